// What a newcomer hit in a day of use (issue 49), each driven through the real widgets: the
// transcript keeps its place; Tuning's Apply keeps the chat's model or says it changed; a broken
// file on the command line leaves the last model answering; Discover offline says why and what
// to do; the first launch sizes mixtures by all their experts; the context meter (and the
// tokens the server counts) never exceed the context; Tuning's shares are whole; the Bottleneck
// dock agrees with the status line, labels its axis, holds still while looked at and exports
// from a button; errors of Add model… stay; the terminal chat's /save imports; the probe's bar
// only goes forward; and the polish: icon actions with tooltips and keys, elided chat titles,
// imported chats marked, the system prompt in exports and a note where a base model ignores it,
// a base model's reply length, the window kept on screen.

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QRegularExpression>
#include <QScreen>
#include <QStandardPaths>
#include <QDir>
#include <QFileInfo>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextCursor>
#include <QToolButton>

#include <netinet/in.h>
#include <random>
#include <sys/socket.h>
#include <unistd.h>

#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/trace/trace.h"
#include "storage/chat_db.h"
#include "ui/generation_panel.h"
#include "ui/bottleneck_view.h"
#include "ui/chat_controller.h"
#include "ui/chat_window.h"
#include "ui/discover_controller.h"
#include "ui/library_controller.h"
#include "ui/library_panel.h"
#include "ui/readable.h"
#include "ui/tuning_panel.h"
#include "ui/welcome_page.h"
#include "ui_test_util.h"

using spillway::ui::ChatWindow;
using spillway::ui::MessageItem;
using spillway::ui::TranscriptView;
using spillway::ui::GenerationPanel;
using spillway::ui::GenerationSettings;
using spillway::ui::builtInPresets;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");

// A shown window on the demo model keeping its chats in `folder`, past the first-launch screen.
std::unique_ptr<ChatWindow> chatWindow(const QString& model, const QString& folder, int maxTokens)
{
    auto window = std::make_unique<ChatWindow>(model, folder);
    window->skipWelcome();
    window->controller()->setTemperature(0.0);
    window->controller()->setMaxTokens(maxTokens);
    window->resize(900, 560);
    window->show();
    return window;
}

// Sends `prompt` and waits for the reply to finish (and, with a data folder, to be stored).
bool exchange(ChatWindow& window, const QString& prompt)
{
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(prompt);
    window.send();
    return finished.wait(60'000) || finished.count() > 0;
}

// "1,234.5 tokens/s" out of a text: the figure before " tokens/s" (its first occurrence after `after`).
QString speedIn(const QString& text, const QString& after = QString())
{
    static const QRegularExpression speed(QStringLiteral("([0-9][0-9,.]*) tokens/s"));
    const int from = after.isEmpty() ? 0 : std::max(0, int(text.indexOf(after)));
    const auto m = speed.match(text, from);
    return m.hasMatch() ? m.captured(1) : QString();
}

// The whole percentages in a text ("448 KiB of the weights (100%)" → 100).
QList<int> percentsIn(const QString& text)
{
    static const QRegularExpression percent(QStringLiteral("\\((\\d+)%\\)"));
    QList<int> out;
    for (auto it = percent.globalMatch(text); it.hasNext();) out << it.next().captured(1).toInt();
    return out;
}

QVector<MessageItem> longConversation(int turns)
{
    QVector<MessageItem> messages;
    for (int i = 0; i < turns; ++i) {
        MessageItem prompt;
        prompt.role = QStringLiteral("user");
        prompt.content = QStringLiteral("Question %1: tell me a story about a cat and a dog.").arg(i);
        MessageItem reply;
        reply.role = QStringLiteral("assistant");
        reply.content = QStringLiteral("Once upon a time there was a cat. ").repeated(12);
        messages << prompt << reply;
    }
    return messages;
}

}  // namespace

class TestDayOfUse : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        qputenv("SPILLWAY_QUICK_PROBE", "1");
        qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
    }

    // A thinking model's reply: its reasoning streams dimmed before the answer, then folds into
    // one line above it that opens and closes it; the answer alone is what Copy takes.
    void reasoningStreamsThenFoldsAboveTheAnswer()
    {
        TranscriptView view;
        view.resize(500, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        MessageItem question;
        question.role = QStringLiteral("user");
        question.content = QStringLiteral("What is 2+2?");
        view.setContinuation(false);  // a chat model answers (a base model's prompt would show before)
        view.setMessages({question});
        view.beginReply(1);
        view.appendReplyReasoning(QStringLiteral("The user asks a sum. "));
        view.appendReplyReasoning(QStringLiteral("Two and two make four."));
        view.appendReplyText(QStringLiteral("It is 4."));
        QString text = view.toPlainText();
        QVERIFY2(text.contains(QStringLiteral("Thinking…\nThe user asks")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("Two and two make four.\nIt is 4.")), qPrintable(text));
        view.finishReply(10, 5, QStringLiteral("demo"));
        QCOMPARE(view.messages()[1].reasoning, QStringLiteral("The user asks a sum. Two and two make four."));
        QCOMPARE(view.messages()[1].content, QStringLiteral("It is 4."));
        text = view.toPlainText();
        QVERIFY2(text.contains(QStringLiteral("Reasoning · 10 words")) && !text.contains(QStringLiteral("make four")) &&
                     text.contains(QStringLiteral("It is 4.")),
                 qPrintable(text));
        emit view.anchorClicked(QUrl(QStringLiteral("msg://reasoning/1")));
        text = view.toPlainText();
        QVERIFY2(text.contains(QStringLiteral("Two and two make four.")), qPrintable(text));
        emit view.anchorClicked(QUrl(QStringLiteral("msg://reasoning/1")));
        QVERIFY(!view.toPlainText().contains(QStringLiteral("make four")));
        // Timed: "Thought for 12 s" (the worker measures it, the chat database keeps it).
        view.beginReply(1);
        view.appendReplyReasoning(QStringLiteral("Two and two make four."));
        view.setReplyReasoningTime(12'300);
        view.appendReplyText(QStringLiteral("It is 4."));
        view.finishReply(10, 5, QStringLiteral("demo"));
        text = view.toPlainText();
        QVERIFY2(text.contains(QStringLiteral("Thought for 12 s · 5 words")) && !text.contains(QStringLiteral("Thinking…")),
                 qPrintable(text));
        QSignalSpy copied(&view, &TranscriptView::copied);
        emit view.anchorClicked(QUrl(QStringLiteral("msg://copy/1")));
        QCOMPARE(copied.count(), 1);
        QCOMPARE(QGuiApplication::clipboard()->text(), QStringLiteral("It is 4."));
    }

    // The chat's thinking rows: only what the template takes (Qwen3.5: the switch and the budget;
    // gpt-oss: the effort); the switch off disables the budget; each reaches the settings.
    void thinkingRowsFollowTheTemplate()
    {
        GenerationPanel panel;
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        auto* thinking = panel.findChild<QCheckBox*>("thinking");
        auto* effort = panel.findChild<QComboBox*>("reasoningEffort");
        auto* budget = panel.findChild<QSpinBox*>("reasoningBudget");
        QVERIFY(thinking && effort && budget);
        QVERIFY(!thinking->isVisible() && !effort->isVisible() && !budget->isVisible());  // a template without
        panel.setThinkingOptions({true, false, true});
        QVERIFY(thinking->isVisible() && !effort->isVisible() && budget->isVisible());
        panel.setThinkingOptions({false, true, false});
        QVERIFY(!thinking->isVisible() && effort->isVisible() && !budget->isVisible());
        QSignalSpy changed(&panel, &GenerationPanel::changed);
        effort->setCurrentIndex(effort->findData(QStringLiteral("high")));
        QCOMPARE(panel.settings().reasoningEffort, QStringLiteral("high"));
        budget->setValue(64);
        thinking->setChecked(false);
        QVERIFY(!budget->isEnabled());
        const GenerationSettings s = panel.settings();
        QVERIFY(!s.thinking);
        QCOMPARE(s.reasoningBudget, 64);
        QCOMPARE(int(changed.count()), 3);
        // They go with the chat, not with a preset.
        QCOMPARE(GenerationSettings::fromJson(s.toJson()), s);
        QCOMPARE(builtInPresets()[0].settings.withThinkingOf(s).reasoningEffort, QStringLiteral("high"));
    }

    // The transcript shows the newest text while a reply streams, stays where the user scrolled
    // up to, and keeps the user's place when another version of the same chat is shown. (The
    // view used to call ensureCursorVisible() at every piece of text: the widget's own cursor sat
    // at the top, so the view ran back there, and the wheel seemed to move it the wrong way.)
    void transcriptFollowsTheNewestAndKeepsTheUsersPlace()
    {
        TranscriptView view;
        view.resize(500, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QScrollBar* bar = view.verticalScrollBar();
        view.setMessages(longConversation(8));
        QTRY_VERIFY(bar->maximum() > 0);
        QCOMPARE(bar->value(), bar->maximum());  // a chat opens at its newest message
        MessageItem question;
        question.role = QStringLiteral("user");
        question.content = QStringLiteral("And then?");
        view.appendMessage(question);
        view.beginReply(int(view.messages().size()));
        for (int i = 0; i < 40; ++i) {
            view.appendReplyText(QStringLiteral("The cat ran to the hill and the dog ran after it. "));
            QCoreApplication::processEvents();
            QCOMPARE(bar->value(), bar->maximum());
        }
        // The user scrolls up (the wheel): new text no longer moves the view.
        QWheelEvent up(QPointF(100, 100), view.viewport()->mapToGlobal(QPointF(100, 100)), QPoint(), QPoint(0, 360),
                       Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(view.viewport(), &up);
        const int place = bar->value();
        QVERIFY2(place < bar->maximum(), "the wheel moved the view up");
        for (int i = 0; i < 10; ++i) view.appendReplyText(QStringLiteral("More of the story. "));
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), place);
        QVERIFY(!view.followsNewest());
        view.finishReply(100, 10, QStringLiteral("demo"));
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), place);
        // Back at the bottom, it follows again; a finished reply leaves the newest in sight.
        bar->setValue(bar->maximum());
        QVERIFY(view.followsNewest());
        view.beginReply(int(view.messages().size()) - 1);
        view.appendReplyText(QStringLiteral("A new version of the reply. ").repeated(10));
        view.finishReply(100, 10, QStringLiteral("demo"));
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), bar->maximum());
        // Another version of an earlier message (the same chat): the place stays.
        bar->setValue(bar->maximum() / 3);
        const int earlier = bar->value();
        QVector<MessageItem> versions = view.messages();
        versions[3].content = QStringLiteral("Another version of this reply, as long as the first. ").repeated(8);
        versions[3].versionCount = 2;
        versions[3].versionNumber = 2;
        view.setMessages(versions, true);
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), earlier);
        // Another chat: its newest message.
        view.setMessages(longConversation(6), false);
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), bar->maximum());
    }

    // The same in the window: after each finished reply the newest message is in sight.
    void windowKeepsTheNewestReplyInSight()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 60);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QScrollBar* bar = transcriptOf(*window)->verticalScrollBar();
        for (int i = 0; i < 4; ++i) QVERIFY(exchange(*window, QStringLiteral("Once upon a time %1").arg(i)));
        QCoreApplication::processEvents();
        QVERIFY(bar->maximum() > 0);
        QCOMPARE(bar->value(), bar->maximum());
        // Regenerate: the new version streams in sight.
        QSignalSpy finished(window.get(), &ChatWindow::replyFinished);
        bool asked = false;  // (once the last reply is stored, regenerate starts)
        QTRY_VERIFY_WITH_TIMEOUT(asked || (asked = window->controller()->regenerate(int(window->controller()->messages().size()) - 1)),
                                 10'000);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
        QTest::qWait(200);
        QCoreApplication::processEvents();
        QCOMPARE(bar->value(), bar->maximum());
    }

    // Chatting with a package, Tuning's variant is the package (the model that answers); Apply
    // keeps it. Choosing the original there and applying changes the picker and says so.
    void applyKeepsTheChatsModelOrSaysItChanged()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 8);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->isTuningReady(), 120'000);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(*window, "models"), 1, 10'000);
        QSignalSpy compared(window.get(), &ChatWindow::compressionCompared);
        window->library()->compressModel(rowIdOf(*window, "models", 0), QStringLiteral("fast"));
        QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 120'000);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(*window, "models"), 2, 10'000);
        QString package;
        qint64 packageId = 0;
        for (const auto& m : window->library()->catalog()->models())
            if (m.format == QLatin1String("package")) package = m.path, packageId = m.id;
        QVERIFY(!package.isEmpty());

        // Chat with the package (the picker).
        QComboBox* picker = part<QComboBox>(*window, "modelPicker");
        QSignalSpy ready(window.get(), &ChatWindow::modelReady);
        const int row = window->library()->catalog()->rowOf(packageId);
        picker->setCurrentIndex(row);
        emit picker->activated(row);
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() >= 1 && window->controller()->modelPath() == package, 30'000);
        auto* tuning = part<spillway::ui::TuningPanel>(*window, "tuning");
        QTRY_COMPARE_WITH_TIMEOUT(tuning->variantBox()->currentData().toString(), package, 10'000);
        QVERIFY2(tuning->variantBox()->currentText().contains(QStringLiteral("answers now")),
                 qPrintable(tuning->variantBox()->currentText()));

        // A budget changed and applied: the package still answers.
        QSignalSpy applied(window.get(), &ChatWindow::tuningApplied);
        part<QSpinBox>(*window, "contextLength")->setValue(512);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.contextLength == 512 &&
                                     window->library()->lastPrediction().plan,
                                 10'000);
        part<QPushButton>(*window, "applyTuning")->click();
        QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 30'000);
        QCOMPARE(window->controller()->modelPath(), package);
        QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
        QVERIFY2(window->controller()->messages().back().modelName.contains(QFileInfo(package).fileName()),
                 qPrintable(window->controller()->messages().back().modelName));

        // The original chosen in Tuning and applied: the picker follows, and a notice says so.
        const int original = tuning->variantBox()->findData(kModel);
        QVERIFY(original >= 0);
        tuning->variantBox()->setCurrentIndex(original);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.modelPath == kModel, 10'000);
        QSignalSpy notices(window.get(), &ChatWindow::noticeShown);
        part<QPushButton>(*window, "applyTuning")->click();
        QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 2, 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(window->controller()->modelPath(), kModel, 10'000);
        QTRY_COMPARE_WITH_TIMEOUT(picker->currentIndex(), window->library()->catalog()->rowOf(window->controller()->modelId()),
                                  10'000);
        QVERIFY(window->controller()->modelId() > 0);
        QVERIFY2(picker->currentText().contains(QStringLiteral("stories260K.gguf")), qPrintable(picker->currentText()));
        bool said = false;
        for (const auto& n : notices) said |= n.first().toString().contains(QStringLiteral("stories260K.gguf"));
        QVERIFY(said);
    }

    // `spillway broken.gguf`: the file is refused with its reason, the model used last answers.
    void brokenStartFileLeavesTheLastModelAnswering()
    {
        QTemporaryDir data, files;
        const QString last = files.filePath(QStringLiteral("last.gguf"));
        QVERIFY(QFile::copy(kModel, last));
        {
            auto db = spillway::storage::ChatDatabase::open(data.path().toStdString());
            QVERIFY(db.ok());
            QVERIFY(db->setSetting("ui.lastModel", QJsonDocument(QJsonObject{{"path", last}}).toJson(QJsonDocument::Compact).toStdString()));
        }
        const QString broken = files.filePath(QStringLiteral("broken.gguf"));
        {
            QFile f(broken);
            QVERIFY(f.open(QIODevice::WriteOnly));
            std::mt19937 random(7);
            QByteArray bytes(64 * 1024, '\0');
            for (char& c : bytes) c = char(random());
            f.write(bytes);
        }
        ChatWindow window(broken, data.path(), nullptr, kModel);
        window.skipWelcome();
        window.library()->addModel(broken);  // as `spillway FILE` does
        window.controller()->setTemperature(0.0);
        window.controller()->setMaxTokens(8);
        window.show();
        QTRY_VERIFY_WITH_TIMEOUT(window.controller()->isModelReady(), 30'000);
        QCOMPARE(window.controller()->modelPath(), last);
        QTRY_VERIFY_WITH_TIMEOUT(errorTextOf(window).contains(QStringLiteral("answers instead")), 10'000);
        QVERIFY2(errorTextOf(window).contains(QStringLiteral("broken.gguf")) && errorTextOf(window).contains(QStringLiteral("last.gguf")),
                 qPrintable(errorTextOf(window)));
        QVERIFY(promptOf(window)->isEnabled());
        QVERIFY(sendButtonOf(window)->isEnabled());
        QVERIFY(exchange(window, QStringLiteral("Once upon a time")));
        QVERIFY(!window.controller()->messages().back().content.isEmpty());
    }

    // Discover without a network: beside the search box, the cause and the remedy.
    void offlineSearchSaysWhyAndWhatToDo()
    {
        // A loopback port nothing listens on: one the system handed out, closed again.
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        QVERIFY(fd >= 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        socklen_t length = sizeof address;
        QVERIFY(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        const int port = ntohs(address.sin_port);
        ::close(fd);
        qputenv("HF_ENDPOINT", QStringLiteral("http://127.0.0.1:%1").arg(port).toUtf8());
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 8);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        window->showView(ChatWindow::View::Discover);
        QSignalSpy failed(window->discover(), &spillway::ui::DiscoverController::searchFailed);
        auto* box = part<QLineEdit>(*window, "discoverSearch");
        QTest::keyClicks(box, QStringLiteral("qwen"));
        QTest::keyClick(box, Qt::Key_Return);
        QVERIFY(failed.wait(30'000));
        qunsetenv("HF_ENDPOINT");
        auto* note = part<QLabel>(*window, "discoverSearchNote");
        QVERIFY(note->isVisible());
        const QString text = note->text();
        QVERIFY2(text.contains(QStringLiteral("offline")) && text.contains(QStringLiteral("network")) &&
                     text.contains(QStringLiteral("HF_ENDPOINT")) && text.contains(QStringLiteral("qwen")),
                 qPrintable(text));
        // Beside the search box: right under it, in the same column.
        QVERIFY(note->mapTo(window.get(), QPoint(0, 0)).y() < part<QListWidget>(*window, "discoverRepos")->mapTo(window.get(), QPoint(0, 0)).y());
        auto* repos = part<QListWidget>(*window, "discoverRepos");
        QCOMPARE(repos->count(), 1);
        QVERIFY(repos->item(0)->text().contains(QStringLiteral("No results")));
        QVERIFY(part<QLabel>(*window, "discoverStatus")->text().isEmpty());  // not under the downloads
    }

    // The first launch's list sizes a mixture by all its experts and its speed by the active ones.
    void capabilitiesSizeMixturesByAllTheirExperts()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 8);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->isTuningReady(), 120'000);
        const QString text = part<spillway::ui::WelcomePage>(*window, "welcome")->summaryText();
        QVERIFY2(text.contains(QStringLiteral("mixtral-8x7b (46.7 B parameters, 12.9 B active per token")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("mistral-7b (7.2 B parameters,")), qPrintable(text));
        // Its size is its own, not the dense model's (7.17 GiB).
        const QString mixtral = text.mid(int(text.indexOf(QStringLiteral("mixtral-8x7b")))).section('\n', 0, 0);
        QVERIFY2(!mixtral.contains(QStringLiteral("7.17 GiB")) && !speedIn(mixtral).isEmpty(), qPrintable(mixtral));
    }

    // A reply that fills the context: the meter says the context, never one past it; the
    // conversation's cache and the tokens counted (the server's usage) never exceed it either.
    void meterAndUsageNeverExceedTheContext()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 1 << 16);  // longer than the context: it decides
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QSignalSpy finished(window->controller(), &spillway::ui::ChatController::replyFinished);
        promptOf(*window)->setText(QStringLiteral("Once upon a time"));
        window->send();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120'000);
        QCOMPARE(finished.at(0).at(3).toString(), QStringLiteral("context"));
        const QString meter = part<QLabel>(*window, "contextMeter")->text();
        static const QRegularExpression figures(QStringLiteral("Context ([0-9,]+) / ([0-9,]+)"));
        const auto m = figures.match(meter);
        QVERIFY2(m.hasMatch(), qPrintable(meter));
        const int held = QLocale().toInt(m.captured(1)), context = QLocale().toInt(m.captured(2));
        QVERIFY(context > 0);
        QVERIFY2(held <= context, qPrintable(meter));
        QCOMPARE(held, context);  // a reply that ended because the context is full filled it

        // The engine's conversation, as the server's slots use it: at several contexts, a reply
        // that runs into the end holds at most the context's positions, and so does its usage.
        auto model = spillway::LlamaModel::load(kModel.toStdString());
        QVERIFY(model.ok());
        for (int ctx : {24, 64, 100}) {
            spillway::engine::EngineOptions o;
            o.backend = "cpu";
            o.contextLength = ctx;
            auto engine = spillway::engine::Engine::open(std::shared_ptr<const spillway::LlamaModel>(std::move(*model)), o);
            QVERIFY(engine.ok());
            auto conversation = (*engine)->conversation();
            spillway::engine::ReplyOptions r;
            r.sampling.temperature = 0;
            const std::vector<spillway::engine::Message> history{{"user", "Once upon a time"}};
            auto stats = conversation->reply(history, r);
            QVERIFY2(stats.ok(), stats ? "" : stats.error().message.c_str());
            QCOMPARE(int(stats->end), int(spillway::engine::ReplyStats::End::Context));
            QCOMPARE(stats->promptTokens + stats->generatedTokens, ctx);  // usage.total_tokens
            QVERIFY(int(stats->tokens.size()) <= ctx);
            QVERIFY(int(conversation->cachedTokens().size()) <= conversation->contextLength());
            model = spillway::LlamaModel::load(kModel.toStdString());
            QVERIFY(model.ok());
        }
    }

    // Tuning: every tier's share at most 100 % and together 100 %; the default context named as
    // such in "Last change"; a context above the trained one explained; the meter follows Apply.
    void tuningSharesAreWholeAndChangesSaid()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 8);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->isTuningReady(), 120'000);
        QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
        window->showView(ChatWindow::View::Tuning);
        auto shares = [&] {
            QList<int> all;
            for (const char* name : {"tierLine0", "tierLine1", "tierLine2"}) all << percentsIn(part<QLabel>(*window, name)->text());
            return all;
        };
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().plan != nullptr, 10'000);
        auto check = [&](const char* what) {
            const QList<int> s = shares();
            QVERIFY2(s.size() == 3, what);
            int sum = 0;
            for (int x : s) {
                QVERIFY2(x >= 0 && x <= 100, qPrintable(QStringLiteral("%1: %2%").arg(what).arg(x)));
                sum += x;
            }
            QVERIFY2(sum == 100, qPrintable(QStringLiteral("%1: the shares add up to %2%").arg(what).arg(sum)));
        };
        check("resident");
        // A split over the three tiers, and one of a few bytes on the device: whole shares.
        auto* panel = part<spillway::ui::TuningPanel>(*window, "tuning");
        spillway::ui::TuningPrediction split = window->library()->lastPrediction();
        split.deviceBytes = 1000, split.ramBytes = 1000, split.ssdBytes = 1000;
        panel->showPrediction(split, false);
        check("a third each");
        split.deviceBytes = 458'752, split.ramBytes = 0, split.ssdBytes = 3;
        panel->showPrediction(split, false);
        check("nearly all on the device");
        QCOMPARE(shares()[0], 100);
        QCOMPARE(spillway::ui::wholeShares({1, 1, 1}), (QList<int>{34, 33, 33}));
        QCOMPARE(spillway::ui::wholeShares({2, 1, 0}), (QList<int>{67, 33, 0}));

        // Context 0 (the default) → 256: "trained (…) → 256".
        part<QDoubleSpinBox>(*window, "vramBudget")->setValue(0);
        part<QDoubleSpinBox>(*window, "ramBudget")->setValue(0);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.ramBudget == 0 &&
                                     window->library()->lastPrediction().settings.vramBudget == 0,
                                 10'000);
        part<QSpinBox>(*window, "contextLength")->setValue(256);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.contextLength == 256, 10'000);
        const QString change = part<spillway::ui::TuningPanel>(*window, "tuning")->lastChangeText();
        QVERIFY2(change.contains(QStringLiteral("context trained (")) && change.contains(QStringLiteral(") → 256")) &&
                     !change.contains(QStringLiteral("context 0")),
                 qPrintable(change));
        // Above the trained context: said, beside the control.
        const int trained = window->library()->lastPrediction().trainedContext;
        QVERIFY(trained > 0);
        part<QSpinBox>(*window, "contextLength")->setValue(trained * 2);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.contextLength == trained * 2, 10'000);
        auto* note = part<QLabel>(*window, "contextNote");
        QVERIFY(note->isVisible());
        QVERIFY2(note->text().contains(QLocale().toString(trained)), qPrintable(note->text()));
        // Applied: the meter shows the new context at once.
        QSignalSpy applied(window.get(), &ChatWindow::tuningApplied);
        part<QSpinBox>(*window, "contextLength")->setValue(1024);
        QTRY_VERIFY_WITH_TIMEOUT(window->library()->lastPrediction().settings.contextLength == 1024, 10'000);
        QVERIFY(!note->isVisible() || trained < 1024);
        part<QPushButton>(*window, "applyTuning")->click();
        QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 30'000);
        QTRY_VERIFY_WITH_TIMEOUT(part<QLabel>(*window, "contextMeter")->text().endsWith(QStringLiteral("/ 1,024")), 10'000);
    }

    // After a 40-token reply the dock says what the status line says; its axis labels differ.
    void dockAgreesWithTheStatusLineAfterAShortReply()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 40);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        auto* dock = part<spillway::ui::BottleneckView>(*window, "bottleneck");
        QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
        QTest::qWait(600);  // the user reads, then writes again: no token's time
        QVERIFY(exchange(*window, QStringLiteral("The dog")));
        QCoreApplication::processEvents();
        dock->pollRecorder();
        const QString status = statusTextOf(*window);
        QVERIFY2(status.contains(QStringLiteral("40 tokens")), qPrintable(status));
        const QString detail = dock->detailLine();
        const QString expected = speedIn(status);
        QVERIFY(!expected.isEmpty());
        QVERIFY2(speedIn(detail, QStringLiteral("overall")) == expected,
                 qPrintable(QStringLiteral("dock: %1 / status: %2").arg(detail, status)));
        // The dock shows this reply's tokens only, with ids the tooltips name.
        dock->resize(1000, 320);
        (void)dock->grab();
        const QStringList labels = dock->axisLabels();
        QVERIFY(labels.size() >= 2);
        QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
        // The export is a button in sight.
        auto* exportButton = part<QToolButton>(*dock, "exportTimeline");
        QVERIFY(exportButton->isVisible());
        QCOMPARE(exportButton->menu()->actions().size(), 2);
    }

    // The view holds still while the user zooms or drags a live trace, and the tooltip names
    // what is drawn.
    void liveViewHoldsStillWhileLookedAt()
    {
        spillway::trace::Recorder recorder(1 << 14);
        spillway::ui::BottleneckView view;
        view.resize(1000, 320);
        view.setRecorder(&recorder);
        view.setMaxTokens(16);
        uint64_t t = spillway::trace::nowNs();
        auto token = [&](uint32_t id) {
            for (int layer = 0; layer < 4; ++layer) {
                recorder.record({spillway::trace::Lane::CpuCompute, layer, "layer", 0, t, t + 50'000, id});
                t += 60'000;
            }
        };
        view.beginReply();
        t = spillway::trace::nowNs() + 1000;
        for (uint32_t id = 0; id < 10; ++id) token(id);
        view.pollRecorder();
        view.zoomBy(0.5, 500);
        QVERIFY(view.isPaused());
        const auto range = view.visibleRange();
        for (uint32_t id = 10; id < 200; ++id) token(id);
        view.pollRecorder();
        QCOMPARE(view.visibleRange().beginNs, range.beginNs);
        QCOMPARE(view.visibleRange().endNs, range.endNs);
        QVERIFY(view.detailLine().contains(QStringLiteral("paused")));
        // The hovered span is one of the tokens shown, and says what it is.
        const QRectF lane = view.laneRect(spillway::trace::Lane::CpuCompute);
        QString info;
        for (int x = int(lane.left()); x < int(lane.right()) && info.isEmpty(); x += 3)
            info = view.spanInfoAt(QPoint(x, int(lane.center().y())));
        QVERIFY(!info.isEmpty());
        QVERIFY2(info.contains(QStringLiteral(" · whole layer · ")) && !info.contains(QStringLiteral("no bytes")) &&
                     !info.contains(QStringLiteral("–")),
                 qPrintable(info));
        static const QRegularExpression tokenId(QStringLiteral("token (\\d+)$"));
        const int id = tokenId.match(info).captured(1).toInt();
        QVERIFY2(id < 10, qPrintable(info));  // held still: the first tokens are what is drawn
        // Double-click: it follows the newest again.
        view.fitToData();
        QVERIFY(!view.isPaused());
        QCOMPARE(view.dataRange().endNs, double(t - 10'000));  // the newest token's last span
    }

    // A file Add model… refuses stays in the Models view, in red, until dismissed.
    void addModelErrorsStay()
    {
        QTemporaryDir data, files;
        auto window = chatWindow(kModel, data.path(), 8);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        const QString broken = files.filePath(QStringLiteral("notes.gguf"));
        QFile f(broken);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("these are notes, not a model");
        f.close();
        window->showView(ChatWindow::View::Models);
        auto* panel = part<spillway::ui::LibraryPanel>(*window, "library");
        emit panel->addRequested(broken);
        QTRY_VERIFY_WITH_TIMEOUT(!panel->errorText().isEmpty(), 10'000);
        QVERIFY2(panel->errorText().contains(QStringLiteral("notes.gguf")), qPrintable(panel->errorText()));
        QVERIFY(part<QLabel>(*window, "libraryError")->isVisible());
        // The next message in the status line does not take it away.
        window->showView(ChatWindow::View::Chats);
        QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
        window->showView(ChatWindow::View::Models);
        QVERIFY(!panel->errorText().isEmpty());
        part<QPushButton>(*window, "libraryErrorDismiss")->click();
        QVERIFY(panel->errorText().isEmpty());
    }

    // The terminal chat's /save file imports: its messages, its system prompt, marked imported.
    void terminalChatSaveImports()
    {
        QTemporaryDir data, files;
        const QString saved = files.filePath(QStringLiteral("chat.json"));
        QProcess cli;
        cli.start(QStringLiteral(SPILLWAY_CLI), {QStringLiteral("chat"), QStringLiteral("-m"), kModel, QStringLiteral("--system"),
                                                QStringLiteral("Tell short stories."), QStringLiteral("--temp"), QStringLiteral("0"),
                                                QStringLiteral("-n"), QStringLiteral("12")});
        QVERIFY(cli.waitForStarted(10'000));
        cli.write(QStringLiteral("Once upon a time\n/save %1\n/quit\n").arg(saved).toUtf8());
        cli.closeWriteChannel();
        QVERIFY(cli.waitForFinished(60'000));
        QVERIFY2(QFile::exists(saved), cli.readAllStandardError().constData());

        auto window = chatWindow(kModel, data.path(), 8);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QSignalSpy listed(window.get(), &ChatWindow::conversationsListed);
        window->controller()->importFile(saved);
        QTRY_VERIFY_WITH_TIMEOUT(rowsOf(*window, "conversations") == 1, 10'000);
        QVERIFY2(errorTextOf(*window).isEmpty(), qPrintable(errorTextOf(*window)));
        QVERIFY2(rowTextOf(*window, "conversations", 0).endsWith(QStringLiteral("(imported)")),
                 qPrintable(rowTextOf(*window, "conversations", 0)));
        const qint64 id = rowIdOf(*window, "conversations", 0);
        const auto messages = storedMessages(data.path(), id);
        QCOMPARE(int(messages.size()), 2);
        QCOMPARE(QString::fromStdString(messages[0].content), QStringLiteral("Once upon a time"));
        QVERIFY(!messages[1].content.empty());
        QSignalSpy shown(window.get(), &ChatWindow::conversationShown);
        window->controller()->openConversation(id);
        QVERIFY(shown.wait(10'000));
        QTRY_COMPARE_WITH_TIMEOUT(window->controller()->settings().systemPrompt, QStringLiteral("Tell short stories."), 10'000);
    }

    // The first launch: the bar only goes forward, and "Ready to chat" waits for the measurement.
    void probeBarOnlyGoesForward()
    {
        spillway::ui::WelcomePage page;
        page.setModel(QStringLiteral("stories260K.gguf on the CPU"));
        QVERIFY(!page.modelLine().startsWith(QStringLiteral("Ready to chat")));
        page.setProgress(0.65, QStringLiteral("memory"));
        page.setProgress(0.0, QStringLiteral("again (the first readings varied): disk"));
        QVERIFY(page.progressBar()->value() >= 65);
        QVERIFY(!page.modelLine().startsWith(QStringLiteral("Ready to chat")));
        page.setSummary(QStringLiteral("2 cores"), QStringLiteral("what it can run"));
        QCOMPARE(page.progressBar()->value(), 100);
        QVERIFY(page.modelLine().startsWith(QStringLiteral("Ready to chat")));
    }

    // The polish: actions are icons with tooltips that Tab reaches and Enter activates; long
    // chat titles end in "…" without a sideways scrollbar; a base model's system prompt is said
    // to be ignored and its replies have a shown default length that Continue goes past; exports
    // carry the system prompt; a window restored off-screen comes back on it.
    void polish()
    {
        QTemporaryDir data;
        auto window = chatWindow(kModel, data.path(), 0);
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        // A base model: the note, and the default length.
        QVERIFY(!part<QLabel>(*window, "systemPromptNote")->text().isEmpty());
        QVERIFY2(part<QSpinBox>(*window, "maxTokens")->specialValueText().contains(QStringLiteral("512")),
                 qPrintable(part<QSpinBox>(*window, "maxTokens")->specialValueText()));
        part<QPlainTextEdit>(*window, "systemPrompt")->setPlainText(QStringLiteral("Be brief."));
        QSignalSpy finished(window->controller(), &spillway::ui::ChatController::replyFinished);
        promptOf(*window)->setText(QStringLiteral("Once upon a time there was a very long title for a chat that does not fit"));
        window->send();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
        const int tokens = finished.at(0).at(2).toInt();
        const QString end = finished.at(0).at(3).toString();
        QVERIFY2((end == QLatin1String("limit") && tokens == 512) || end == QLatin1String("turn"), qPrintable(end));
        if (end == QLatin1String("limit")) {
            QVERIFY2(statusTextOf(*window).contains(QStringLiteral("512 tokens")), qPrintable(statusTextOf(*window)));
            QSignalSpy more(window->controller(), &spillway::ui::ChatController::replyFinished);
            bool continued = false;  // (continueReply starts it: called until it can, once the reply is stored)
            QTRY_VERIFY_WITH_TIMEOUT(continued || (continued = window->controller()->continueReply()), 10'000);
            QTRY_COMPARE_WITH_TIMEOUT(more.count(), 1, 60'000);
            QVERIFY(more.at(0).at(2).toInt() > 0);
        }

        // Icon actions: a tooltip each; Tab reaches one and Enter runs it.
        TranscriptView* transcript = transcriptOf(*window);
        QTextCursor anchors(transcript->document());
        int icons = 0;
        QStringList tips;
        for (QTextBlock b = transcript->document()->begin(); b.isValid(); b = b.next())
            for (auto it = b.begin(); !it.atEnd(); ++it) {
                const QTextCharFormat f = it.fragment().charFormat();
                if (f.isAnchor() && f.anchorHref().startsWith(QStringLiteral("msg://"))) {
                    tips << f.toolTip();
                    icons += f.isImageFormat();
                }
            }
        QVERIFY(icons >= 3);  // edit, copy, regenerate (and continue)
        for (const QString& tip : tips) QVERIFY2(!tip.isEmpty(), "an action without a tooltip");
        QSignalSpy copied(transcript, &TranscriptView::copied);
        transcript->setFocus();
        bool done = false;
        for (int i = 0; i < 8 && !done; ++i) {
            QTest::keyClick(transcript, Qt::Key_Tab);
            if (transcript->textCursor().charFormat().anchorHref().startsWith(QStringLiteral("msg://copy"))) {
                QTest::keyClick(transcript, Qt::Key_Return);
                done = true;
            }
        }
        QVERIFY(done);
        QCOMPARE(copied.count(), 1);

        // Long titles: elided, no sideways scrollbar.
        auto* list = part<QListView>(*window, "conversations");
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(*window, "conversations"), 1, 10'000);
        QCOMPARE(list->horizontalScrollBarPolicy(), Qt::ScrollBarAlwaysOff);
        QVERIFY(list->textElideMode() == Qt::ElideRight);
        const QModelIndex first = list->model()->index(0, 0);
        QVERIFY2(list->visualRect(first).right() <= list->viewport()->width() &&
                     list->visualRect(first).width() >= list->viewport()->width() - 8,
                 qPrintable(QStringLiteral("the title's row is %1 px wide in a list of %2")
                                .arg(list->visualRect(first).width())
                                .arg(list->viewport()->width())));

        // Export dialogs open in Documents (else home), named after the chat.
        QCOMPARE(ChatWindow::fileNameFor(QStringLiteral("Once upon a time: a story / part 2")),
                 QStringLiteral("Once upon a time a story part 2"));
        QCOMPARE(ChatWindow::fileNameFor(QStringLiteral("???")), QStringLiteral("spillway-chat"));
        QCOMPARE(ChatWindow::fileNameFor(QString(80, QLatin1Char('a'))).size(), 60);
        const QString documents = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
        const QString folder = QFileInfo(ChatWindow::documentsFile(QStringLiteral("x.md"))).absolutePath();
        QVERIFY2(folder == QFileInfo(documents).absoluteFilePath() || folder == QDir::homePath(), qPrintable(folder));

        // Exports carry the system prompt.
        const qint64 id = window->controller()->currentConversation();
        QVERIFY(id > 0);
        const QString json = data.filePath(QStringLiteral("export.json")), md = data.filePath(QStringLiteral("export.md"));
        QSignalSpy exported(window->controller(), &spillway::ui::ChatController::exported);
        QTest::qWait(300);  // the settings reach the store
        window->controller()->exportConversation(id, json, QStringLiteral("json"));
        window->controller()->exportConversation(id, md, QStringLiteral("markdown"));
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 2, 10'000);
        QFile j(json), m(md);
        QVERIFY(j.open(QIODevice::ReadOnly) && m.open(QIODevice::ReadOnly));
        QCOMPARE(QJsonDocument::fromJson(j.readAll()).object().value("systemPrompt").toString(), QStringLiteral("Be brief."));
        QVERIFY(QString::fromUtf8(m.readAll()).contains(QStringLiteral("## System prompt\n\nBe brief.")));
        window->close();
        window.reset();

        // A window stored far off the screen comes back inside its available area.
        {
            ChatWindow offscreen(kModel);
            offscreen.setGeometry(5000, 4000, 4000, 3000);
            auto db = spillway::storage::ChatDatabase::open(data.path().toStdString());
            QVERIFY(db.ok());
            const QJsonObject stored{{"geometry", QString::fromLatin1(offscreen.saveGeometry().toBase64())},
                                     {"state", QString::fromLatin1(offscreen.saveState().toBase64())}};
            QVERIFY(db->setSetting("ui.window", QJsonDocument(stored).toJson(QJsonDocument::Compact).toStdString()));
        }
        ChatWindow again(kModel, data.path());
        again.skipWelcome();
        again.show();
        const QRect area = QGuiApplication::primaryScreen()->availableGeometry();
        QTRY_VERIFY_WITH_TIMEOUT(area.contains(again.frameGeometry()), 10'000);
    }

private:
    QTemporaryDir m_cache;
};

QTEST_MAIN(TestDayOfUse)
#include "test_day_of_use.moc"
