// ChatWindow with the real demo model on the inference thread: greedy output matches the
// reference, the status line shows the speed, Stop ends a long reply, a bad path is an error;
// conversations are stored (on the storage thread), listed, searched, reopened and deleted.

#include <QApplication>
#include <QFileInfo>
#include <QFile>
#include <QLineEdit>
#include <QListWidget>
#include <QDir>
#include <QDropEvent>
#include <QMimeData>
#include <QProgressBar>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QUrl>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextStream>

#include "core/trace/trace.h"
#include "gpu/registry.h"
#include "storage/chat_db.h"
#include "ui/bottleneck_view.h"
#include "ui/chat_window.h"
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
    void markdownRepliesAreRendered();
    void tuningPlansAndAppliesAPlacement();
    void vulkanDeviceRepliesLikeTheCpu();

private:
    QTemporaryDir m_cache;
};

void TestChatWindow::greedyReplyMatchesReference()
{
    const QString prompt = QStringLiteral("Once upon a time");
    const QString expected = referenceFor(prompt);
    QVERIFY2(!expected.isEmpty(), qPrintable("no reference line in " + kReference));

    ChatWindow window(kModel);
    window.setTemperature(0.0);
    window.setMaxTokens(48);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(window.sendButton()->isEnabled());
    QVERIFY(window.errorText().isEmpty());

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    QTest::keyClicks(window.promptEdit(), prompt);
    QTest::mouseClick(window.sendButton(), Qt::LeftButton);
    QVERIFY(!window.sendButton()->isEnabled());  // busy until the reply ends
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30'000);

    const QString transcript = window.transcript()->toPlainText();
    QVERIFY2(transcript.contains(expected), qPrintable("transcript:\n" + transcript));
    QVERIFY2(window.statusText().contains("48 tokens"), qPrintable(window.statusText()));
    QVERIFY2(window.statusText().contains("tokens/s"), qPrintable(window.statusText()));
    QVERIFY(window.statusText().contains("first token"));
    QVERIFY(window.sendButton()->isEnabled());
    QVERIFY(!window.stopButton()->isEnabled());
    // The docked visualizer drew the layers the engine just ran.
    QTRY_VERIFY_WITH_TIMEOUT(window.bottleneckView()->paintedSpanCount(spillway::trace::Lane::DeviceCompute) > 0, 5'000);
    QVERIFY2(!window.bottleneckView()->headline().isEmpty(), "no headline");
}

void TestChatWindow::stopEndsLongReply()
{
    ChatWindow window(kModel);
    window.setTemperature(0.8);
    window.setMaxTokens(2000);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.promptEdit()->setText(QStringLiteral("Once upon a time"));
    window.sendButton()->click();
    QVERIFY(window.isGenerating());
    QVERIFY(window.stopButton()->isEnabled());
    // Let some text stream in first, so the stop lands mid-generation.
    const QString before = window.transcript()->toPlainText();
    QTRY_VERIFY_WITH_TIMEOUT(window.transcript()->toPlainText() != before, 10'000);

    // How soon the stop lands is the generator's (it polls the flag before each token:
    // test_offload's StopDuringAPromptEndsAfterTheCurrentBatch); here, that the window ends the reply and is ready again.
    QTest::mouseClick(window.stopButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30'000);
    QVERIFY(!window.isGenerating());
    QVERIFY(window.sendButton()->isEnabled());
    QVERIFY(window.statusText().contains("tokens/s"));
    qInfo("stopped: %s", qPrintable(window.statusText()));
}

void TestChatWindow::missingModelShowsError()
{
    ChatWindow window(QStringLiteral("/nonexistent/no-such-model.gguf"));
    window.show();
    QSignalSpy errors(&window, &ChatWindow::errorShown);
    QTRY_VERIFY_WITH_TIMEOUT(errors.count() == 1, 10'000);
    QVERIFY2(window.statusText().startsWith("Error"), qPrintable(window.statusText()));
    QVERIFY(!window.errorText().isEmpty());
    QVERIFY(!window.isModelReady());
    QVERIFY(!window.sendButton()->isEnabled());
    window.promptEdit()->setText(QStringLiteral("hello"));
    window.send();  // ignored: no model
    QVERIFY(!window.isGenerating());
    QVERIFY(!window.sendButton()->isEnabled());
}

void TestChatWindow::conversationsAreStoredSearchedAndReopened()
{
    QTemporaryDir data;
    QVERIFY(data.isValid());
    const QString prompt = QStringLiteral("Once upon a time");
    {
        ChatWindow window(kModel, data.path());
        window.setTemperature(0.0);
        window.setMaxTokens(16);
        window.show();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QSignalSpy stored(&window, &ChatWindow::replyStored);
        window.promptEdit()->setText(prompt);
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 1, 30'000);
        QVERIFY(window.currentConversation() > 0);
        QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 1, 5'000);
        // A second exchange in the same conversation.
        window.promptEdit()->setText(QStringLiteral("The dog"));
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 2, 30'000);
        QCOMPARE(window.conversationList()->count(), 1);
        // New chat, one more conversation.
        window.newChatButton()->click();
        QCOMPARE(window.currentConversation(), 0);
        window.promptEdit()->setText(QStringLiteral("Tom and Sue"));
        window.send();
        QTRY_VERIFY_WITH_TIMEOUT(stored.count() == 3, 30'000);
        QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 2, 5'000);
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
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 2, 10'000);
    QSignalSpy listed(&window, &ChatWindow::conversationsListed);
    window.searchEdit()->setText(QStringLiteral("Sue"));
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 1, 5'000);
    QCOMPARE(window.conversationList()->item(0)->text(), QStringLiteral("Tom and Sue"));
    window.searchEdit()->setText(QStringLiteral("zebra"));
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 0, 5'000);
    window.searchEdit()->clear();
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 2, 5'000);

    QListWidgetItem* item = nullptr;
    for (int i = 0; i < window.conversationList()->count(); ++i)
        if (window.conversationList()->item(i)->text() == prompt) item = window.conversationList()->item(i);
    QVERIFY(item);
    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.openConversation(item->data(Qt::UserRole).toLongLong());
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, 5'000);
    const QString transcript = window.transcript()->toPlainText();
    QVERIFY2(transcript.contains("The dog") && transcript.contains(prompt), qPrintable(transcript));
    // The reply's figures show on hover: a tooltip over its text.
    const QVector<spillway::ui::MessageItem> shownMessages = window.transcript()->messages();
    QCOMPARE(int(shownMessages.size()), 4);
    QVERIFY(shownMessages[3].tokensPerSecond > 0);
    QString tips;
    for (QTextBlock b = window.transcript()->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it) tips += it.fragment().charFormat().toolTip() + "\n";
    QVERIFY2(tips.contains("tokens/s") && tips.contains("first token"), qPrintable(tips));

    window.deleteConversation(item->data(Qt::UserRole).toLongLong());
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 1, 5'000);
    QCOMPARE(window.currentConversation(), 0);
    QVERIFY(window.errorText().isEmpty());
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
    QSignalSpy listed(&window, &ChatWindow::modelsListed);
    QTRY_VERIFY_WITH_TIMEOUT(listed.count() >= 1, 10'000);  // the empty catalog
    QCOMPARE(window.modelList()->count(), 0);

    dropFile(window, kModel);
    QTRY_COMPARE_WITH_TIMEOUT(window.modelList()->count(), 1, 10'000);
    QVERIFY2(window.modelList()->item(0)->text().contains("stories260K.gguf"), qPrintable(window.modelList()->item(0)->text()));
    dropFile(window, kModel);  // the same file again: still one entry

    // A truncated file: an error naming it, nothing added.
    const QString truncated = QDir(data.path()).filePath("truncated.gguf");
    {
        QFile in(kModel), out(truncated);
        QVERIFY(in.open(QIODevice::ReadOnly) && out.open(QIODevice::WriteOnly));
        out.write(in.read(5000));
    }
    QSignalSpy rejected(&window, &ChatWindow::modelRejected);
    dropFile(window, truncated);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 1, 10'000);
    QVERIFY2(window.errorText().contains("truncated.gguf"), qPrintable(window.errorText()));
    QCOMPARE(window.modelList()->count(), 1);

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
    QVERIFY2(window.errorText().contains("hf-model") && window.errorText().contains("no tokenizer"),
             qPrintable(window.errorText()));
    const QString safetensors = QDir(data.path()).filePath("model.safetensors");
    {
        QFile f(safetensors);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10));
    }
    dropFile(window, safetensors);
    QTRY_COMPARE_WITH_TIMEOUT(rejected.count(), 3, 10'000);
    QVERIFY2(window.errorText().contains("safetensors"), qPrintable(window.errorText()));
    QCOMPARE(window.modelList()->count(), 1);

    // Compress with the fast preset: progress, then a package in the catalog under the source.
    const qint64 source = window.modelList()->item(0)->data(Qt::UserRole).toLongLong();
    QSignalSpy progress(&window, &ChatWindow::compressionProgress);
    QSignalSpy finished(&window, &ChatWindow::compressionFinished);
    window.compressModel(source, QStringLiteral("fast"));
    QVERIFY(window.isCompressing());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QVERIFY(progress.count() >= 3);
    const QString package = finished.at(0).at(0).toString();
    QVERIFY2(QFileInfo::exists(package + "/manifest.json"), qPrintable(package));
    QVERIFY2(finished.at(0).at(1).toString().contains("top-1"), qPrintable(finished.at(0).at(1).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(window.modelList()->count(), 2, 10'000);
    QCOMPARE(window.compressionBar()->value(), 1000);

    // Cancelled at once: nothing is left in the models folder but the first package.
    QSignalSpy failed(&window, &ChatWindow::compressionFailed);
    window.compressModel(source, QStringLiteral("smallest"));
    window.cancelCompression();
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60'000);
    QVERIFY(failed.at(0).at(1).toBool());  // cancelled
    QCOMPARE(QDir(window.modelsFolder()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot),
             QStringList{QFileInfo(package).fileName()});
    QCOMPARE(window.modelList()->count(), 2);
    QVERIFY(!window.isCompressing());
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
    QTRY_COMPARE_WITH_TIMEOUT(window.conversationList()->count(), 1, 10'000);
    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.openConversation(id);
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() == 1, 5'000);
    const QString text = window.transcript()->toPlainText();
    QVERIFY2(text.contains("int answer = 42;") && !text.contains("```") && !text.contains("# Result"), qPrintable(text));
    const QString html = window.transcript()->toHtml();
    // Qt writes a Markdown heading as a large bold span and a code block as <pre>.
    QVERIFY2(html.contains("font-size:xx-large") && html.contains("<pre"), qPrintable(html.right(600)));
}

void TestChatWindow::tuningPlansAndAppliesAPlacement()
{
    QTemporaryDir data, cache;
    QVERIFY(data.isValid() && cache.isValid());
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());  // no cached profile: the (quick) probe measures
    ChatWindow window(kModel, data.path());
    window.setTemperature(0.0);
    window.setMaxTokens(8);
    window.show();
    QSignalSpy ready(&window, &ChatWindow::tuningReady);
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 120'000);
    QVERIFY2(window.hardwareSummary().contains("CPU") && window.hardwareSummary().contains("Disk"),
             qPrintable(window.hardwareSummary()));
    // Default budgets: the demo model fits on the device; nothing is read from the SSD.
    QTRY_VERIFY_WITH_TIMEOUT(window.lastPrediction().plan != nullptr, 10'000);
    QCOMPARE(window.lastPrediction().ssdBytesPerToken, 0);
    QVERIFY(window.lastPrediction().tokensPerSecond > 0);

    // Tight budgets: the planner moves weights to the SSD, and the panel says so at once.
    window.contextBox()->setValue(64);
    window.vramBudgetBox()->setValue(1.0);
    window.ramBudgetBox()->setValue(0.06);
    const qint64 vram = 1024 * 1024;
    QTRY_VERIFY_WITH_TIMEOUT(window.lastPrediction().settings.vramBudget == vram &&
                                 window.lastPrediction().settings.ramBudget == qint64(0.06 * 1024 * 1024),
                             10'000);
    QVERIFY2(window.lastPrediction().ssdBytesPerToken > 0, qPrintable(window.predictionText()));
    QVERIFY(window.predictionText().contains("tokens/s"));
    QVERIFY(window.applyButton()->isEnabled());

    // Apply, then a reply runs that placement: the visualizer shows SSD reads.
    QSignalSpy applied(&window, &ChatWindow::tuningApplied);
    window.applyButton()->click();
    QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 10'000);
    QVERIFY2(window.statusText().contains("plan applied"), qPrintable(window.statusText()));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.promptEdit()->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY(window.errorText().isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(window.bottleneckView()->paintedSpanCount(spillway::trace::Lane::SsdRead) > 0, 5'000);
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
    window.setTemperature(0.0);
    window.setMaxTokens(48);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QCOMPARE(window.activeBackend(), QStringLiteral("vulkan"));
    QVERIFY2(window.statusText().contains("Vulkan"), qPrintable(window.statusText()));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.promptEdit()->setText(prompt);
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QVERIFY2(window.errorText().isEmpty() && window.noticeText().isEmpty(),
             qPrintable(window.errorText() + window.noticeText()));
    const QString transcript = window.transcript()->toPlainText();
    QVERIFY2(transcript.contains(expected), qPrintable("transcript:\n" + transcript));
    // The tuning panel plans for the device that computes.
    QTRY_VERIFY_WITH_TIMEOUT(window.lastPrediction().plan != nullptr, 120'000);
    QCOMPARE(window.lastPrediction().settings.backend, QStringLiteral("vulkan"));
    qunsetenv("SPILLWAY_BACKEND");
    qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());
}

QTEST_MAIN(TestChatWindow)
#include "test_chat_window.moc"
