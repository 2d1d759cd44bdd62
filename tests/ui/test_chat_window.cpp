// ChatWindow with the real demo model on the inference thread: greedy output matches the
// reference, the status line shows the speed, Stop ends a long reply, a bad path is an error.

#include <QElapsedTimer>
#include <QFile>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>
#include <QTextStream>

#include "ui/chat_window.h"

using spillway::ui::ChatWindow;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_SHARED_DIR "/models/stories260K.gguf");
const QString kReference =
    QStringLiteral(SPILLWAY_SHARED_DIR "/reference/stories260K.greedy48.tsv");

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
    void greedyReplyMatchesReference();
    void stopEndsLongReply();
    void missingModelShowsError();
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
    QTRY_VERIFY_WITH_TIMEOUT(window.isModelReady(), 30'000);
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
}

void TestChatWindow::stopEndsLongReply()
{
    ChatWindow window(kModel);
    window.setTemperature(0.8);
    window.setMaxTokens(2000);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.isModelReady(), 30'000);

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.promptEdit()->setText(QStringLiteral("Once upon a time"));
    window.sendButton()->click();
    QVERIFY(window.isGenerating());
    QVERIFY(window.stopButton()->isEnabled());
    // Let some text stream in first, so the stop lands mid-generation.
    const QString before = window.transcript()->toPlainText();
    QTRY_VERIFY_WITH_TIMEOUT(window.transcript()->toPlainText() != before, 10'000);

    QElapsedTimer timer;
    timer.start();
    QTest::mouseClick(window.stopButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 5'000);
    QVERIFY2(timer.elapsed() < 5'000, qPrintable(QString::number(timer.elapsed()) + " ms"));
    QVERIFY(!window.isGenerating());
    QVERIFY(window.sendButton()->isEnabled());
    QVERIFY(window.statusText().contains("tokens/s"));
    qInfo("stopped after %lld ms: %s", qint64(timer.elapsed()), qPrintable(window.statusText()));
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

QTEST_MAIN(TestChatWindow)
#include "test_chat_window.moc"
