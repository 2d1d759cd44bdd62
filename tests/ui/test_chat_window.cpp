// ChatWindow with the real demo model on the inference thread: greedy output matches the
// reference, the status line shows the speed, Stop ends a long reply, a bad path is an error;
// conversations are stored (on the storage thread), listed, searched, reopened and deleted.

#include <QApplication>
#include <QFileInfo>
#include <QFile>
#include <QLabel>
#include <QAccessible>
#include <QScrollBar>
#include <QLineEdit>
#include <QListView>
#include <QDir>
#include <QDropEvent>
#include <QMimeData>
#include <QProgressBar>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QUrl>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTest>
#include <QTranslator>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextStream>
#include <QStackedWidget>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QToolButton>

#include "core/trace/trace.h"
#include "gpu/registry.h"
#include "storage/chat_db.h"
#include "ui/bottleneck_view.h"
#include "ui/chat_controller.h"
#include "ui/chat_window.h"
#include "ui/translation.h"
#include "ui/library_controller.h"
#include "ui/generation_worker.h"
#include "ui/tuning_panel.h"
#include "ui/library_panel.h"
#include "ui/model_catalog_model.h"
#include "ui_test_util.h"

using spillway::ui::ChatWindow;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
const QString kReference =
    QStringLiteral(SPILLWAY_TEST_DATA_DIR "/reference/stories260K.greedy48.tsv");

// The greedy 48-token text (prompt included) the reference file gives for `prompt`.
QString referenceFor(const QString& prompt)
{
    QFile file(kReference);
    if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) return {};
    QTextStream in(&file);
    while (!in.atEnd()) {
        const QStringList fields = in.readLine().split('\t');
        if (fields.size() == 2 && fields[0] == prompt) return fields[1];
    }
    return {};
}

}  // namespace

class TestChatWindow : public QObject {
    Q_OBJECT
private slots:
    // Every window measures the machine for its Tuning tab: the quick probe, into a cache of this
    // test's own (a full probe of a clean machine takes a minute or more, and the user's cache is
    // not this test's to write).
    void initTestCase()
    {
        QVERIFY(m_cache.isValid());
        qputenv("SPILLWAY_QUICK_PROBE", "1");
        qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
    }
    void cleanupTestCase()
    {
        qunsetenv("SPILLWAY_QUICK_PROBE");
        qunsetenv("XDG_CACHE_HOME");
    }
    void greedyReplyMatchesReference();
    void stopEndsLongReply();
    void missingModelShowsError();
    void conversationsAreStoredSearchedAndReopened();
    void droppedModelsAreCatalogedAndCompressed();
    void chatsExportAndImportRoundTrip();
    void translationsFollowTheLocale();
    void markdownRepliesAreRendered();
    void tuningPlansAndAppliesAPlacement();
    void tuningSaysWhereTheExpertsAre();
    void vulkanDeviceRepliesLikeTheCpu();
    void everyControlHasAnAccessibleName();
    void recommendedPresetIsTheSmallestThatPasses();
    void navigationRailSwitchesViews();
    void llama2cCheckpointsAskForArchitectureAndTokenizer();

private:
    QTemporaryDir m_cache;
};

void TestChatWindow::greedyReplyMatchesReference()
{
    const QString prompt = QStringLiteral("Once upon a time");
    const QString expected = referenceFor(prompt);
    QVERIFY2(!expected.isEmpty(), qPrintable("no reference line in " + kReference));

    ChatWindow window(kModel);
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(48);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(sendButtonOf(window)->isEnabled());
    QVERIFY(errorTextOf(window).isEmpty());

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    QTest::keyClicks(promptOf(window), prompt);
    QTest::mouseClick(sendButtonOf(window), Qt::LeftButton);
    QVERIFY(!sendButtonOf(window)->isEnabled());  // busy until the reply ends
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30'000);

    const QString transcript = transcriptOf(window)->toPlainText();
    QVERIFY2(transcript.contains(expected), qPrintable("transcript:\n" + transcript));
    QVERIFY2(statusTextOf(window).contains("48 tokens"), qPrintable(statusTextOf(window)));
    QVERIFY2(statusTextOf(window).contains("tokens/s"), qPrintable(statusTextOf(window)));
    QVERIFY(statusTextOf(window).contains("first token"));
    // The context meter: the prompt's tokens and the 48 new ones, of the session's context.
    QTRY_VERIFY_WITH_TIMEOUT(QRegularExpression(QStringLiteral("^Context ([0-9,]+) / ([0-9,]+)$"))
                                 .match(part<QLabel>(window, "contextMeter")->text())
                                 .hasMatch(),
                             5'000);
    {
        const QRegularExpressionMatch m = QRegularExpression(QStringLiteral("^Context ([0-9,]+) / ([0-9,]+)$"))
                                              .match(part<QLabel>(window, "contextMeter")->text());
        const int used = QString(m.captured(1)).remove(QLatin1Char(',')).toInt();
        const int context = QString(m.captured(2)).remove(QLatin1Char(',')).toInt();
        QVERIFY2(used > 48 && used < 48 + 32 && context >= used, qPrintable(m.captured(0)));
    }
    QVERIFY(sendButtonOf(window)->isEnabled());
    QVERIFY(!stopButtonOf(window)->isEnabled());
    // The docked visualizer drew the layers the engine just ran.
    QTRY_VERIFY_WITH_TIMEOUT(part<spillway::ui::BottleneckView>(window, "bottleneck")->paintedSpanCount(spillway::trace::Lane::DeviceCompute) > 0, 5'000);
    QVERIFY2(!part<spillway::ui::BottleneckView>(window, "bottleneck")->headline().isEmpty(), "no headline");
    // Computed by the CPU (no CUDA GPU here; the app does not compute on Mesa's CPU Vulkan): the
    // compute lane and the headline say so, instead of "device compute" beside an idle CPU lane.
    const auto* view = part<spillway::ui::BottleneckView>(window, "bottleneck");
    bool cuda = false;
    for (const auto& b : spillway::gpu::backendStatus()) cuda |= b.name == "cuda" && b.usable;
    if (!cuda) {
        QVERIFY(view->computeOnHost());
        QCOMPARE(view->laneLabel(spillway::trace::Lane::DeviceCompute), QStringLiteral("CPU compute"));
        QCOMPARE(view->laneLabel(spillway::trace::Lane::CpuCompute), QStringLiteral("CPU beside GPU"));
        QVERIFY2(view->headline().contains("CPU compute"), qPrintable(view->headline()));
    }
}

void TestChatWindow::stopEndsLongReply()
{
    ChatWindow window(kModel);
    window.controller()->setTemperature(0.8);
    window.controller()->setMaxTokens(2000);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    sendButtonOf(window)->click();
    QVERIFY(window.controller()->isGenerating());
    QVERIFY(stopButtonOf(window)->isEnabled());
    // Let some text stream in first, so the stop lands mid-generation.
    const QString before = transcriptOf(window)->toPlainText();
    QTRY_VERIFY_WITH_TIMEOUT(transcriptOf(window)->toPlainText() != before, 10'000);

    // How soon the stop lands is the generator's (it polls the flag before each token:
    // test_offload's StopDuringAPromptEndsAfterTheCurrentBatch); here, that the window ends the reply and is ready again.
    QTest::mouseClick(stopButtonOf(window), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30'000);
    QVERIFY(!window.controller()->isGenerating());
    QVERIFY(sendButtonOf(window)->isEnabled());
    QVERIFY(statusTextOf(window).contains("tokens/s"));
    qInfo("stopped: %s", qPrintable(statusTextOf(window)));
}

void TestChatWindow::missingModelShowsError()
{
    ChatWindow window(QStringLiteral("/nonexistent/no-such-model.gguf"));
    window.show();
    QSignalSpy errors(&window, &ChatWindow::errorShown);
    QTRY_VERIFY_WITH_TIMEOUT(errors.count() == 1, 10'000);
    QVERIFY2(statusTextOf(window).startsWith("Error"), qPrintable(statusTextOf(window)));
    QVERIFY(!errorTextOf(window).isEmpty());
    QVERIFY(!window.controller()->isModelReady());
    QVERIFY(!sendButtonOf(window)->isEnabled());
    promptOf(window)->setText(QStringLiteral("hello"));
    window.send();  // ignored: no model
    QVERIFY(!window.controller()->isGenerating());
    QVERIFY(!sendButtonOf(window)->isEnabled());
}

void TestChatWindow::conversationsAreStoredSearchedAndReopened()
{
    QTemporaryDir data;
    QVERIFY(data.isValid());
    const QString prompt = QStringLiteral("Once upon a time");
    {
        ChatWindow window(kModel, data.path());
        window.controller()->setTemperature(0.0);
        window.controller()->setMaxTokens(16);
        window.show();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QSignalSpy stored(&window, &ChatWindow::replyStored);
        promptOf(window)->setText(prompt);
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 1, 30'000);
        QVERIFY(window.controller()->currentConversation() > 0);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 1, 5'000);
        // A second exchange in the same conversation.
        promptOf(window)->setText(QStringLiteral("The dog"));
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 2, 30'000);
        QCOMPARE(rowsOf(window, "conversations"), 1);
        // New chat, one more conversation.
        part<QPushButton>(window, "newChat")->click();
        QCOMPARE(window.controller()->currentConversation(), 0);
        promptOf(window)->setText(QStringLiteral("Tom and Sue"));
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 3, 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 2, 5'000);
    }
    // What reached the database, read directly.
    {
        auto db = spillway::storage::ChatDatabase::open(data.path().toStdString());
        QVERIFY(db);
        auto conversations = db->conversations();
        QVERIFY(conversations);
        QCOMPARE(int(conversations->size()), 2);
        int64_t first = 0;
        for (const auto& c : *conversations)
            if (c.title == prompt.toStdString()) first = c.id;
        QVERIFY(first > 0);
        auto messages = db->messages(first);
        QVERIFY(messages);
        QCOMPARE(int(messages->size()), 4);
        QCOMPARE(QString::fromStdString((*messages)[0].content), prompt);
        QVERIFY((*messages)[1].role == spillway::storage::Role::Assistant);
        QVERIFY(!(*messages)[1].content.empty());
        QVERIFY((*messages)[1].generation.tokensPerSecond.value_or(0) > 0);
    }
    // A new window lists both, searches, reopens one, deletes one.
    ChatWindow window(kModel, data.path());
    window.show();
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 2, 10'000);
    QSignalSpy listed(&window, &ChatWindow::conversationsListed);
    part<QLineEdit>(window, "search")->setText(QStringLiteral("Sue"));
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 1, 5'000);
    QCOMPARE(rowTextOf(window, "conversations", 0), QStringLiteral("Tom and Sue"));
    part<QLineEdit>(window, "search")->setText(QStringLiteral("zebra"));
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 0, 5'000);
    part<QLineEdit>(window, "search")->clear();
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 2, 5'000);

    qint64 promptConversation = 0;
    for (int i = 0; i < rowsOf(window, "conversations"); ++i)
        if (rowTextOf(window, "conversations", i) == prompt) promptConversation = rowIdOf(window, "conversations", i);
    QVERIFY(promptConversation);
    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.controller()->openConversation(promptConversation);
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, 5'000);
    const QString transcript = transcriptOf(window)->toPlainText();
    QVERIFY2(transcript.contains("The dog") && transcript.contains(prompt), qPrintable(transcript));
    // The reply's figures show on hover: a tooltip over its text.
    const QVector<spillway::ui::MessageItem> shownMessages = transcriptOf(window)->messages();
    QCOMPARE(int(shownMessages.size()), 4);
    QVERIFY(shownMessages[3].tokensPerSecond > 0);
    QString tips;
    for (QTextBlock b = transcriptOf(window)->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it) tips += it.fragment().charFormat().toolTip() + "\n";
    QVERIFY2(tips.contains("tokens/s") && tips.contains("first token"), qPrintable(tips));

    window.controller()->deleteConversation(promptConversation);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 1, 5'000);
    QCOMPARE(window.controller()->currentConversation(), 0);
    QVERIFY(errorTextOf(window).isEmpty());
}

namespace {

// What a drag and drop of `path` onto the window delivers.
void dropFile(QWidget& target, const QString& path)
{
    QMimeData data;
    data.setUrls({QUrl::fromLocalFile(path)});
    const QPoint at(target.width() / 2, target.height() / 2);
    QDragEnterEvent enter(at, Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&target, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(at), Qt::CopyAction, &data, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&target, &drop);
}

}  // namespace

void TestChatWindow::droppedModelsAreCatalogedAndCompressed()
{
    QTemporaryDir data;
    QVERIFY(data.isValid());
    ChatWindow window(kModel, data.path());
    window.show();
    // The running model is in the library from the start; dropped again, it is still one entry.
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 1, 10'000);
    QVERIFY2(rowTextOf(window, "models", 0).contains("stories260K.gguf"), qPrintable(rowTextOf(window, "models", 0)));
    QSignalSpy listed(&window, &ChatWindow::modelsListed);
    dropFile(window, kModel);
    QTRY_VERIFY_WITH_TIMEOUT(listed.count() >= 1, 10'000);
    QCOMPARE(rowsOf(window, "models"), 1);

    // A truncated file: an error naming it, nothing added.
    const QString truncated = QDir(data.path()).filePath("truncated.gguf");
    {
        QFile in(kModel), out(truncated);
        QVERIFY(in.open(QIODevice::ReadOnly) && out.open(QIODevice::WriteOnly));
        out.write(in.read(5000));
    }
    QSignalSpy rejected(window.library(), &spillway::ui::LibraryController::modelRejected);
    dropFile(window, truncated);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 1, 10'000);
    QVERIFY2(errorTextOf(window).contains("truncated.gguf"), qPrintable(errorTextOf(window)));
    QCOMPARE(rowsOf(window, "models"), 1);

    // A Hugging Face folder without its tokenizer and weights, and a safetensors file alone:
    // refused with what is missing, nothing added.
    const QString hf = QDir(data.path()).filePath("hf-model");
    QVERIFY(QDir().mkpath(hf));
    {
        QFile config(hf + "/config.json");
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write("{\"architectures\": [\"LlamaForCausalLM\"]}");
    }
    dropFile(window, hf);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 2, 10'000);
    QVERIFY2(errorTextOf(window).contains("hf-model") && errorTextOf(window).contains("no tokenizer"),
             qPrintable(errorTextOf(window)));
    const QString safetensors = QDir(data.path()).filePath("model.safetensors");
    {
        QFile f(safetensors);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10));
    }
    dropFile(window, safetensors);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 3, 10'000);
    QVERIFY2(errorTextOf(window).contains("safetensors"), qPrintable(errorTextOf(window)));
    QCOMPARE(rowsOf(window, "models"), 1);

    // Compress with the fast preset: progress, then a package in the catalog under the source.
    const qint64 source = rowIdOf(window, "models", 0);
    QSignalSpy progress(window.library(), &spillway::ui::LibraryController::compressionProgress);
    QSignalSpy finished(window.library(), &spillway::ui::LibraryController::compressionFinished);
    window.library()->compressModel(source, QStringLiteral("fast"));
    QVERIFY(window.library()->isCompressing());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QVERIFY(progress.count() >= 3);
    const QString package = finished.at(0).at(0).toString();
    QVERIFY2(QFileInfo::exists(package + "/manifest.json"), qPrintable(package));
    QVERIFY2(finished.at(0).at(1).toString().contains("top-1"), qPrintable(finished.at(0).at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 2, 10'000);
    QCOMPARE(part<QProgressBar>(window, "compressionBar")->value(), 1000);

    // Cancelled at once: nothing is left in the models folder but the first package.
    QSignalSpy failed(window.library(), &spillway::ui::LibraryController::compressionFailed);
    window.library()->compressModel(source, QStringLiteral("smallest"));
    window.library()->cancelCompression();
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60'000);
    QVERIFY(failed.at(0).at(1).toBool());  // cancelled
    QCOMPARE(part<QProgressBar>(window, "compressionBar")->value(), 0);
    QCOMPARE(QDir(window.library()->modelsFolder()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot),
             QStringList{QFileInfo(package).fileName()});
    QCOMPARE(rowsOf(window, "models"), 2);
    QVERIFY(!window.library()->isCompressing());

    // The int8 package passes the quality bar; 50 % pruning of this 260K model does not: its card
    // says so, the summary too, and the recommended preset stays "fast".
    QVERIFY2(!rowTextOf(window, "models", 1).contains("Below the quality bar"), qPrintable(rowTextOf(window, "models", 1)));
    QCOMPARE(part<spillway::ui::LibraryPanel>(window, "library")->recommended(), QStringLiteral("fast"));
    window.library()->compressModel(source, QStringLiteral("balanced"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60'000);
    QVERIFY2(finished.at(1).at(1).toString().contains("below the quality bar"), qPrintable(finished.at(1).at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 3, 10'000);
    int flagged = 0;
    for (int row = 0; row < 3; ++row) flagged += rowTextOf(window, "models", row).contains("Below the quality bar") ? 1 : 0;
    QCOMPARE(flagged, 1);
    QCOMPARE(spillway::ui::recommendedPreset(window.library()->catalog()->models(), source), QStringLiteral("fast"));
    QCOMPARE(part<QPushButton>(window, "compress")->text(), QStringLiteral("Compress (fast)"));
}

// A dropped llama2.c checkpoint (it records neither its activation nor its tokenizer) opens a
// dialog with the tokenizer found beside it; with relu-llama chosen, the library lists it as a
// llama2.c model of that architecture and it answers with the thesis runtime's reference text.
void TestChatWindow::llama2cCheckpointsAskForArchitectureAndTokenizer()
{
    const QString checkpoint = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/relu-stories-260K/model_qint80.bin");
    QString expected;
    {
        QFile file(QStringLiteral(SPILLWAY_TEST_DATA_DIR "/reference/relu-stories-260K.greedy48.tsv"));
        QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList fields = QString::fromUtf8(file.readLine()).trimmed().split('\t');
        QCOMPARE(fields.value(0), QStringLiteral("Once upon a time"));
        expected = fields.value(1);
    }
    QTemporaryDir data;
    ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(48);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 1, 10'000);
    dropFile(window, checkpoint);
    QDialog* dialog = nullptr;
    QTRY_VERIFY_WITH_TIMEOUT((dialog = window.findChild<QDialog*>(QStringLiteral("checkpointDialog"))) != nullptr, 5'000);
    auto* tokenizer = dialog->findChild<QLineEdit*>(QStringLiteral("checkpointTokenizer"));
    QVERIFY(tokenizer);
    QVERIFY2(tokenizer->text().endsWith("relu-stories-260K/tok1024.bin"), qPrintable(tokenizer->text()));
    auto* ok = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);
    tokenizer->setText(QStringLiteral("/nonexistent/tokenizer.bin"));
    QVERIFY(!ok->isEnabled());  // a tokenizer that is not there cannot be chosen
    tokenizer->setText(QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/relu-stories-260K/tok1024.bin"));
    QVERIFY(ok->isEnabled());
    auto* architecture = dialog->findChild<QComboBox*>(QStringLiteral("checkpointArchitecture"));
    architecture->setCurrentIndex(architecture->findData(QStringLiteral("relu-llama")));
    QTest::mouseClick(ok, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 2, 10'000);
    int row = rowTextOf(window, "models", 0).contains("model_qint80") ? 0 : 1;
    QVERIFY2(rowTextOf(window, "models", row).contains("llama2.c · relu-llama"), qPrintable(rowTextOf(window, "models", row)));

    // It answers as the thesis' runtime does.
    QSignalSpy ready(&window, &ChatWindow::modelReady);
    part<QListView>(window, "models")->setCurrentIndex(part<QListView>(window, "models")->model()->index(row, 0));
    QTest::mouseClick(part<QPushButton>(window, "chatWithModel"), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30'000);
    QVERIFY2(window.controller()->modelPath().endsWith(".llama2c.json"), qPrintable(window.controller()->modelPath()));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    QTest::keyClicks(promptOf(window), QStringLiteral("Once upon a time"));
    QTest::mouseClick(sendButtonOf(window), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    const QString transcript = transcriptOf(window)->toPlainText();
    QVERIFY2(transcript.contains(expected), qPrintable(transcript + "\nexpected: " + expected));
}

void TestChatWindow::recommendedPresetIsTheSmallestThatPasses()
{
    using spillway::ui::ModelItem;
    const auto package = [](qint64 id, const char* preset, double top1, qint64 bytes, double ppl = 10.0) {
        ModelItem m;
        m.id = id;
        m.parentId = 1;
        m.format = QStringLiteral("package");
        m.sizeBytes = bytes;
        m.qualityJson = QStringLiteral(R"({"top1Agreement": %1, "perplexityReference": 10.0, "perplexityCandidate": %2, "preset": "%3"})")
                            .arg(top1)
                            .arg(ppl)
                            .arg(QLatin1String(preset));
        return m;
    };
    ModelItem source;
    source.id = 1;
    QVector<ModelItem> catalog{source};
    QCOMPARE(spillway::ui::recommendedPreset(catalog, 1), QStringLiteral("fast"));  // nothing measured
    catalog << package(2, "fast", 0.99, 600);
    catalog << package(3, "balanced", 0.29, 400);  // fails the agreement
    QCOMPARE(spillway::ui::recommendedPreset(catalog, 1), QStringLiteral("fast"));
    catalog << package(4, "smallest", 0.95, 300, 13.0);  // fails the perplexity (x1.3)
    QCOMPARE(spillway::ui::recommendedPreset(catalog, 1), QStringLiteral("fast"));
    catalog << package(5, "smallest", 0.95, 250, 11.0);
    QCOMPARE(spillway::ui::recommendedPreset(catalog, 1), QStringLiteral("smallest"));
    QCOMPARE(spillway::ui::recommendedPreset(catalog, 2), QStringLiteral("fast"));  // another model's packages
    QString why;
    QVERIFY(!spillway::ui::qualityPasses(catalog[2].qualityJson, &why));
    QVERIFY2(why.contains("29.0%"), qPrintable(why));
    QVERIFY(spillway::ui::qualityPasses(QString()));  // an original
}

void TestChatWindow::navigationRailSwitchesViews()
{
    QTemporaryDir data;
    ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.resize(1200, 800);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    auto* views = part<QStackedWidget>(window, "views");
    QCOMPARE(window.currentView(), ChatWindow::View::Chats);
    QVERIFY(part<QWidget>(window, "conversations")->isVisible());

    // The rail's Models button: the library fills the main area (not a sidebar).
    QTest::mouseClick(part<QToolButton>(window, "navModels"), Qt::LeftButton);
    QCOMPARE(window.currentView(), ChatWindow::View::Models);
    QCOMPARE(views->currentWidget(), part<QWidget>(window, "library"));
    QVERIFY(part<QWidget>(window, "models")->isVisible());
    QVERIFY(!part<QWidget>(window, "conversations")->isVisible());
    QVERIFY2(part<QWidget>(window, "models")->width() > window.width() * 3 / 4,
             qPrintable(QString::number(part<QWidget>(window, "models")->width())));
    QVERIFY(part<QWidget>(window, "bottleneckDock")->isVisible());  // the dock stays in every view

    // Ctrl+3: the Tuning view, as wide.
    QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
    QCOMPARE(window.currentView(), ChatWindow::View::Tuning);
    QVERIFY(part<QToolButton>(window, "navTuning")->isChecked());
    QVERIFY(part<QWidget>(window, "tuning")->width() > window.width() * 3 / 4);
    QVERIFY(part<QWidget>(window, "bottleneckDock")->isVisible());

    // Chat with the selected model: back to the chat, the prompt focused.
    QTest::keyClick(&window, Qt::Key_2, Qt::ControlModifier);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 1, 10'000);
    QTest::mouseClick(part<QPushButton>(window, "chatWithModel"), Qt::LeftButton);
    QCOMPARE(window.currentView(), ChatWindow::View::Chats);
    QVERIFY(part<QToolButton>(window, "navChats")->isChecked());
    QVERIFY(part<QWidget>(window, "prompt")->isVisible());
}

void TestChatWindow::markdownRepliesAreRendered()
{
    QVERIFY(spillway::ui::looksLikeMarkdown("Here:\n```cpp\nint x;\n```"));
    QVERIFY(spillway::ui::looksLikeMarkdown("# Title\ntext"));
    QVERIFY(spillway::ui::looksLikeMarkdown("Steps:\n1. one\n2. two"));
    QVERIFY(!spillway::ui::looksLikeMarkdown("Once upon a time, there was a girl. She was 3."));

    // A stored reply written in Markdown shows rendered: a heading, a code block, no fences.
    QTemporaryDir data;
    QVERIFY(data.isValid());
    qint64 id = 0;
    {
        auto db = spillway::storage::ChatDatabase::open(data.path().toStdString());
        QVERIFY(db);
        auto c = db->createConversation("markdown");
        QVERIFY(c);
        id = *c;
        QVERIFY(db->appendMessage(id, spillway::storage::Role::User, "show code"));
        QVERIFY(db->appendMessage(id, spillway::storage::Role::Assistant,
                                  "# Result\n\nHere it is:\n\n```cpp\nint answer = 42;\n```\n"));
    }
    ChatWindow window(kModel, data.path());
    window.show();
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 1, 10'000);
    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.controller()->openConversation(id);
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, 5'000);
    const QString text = transcriptOf(window)->toPlainText();
    QVERIFY2(text.contains("int answer = 42;") && !text.contains("```") && !text.contains("# Result"), qPrintable(text));
    const QString html = transcriptOf(window)->toHtml();
    // Qt writes a Markdown heading as a large bold span and a code block as <pre>.
    QVERIFY2(html.contains("font-size:xx-large") && html.contains("<pre"), qPrintable(html.right(600)));
}

// A mixture of experts: the Tuning view says where its experts are and what the expert cache is
// expected to hit, as `plan` does.
void TestChatWindow::tuningSaysWhereTheExpertsAre()
{
    QTemporaryDir data, cache;
    QVERIFY(data.isValid() && cache.isValid());
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    ChatWindow window(QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/moe/tiny-qwen2moe.gguf"), data.path());
    window.show();
    QSignalSpy ready(&window, &ChatWindow::tuningReady);
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 120'000);
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().plan != nullptr, 10'000);
    auto* tuning = part<spillway::ui::TuningPanel>(window, "tuning");
    // Default budgets: the tiny model fits; its experts stay on the device.
    QVERIFY2(tuning->predictionText().contains("Experts: on the device in 3 of 3 layers"),
             qPrintable(tuning->predictionText()));
    // A device budget too small for the expert stacks: none stays there (1.6 MiB: the KV cache
    // and a 256-token prompt batch's activations take 1.0 of it).
    part<QSpinBox>(window, "contextLength")->setValue(64);
    part<QDoubleSpinBox>(window, "vramBudget")->setValue(1.6);
    part<QDoubleSpinBox>(window, "ramBudget")->setValue(0.06);
    // (Each change plans again: wait for the prediction with both budgets.)
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.vramBudget == qint64(1.6 * 1024 * 1024) &&
                                 window.library()->lastPrediction().settings.ramBudget == qint64(0.06 * 1024 * 1024),
                             10'000);
    QVERIFY2(tuning->predictionText().contains("Experts: on the device in 0 of 3 layers"),
             qPrintable(tuning->predictionText()));
}

void TestChatWindow::tuningPlansAndAppliesAPlacement()
{
    QTemporaryDir data, cache;
    QVERIFY(data.isValid() && cache.isValid());
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());  // no cached profile: the (quick) probe measures
    ChatWindow window(kModel, data.path());
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(24);  // 16 or more: the reply is measured lane by lane
    window.show();
    QSignalSpy ready(&window, &ChatWindow::tuningReady);
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 120'000);
    QVERIFY2(part<spillway::ui::TuningPanel>(window, "tuning")->hardwareSummary().contains("CPU") && part<spillway::ui::TuningPanel>(window, "tuning")->hardwareSummary().contains("Disk"),
             qPrintable(part<spillway::ui::TuningPanel>(window, "tuning")->hardwareSummary()));
    // Default budgets: the demo model fits on the device; nothing is read from the SSD.
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().plan != nullptr, 10'000);
    QCOMPARE(window.library()->lastPrediction().ssdBytesPerToken, 0);
    QVERIFY(window.library()->lastPrediction().tokensPerSecond > 0);

    // Tight budgets: the planner moves weights to the SSD, and the panel says so at once.
    part<QSpinBox>(window, "contextLength")->setValue(64);
    part<QDoubleSpinBox>(window, "vramBudget")->setValue(1.0);
    part<QDoubleSpinBox>(window, "ramBudget")->setValue(0.06);
    const qint64 vram = 1024 * 1024;
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.vramBudget == vram &&
                                 window.library()->lastPrediction().settings.ramBudget == qint64(0.06 * 1024 * 1024),
                             10'000);
    QVERIFY2(window.library()->lastPrediction().ssdBytesPerToken > 0, qPrintable(part<spillway::ui::TuningPanel>(window, "tuning")->predictionText()));
    QVERIFY(part<spillway::ui::TuningPanel>(window, "tuning")->predictionText().contains("tokens/s"));
    QVERIFY(part<QPushButton>(window, "applyTuning")->isEnabled());
    auto* tuning = part<spillway::ui::TuningPanel>(window, "tuning");
    // The lane table: each busy lane predicted, no run yet.
    QVERIFY2(tuning->lanesText().contains("SSD reads: predicted") && tuning->lanesText().contains("Token: predicted") &&
                 tuning->lanesText().contains("Measured figures appear here"),
             qPrintable(tuning->lanesText()));
    QVERIFY(!tuning->lanesText().contains("last run"));

    // Apply, then a reply runs that placement: the visualizer shows SSD reads.
    QSignalSpy applied(&window, &ChatWindow::tuningApplied);
    part<QPushButton>(window, "applyTuning")->click();
    QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 10'000);
    QVERIFY2(statusTextOf(window).contains("plan applied"), qPrintable(statusTextOf(window)));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY(errorTextOf(window).isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(part<spillway::ui::BottleneckView>(window, "bottleneck")->paintedSpanCount(spillway::trace::Lane::SsdRead) > 0, 5'000);
    // The reply measured lane by lane, beside the prediction of the same placement.
    QTRY_VERIFY2_WITH_TIMEOUT(tuning->lanesText().contains("last run"), qPrintable(tuning->lanesText()), 10'000);
    QVERIFY2(tuning->lanesText().contains(QRegularExpression("SSD reads: predicted [0-9.,]+ ms, last run [0-9.,]+ ms")) &&
                 tuning->lanesText().contains(QRegularExpression("Last run: 2[0-3] tokens with this placement")),
             qPrintable(tuning->lanesText()));
    QVERIFY2(tuning->lanesText().contains(QRegularExpression("Token: predicted [0-9.,]+ ms, last run [0-9.,]*[1-9][0-9.,]* ms")),
             qPrintable(tuning->lanesText()));
    // Another placement (a longer context): its prediction alone, and why the run is not beside it.
    part<QSpinBox>(window, "contextLength")->setValue(128);
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.contextLength == 128, 10'000);
    QTRY_VERIFY2_WITH_TIMEOUT(tuning->lanesText().contains("another placement"), qPrintable(tuning->lanesText()), 10'000);
    QVERIFY(!tuning->lanesText().contains("last run"));
    qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
}

// SPILLWAY_BACKEND=vulkan (the app's --backend): the chat computes on the Vulkan device (lavapipe
// in CI), says so in the status line, plans for it, and the greedy reply is the reference text.
void TestChatWindow::vulkanDeviceRepliesLikeTheCpu()
{
    bool usable = false;
    for (const auto& b : spillway::gpu::backendStatus())
        if (b.name == "vulkan") usable = b.usable;
    if (!usable) QSKIP("no usable Vulkan device");
    const QString prompt = QStringLiteral("Once upon a time");
    const QString expected = referenceFor(prompt);
    QTemporaryDir data, cache;
    QVERIFY(data.isValid() && cache.isValid());
    qputenv("SPILLWAY_BACKEND", "vulkan");
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    ChatWindow window(kModel, data.path());
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(48);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QCOMPARE(window.activeBackend(), QStringLiteral("vulkan"));
    QVERIFY2(statusTextOf(window).contains("Vulkan"), qPrintable(statusTextOf(window)));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(prompt);
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QVERIFY2(errorTextOf(window).isEmpty() && noticeTextOf(window).isEmpty(),
             qPrintable(errorTextOf(window) + noticeTextOf(window)));
    const QString transcript = transcriptOf(window)->toPlainText();
    QVERIFY2(transcript.contains(expected), qPrintable("transcript:\n" + transcript));
    // The tuning panel plans for the device that computes.
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().plan != nullptr, 120'000);
    QCOMPARE(window.library()->lastPrediction().settings.backend, QStringLiteral("vulkan"));
    qunsetenv("SPILLWAY_BACKEND");
    qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
}

// What a screen reader announces: every control a user can reach with the keyboard, in every
// tab and panel, has a name (its own, its button text, or its form label); the painted timeline
// says in words what it draws.
void TestChatWindow::everyControlHasAnAccessibleName()
{
    QTemporaryDir data;
    ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QStringList unnamed;
    for (QWidget* w : window.findChildren<QWidget*>()) {
        if (w->focusPolicy() == Qt::NoFocus || !w->isEnabledTo(&window)) continue;
        // Qt's own parts of a named control: scroll bars, a tab widget's bar, a combo box's popup.
        if (qobject_cast<QScrollBar*>(w) || w->inherits("QTabBar") || w->inherits("QComboBoxListView") ||
            w->objectName().startsWith("qt_"))
            continue;
        QAccessibleInterface* iface = QAccessible::queryAccessibleInterface(w);
        if (!iface || iface->text(QAccessible::Name).trimmed().isEmpty())
            unnamed << QStringLiteral("%1 '%2'").arg(QString::fromLatin1(w->metaObject()->className()), w->objectName());
    }
    QVERIFY2(unnamed.isEmpty(), qPrintable(unnamed.join(", ")));

    auto* view = part<spillway::ui::BottleneckView>(window, "bottleneck");
    QVERIFY(!view->accessibleName().isEmpty());
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.controller()->setMaxTokens(8);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QTRY_VERIFY_WITH_TIMEOUT(!view->headline().isEmpty(), 5'000);
    QAccessibleInterface* iface = QAccessible::queryAccessibleInterface(view);
    QVERIFY(iface);
    QTRY_VERIFY_WITH_TIMEOUT(iface->text(QAccessible::Description).contains(view->headline()), 5'000);
}

QTEST_MAIN(TestChatWindow)
// A chat exported as JSON and imported again (through the controller, as the File menu does, and
// by dropping the export on the window) is the same chat, message for message; Markdown holds
// its text; every chat exports into one file; a file that is not an export is refused by name.
void TestChatWindow::chatsExportAndImportRoundTrip()
{
    QTemporaryDir data, out;
    QVERIFY(data.isValid() && out.isValid());
    ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    spillway::ui::ChatController* chat = window.controller();
    chat->setTemperature(0.0);
    chat->setMaxTokens(16);
    for (const char* prompt : {"Once upon a time", "The dog"}) {
        QSignalSpy stored(&window, &ChatWindow::replyStored);
        promptOf(window)->setText(QString::fromLatin1(prompt));
        window.send();
        QTRY_COMPARE_WITH_TIMEOUT(stored.count(), 1, 30'000);
    }
    const qint64 original = chat->currentConversation();
    const QVector<spillway::ui::MessageItem> before = chat->messages();
    QCOMPARE(int(before.size()), 4);

    QSignalSpy exported(chat, &spillway::ui::ChatController::exported);
    const QString json = out.filePath("chat.json"), markdown = out.filePath("chat.md"), all = out.filePath("all.json");
    chat->exportConversation(original, json, QStringLiteral("json"));
    chat->exportConversation(original, markdown, QStringLiteral("markdown"));
    QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 2, 5'000);
    QFile md(markdown);
    QVERIFY(md.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(md.readAll());
    for (const auto& m : before) QVERIFY2(text.contains(m.content.trimmed()), qPrintable(m.content));

    // Imported: a new conversation, opened, with the same messages.
    QSignalSpy imported(chat, &spillway::ui::ChatController::imported);
    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    chat->importFile(json);
    QTRY_COMPARE_WITH_TIMEOUT(imported.count(), 1, 5'000);
    QTRY_VERIFY_WITH_TIMEOUT(chat->currentConversation() != original && shown.count() >= 1, 5'000);
    QCOMPARE(int(chat->messages().size()), int(before.size()));
    for (int i = 0; i < before.size(); ++i) {
        QCOMPARE(chat->messages()[i].role, before[i].role);
        QCOMPARE(chat->messages()[i].content, before[i].content);
    }
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 2, 5'000);

    // Every chat in one file, dropped on the window: two more.
    chat->exportAll(all, QStringLiteral("json"));
    QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 3, 5'000);
    QCOMPARE(exported.last().at(1).toInt(), 2);
    dropFile(window, all);
    QTRY_COMPARE_WITH_TIMEOUT(imported.count(), 2, 5'000);
    QCOMPARE(imported.last().at(0).toInt(), 2);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "conversations"), 4, 5'000);

    // Not an export: refused with the file's name; nothing added.
    const QString junk = out.filePath("junk.json");
    {
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"hello\": 1}");
    }
    QSignalSpy errors(&window, &ChatWindow::errorShown);
    chat->importFile(junk);
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 5'000);
    QVERIFY2(errors.first().first().toString().contains("junk.json"), qPrintable(errors.first().first().toString()));
    QCOMPARE(rowsOf(window, "conversations"), 4);
}

// The app speaks the user's language where it has a translation: German from the compiled
// ui/translations/spillway_de.ts; a language without one stays English.
void TestChatWindow::translationsFollowTheLocale()
{
#ifndef SPILLWAY_TRANSLATIONS_DIR
    QSKIP("built without Qt's Linguist tools (qt6-tools-dev, qt6-l10n-tools): no translations");
#else
    QVERIFY(!spillway::ui::installTranslation(*QCoreApplication::instance(), QLocale(QLocale::Japanese, QLocale::Japan),
                                              QStringLiteral(SPILLWAY_TRANSLATIONS_DIR)));
    QVERIFY(spillway::ui::installTranslation(*QCoreApplication::instance(), QLocale(QLocale::German, QLocale::Germany),
                                             QStringLiteral(SPILLWAY_TRANSLATIONS_DIR)));
    {
        ChatWindow window(kModel);
        QCOMPARE(sendButtonOf(window)->text(), QStringLiteral("Senden"));
        QCOMPARE(part<QPushButton>(window, "settingsToggle")->text(), QStringLiteral("Einstellungen"));
        QCOMPARE(promptOf(window)->placeholderText(), QStringLiteral("Prompt eingeben und Enter drücken (Umschalt+Enter für eine neue Zeile)"));
    }
    for (QTranslator* t : QCoreApplication::instance()->findChildren<QTranslator*>()) {
        QCoreApplication::removeTranslator(t);
        delete t;
    }
    ChatWindow english(kModel);
    QCOMPARE(sendButtonOf(english)->text(), QStringLiteral("Send"));
#endif
}

#include "test_chat_window.moc"
