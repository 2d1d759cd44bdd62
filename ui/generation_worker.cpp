#include "generation_worker.h"

#include <chrono>
#include <random>
#include <string>

#include "core/model/llama_model.h"
#include "core/plan/planner.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/registry.h"

namespace spillway::ui {

namespace {

// How often streamed text goes to the GUI: about one frame at 60 Hz.
constexpr auto kBatchInterval = std::chrono::milliseconds(16);

QString describe(const LlamaModel& model, const gpu::Device& device)
{
    const auto& c = model.config();
    const QString name = !c.name.empty() ? QString::fromStdString(c.name)
                                         : QString::fromStdString(c.architecture);
    const double params = double(model.parameterCount());
    const QString size = params >= 1e9   ? QString::number(params / 1e9, 'f', 1) + "B"
                         : params >= 1e6 ? QString::number(params / 1e6, 'f', 1) + "M"
                                         : QString::number(params / 1e3, 'f', 0) + "K";
    return QStringLiteral("%1 (%2 parameters, %3 layers) on %4")
        .arg(name, size)
        .arg(c.nLayers)
        .arg(QString::fromStdString(device.info().name));
}

}  // namespace

size_t completeUtf8Prefix(const std::string& bytes)
{
    // Look back at most 3 bytes for the lead byte of the last character.
    const size_t n = bytes.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const auto b = static_cast<unsigned char>(bytes[n - back]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
        const size_t need = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3
                            : (b >> 3) == 0x1E ? 4 : 1;  // invalid lead: let Qt replace it
        return back >= need ? n : n - back;
    }
    return n;  // only continuation bytes: invalid, let Qt replace them
}

GenerationWorker::GenerationWorker(QObject* parent) : QObject(parent) {}

GenerationWorker::~GenerationWorker() = default;

void GenerationWorker::loadModel(const QString& path)
{
    m_model.reset();
    auto model = LlamaModel::load(path.toStdString());
    if (!model) {
        emit failed(QString::fromStdString(model.error().message));
        return;
    }
    if (!m_device) {
        auto device = gpu::createDevice("cpu", gpu::DeviceOptions{});
        if (!device) {
            emit failed(QString::fromStdString(device.error().message));
            return;
        }
        m_device = std::move(*device);
    }
    m_model = std::move(*model);
    emit modelLoaded(describe(*m_model, *m_device));
}

void GenerationWorker::generate(const QString& prompt, int maxTokens, double temperature)
{
    if (!m_model || !m_device) {
        emit failed(tr("no model is loaded"));
        return;
    }
    // A fresh session (KV cache) per request: simple and always correct.
    SessionOptions options;
    options.streamer.trace = m_recorder;
    if (m_plan) {
        options.placement = m_plan->placement;
        options.streamer.hostBudget = m_plan->ramBudget;
        options.contextLength = m_contextLength;
    }
    auto session = LlamaSession::create(*m_model, *m_device, options);
    if (!session) {
        emit failed(QString::fromStdString(session.error().message));
        return;
    }
    SamplerSettings settings;
    settings.temperature = float(temperature);
    settings.seed = std::random_device{}();
    Sampler sampler(m_model->config().vocabSize, settings);

    using Clock = std::chrono::steady_clock;
    std::string pending;  // bytes not yet sent to the GUI
    auto lastEmit = Clock::now();
    GenerationRequest request;
    request.prompt = prompt.toStdString();
    request.maxNewTokens = maxTokens;
    request.stop = &m_stop;
    request.onToken = [&](std::string_view text, int32_t) {
        pending.append(text);
        const auto now = Clock::now();
        if (now - lastEmit >= kBatchInterval) {
            const size_t whole = completeUtf8Prefix(pending);
            if (whole > 0) {
                emit tokens(QString::fromUtf8(pending.data(), qsizetype(whole)));
                pending.erase(0, whole);
                lastEmit = now;
            }
        }
        return true;
    };
    auto stats = spillway::generate(**session, sampler, request);
    if (!pending.empty())  // a cut-off character at the very end shows as U+FFFD
        emit tokens(QString::fromUtf8(pending.data(), qsizetype(pending.size())));
    if (!stats) {
        emit failed(QString::fromStdString(stats.error().message));
        return;
    }
    emit finished(stats->decodeTokensPerSecond(), stats->timeToFirstToken * 1e3,
                  stats->generatedTokens);
}

void GenerationWorker::applyPlan(const TuningPrediction& prediction)
{
    if (!m_model || !prediction.plan) return emit failed(tr("no model or plan to apply"));
    gpu::DeviceOptions o;
    o.threads = prediction.settings.threads;
    o.memoryLimit = uint64_t(std::max<qint64>(0, prediction.settings.vramBudget));
    auto device = gpu::createDevice("cpu", o);
    if (!device) return emit failed(QString::fromStdString(device.error().message));
    m_device = std::move(*device);
    m_plan = prediction.plan;
    m_contextLength = prediction.settings.contextLength;
    emit planApplied(tr("%1 — plan applied: predicted %2 tokens/s")
                         .arg(describe(*m_model, *m_device))
                         .arg(prediction.tokensPerSecond, 0, 'f', 1));
}

}  // namespace spillway::ui
