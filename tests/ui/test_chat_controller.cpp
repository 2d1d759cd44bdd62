// The app's controllers without a window (no widgets): a front end that only calls their slots
// and reads their state chats, keeps every exchange in the history, regenerates, edits and lists
// (ChatController), catalogs, compresses and plans (LibraryController), exactly as the window
// does through them. The workers live on WorkerThreads' threads, as in the app.

#include <tuple>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "storage/chat_db.h"
#include "core/trace/trace.h"
#include "ui/chat_controller.h"
#include "ui/conversation_list_model.h"
#include "ui/generation_worker.h"
#include "ui/library_controller.h"
#include "ui/model_catalog_model.h"
#include "ui/readable.h"
#include "ui/worker_threads.h"
#include "ui_test_util.h"
#include "../common/chat_template_model.h"

using spillway::ui::ChatController;
using spillway::ui::LibraryController;
using spillway::ui::WorkerThreads;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");

// A chat controller on the app's workers with a history of its own (a temporary data folder), and
// the spies most tests read.
struct ChatRig {
    QTemporaryDir data;
    spillway::trace::Recorder recorder{1024};
    WorkerThreads workers{/*withData=*/true, &recorder, QStringLiteral("cpu")};
    ChatController chat{workers.generation(), workers.store()};
    QSignalSpy loaded{&chat, &ChatController::modelLoaded};
    QSignalSpy failed{&chat, &ChatController::failed};
    QSignalSpy finished{&chat, &ChatController::replyFinished};
    QSignalSpy stored{&chat, &ChatController::replyStored};
    QSignalSpy reset{&chat, &ChatController::messagesReset};

    // Opens the history and loads `model`; the error, or "" once it answers.
    QString open(const QString& model)
    {
        if (!data.isValid()) return QStringLiteral("no temporary folder");
        chat.openHistory(data.path());
        chat.loadModel(model);
        if (!QTest::qWaitFor([&] { return loaded.count() == 1 || failed.count() > 0; }, 30'000))
            return QStringLiteral("the model did not load within 30 s");
        return failed.isEmpty() ? QString() : failed.first().first().toString();
    }
};

}  // namespace

class TestChatController : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        qputenv("SPILLWAY_QUICK_PROBE", "1");  // the small, rough probe
        qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
    }
    void chatsAndKeepsHistoryWithoutWidgets();
    void sendIsRefusedUntilTheModelIsReady();
    void librarySurvivesBadInputCompressesAndPlans();
    void numbersAreReadable();
    void continueExtendsACutReply();
    void reasoningIsStoredApartAndComesBack();
    void thinkingSettingsReachTheTemplateAndReasoningStaysOutOfLaterTurns();

private:
    QTemporaryDir m_cache;  // the probe's cached profile, not the user's
};

void TestChatController::chatsAndKeepsHistoryWithoutWidgets()
{
    QTemporaryDir data;
    QVERIFY(data.isValid());
    spillway::trace::Recorder recorder(1024);
    WorkerThreads workers(/*withData=*/true, &recorder, QStringLiteral("cpu"));
    ChatController chat(workers.generation(), workers.store());
    chat.setTemperature(0.0);
    chat.setMaxTokens(12);
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    QSignalSpy failed(&chat, &ChatController::failed);
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    QSignalSpy stored(&chat, &ChatController::replyStored);
    QSignalSpy listed(&chat, &ChatController::conversationsListed);
    QSignalSpy reset(&chat, &ChatController::messagesReset);
    chat.openHistory(data.path());
    chat.loadModel(kModel);
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1 || failed.count() > 0, 30'000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
    QVERIFY(chat.isModelReady());

    // A first exchange: a stored conversation with the prompt and the reply, ids given back.
    QVERIFY(chat.send(QStringLiteral("Once upon a time")));
    QVERIFY(chat.isGenerating());
    QVERIFY(!chat.send(QStringLiteral("a second prompt while the first is answered")));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 1, 10'000);
    QVERIFY(!chat.isGenerating());
    const qint64 conversation = chat.currentConversation();
    QVERIFY(conversation > 0);
    QCOMPARE(int(chat.messages().size()), 2);
    const QString reply = chat.messages()[1].content;
    QVERIFY(!reply.isEmpty());
    QVERIFY(chat.messages()[0].id > 0 && chat.messages()[1].id > 0);
    QVERIFY(chat.messages()[1].tokensPerSecond > 0);
    auto rows = storedMessages(data.path(), conversation);
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(QString::fromStdString(rows[1].content), reply);
    QTRY_COMPARE_WITH_TIMEOUT(chat.conversations()->rowCount(), 1, 5'000);
    QCOMPARE(chat.conversations()->idAt(0), conversation);
    QCOMPARE(chat.conversations()->titleAt(0), QStringLiteral("Once upon a time"));

    // Regenerating at temperature 0 gives the same text as a second version of the reply; the
    // reload after the store shows its count.
    const int resets = int(reset.count());
    QVERIFY(!chat.regenerate(0));  // only the last reply
    QVERIFY(chat.regenerate(1));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 30'000);
    QTRY_VERIFY_WITH_TIMEOUT(reset.count() > resets, 10'000);
    QCOMPARE(int(chat.messages().size()), 2);
    QCOMPARE(chat.messages()[1].content, reply);
    QCOMPARE(chat.messages()[1].versionCount, 2);

    // Editing the prompt: a new version of it and of its reply, still two messages.
    QVERIFY(chat.editAndResend(0, QStringLiteral("The dog")));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 30'000);
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 3, 10'000);
    QCOMPARE(int(chat.messages().size()), 2);
    QCOMPARE(chat.messages()[0].content, QStringLiteral("The dog"));
    rows = storedMessages(data.path(), conversation);
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(QString::fromStdString(rows[0].content), QStringLiteral("The dog"));

    // A new conversation is empty until its first prompt; the search narrows the list.
    chat.newConversation();
    QCOMPARE(chat.currentConversation(), qint64(0));
    QVERIFY(chat.messages().isEmpty());
    chat.setSearch(QStringLiteral("zebra"));
    QTRY_COMPARE_WITH_TIMEOUT(chat.conversations()->rowCount(), 0, 5'000);
    chat.setSearch(QString());
    QTRY_COMPARE_WITH_TIMEOUT(chat.conversations()->rowCount(), 1, 5'000);

    // Opening it again shows what was stored.
    QSignalSpy shown(&chat, &ChatController::conversationShown);
    chat.openConversation(conversation);
    QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 5'000);
    QCOMPARE(chat.currentConversation(), conversation);
    QCOMPARE(int(chat.messages().size()), 2);
    QCOMPARE(chat.messages()[0].content, QStringLiteral("The dog"));
    QVERIFY(failed.isEmpty());
}

void TestChatController::sendIsRefusedUntilTheModelIsReady()
{
    spillway::trace::Recorder recorder(64);
    WorkerThreads workers(/*withData=*/false, &recorder, QStringLiteral("cpu"));
    ChatController chat(workers.generation(), nullptr);
    QVERIFY(!chat.send(QStringLiteral("too early")));
    QVERIFY(chat.messages().isEmpty());
    QSignalSpy failed(&chat, &ChatController::failed);
    chat.loadModel(QStringLiteral("/nonexistent/model.gguf"));
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10'000);
    QVERIFY(!chat.isModelReady());
    QVERIFY(!chat.send(QStringLiteral("still no model")));
    QVERIFY(!chat.isGenerating());
}

void TestChatController::librarySurvivesBadInputCompressesAndPlans()
{
    QTemporaryDir data;
    QVERIFY(data.isValid());
    spillway::trace::Recorder recorder(64);
    WorkerThreads workers(/*withData=*/true, &recorder, QStringLiteral("cpu"));
    ChatController chat(workers.generation(), workers.store());  // opens the store the catalog lives in
    LibraryController library(&workers, data.path(), kModel);
    QSignalSpy listed(&library, &LibraryController::modelsListed);
    QSignalSpy rejected(&library, &LibraryController::modelRejected);
    QSignalSpy welcome(&library, &LibraryController::welcomeNeeded);
    chat.openHistory(data.path());
    library.checkWelcome();
    QTRY_COMPARE_WITH_TIMEOUT(welcome.count(), 1, 5'000);  // a fresh data folder: the first launch
    library.markWelcomeSeen();

    // A model, then a file that is not one: the first is cataloged, the second refused by name.
    library.addModel(kModel);
    QTRY_VERIFY_WITH_TIMEOUT(library.catalog()->rowCount() == 1, 10'000);
    const QString junk = QDir(data.path()).filePath("junk.gguf");
    {
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("GGUF but not really");
    }
    library.addModel(junk);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 1, 10'000);
    QCOMPARE(rejected.first().at(0).toString(), junk);
    QCOMPARE(library.catalog()->rowCount(), 1);

    // The machine is measured, every catalog card gets its prediction, and a plan comes back for
    // the settings asked.
    QSignalSpy ready(&library, &LibraryController::tuningReady);
    QSignalSpy predicted(&library, &LibraryController::predicted);
    library.startTuning();
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 120'000);
    QVERIFY(!library.capabilities().isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(!library.catalog()->prediction(kModel).isEmpty(), 30'000);
    QVERIFY2(library.catalog()->prediction(kModel).contains("tokens/s"), qPrintable(library.catalog()->prediction(kModel)));
    spillway::ui::TuningSettings settings;
    settings.modelPath = kModel;
    settings.contextLength = 128;
    settings.backend = QStringLiteral("auto");
    library.predict(settings);
    QTRY_COMPARE_WITH_TIMEOUT(predicted.count(), 1, 30'000);
    QVERIFY(library.lastPrediction().plan != nullptr);
    QCOMPARE(library.lastPrediction().settings.backend, QStringLiteral("cpu"));  // "auto": the device computing

    // Compression: the package joins the catalog under its source, and its predicted speed is
    // compared with the source's.
    QSignalSpy finished(&library, &LibraryController::compressionFinished);
    QSignalSpy compared(&library, &LibraryController::compressionCompared);
    const qint64 source = library.catalog()->idAt(0);
    QVERIFY(library.compressModel(source, QStringLiteral("fast")));
    QVERIFY(library.isCompressing());
    QVERIFY(!library.compressModel(source, QStringLiteral("fast")));  // one at a time
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QVERIFY(!library.isCompressing());
    QTRY_COMPARE_WITH_TIMEOUT(library.catalog()->rowCount(), 2, 10'000);
    const QString package = finished.first().at(0).toString();
    QCOMPARE(library.catalog()->index(1).data(spillway::ui::ModelCatalogModel::PathRole).toString(), package);
    QVERIFY(library.catalog()->index(1).data(Qt::DisplayRole).toString().contains("from stories260K.gguf"));
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 30'000);
    QVERIFY2(compared.first().at(0).toString().contains("tokens/s"), qPrintable(compared.first().at(0).toString()));
    QVERIFY(library.modelsFolder().startsWith(data.path()));

    // Removed from the library: the package's card goes, its files stay; the source is untouched.
    const qint64 packageId = library.catalog()->idAt(1);
    QVERIFY(!library.removeModel(0));  // not in the catalog
    QVERIFY(library.removeModel(packageId));
    QTRY_COMPARE_WITH_TIMEOUT(library.catalog()->rowCount(), 1, 5'000);
    QCOMPARE(library.catalog()->idAt(0), source);
    QVERIFY(QFileInfo::exists(package + "/manifest.json"));
    // Added again, it comes back (as a model of its own: its parent link went with it).
    library.addModel(package);
    QTRY_COMPARE_WITH_TIMEOUT(library.catalog()->rowCount(), 2, 10'000);
}

void TestChatController::numbersAreReadable()
{
    const QLocale before;
    QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
    using spillway::ui::readable;
    QCOMPARE(readable(10847.7), QStringLiteral("10,800"));
    QCOMPARE(readable(248.7), QStringLiteral("249"));
    QCOMPARE(readable(43.2), QStringLiteral("43"));
    QCOMPARE(readable(8.74), QStringLiteral("8.7"));
    QCOMPARE(readable(0.523), QStringLiteral("0.52"));
    QCOMPARE(readable(0.0523), QStringLiteral("0.052"));
    QCOMPARE(readable(0), QStringLiteral("0"));
    QCOMPARE(readable(1234567), QStringLiteral("1,230,000"));
    QLocale::setDefault(before);
}

// A reply cut at its token limit goes on with Continue: the longer text is what one reply of both
// lengths gives (greedy), kept as a new version of the reply; the next prompt follows it.
void TestChatController::continueExtendsACutReply()
{
    ChatRig rig;
    const QString error = rig.open(kModel);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    auto [data, chat, finished, stored, reset] = std::tie(rig.data, rig.chat, rig.finished, rig.stored, rig.reset);
    chat.setTemperature(0.0);

    chat.setMaxTokens(20);  // one reply of 20 tokens, for comparison
    QVERIFY(chat.send(QStringLiteral("Once upon a time")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 1, 30'000);
    const QString whole = chat.messages()[1].content;
    chat.newConversation();

    chat.setMaxTokens(8);
    QVERIFY(!chat.continueReply());  // nothing to continue
    QVERIFY(chat.send(QStringLiteral("Once upon a time")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 2, 30'000);
    QCOMPARE(finished.last().at(3).toString(), QStringLiteral("limit"));
    const QString cut = chat.messages()[1].content;
    QVERIFY(whole.startsWith(cut) && cut.size() < whole.size());

    chat.setMaxTokens(12);
    const int resets = int(reset.count());
    QVERIFY(chat.continueReply());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 30'000);
    QCOMPARE(chat.messages()[1].content, whole);
    QTRY_VERIFY_WITH_TIMEOUT(reset.count() > resets, 10'000);  // reloaded with its version count
    QCOMPARE(int(chat.messages().size()), 2);
    QCOMPARE(chat.messages()[1].content, whole);
    QCOMPARE(chat.messages()[1].versionCount, 2);
    const auto rows = storedMessages(data.path(), chat.currentConversation());
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(QString::fromStdString(rows[1].content), whole);
}


// A thinking model's reply: its reasoning is stored apart from its answer (the chat database's
// reasoning column) and comes back when the chat is opened again.
void TestChatController::reasoningIsStoredApartAndComesBack()
{
    ChatRig rig;
    auto [data, chat, failed, stored] = std::tie(rig.data, rig.chat, rig.failed, rig.stored);
    const QString model = data.filePath(QStringLiteral("thinking.gguf"));
    // The template opens the thinking; the story model never closes it, so all it writes is reasoning.
    QVERIFY(spillway::testing_support::writeWithChatTemplate(
        kModel.toStdString(), model.toStdString(),
        spillway::testing_support::kChatMlTemplate + "{% if add_generation_prompt %}<think>\n{% endif %}{# </think> #}"));
    chat.setTemperature(0.0);
    chat.setMaxTokens(12);
    const QString error = rig.open(model);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(chat.send(QStringLiteral("Once upon a time")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 1, 30'000);
    const qint64 conversation = chat.currentConversation();
    const QString reasoning = chat.messages()[1].reasoning;
    QVERIFY(!reasoning.isEmpty());
    QCOMPARE(chat.messages()[1].content, QString());
    const auto rows = storedMessages(data.path(), conversation);
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(QString::fromStdString(rows[1].generation.reasoning), reasoning);
    QCOMPARE(QString::fromStdString(rows[1].content), QString());

    chat.newConversation();
    QSignalSpy shown(&chat, &ChatController::conversationShown);
    chat.openConversation(conversation);
    QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 5'000);
    QCOMPARE(chat.messages()[1].reasoning, reasoning);
    QVERIFY(failed.isEmpty());
}

// Qwen3.5's own template (tests/chat/templates) on the story model: the chat's thinking switch
// and budget reach it, a timed reply with both reasoning and answer is stored with its time, and
// the next turn's prompt carries the earlier answer but not its reasoning (the template drops
// it before the last prompt).
void TestChatController::thinkingSettingsReachTheTemplateAndReasoningStaysOutOfLaterTurns()
{
    ChatRig rig;
    auto [data, chat, failed, stored] = std::tie(rig.data, rig.chat, rig.failed, rig.stored);
    QFile source(QStringLiteral(SPILLWAY_TEST_DATA_DIR "/../chat/templates/qwen3.5.jinja"));
    QVERIFY(source.open(QIODevice::ReadOnly));
    const QString model = data.filePath(QStringLiteral("qwen35-template.gguf"));
    QVERIFY(spillway::testing_support::writeWithChatTemplate(kModel.toStdString(), model.toStdString(),
                                                             source.readAll().toStdString()));
    QSignalSpy prompts(rig.workers.generation(), &spillway::ui::GenerationWorker::promptPrepared);
    const QString error = rig.open(model);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    // The template reads enable_thinking and marks reasoning with <think>; no reasoning_effort.
    QCOMPARE(chat.thinkingOptions(), (spillway::ui::ThinkingOptions{true, false, true}));

    spillway::ui::GenerationSettings settings = chat.settings();
    settings.temperature = 0;
    settings.maxTokens = 30;
    settings.reasoningBudget = 10;
    chat.setSettings(settings);
    QVERIFY(chat.send(QStringLiteral("Tell me a story")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 1, 30'000);
    QCOMPARE(int(prompts.count()), 1);
    QVERIFY2(prompts[0][0].toString().endsWith(QStringLiteral("<|im_start|>assistant\n<think>\n")),
             qPrintable(prompts[0][0].toString()));
    const spillway::ui::MessageItem first = chat.messages()[1];
    QVERIFY2(!first.reasoning.trimmed().isEmpty() && !first.content.trimmed().isEmpty(),
             qPrintable(first.reasoning + " | " + first.content));
    QVERIFY(first.reasoningMs > 0);
    auto rows = storedMessages(data.path(), chat.currentConversation());
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(QString::fromStdString(rows[1].generation.reasoning), first.reasoning);
    QVERIFY(rows[1].generation.reasoningMs.value_or(0) > 0);

    // The next turn: the earlier answer goes back, its reasoning does not.
    QVERIFY(chat.send(QStringLiteral("And then?")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 2, 30'000);
    QCOMPARE(int(prompts.count()), 2);
    const QString second = prompts[1][0].toString();
    QVERIFY2(second.contains(QStringLiteral("<|im_start|>assistant\n") + first.content.trimmed()), qPrintable(second));
    QVERIFY2(!second.contains(first.reasoning.trimmed()), qPrintable(second));

    // Thinking off: the template closes an empty thinking block itself; nothing is reasoning.
    settings.thinking = false;
    chat.setSettings(settings);
    QVERIFY(chat.send(QStringLiteral("The end")));
    QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 3, 30'000);
    QCOMPARE(int(prompts.count()), 3);
    QVERIFY2(prompts[2][0].toString().endsWith(QStringLiteral("<|im_start|>assistant\n<think>\n\n</think>\n\n")),
             qPrintable(prompts[2][0].toString()));
    QCOMPARE(chat.messages()[5].reasoning, QString());
    QVERIFY(!chat.messages()[5].content.isEmpty());
    QVERIFY(failed.isEmpty());
}

QTEST_GUILESS_MAIN(TestChatController)
#include "test_chat_controller.moc"
