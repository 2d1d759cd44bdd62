// The inference worker on a device that is not the CPU: weights that do not fit the device
// stream from RAM, a device that cannot hold the session hands the reply to the CPU, a device
// lost mid-reply finishes it on the CPU (and later replies too), an unusable backend says why.
// Each time the user gets a notice and the greedy text is still the reference text, whole. The
// "GPU" is a CPU device that refuses host pointers (tests/common/opaque_device.h), so this runs
// everywhere; test_chat_window runs the real Vulkan device.

#include <QSignalSpy>
#include <QTest>

#include <QTemporaryDir>

#include "../common/chat_template_model.h"
#include "../common/opaque_device.h"
#include "../common/reference_texts.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/forwarding_device.h"
#include "gpu/registry.h"
#include "ui/generation_worker.h"

using spillway::testing_support::OpaqueDevice;
using spillway::ui::GenerationWorker;
using spillway::ui::MessageItem;

namespace {

const QString kModel = QStringLiteral(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
const char* const kPrompt = "Once upon a time";

std::string referenceText()
{
    for (const auto& r : spillway::testing_support::readReferenceTexts(SPILLWAY_TEST_DATA_DIR
                                                                         "/reference/stories260K.greedy48.tsv"))
        if (r.prompt == kPrompt) return r.text;
    return {};
}

// The prompt and the greedy 48-token reply, as the chat shows them; "" when it failed.
QString reply(GenerationWorker& worker)
{
    QString text;
    QObject::connect(&worker, &GenerationWorker::tokens, &worker, [&](const QString& t) { text += t; });
    QSignalSpy finished(&worker, &GenerationWorker::finished);
    MessageItem prompt;
    prompt.role = QStringLiteral("user");
    prompt.content = QString::fromUtf8(kPrompt);
    worker.generate({prompt}, 48, 0.0);
    QObject::disconnect(&worker, &GenerationWorker::tokens, &worker, nullptr);
    return finished.count() == 1 ? QString::fromUtf8(kPrompt) + text : QString();
}

// Device memory a session of the demo model takes in all (weights on the device) and the weights'
// share of it, measured on an opaque device.
struct Footprint {
    uint64_t total = 0, weights = 0;
};

// A worker on an opaque device with `limit` bytes of memory (0: no limit), and its signals.
struct Rig {
    explicit Rig(uint64_t limit = 0)
    {
        auto opaque = std::make_unique<OpaqueDevice>(spillway::gpu::createCpuDevice(1, limit));
        device = opaque.get();
        worker.setDevice(std::move(opaque));
    }
    GenerationWorker worker;
    OpaqueDevice* device = nullptr;  // owned by the worker
    QSignalSpy notices{&worker, &GenerationWorker::notice};
    QSignalSpy changes{&worker, &GenerationWorker::deviceChanged};
    QString notice(int i = 0) const { return notices.at(i).at(0).toString(); }
};

Footprint footprint()
{
    Footprint f;
    Rig rig;
    rig.worker.loadModel(kModel);
    if (reply(rig.worker).isEmpty()) return f;
    f.total = rig.device->memoryStats().peak;
    auto model = spillway::LlamaModel::load(kModel.toStdString());
    if (model) f.weights = (*model)->weightBytesPerToken();
    return f;
}

}  // namespace

class TestGenerationWorker : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void weightsThatDoNotFitTheDeviceStreamFromRam();
    void aDeviceThatCannotHoldTheSessionHandsTheReplyToTheCpu();
    void aLostDeviceFinishesTheReplyOnTheCpu();
    void anUnusableBackendSaysWhyAndComputesOnTheCpu();
    void theNoticesAreTheEnginesOwn_data();
    void theNoticesAreTheEnginesOwn();
    void tenTurnsEachEvaluateOnlyTheirNewTokens();
    void aLoadShowsProgressAndACancelledOneLeavesTheModelBefore();

private:
    QString m_expected;
    Footprint m_footprint;
};

void TestGenerationWorker::initTestCase()
{
    m_expected = QString::fromStdString(referenceText());
    QVERIFY2(!m_expected.isEmpty(), "no reference line for the prompt");
    {  // every test loads it: one clear failure here instead of empty replies below
        auto model = spillway::LlamaModel::load(kModel.toStdString());
        QVERIFY2(model.ok(), model ? "" : model.error().message.c_str());
    }
    m_footprint = footprint();
    QVERIFY2(m_footprint.weights > 0 && m_footprint.total > m_footprint.weights,
             qPrintable(QStringLiteral("total %1, weights %2").arg(m_footprint.total).arg(m_footprint.weights)));
}

void TestGenerationWorker::weightsThatDoNotFitTheDeviceStreamFromRam()
{
    // Room for the KV cache and activations and a few layers, not for every weight.
    const uint64_t limit = m_footprint.total - m_footprint.weights / 2;
    Rig rig(limit);
    rig.worker.loadModel(kModel);
    QCOMPARE(reply(rig.worker), m_expected);
    QCOMPARE(rig.notices.count(), 1);
    QVERIFY2(rig.notice().contains("does not fit") && rig.notice().contains("stream from RAM"), qPrintable(rig.notice()));
    QCOMPARE(rig.changes.count(), 0);  // still the same device
    QVERIFY(rig.device->uploads > 0);  // it computed, on weights copied in each token
    QVERIFY(rig.device->memoryStats().peak <= limit);
}

void TestGenerationWorker::aDeviceThatCannotHoldTheSessionHandsTheReplyToTheCpu()
{
    Rig rig(4096);  // 4 KiB
    rig.worker.loadModel(kModel);
    QCOMPARE(reply(rig.worker), m_expected);
    QCOMPARE(rig.notices.count(), 1);
    QVERIFY2(rig.notice().contains("opaque-cpu device cannot run") && rig.notice().contains("computed on the CPU"),
             qPrintable(rig.notice()));
    QCOMPARE(rig.device->rmsnorms, uint64_t(0));  // nothing ran on it
    // The conversation keeps its session, on the CPU: the next reply goes on there, without a
    // second notice (applying a plan opens a new one on the device).
    QCOMPARE(reply(rig.worker), m_expected);
    QCOMPARE(rig.notices.count(), 1);
    QCOMPARE(rig.device->rmsnorms, uint64_t(0));
}

void TestGenerationWorker::aLostDeviceFinishesTheReplyOnTheCpu()
{
    // During the prompt; some tokens into the reply (the demo model runs 11 RMSNorms a token).
    for (uint64_t lostAt : {uint64_t(1), uint64_t(11 * 20)}) {
        Rig rig;
        rig.device->failAfterRmsnorms = lostAt;
        rig.device->failWith = spillway::makeError(spillway::ErrorCode::DeviceLost, "test device: lost");
        rig.worker.loadModel(kModel);
        QCOMPARE(reply(rig.worker), m_expected);
        QCOMPARE(rig.notices.count(), 1);
        QVERIFY2(rig.notice().contains("opaque-cpu device failed (test device: lost)") &&
                     rig.notice().contains("on the CPU"),
                 qPrintable(rig.notice()));
        QCOMPARE(rig.changes.count(), 1);  // the device was dropped (rig.device is gone)
        QCOMPARE(rig.changes.at(0).at(0).toString(), QStringLiteral("cpu"));
        const QString why = rig.changes.at(0).at(2).toString();
        QVERIFY2(why.contains("test device: lost"), qPrintable(why));
        // Later replies run on the CPU at once.
        QCOMPARE(reply(rig.worker), m_expected);
        QCOMPARE(rig.notices.count(), 1);
    }
}

void TestGenerationWorker::anUnusableBackendSaysWhyAndComputesOnTheCpu()
{
    spillway::gpu::BackendStatus cuda;
    for (const auto& b : spillway::gpu::backendStatus())
        if (b.name == "cuda") cuda = b;
    if (cuda.usable) QSKIP("CUDA is usable here: nothing to fall back from");
    GenerationWorker worker;
    worker.setBackend(QStringLiteral("cuda"));
    QSignalSpy notices(&worker, &GenerationWorker::notice);
    QSignalSpy changes(&worker, &GenerationWorker::deviceChanged);
    worker.loadModel(kModel);
    QCOMPARE(changes.count(), 1);
    QCOMPARE(changes.at(0).at(0).toString(), QStringLiteral("cpu"));
    QCOMPARE(notices.count(), 1);
    const QString notice = notices.at(0).at(0).toString();
    QVERIFY2(notice.contains(QString::fromStdString(cuda.reason)) && notice.contains("computing on the CPU"),
             qPrintable(notice));
    QCOMPARE(reply(worker), m_expected);
}

void TestGenerationWorker::theNoticesAreTheEnginesOwn_data()
{
    QTest::addColumn<QString>("device");
    QTest::newRow("cannot hold the session") << QStringLiteral("opaque,memory=4096");
    QTest::newRow("lost mid-reply") << QStringLiteral("opaque,lost-after=220");
}

// The worker and the engine (and spillway-cli: test_engine_fallbacks) report one event in the
// same words: the engine made on the failing device that SPILLWAY_TEST_DEVICE describes.
void TestGenerationWorker::theNoticesAreTheEnginesOwn()
{
    QFETCH(QString, device);
    qputenv("SPILLWAY_TEST_DEVICE", device.toUtf8());
    std::vector<std::string> fromEngine;
    {
        auto model = spillway::LlamaModel::load(kModel.toStdString());
        QVERIFY(model.ok());
        auto engine = spillway::engine::Engine::open(
            std::move(*model), {}, [&](const spillway::engine::Notice& n) { fromEngine.push_back(n.message); });
        QVERIFY(engine.ok());
        auto conversation = (*engine)->conversation();
        spillway::engine::ReplyOptions o;
        o.maxNewTokens = 48;
        o.sampling.temperature = 0;
        QVERIFY(conversation->complete(kPrompt, true, o).ok());
    }
    GenerationWorker worker;
    QSignalSpy notices(&worker, &GenerationWorker::notice);
    worker.loadModel(kModel);
    QCOMPARE(reply(worker), m_expected);
    qunsetenv("SPILLWAY_TEST_DEVICE");
    QCOMPARE(fromEngine.size(), size_t(1));
    QCOMPARE(notices.count(), 1);
    QCOMPARE(notices.at(0).at(0).toString(), QString::fromStdString(fromEngine.front()));
}

namespace {

// The CPU device, counting the tokens it runs (one attention query per token and layer).
class CountingDevice final : public spillway::gpu::ForwardingDevice {
public:
    using ForwardingDevice::ForwardingDevice;
    void attention(const spillway::gpu::AttentionArgs& a) override
    {
        ++attentionCalls;
        m_inner.attention(a);
    }
    void attentionBatch(const spillway::gpu::AttentionArgs& a, int queries, size_t rowStride) override
    {
        attentionCalls += uint64_t(queries);
        m_inner.attentionBatch(a, queries, rowStride);
    }
    uint64_t attentionCalls = 0;
};

}  // namespace

// A load copies the weights in with progress (not at the first message); loading the next model
// first unloads this one and says how much device memory that freed; a load cancelled at its
// first copy leaves the model before answering, exactly as before.
void TestGenerationWorker::aLoadShowsProgressAndACancelledOneLeavesTheModelBefore()
{
    Rig rig;  // an opaque device: the weights are copied to it
    QSignalSpy progress(&rig.worker, &GenerationWorker::loadProgress);
    QSignalSpy loaded(&rig.worker, &GenerationWorker::modelLoaded);
    QSignalSpy cancelled(&rig.worker, &GenerationWorker::loadCancelled);
    QSignalSpy unloaded(&rig.worker, &GenerationWorker::unloaded);
    QSignalSpy failed(&rig.worker, &GenerationWorker::failed);
    rig.worker.loadModel(kModel);
    QCOMPARE(loaded.count(), 1);
    QVERIFY2(progress.count() >= 2, qPrintable(QString::number(progress.count())));
    const qint64 total = progress.last().at(1).toLongLong();
    QCOMPARE(progress.last().at(0).toLongLong(), total);  // all of it, once at the end
    QVERIFY2(total >= qint64(m_footprint.weights) / 2, qPrintable(QString::number(total)));
    QCOMPARE(progress.first().at(0).toLongLong(), 0);
    const uint64_t used = rig.device->memoryStats().used;
    QVERIFY(used >= uint64_t(total));  // the weights are on the device before any message

    rig.worker.requestCancelLoad();
    rig.worker.loadModel(kModel);
    QCOMPARE(cancelled.count(), 1);
    QVERIFY(failed.isEmpty());
    QCOMPARE(loaded.count(), 1);
    QVERIFY2(cancelled.at(0).at(0).toString().contains("stories260K"), qPrintable(cancelled.at(0).at(0).toString()));
    QCOMPARE(unloaded.count(), 1);
    QCOMPARE(unloaded.at(0).at(0).toString(), QStringLiteral("stories260K.gguf"));
    QCOMPARE(unloaded.at(0).at(1).toLongLong(), qint64(used));  // all of its device memory
    QVERIFY(rig.device->memoryStats().used < used);             // the cancelled copies are gone
    QCOMPARE(reply(rig.worker), m_expected);                    // the model before answers
}

// A 10-turn chat through the app's worker, as the chat window sends it (the whole conversation
// each time): after the first turn, each evaluates only its new tokens (the user's message, the
// template's markers, the reply), counted on the device, not the history again.
void TestGenerationWorker::tenTurnsEachEvaluateOnlyTheirNewTokens()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString model = dir.filePath("chatml.gguf");
    QVERIFY(spillway::testing_support::writeWithChatTemplate(kModel.toStdString(), model.toStdString(),
                                                             spillway::testing_support::kChatMlTemplate));
    GenerationWorker worker;
    auto counting = std::make_unique<CountingDevice>(spillway::gpu::createCpuDevice(1));
    CountingDevice* device = counting.get();
    worker.setDevice(std::move(counting));
    QSignalSpy loaded(&worker, &GenerationWorker::modelLoaded);
    QSignalSpy finished(&worker, &GenerationWorker::finished);
    QSignalSpy used(&worker, &GenerationWorker::contextUsed);
    QSignalSpy failed(&worker, &GenerationWorker::failed);
    worker.loadModel(model);
    QCOMPARE(loaded.count(), 1);
    QVERIFY(loaded.at(0).at(1).toBool());  // it answers chat turns
    const int layers = spillway::LlamaModel::load(model.toStdString()).value()->config().nLayers;

    const char* const turns[] = {"Tom had a red ball.", "He threw it high.", "It fell in the pond.",
                                 "A frog found it.",    "The frog gave it back.", "Tom said thank you.",
                                 "They played all day.", "The sun went down.",   "Tom went home.",
                                 "He slept well."};
    QVector<MessageItem> conversation;
    uint64_t counted = 0;
    int previousUsed = 0;
    for (int turn = 0; turn < 10; ++turn) {
        MessageItem user;
        user.role = QStringLiteral("user");
        user.content = QString::fromUtf8(turns[turn]);
        conversation.push_back(user);
        QString text;
        auto connection = QObject::connect(&worker, &GenerationWorker::tokens, &worker,
                                           [&](const QString& t) { text += t; });
        worker.generate(conversation, 8, 0.0);
        QObject::disconnect(connection);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        QCOMPARE(finished.count(), turn + 1);
        MessageItem reply;
        reply.role = QStringLiteral("assistant");
        reply.content = text;
        conversation.push_back(reply);

        const int nowUsed = used.last().at(0).toInt();  // prompt and reply tokens the chat holds
        const uint64_t ran = (device->attentionCalls - counted) / uint64_t(layers);
        counted = device->attentionCalls;
        if (turn == 0) {
            QCOMPARE(ran, uint64_t(nowUsed - 1));  // all of it (the last sampled token is not run)
        } else {
            // Only what is new since the last turn: the history is in the cache.
            QVERIFY2(ran == uint64_t(nowUsed - previousUsed),
                     qPrintable(QStringLiteral("turn %1: ran %2 tokens, %3 new of %4")
                                    .arg(turn + 1)
                                    .arg(ran)
                                    .arg(nowUsed - previousUsed)
                                    .arg(nowUsed)));
            QVERIFY(ran < uint64_t(nowUsed) / 2 || turn < 2);
        }
        previousUsed = nowUsed;
    }
}

QTEST_GUILESS_MAIN(TestGenerationWorker)
#include "test_generation_worker.moc"
