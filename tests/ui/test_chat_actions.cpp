// The message actions and the first launch, driven through the real window with the demo model:
// copy, regenerate (a new version of the reply, ‹ 1/2 › flips back), edit-and-resend of the last
// prompt (new versions of prompt and reply) and of an earlier one (what followed is dropped),
// editing cancelled with Escape; the first-launch screen with the probe's progress, shown once;
// model cards with the planner's prediction; KV precision and compression variants in Tuning.

#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QFile>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QListView>
#include <QProgressBar>
#include <QPushButton>
#include <QScopeGuard>
#include <QScreen>
#include <QGuiApplication>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QUrl>

#include <cstring>
#include <memory>

#include "../common/chat_template_model.h"
#include "core/calibrate/compress_model.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "gpu/cpu/cpu_device.h"
#include "storage/chat_db.h"
#include "ui/chat_window.h"
#include "ui/chat_controller.h"
#include "ui/library_controller.h"
#include "ui_test_util.h"
#include "ui/generation_worker.h"
#include "ui/library_panel.h"
#include "ui/tuning_panel.h"
#include "ui/welcome_page.h"
#include "ui/worker_threads.h"

using spillway::ui::ChatWindow;
using spillway::storage::ChatDatabase;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");

int versionCount(const QString& folder, qint64 message)
{
    auto db = ChatDatabase::open(folder.toStdString());
    if (!db) return -1;
    auto versions = db->versions(message);
    return versions ? int(versions->size()) : -1;
}

// The text of version `number` of a stored message ("" when there is none).
std::string storedVersion(const QString& folder, qint64 message, int number)
{
    auto db = ChatDatabase::open(folder.toStdString());
    if (!db) return {};
    auto versions = db->versions(message);
    if (versions)
        for (const auto& v : *versions)
            if (v.number == number) return v.content;
    return {};
}

// A copy of the demo model whose metadata carries `chatTemplate` (tokenizer.chat_template).
bool writeWithTemplate(const QString& out, const std::string& chatTemplate)
{
    return spillway::testing_support::writeWithChatTemplate(kModel.toStdString(), out.toStdString(), chatTemplate);
}

const std::string& kChatMl = spillway::testing_support::kChatMlTemplate;

// A shown window on the demo model keeping its chats in `folder`, past the first-launch screen.
std::unique_ptr<ChatWindow> chatWindow(const QString& folder, double temperature, int maxTokens)
{
    auto window = std::make_unique<ChatWindow>(kModel, folder);
    window->skipWelcome();
    window->controller()->setTemperature(temperature);
    window->controller()->setMaxTokens(maxTokens);
    window->show();
    return window;
}

// Sends `prompt` and waits until its reply is stored.
bool exchange(ChatWindow& window, const QString& prompt)
{
    QSignalSpy stored(&window, &ChatWindow::replyStored);
    promptOf(window)->setText(prompt);
    window.send();
    return stored.wait(30'000) || stored.count() > 0;
}

}  // namespace

class TestChatActions : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { qputenv("SPILLWAY_QUICK_PROBE", "1"); }
    void copyPutsTheReplyOnTheClipboard();
    void regenerateAddsAVersion();
    void editLastPromptVersionsPromptAndReply();
    void editEarlierPromptDropsWhatFollowed();
    void editIsCancelledWithEscape();
    void firstLaunchShowsTheMachineOnce();
    void cardsAndTuningShowPredictions();
    void laneTableShowsTheProbeTheCalibrationAndTheRun();
    void chatTemplateFormatsTheConversation();
    void brokenChatTemplateIsReportedAndContinued();
    void neuronCacheIsTunedAppliedAndReported();
    void anotherModelAnswersWithoutARestart();
    void replyIsNotCutAt256Tokens();
    void chatSettingsReachTheModelAndStayWithTheChat();
    void windowAndLastModelSurviveARestart();
    void anotherChatWaitsWhileAReplyIsWritten();
    void multiLinePromptsKeepTheirLines();
};

void TestChatActions::copyPutsTheReplyOnTheClipboard()
{
    ChatWindow window(kModel);
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(12);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    const auto& messages = transcriptOf(window)->messages();
    QCOMPARE(int(messages.size()), 2);
    QVERIFY(!messages[1].content.isEmpty());
    QGuiApplication::clipboard()->clear();
    emit transcriptOf(window)->anchorClicked(QUrl(QStringLiteral("msg://copy/1")));
    QCOMPARE(QGuiApplication::clipboard()->text(), messages[1].content);
    // The actions are in the document as links.
    const QString html = transcriptOf(window)->toHtml();
    QVERIFY2(html.contains("msg://copy/1") && html.contains("msg://regenerate/1") && html.contains("msg://edit/0"),
             qPrintable(html));
}

void TestChatActions::regenerateAddsAVersion()
{
    QTemporaryDir data;
    const auto owned = chatWindow(data.path(), 1.0, 12);
    ChatWindow& window = *owned;
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(exchange(window, QStringLiteral("Once upon a time")));
    const qint64 conversation = window.controller()->currentConversation();
    auto stored = storedMessages(data.path(), conversation);
    QCOMPARE(int(stored.size()), 2);
    const std::string first = stored[1].content;

    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.controller()->regenerate(1);
    QVERIFY(window.controller()->isGenerating());
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() >= 1, 30'000);  // reloaded with the new version counts
    stored = storedMessages(data.path(), conversation);
    QCOMPARE(int(stored.size()), 2);  // still one reply, now with two versions
    QCOMPARE(versionCount(data.path(), stored[1].id), 2);
    QCOMPARE(transcriptOf(window)->messages()[1].versionNumber, 2);
    QVERIFY(transcriptOf(window)->toPlainText().contains("2/2"));

    // ‹ shows the first version again, and it stays the current one.
    shown.clear();
    window.controller()->showVersion(1, 1);
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() >= 1, 10'000);
    QCOMPARE(transcriptOf(window)->messages()[1].content.toStdString(), first);
    QVERIFY(transcriptOf(window)->toPlainText().contains("1/2"));
    QCOMPARE(storedMessages(data.path(), conversation)[1].content, first);
    // Only the last reply can be regenerated; a prompt cannot.
    window.controller()->regenerate(0);
    QVERIFY(!window.controller()->isGenerating());
}

void TestChatActions::editLastPromptVersionsPromptAndReply()
{
    QTemporaryDir data;
    const auto owned = chatWindow(data.path(), 0.0, 12);
    ChatWindow& window = *owned;
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(exchange(window, QStringLiteral("Once upon a time")));
    const qint64 conversation = window.controller()->currentConversation();

    QSignalSpy shown(&window, &ChatWindow::conversationShown);
    window.controller()->editAndResend(0, QStringLiteral("The dog"));
    QTRY_VERIFY_WITH_TIMEOUT(shown.count() >= 1, 30'000);
    const auto stored = storedMessages(data.path(), conversation);
    QCOMPARE(int(stored.size()), 2);
    QCOMPARE(stored[0].content, std::string("The dog"));
    QVERIFY(!stored[1].content.empty());
    QCOMPARE(versionCount(data.path(), stored[0].id), 2);  // the original prompt is kept
    QCOMPARE(versionCount(data.path(), stored[1].id), 2);  // and so is its reply
    const QString text = transcriptOf(window)->toPlainText();
    QVERIFY2(text.contains("The dog") && !text.contains("Once upon a time"), qPrintable(text));

    // The versions move together: the reply's ‹ shows the first reply under the prompt it answered,
    // the prompt's › the edited prompt with the reply made for it; a regeneration stays with its
    // prompt.
    const std::string firstReply = storedVersion(data.path(), stored[1].id, 1), secondReply = stored[1].content;
    QVERIFY(firstReply != secondReply);
    auto showAndWait = [&](int index, int number) {
        const int before = int(shown.count());
        window.controller()->showVersion(index, number);
        return QTest::qWaitFor([&] { return shown.count() > before; }, 10'000);
    };
    // The store writes on its own thread: what a shown version puts in the database lands soon
    // after the signal, not with it.
    auto storedAt = [&](size_t i) {
        const auto messages = storedMessages(data.path(), conversation);
        return i < messages.size() ? messages[i].content : std::string();
    };
    QVERIFY(showAndWait(1, 1));
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(0), std::string("Once upon a time"), 5'000);
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(1), firstReply, 5'000);
    QVERIFY(showAndWait(0, 2));
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(0), std::string("The dog"), 5'000);
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(1), secondReply, 5'000);
    QSignalSpy finished(&window, &ChatWindow::replyStored);
    QVERIFY(window.controller()->regenerate(1));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1 && !window.controller()->isGenerating(), 30'000);
    QCOMPARE(versionCount(data.path(), stored[1].id), 3);
    QVERIFY(showAndWait(0, 1));  // the first prompt: its only reply
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(1), firstReply, 5'000);
    QVERIFY(showAndWait(0, 2));  // the edited prompt: the latest reply made for it (the regeneration)
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(0), std::string("The dog"), 5'000);
    QTRY_COMPARE_WITH_TIMEOUT(storedAt(1), storedVersion(data.path(), stored[1].id, 3), 5'000);
}

void TestChatActions::editEarlierPromptDropsWhatFollowed()
{
    QTemporaryDir data;
    const auto owned = chatWindow(data.path(), 0.0, 8);
    ChatWindow& window = *owned;
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(exchange(window, QStringLiteral("Once upon a time")));
    QVERIFY(exchange(window, QStringLiteral("The dog")));
    const qint64 conversation = window.controller()->currentConversation();
    QCOMPARE(int(storedMessages(data.path(), conversation).size()), 4);

    QSignalSpy stored(&window, &ChatWindow::replyStored);
    window.controller()->editAndResend(0, QStringLiteral("Tom and Sue"));
    QTRY_VERIFY_WITH_TIMEOUT(stored.count() >= 1, 30'000);
    const auto messages = storedMessages(data.path(), conversation);
    QCOMPARE(int(messages.size()), 2);
    QCOMPARE(messages[0].content, std::string("Tom and Sue"));
    QCOMPARE(versionCount(data.path(), messages[0].id), 2);
    QCOMPARE(int(transcriptOf(window)->messages().size()), 2);
}

void TestChatActions::editIsCancelledWithEscape()
{
    ChatWindow window(kModel);
    window.controller()->setMaxTokens(4);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Lily"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    // A laptop-sized window (1366x768 leaves about 700 px) keeps its size while the edit banner
    // shows (it grew by 21 px once).
    window.resize(1000, 700);
    QTRY_COMPARE_WITH_TIMEOUT(window.size(), QSize(1000, 700), 2'000);
    emit transcriptOf(window)->anchorClicked(QUrl(QStringLiteral("msg://edit/0")));
    QCOMPARE(promptOf(window)->text(), QStringLiteral("Lily"));
    QTest::qWait(50);
    QCOMPARE(window.size(), QSize(1000, 700));
    QVERIFY2(window.minimumSizeHint().height() <= 700, qPrintable(QString::number(window.minimumSizeHint().height())));
    auto* banner = window.findChild<QLabel*>("editBanner");
    QVERIFY(banner && banner->isVisible());
    promptOf(window)->setFocus();
    QTest::keyClick(promptOf(window), Qt::Key_Escape);
    QVERIFY(!banner->isVisible());
    QVERIFY(promptOf(window)->text().isEmpty());
    QCOMPARE(int(transcriptOf(window)->messages().size()), 2);  // nothing changed
}

void TestChatActions::firstLaunchShowsTheMachineOnce()
{
    QTemporaryDir data, cache;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());  // no cached profile: the probe measures
    {
        ChatWindow window(kModel, data.path());
        window.show();
        QTRY_VERIFY_WITH_TIMEOUT(window.isWelcomeShown(), 10'000);
        QSignalSpy ready(&window, &ChatWindow::tuningReady);
        QList<int> values;
        connect(part<spillway::ui::WelcomePage>(window, "welcome")->progressBar(), &QProgressBar::valueChanged, this,
                [&values](int v) { values << v; });
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 120'000);
        QCOMPARE(part<spillway::ui::WelcomePage>(window, "welcome")->progressBar()->value(), 100);
        QVERIFY2(values.size() >= 3, qPrintable(QString::number(values.size())));  // it moved while measuring
        QVERIFY(std::is_sorted(values.begin(), values.end()));
        const QString summary = part<spillway::ui::WelcomePage>(window, "welcome")->summaryText();
        QVERIFY2(summary.contains("CPU:") && summary.contains("Disk:"), qPrintable(summary));
        QVERIFY2(summary.contains("llama2-7b") && summary.contains("tokens/s"), qPrintable(summary));
        part<spillway::ui::WelcomePage>(window, "welcome")->startButton()->click();
        QVERIFY(!window.isWelcomeShown());
    }
    {
        // The second launch goes straight to the chat.
        ChatWindow window(kModel, data.path());
        window.show();
        QSignalSpy ready(&window, &ChatWindow::tuningReady);
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 60'000);
        QVERIFY(!window.isWelcomeShown());
    }
    qunsetenv("XDG_CACHE_HOME");
}

// The Tuning view's lane table (issue 33, "show it"): per lane the probe's figure once runs
// calibrated the prediction, the calibrated one, and the last measured reply while the placement
// shown is the one it ran with.
void TestChatActions::laneTableShowsTheProbeTheCalibrationAndTheRun()
{
    const QLocale saved;
    QLocale::setDefault(QLocale::c());  // the figures' separators
    const auto restore = qScopeGuard([&saved] { QLocale::setDefault(saved); });
    spillway::ui::TuningPanel panel;
    auto plan = std::make_shared<spillway::plan::PlanResult>();
    plan->deviceName = "test device";
    plan->deviceWeightBytes = 1000;
    plan->ssdBytes = 500;
    plan->probeLanes.ssdRead = 0.004;
    plan->probeLanes.deviceCompute = 0.002;
    plan->probeSecondsPerToken = 0.005;
    plan->lanes = plan->probeLanes;
    plan->secondsPerToken = plan->probeSecondsPerToken;
    spillway::ui::TuningPrediction prediction;
    prediction.plan = plan;
    prediction.tokensPerSecond = 200;
    panel.showPrediction(prediction, true);
    QCOMPARE(panel.lanesText(), QStringLiteral("SSD reads: predicted 4.00 ms\nDevice compute: predicted 2.00 ms\n"
                                               "Token: predicted 5.00 ms\nMeasured figures appear here after a reply of "
                                               "16 tokens or more with an applied plan."));
    // A run of this placement: its column appears.
    spillway::ui::RunLanes run;
    run.planKey = spillway::ui::planKey(*plan);
    run.tokens = 31;
    run.secondsPerToken = 0.010;
    run.predictedSecondsPerToken = 0.005;
    run.ssd = 0.008;
    run.device = 0.0025;
    panel.showMeasured(run);
    QCOMPARE(panel.lanesText(), QStringLiteral("SSD reads: predicted 4.00 ms, last run 8.00 ms\n"
                                               "Device compute: predicted 2.00 ms, last run 2.50 ms\n"
                                               "Token: predicted 5.00 ms, last run 10.00 ms\n"
                                               "Last run: 31 tokens with this placement, 100 tokens/s measured against "
                                               "200 predicted then."));
    // The planner, calibrated by it: the probe's column beside the calibrated one.
    auto calibrated = std::make_shared<spillway::plan::PlanResult>(*plan);
    calibrated->lanes.ssdRead = 0.008;
    calibrated->secondsPerToken = 0.010;
    calibrated->calibrationRuns = 1;
    prediction.plan = calibrated;
    panel.showPrediction(prediction, true);
    QVERIFY2(panel.lanesText().startsWith(QStringLiteral("SSD reads: probe 4.00 ms, predicted 8.00 ms, last run 8.00 ms\n")),
             qPrintable(panel.lanesText()));
    // Another placement: the run is not shown beside it.
    auto other = std::make_shared<spillway::plan::PlanResult>(*calibrated);
    other->deviceWeightBytes = 2000;
    prediction.plan = other;
    panel.showPrediction(prediction, true);
    QVERIFY(!panel.lanesText().contains(QStringLiteral("last run")));
    QVERIFY(panel.lanesText().endsWith(QStringLiteral("The last reply ran with another placement: apply this one and chat to measure it.")));
    panel.showNoPlan(QStringLiteral("too small"));
    QVERIFY(panel.lanesText().isEmpty());
}

void TestChatActions::cardsAndTuningShowPredictions()
{
    QTemporaryDir data, cache;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    ChatWindow window(kModel, data.path());
    window.skipWelcome();
    window.show();
    QSignalSpy ready(&window, &ChatWindow::tuningReady);
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1, 120'000);
    window.library()->addModel(kModel);
    QTRY_COMPARE_WITH_TIMEOUT(rowsOf(window, "models"), 1, 10'000);
    QTRY_VERIFY_WITH_TIMEOUT(rowTextOf(window, "models", 0).contains("tokens/s"), 10'000);
    QVERIFY2(rowTextOf(window, "models", 0).contains("Predicted here:"), qPrintable(rowTextOf(window, "models", 0)));

    // Compressing: the result shows the predicted speed before and after.
    QSignalSpy compared(&window, &ChatWindow::compressionCompared);
    window.library()->compressModel(rowIdOf(window, "models", 0), QStringLiteral("fast"));
    QTRY_COMPARE_WITH_TIMEOUT(compared.count(), 1, 60'000);
    const QString result = part<QLabel>(window, "compressResult")->text();
    QVERIFY2(result.contains("→") && result.contains("tokens/s") && result.contains("top-1"), qPrintable(result));

    // Tuning: the package is a variant of the running model; fp16 KV halves the cache.
    QComboBox* variants = part<spillway::ui::TuningPanel>(window, "tuning")->variantBox();
    QTRY_COMPARE_WITH_TIMEOUT(variants->count(), 2, 10'000);
    QSignalSpy predicted(&window, &ChatWindow::tuningPredicted);
    part<QSpinBox>(window, "contextLength")->setValue(256);
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.contextLength == 256, 10'000);
    const qint64 kv32 = window.library()->lastPrediction().kvBytes;
    QVERIFY(kv32 > 0);
    part<spillway::ui::TuningPanel>(window, "tuning")->kvTypeBox()->setCurrentIndex(part<spillway::ui::TuningPanel>(window, "tuning")->kvTypeBox()->findData("f16"));
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.kvType == QLatin1String("f16"), 10'000);
    QCOMPARE(window.library()->lastPrediction().kvBytes * 2, kv32);
    const QString package = variants->itemData(1).toString();
    variants->setCurrentIndex(1);
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.modelPath == package, 10'000);
    QVERIFY(part<QPushButton>(window, "applyTuning")->isEnabled());

    // Apply runs the package with an fp16 KV cache.
    QSignalSpy applied(&window, &ChatWindow::tuningApplied);
    part<QPushButton>(window, "applyTuning")->click();
    QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 30'000);
    QVERIFY2(statusTextOf(window).contains("KV cache f16"), qPrintable(statusTextOf(window)));
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    window.controller()->setMaxTokens(8);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY(errorTextOf(window).isEmpty());
    qunsetenv("XDG_CACHE_HOME");
}

void TestChatActions::chatTemplateFormatsTheConversation()
{
    QTemporaryDir dir;
    const QString model = dir.filePath("chatml.gguf");
    QVERIFY(writeWithTemplate(model, kChatMl));
    ChatWindow window(model);
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(6);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY(!transcriptOf(window)->continuation());  // replies are shown on their own

    QSignalSpy prompts(window.workers()->generation(), &spillway::ui::GenerationWorker::promptPrepared);
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Hi"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QCOMPARE(prompts.count(), 1);
    QCOMPARE(prompts.at(0).at(0).toString(), QStringLiteral("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    const QString reply = transcriptOf(window)->messages().at(1).content;

    // The second turn carries the whole conversation, the first reply as the assistant's turn.
    promptOf(window)->setText(QStringLiteral("More"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 30'000);
    QCOMPARE(prompts.at(1).at(0).toString(),
             QStringLiteral("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n%1<|im_end|>\n"
                            "<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n")
                 .arg(reply));
    QVERIFY(!transcriptOf(window)->toPlainText().contains("Model: Hi"));  // the prompt is not repeated
}

void TestChatActions::brokenChatTemplateIsReportedAndContinued()
{
    QTemporaryDir dir;
    const QString model = dir.filePath("broken.gguf");
    QVERIFY(writeWithTemplate(model, "{% for message in messages %}{{ message['content'] }"));
    ChatWindow window(model);
    window.controller()->setMaxTokens(4);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QVERIFY2(statusTextOf(window).contains("chat template is not used"), qPrintable(statusTextOf(window)));
    QVERIFY(transcriptOf(window)->continuation());
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY(errorTextOf(window).isEmpty());
}


void TestChatActions::neuronCacheIsTunedAppliedAndReported()
{
    // A ReLU model packaged with bundles and predictors (relu-stories-260K).
    QTemporaryDir folder;
    QVERIFY(folder.isValid());
    qputenv("XDG_CACHE_HOME", folder.filePath("cache").toUtf8());
    const QString package = folder.filePath("relu-package");
    {
        auto source = spillway::LlamaModel::load(SPILLWAY_TEST_DATA_DIR "/models/relu-stories-260K/model_qint80.bin",
                                                 spillway::ModelLoadOptions{"relu-llama", ""});
        QVERIFY2(source.ok(), source ? "" : source.error().message.c_str());
        auto device = spillway::gpu::createCpuDevice(2);
        spillway::compress::CompressOptions o;
        o.qualityCheck = false;
        o.bundles = true;
        o.predictorRank = 8;
        o.predictorContinueTokens = 8;
        QVERIFY(spillway::compress::compressModel(**source, package.toStdString(), o, *device).ok());
    }
    ChatWindow window(package, folder.filePath("data"));
    window.skipWelcome();
    window.controller()->setTemperature(0.0);
    window.controller()->setMaxTokens(12);
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);

    // Tuning: the cache is planned (its FFN matrices leave the placement), in predicted mode.
    spillway::ui::TuningPanel* tuning = part<spillway::ui::TuningPanel>(window, "tuning");
    tuning->neuronModeBox()->setCurrentIndex(tuning->neuronModeBox()->findData("predicted"));
    tuning->neuronCacheBox()->setValue(64);
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.neuronCache == 64 &&
                                 window.library()->lastPrediction().settings.neuronMode == QLatin1String("predicted"),
                             20'000);
    QVERIFY2(window.library()->lastPrediction().note.isEmpty(), qPrintable(window.library()->lastPrediction().note));
    QTRY_VERIFY_WITH_TIMEOUT(part<QPushButton>(window, "applyTuning")->isEnabled(), 10'000);
    QSignalSpy applied(&window, &ChatWindow::tuningApplied);
    part<QPushButton>(window, "applyTuning")->click();
    QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 1, 30'000);
    QVERIFY2(statusTextOf(window).contains("neuron cache 64"), qPrintable(statusTextOf(window)));
    // Each layer's cold neurons go where the cost model says, and the status says how many run on the CPU.
    QCOMPARE(window.library()->lastPrediction().coldOnCpu.size(), 4);
    QVERIFY2(statusTextOf(window).contains(QStringLiteral("cold neurons on the CPU in %1 of 4 layers")
                                              .arg(window.library()->lastPrediction().coldOnCpu.count(true))),
             qPrintable(statusTextOf(window)));
    // Asked for explicitly: the CPU takes the cold neurons of every layer.
    tuning->coldNeuronsBox()->setCurrentIndex(tuning->coldNeuronsBox()->findData("cpu"));
    QTRY_VERIFY_WITH_TIMEOUT(window.library()->lastPrediction().settings.coldNeurons == QLatin1String("cpu"), 20'000);
    QCOMPARE(window.library()->lastPrediction().coldOnCpu.count(true), 4);
    QTRY_VERIFY_WITH_TIMEOUT(part<QPushButton>(window, "applyTuning")->isEnabled(), 10'000);
    part<QPushButton>(window, "applyTuning")->click();
    QTRY_COMPARE_WITH_TIMEOUT(applied.count(), 2, 30'000);
    QVERIFY2(statusTextOf(window).contains("cold neurons on the CPU in 4 of 4 layers"), qPrintable(statusTextOf(window)));

    // A reply through the cache: the status line reports its hit rate and bytes per token.
    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY2(errorTextOf(window).isEmpty(), qPrintable(errorTextOf(window)));
    QVERIFY2(statusTextOf(window).contains("neuron cache: hit rate"), qPrintable(statusTextOf(window)));

    // The demo model's FFN is SwiGLU: the setting is declined, with the reason shown.
    ChatWindow dense(kModel, folder.filePath("data2"));
    dense.skipWelcome();
    dense.show();
    SPILLWAY_WAIT_FOR_MODEL(dense, 30'000);
    part<spillway::ui::TuningPanel>(dense, "tuning")->neuronCacheBox()->setValue(32);
    QTRY_VERIFY_WITH_TIMEOUT(!dense.library()->lastPrediction().note.isEmpty(), 20'000);
    QCOMPARE(dense.library()->lastPrediction().settings.neuronCache, 0);
    QVERIFY(dense.library()->lastPrediction().note.contains("ReLU"));
    QVERIFY(part<spillway::ui::TuningPanel>(dense, "tuning")->predictionText().contains("ReLU"));
    qunsetenv("XDG_CACHE_HOME");
}

// Shift+Enter adds a line and Enter sends; a pasted multi-line text keeps its lines; the box
// grows with its lines and is one line again once sent; the stored prompt has every line.
void TestChatActions::multiLinePromptsKeepTheirLines()
{
    QTemporaryDir data;
    const auto owned = chatWindow(data.path(), 0.0, 8);
    ChatWindow& window = *owned;
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    auto* prompt = promptOf(window);
    const int oneLine = prompt->height();
    prompt->setFocus();
    QTest::keyClicks(prompt, QStringLiteral("Once upon"));
    QTest::keyClick(prompt, Qt::Key_Return, Qt::ShiftModifier);
    QTest::keyClicks(prompt, QStringLiteral("a time"));
    QCOMPARE(prompt->text(), QStringLiteral("Once upon\na time"));
    QVERIFY2(prompt->height() > oneLine, qPrintable(QString::number(prompt->height())));
    QGuiApplication::clipboard()->setText(QStringLiteral("\nthere was\na dog"));
    prompt->paste();
    QCOMPARE(prompt->text(), QStringLiteral("Once upon\na time\nthere was\na dog"));
    const int fourLines = prompt->height();
    QVERIFY(fourLines > oneLine);

    QSignalSpy finished(&window, &ChatWindow::replyFinished);
    QSignalSpy replyStored(&window, &ChatWindow::replyStored);
    QTest::keyClick(prompt, Qt::Key_Return);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30'000);
    QVERIFY(prompt->text().isEmpty());
    QCOMPARE(prompt->height(), oneLine);
    // The reply is written by the store's thread after it finishes (as exchange() waits for).
    QTRY_COMPARE_WITH_TIMEOUT(replyStored.count(), 1, 30'000);
    const auto stored = storedMessages(data.path(), window.controller()->currentConversation());
    QCOMPARE(int(stored.size()), 2);
    QCOMPARE(stored[0].content, std::string("Once upon\na time\nthere was\na dog"));
    QVERIFY(transcriptOf(window)->toPlainText().contains(QStringLiteral("there was")));
    // A line that fits wraps when the window narrows, and the box grows with it.
    window.resize(1200, window.height());
    prompt->setText(QStringLiteral("the quick brown fox jumps over the lazy dog ").repeated(2).trimmed());
    QTRY_COMPARE_WITH_TIMEOUT(prompt->height(), oneLine, 2'000);
    window.resize(window.minimumSizeHint().width(), window.height());
    QTRY_VERIFY_WITH_TIMEOUT(prompt->height() > oneLine, 2'000);
}

QTEST_MAIN(TestChatActions)
#include "test_chat_actions.moc"

// Chat with the launch model, pick a second model (a chat-template copy) in the picker and chat
// with it without a restart; the conversation remembers its model; a model whose file went away
// fails to load with the reason shown, and the model before goes on answering.
void TestChatActions::anotherModelAnswersWithoutARestart()
{
    QTemporaryDir data, dir, cache;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    const QString chatml = dir.filePath("chatml.gguf");
    const QString doomed = dir.filePath("doomed.gguf");
    QVERIFY(writeWithTemplate(chatml, kChatMl));
    QVERIFY(QFile::copy(kModel, doomed));
    auto window = chatWindow(data.path(), 0.0, 8);
    SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
    spillway::ui::ChatController* chat = window->controller();
    QComboBox* picker = part<QComboBox>(*window, "modelPicker");
    QTRY_COMPARE_WITH_TIMEOUT(picker->count(), 1, 10'000);  // the running model is in the library
    QVERIFY2(picker->currentText().startsWith("stories260K.gguf · gguf"), qPrintable(picker->currentText()));
    QTRY_VERIFY_WITH_TIMEOUT(chat->modelId() > 0, 10'000);
    const qint64 first = chat->modelId();
    QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
    const qint64 conversation = chat->currentConversation();

    // The second model joins the library (as a drop or Add model… does) and is picked.
    window->library()->addModel(chatml);
    window->library()->addModel(doomed);
    QTRY_COMPARE_WITH_TIMEOUT(picker->count(), 3, 10'000);
    int row = -1;
    for (int i = 0; i < picker->count(); ++i)
        if (picker->itemText(i).startsWith("chatml.gguf")) row = i;
    QVERIFY(row >= 0);
    QSignalSpy ready(window.get(), &ChatWindow::modelReady);
    picker->setCurrentIndex(row);
    emit picker->activated(row);  // what a user's choice sends
    QVERIFY(chat->isLoading());
    QVERIFY(part<QPushButton>(*window, "cancelLoad")->isVisible());  // while it loads
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1 && !chat->isLoading(), 30'000);
    QCOMPARE(chat->modelPath(), chatml);
    QVERIFY(chat->modelId() != first);
    QVERIFY2(statusTextOf(*window).startsWith("chatml.gguf"), qPrintable(statusTextOf(*window)));
    // The model before was unloaded first, and the status line says what that freed.
    QVERIFY2(statusTextOf(*window).contains("unloaded stories260K.gguf, which freed"), qPrintable(statusTextOf(*window)));
    QVERIFY(!part<QPushButton>(*window, "cancelLoad")->isVisible());
    QVERIFY(!part<QProgressBar>(*window, "loadProgress")->isVisible());
    QVERIFY(!transcriptOf(*window)->continuation());  // it answers chat turns

    // The same conversation goes on with it: the whole conversation in its template.
    QSignalSpy prompts(window->workers()->generation(), &spillway::ui::GenerationWorker::promptPrepared);
    QVERIFY(exchange(*window, QStringLiteral("And then?")));
    QCOMPARE(prompts.count(), 1);
    QVERIFY2(prompts.at(0).at(0).toString().startsWith("<|im_start|>user\nOnce upon a time<|im_end|>"),
             qPrintable(prompts.at(0).at(0).toString()));
    QCOMPARE(int(chat->messages().size()), 4);
    {
        auto db = ChatDatabase::open(data.path().toStdString());
        QVERIFY(db);
        auto record = db->conversation(conversation);
        QVERIFY(record);
        QCOMPARE(record->modelId.value_or(0), chat->modelId());
    }

    // A model whose file went away: the reason is shown, the model before answers on.
    QVERIFY(QFile::remove(doomed));
    const qint64 chatmlId = chat->modelId();
    QSignalSpy errors(window.get(), &ChatWindow::errorShown);
    for (int i = 0; i < picker->count(); ++i)
        if (picker->itemText(i).startsWith("doomed.gguf")) row = i;
    emit picker->activated(row);
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 30'000);
    QVERIFY2(errors.at(0).at(0).toString().contains("doomed.gguf") &&
                 errors.at(0).at(0).toString().contains("goes on answering"),
             qPrintable(errors.at(0).at(0).toString()));
    QVERIFY(!chat->isLoading());
    QCOMPARE(chat->modelId(), chatmlId);
    QTRY_COMPARE_WITH_TIMEOUT(picker->currentText().startsWith("chatml.gguf"), true, 5'000);
    QVERIFY(exchange(*window, QStringLiteral("Still there?")));
    QCOMPARE(int(chat->messages().size()), 6);

    // A new chat on the first model; opening the earlier chat again loads the model it talks to.
    chat->newConversation();
    for (int i = 0; i < picker->count(); ++i)
        if (picker->itemText(i).startsWith("stories260K.gguf")) row = i;
    QSignalSpy back(window.get(), &ChatWindow::modelReady);
    emit picker->activated(row);
    QTRY_VERIFY_WITH_TIMEOUT(back.count() == 1 && !chat->isLoading(), 30'000);
    QCOMPARE(chat->modelId(), first);
    QVERIFY(exchange(*window, QStringLiteral("A new story")));
    QVERIFY(chat->currentConversation() != conversation);
    QSignalSpy reopened(window.get(), &ChatWindow::modelReady);
    chat->openConversation(conversation);
    QTRY_VERIFY_WITH_TIMEOUT(reopened.count() == 1 && !chat->isLoading(), 30'000);
    QCOMPARE(chat->modelPath(), chatml);
    QCOMPARE(chat->currentConversation(), conversation);
    QCOMPARE(int(chat->messages().size()), 6);
    QVERIFY2(picker->currentText().startsWith("chatml.gguf"), qPrintable(picker->currentText()));
    window.reset();
    qunsetenv("XDG_CACHE_HOME");
}

// With no token limit (the app's default), a reply goes on until the model ends it or the
// context is full: the base demo model writes past 256 tokens, and the status says why it ended.
void TestChatActions::replyIsNotCutAt256Tokens()
{
    ChatWindow window(kModel);
    window.controller()->setTemperature(0.0);
    QCOMPARE(window.controller()->maxTokens(), 0);  // the default: no limit
    window.show();
    SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
    QSignalSpy finished(window.controller(), &spillway::ui::ChatController::replyFinished);
    promptOf(window)->setText(QStringLiteral("Once upon a time"));
    window.send();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    const int tokens = finished.at(0).at(2).toInt();
    const QString end = finished.at(0).at(3).toString();
    // A base model (the demo) never ends a turn: it stops at the base-model reply length (512),
    // which the status line names; a chat model goes on until its turn or the context ends.
    QVERIFY2(end == "turn" || end == "context" || end == "limit", qPrintable(end));
    if (end == "context") QVERIFY2(statusTextOf(window).contains("the context is full"), qPrintable(statusTextOf(window)));
    if (end == "limit") {
        QCOMPARE(tokens, spillway::ui::ChatController::kBaseModelReplyTokens);
        QVERIFY2(statusTextOf(window).contains("reply length (512 tokens)"), qPrintable(statusTextOf(window)));
    }
    QVERIFY2(tokens > 256, qPrintable(QStringLiteral("%1 tokens, ended by %2").arg(tokens).arg(end)));
}

// The chat's settings: a system prompt typed in the side sheet reaches the template; a preset
// sets the sampler; both stay with the chat (a second window over the same database shows them
// when it opens the chat), and a preset saved in one window is offered in the next.
void TestChatActions::chatSettingsReachTheModelAndStayWithTheChat()
{
    QTemporaryDir data, dir, cache;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    const QString model = dir.filePath("chatml.gguf");
    QVERIFY(writeWithTemplate(model, kChatMl));
    qint64 conversation = 0;
    {
        auto window = std::make_unique<ChatWindow>(model, data.path());
        window->skipWelcome();
        window->show();
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        part<QPushButton>(*window, "settingsToggle")->click();
        QVERIFY(part<QWidget>(*window, "generationSettings")->isVisible());
        part<QPlainTextEdit>(*window, "systemPrompt")->setPlainText(QStringLiteral("Answer in one line."));
        QComboBox* preset = part<QComboBox>(*window, "preset");
        const int precise = preset->findText(QStringLiteral("Precise"));
        QVERIFY(precise > 0);
        preset->setCurrentIndex(precise);
        emit preset->activated(precise);
        QCOMPARE(part<QDoubleSpinBox>(*window, "temperature")->value(), 0.0);
        QCOMPARE(window->controller()->settings().temperature, 0.0);
        QCOMPARE(window->controller()->settings().systemPrompt, QStringLiteral("Answer in one line."));
        part<QSpinBox>(*window, "maxTokens")->setValue(6);

        QSignalSpy prompts(window->workers()->generation(), &spillway::ui::GenerationWorker::promptPrepared);
        QVERIFY(exchange(*window, QStringLiteral("Hi")));
        QCOMPARE(prompts.count(), 1);
        QCOMPARE(prompts.at(0).at(0).toString(),
                 QStringLiteral("<|im_start|>system\nAnswer in one line.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                "<|im_start|>assistant\n"));
        conversation = window->controller()->currentConversation();
        QVERIFY(conversation > 0);

        // A preset of the user's: the chat's settings with a warmer temperature.
        part<QDoubleSpinBox>(*window, "temperature")->setValue(0.3);
        QVERIFY(window->controller()->savePreset(QStringLiteral("Mine")));
        QVERIFY(!window->controller()->savePreset(QStringLiteral("precise")));  // a built-in name
        QTRY_VERIFY_WITH_TIMEOUT(preset->findText(QStringLiteral("Mine")) > 0, 5'000);
        QCOMPARE(preset->currentText(), QStringLiteral("Mine"));
    }
    {
        // A new window over the same database: the chat brings its settings back.
        auto window = std::make_unique<ChatWindow>(model, data.path());
        window->skipWelcome();
        window->show();
        SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
        QComboBox* preset = part<QComboBox>(*window, "preset");
        QTRY_VERIFY_WITH_TIMEOUT(preset->findText(QStringLiteral("Mine")) > 0, 5'000);
        QCOMPARE(window->controller()->settings().systemPrompt, QString());  // a new chat starts plain
        QSignalSpy changed(window->controller(), &spillway::ui::ChatController::settingsChanged);
        window->controller()->openConversation(conversation);
        QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, 5'000);
        QCOMPARE(part<QPlainTextEdit>(*window, "systemPrompt")->toPlainText(), QStringLiteral("Answer in one line."));
        QCOMPARE(part<QDoubleSpinBox>(*window, "temperature")->value(), 0.3);
        QCOMPARE(part<QSpinBox>(*window, "maxTokens")->value(), 6);
        QCOMPARE(window->controller()->settings().temperature, 0.3);
    }
    qunsetenv("XDG_CACHE_HOME");
}

// Started without a model, the app takes the one used last (the demo model the first time); the
// window's size and dock layout come back too (two windows over one database, one after the other).
void TestChatActions::windowAndLastModelSurviveARestart()
{
    QTemporaryDir data, dir, cache;
    qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
    const QString chatml = dir.filePath("chatml.gguf");
    QVERIFY(writeWithTemplate(chatml, kChatMl));
    QSize saved;
    {
        ChatWindow window(QString(), data.path(), nullptr, kModel);  // nothing used before: the fallback
        window.skipWelcome();
        window.show();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QCOMPARE(window.controller()->modelPath(), kModel);
        window.resize(780, 560);  // (its layout's minimum may be a little larger)
        saved = window.size();
        // It fits the test's screen (offscreen: 800x600) and a 1366x768 laptop's: kept as it was
        // (a window larger than the screen comes back inside it: test_day_of_use).
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        QVERIFY2(saved.width() <= screen.width() && saved.height() <= screen.height() && saved.width() > 640,
                 qPrintable(QStringLiteral("%1x%2").arg(saved.width()).arg(saved.height())));
        part<QDockWidget>(window, "bottleneckDock")->hide();
        window.library()->addModel(chatml);
        QComboBox* picker = part<QComboBox>(window, "modelPicker");
        QTRY_COMPARE_WITH_TIMEOUT(picker->count(), 2, 10'000);
        const int row = picker->itemText(0).startsWith("chatml.gguf") ? 0 : 1;
        QSignalSpy ready(&window, &ChatWindow::modelReady);
        emit picker->activated(row);
        QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 1 && !window.controller()->isLoading(), 30'000);
        QCOMPARE(window.controller()->modelPath(), chatml);
        // The Tuning tab's choices.
        part<QDoubleSpinBox>(window, "vramBudget")->setValue(3.5);
        part<QSpinBox>(window, "contextLength")->setValue(512);
        auto* kv = part<QComboBox>(window, "kvType");
        kv->setCurrentIndex(kv->findData(QStringLiteral("q8")));
        part<QSpinBox>(window, "prefetch")->setValue(5);
        window.close();
    }
    {
        ChatWindow window(QString(), data.path(), nullptr, kModel);
        window.skipWelcome();
        window.show();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QCOMPARE(window.controller()->modelPath(), chatml);
        QTRY_COMPARE_WITH_TIMEOUT(window.size(), saved, 5'000);
        QVERIFY(part<QDockWidget>(window, "bottleneckDock")->isHidden());
        QTRY_COMPARE_WITH_TIMEOUT(part<QSpinBox>(window, "contextLength")->value(), 512, 5'000);
        QCOMPARE(part<QDoubleSpinBox>(window, "vramBudget")->value(), 3.5);
        QCOMPARE(part<QComboBox>(window, "kvType")->currentData().toString(), QStringLiteral("q8"));
        QCOMPARE(part<QSpinBox>(window, "prefetch")->value(), 5);
    }
    {
        // The model used last went away: the fallback answers.
        QVERIFY(QFile::remove(chatml));
        ChatWindow window(QString(), data.path(), nullptr, kModel);
        window.skipWelcome();
        SPILLWAY_WAIT_FOR_MODEL(window, 30'000);
        QCOMPARE(window.controller()->modelPath(), kModel);
    }
    qunsetenv("XDG_CACHE_HOME");
}

// Clicking another chat while a reply is written keeps the highlight, the transcript and the
// reply where they are, and says why; once the reply ends, the click opens the other chat.
void TestChatActions::anotherChatWaitsWhileAReplyIsWritten()
{
    QTemporaryDir data;
    auto window = chatWindow(data.path(), 0.0, 8);
    SPILLWAY_WAIT_FOR_MODEL(*window, 30'000);
    spillway::ui::ChatController* chat = window->controller();
    QVERIFY(exchange(*window, QStringLiteral("Once upon a time")));
    const qint64 first = chat->currentConversation();
    chat->newConversation();
    chat->setMaxTokens(0);  // to the end of the context: long enough to click during it
    QSignalSpy finished(chat, &spillway::ui::ChatController::replyFinished);
    promptOf(*window)->setText(QStringLiteral("The dog"));
    window->send();
    QTRY_VERIFY_WITH_TIMEOUT(chat->currentConversation() != 0 && chat->currentConversation() != first, 10'000);
    const qint64 second = chat->currentConversation();
    QListView* list = part<QListView>(*window, "conversations");
    QTRY_COMPARE_WITH_TIMEOUT(list->model()->rowCount(), 2, 5'000);
    int firstRow = -1;
    for (int row = 0; row < 2; ++row)
        if (rowIdOf(*window, "conversations", row) == first) firstRow = row;
    QVERIFY(firstRow >= 0);
    QVERIFY(chat->isGenerating());
    list->setCurrentIndex(list->model()->index(firstRow, 0));
    emit list->clicked(list->model()->index(firstRow, 0));
    QVERIFY(list->currentIndex().row() != firstRow);  // the highlight went back
    QVERIFY2(statusTextOf(*window).contains("A reply is being written"), qPrintable(statusTextOf(*window)));
    QCOMPARE(chat->currentConversation(), second);
    stopButtonOf(*window)->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60'000);
    QCOMPARE(transcriptOf(*window)->messages().at(0).content, QStringLiteral("The dog"));
    QSignalSpy shown(window.get(), &ChatWindow::conversationShown);
    emit list->clicked(list->model()->index(firstRow, 0));
    QTRY_COMPARE_WITH_TIMEOUT(shown.count(), 1, 5'000);
    QCOMPARE(chat->currentConversation(), first);
}
