#include "generation_worker.h"

#include <chrono>
#include <random>
#include <string>

#include "core/chat/chat_template.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/plan/planner.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/cpu/cpu_device.h"
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

// Texts of the tokens that end a chat turn in the common template families: generation stops
// there (the model's EOS already stops it) and they are not shown.
bool endsTurn(std::string_view text)
{
    static constexpr std::string_view kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>",
                                                 "<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (std::string_view e : kEnds)
        if (text == e) return true;
    return false;
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
    QString why;
    const bool fresh = !m_device;
    if (fresh) m_device = makeDevice(gpu::DeviceOptions{}, &why);
    m_model = std::move(*model);
    readChatTemplate();
    if (fresh) {
        emit deviceChanged(QString::fromStdString(m_device->info().backend), loadedDescription(), why);
        if (m_backend != QLatin1String("auto") && !why.isEmpty()) emit notice(why);  // asked for, not had
    }
    emit modelLoaded(loadedDescription(), m_template != nullptr);
}

void GenerationWorker::setDevice(std::unique_ptr<gpu::Device> device) { m_device = std::move(device); }

std::unique_ptr<gpu::Device> GenerationWorker::makeDevice(const gpu::DeviceOptions& options, QString* why)
{
    auto chosen = gpu::chooseDevice(m_backend.toStdString(), options);
    if (chosen) {
        *why = QString::fromStdString(chosen->why);
        return std::move(chosen->device);
    }
    *why = tr("%1; computing on the CPU").arg(QString::fromStdString(chosen.error().message));
    return gpu::createCpuDevice(options.threads);
}

gpu::Device& GenerationWorker::cpuDevice()
{
    if (!m_cpuDevice) m_cpuDevice = gpu::createCpuDevice(m_threads);
    return *m_cpuDevice;
}

Result<std::unique_ptr<LlamaSession>> GenerationWorker::openSession(const SessionOptions& options)
{
    auto session = LlamaSession::create(*m_model, *m_device, options);
    if (session || m_device->info().caps.hostPointers) return session;
    const QString backend = QString::fromStdString(m_device->info().backend);
    const Error onDevice = session.error();
    if (onDevice.code == ErrorCode::OutOfDeviceMemory && !options.placement) {
        // All weights on the device was the default: stream them from RAM instead (the Tuning
        // tab's plan keeps the ones that fit).
        SessionOptions streamed = options;
        streamed.placement = plan::uniformPlacement(*m_model, plan::Tier::Host);
        session = LlamaSession::create(*m_model, *m_device, streamed);
        if (session) {
            emit notice(tr("The model does not fit in the %1 device's free memory (%2): its weights stream from RAM "
                           "each token. Apply a plan in the Tuning tab to keep the ones that fit on the device.")
                            .arg(backend, QString::fromStdString(onDevice.message)));
            return session;
        }
    }
    SessionOptions onCpu = options;  // the plan was made for the GPU: the CPU keeps the weights in RAM
    onCpu.placement.reset();
    onCpu.streamer.hostBudget = 0;
    session = LlamaSession::create(*m_model, cpuDevice(), onCpu);
    if (!session) return onDevice;  // the first reason is the one to fix
    emit notice(tr("The %1 device cannot run this model as set up (%2): this reply is computed on the CPU.")
                    .arg(backend, QString::fromStdString(onDevice.message)));
    return session;
}

void GenerationWorker::leaveForTheCpu(const QString& why)
{
    m_device = std::move(m_cpuDevice);
    m_plan.reset();  // made for the lost device
    emit deviceChanged(QStringLiteral("cpu"), loadedDescription(), why);
}

void GenerationWorker::generate(const QVector<MessageItem>& conversation, int maxTokens, double temperature)
{
    if (!m_model || !m_device) {
        emit failed(tr("no model is loaded"));
        return;
    }
    std::string prompt;
    bool addBos = true;
    if (!buildPrompt(conversation, &prompt, &addBos)) return;
    emit promptPrepared(QString::fromStdString(prompt));
    // A fresh session (KV cache) per request: simple and always correct.
    SessionOptions options;
    options.streamer.trace = m_recorder;
    if (m_plan) {
        options.placement = m_plan->placement;
        options.streamer.hostBudget = m_plan->ramBudget;
        options.contextLength = m_contextLength;
        options.kvType = m_plan->kvType;
        options.neuronCache.capacity = m_neuronCache;
        options.neuronCache.mode = m_neuronPredicted ? NeuronCacheMode::Predicted : NeuronCacheMode::Exact;
        options.neuronCache.source = m_model->ffnBundles().empty() ? BundleSource::Ram : BundleSource::Ssd;
        options.neuronCache.coldPerLayer = m_neuronCold;
    }
    auto session = openSession(options);
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
    request.prompt = std::move(prompt);
    request.addBos = addBos;
    request.maxNewTokens = maxTokens;
    request.stop = &m_stop;
    const bool chatting = m_template != nullptr;
    request.onToken = [&](std::string_view text, int32_t) {
        if (chatting && (endsTurn(text) || (!m_eosText.empty() && text == m_eosText))) return false;
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
    // A GPU lost mid-reply: the CPU goes on from the tokens so far, and computes later replies.
    std::unique_ptr<LlamaSession> cpuSession;
    QString lost;
    if (!m_device->info().caps.hostPointers) {
        request.onDeviceLost = [&](const Error& why) -> LlamaSession* {
            SessionOptions onCpu;
            onCpu.contextLength = (*session)->contextLength();
            onCpu.batch = (*session)->batch();
            onCpu.kvType = (*session)->kvType();
            onCpu.streamer.trace = m_recorder;
            auto fallback = LlamaSession::create(*m_model, cpuDevice(), onCpu);
            if (!fallback) return nullptr;
            cpuSession = std::move(*fallback);
            lost = tr("the %1 device failed (%2)")
                       .arg(QString::fromStdString(m_device->info().backend), QString::fromStdString(why.message));
            emit notice(tr("%1: the reply goes on on the CPU, and later replies too.").arg(lost));
            return cpuSession.get();
        };
    }
    auto stats = spillway::generate(**session, sampler, request);
    const NeuronCacheReport nc = (*session)->neuronCacheReport();
    if (!lost.isEmpty()) {  // the sessions go before their devices
        cpuSession.reset();
        session->reset();
        leaveForTheCpu(lost);
    }
    if (!pending.empty())  // a cut-off character at the very end shows as U+FFFD
        emit tokens(QString::fromUtf8(pending.data(), qsizetype(pending.size())));
    if (!stats) {
        emit failed(QString::fromStdString(stats.error().message));
        return;
    }
    if (nc.total.tokens > 0) {
        const double tokens = double(nc.total.tokens) / double(std::max(1, m_model->config().nLayers));
        const double bytes = double(nc.ssdRequests ? nc.ssdBytes : nc.shippedBytes());  // what moved
        emit neuronCacheReport(nc.total.hitRate(), bytes / std::max(1.0, tokens));
    }
    emit finished(stats->decodeTokensPerSecond(), stats->timeToFirstToken * 1e3,
                  stats->generatedTokens);
}

QString GenerationWorker::loadedDescription() const
{
    QString d = describe(*m_model, *m_device);
    if (!m_templateNote.isEmpty()) d += tr(" — its chat template is not used (%1); prompts are continued").arg(m_templateNote);
    return d;
}

void GenerationWorker::readChatTemplate()
{
    m_template.reset();
    m_bosText.clear();
    m_eosText.clear();
    m_templateNote.clear();
    auto info = chat::chatTemplateFromMetadata(m_model->metadata());
    if (!info) {
        if (info.error().code != ErrorCode::UnsupportedModel)  // absent is normal: a base model
            m_templateNote = QString::fromStdString(info.error().message);
        return;
    }
    auto parsed = chat::ChatTemplate::parse(info->source);
    if (!parsed) {
        m_templateNote = QString::fromStdString(parsed.error().message);
        return;
    }
    m_template = std::make_shared<const chat::ChatTemplate>(std::move(*parsed));
    m_bosText = info->bosToken;
    m_eosText = info->eosToken;
}

bool GenerationWorker::buildPrompt(const QVector<MessageItem>& conversation, std::string* prompt, bool* addBos)
{
    if (!m_template) {  // a base model continues the last prompt
        for (const MessageItem& m : conversation)
            if (m.role == QLatin1String("user")) *prompt = m.content.toStdString();
        if (prompt->empty()) {
            emit failed(tr("there is no prompt to reply to"));
            return false;
        }
        *addBos = true;
        return true;
    }
    std::vector<chat::ChatMessage> messages;
    for (const MessageItem& m : conversation) messages.push_back({m.role.toStdString(), m.content.toStdString()});
    chat::ChatTemplateOptions options;
    options.bosToken = m_bosText;
    options.eosToken = m_eosText;
    options.addGenerationPrompt = true;
    auto text = m_template->render(messages, options);
    if (!text) {
        emit failed(tr("the model's chat template: %1").arg(QString::fromStdString(text.error().message)));
        return false;
    }
    // Templates that write the BOS text themselves get no second one.
    *addBos = m_bosText.empty() || text->rfind(m_bosText, 0) != 0;
    *prompt = std::move(*text);
    return true;
}

void GenerationWorker::applyPlan(const TuningPrediction& prediction)
{
    if (!m_model || !prediction.plan) return emit failed(tr("no model or plan to apply"));
    const QString variant = prediction.settings.modelPath;
    if (!variant.isEmpty() && variant.toStdString() != m_model->path()) {  // another compression variant
        auto model = LlamaModel::load(variant.toStdString());
        if (!model) return emit failed(QString::fromStdString(model.error().message));
        m_model = std::move(*model);
        readChatTemplate();
        emit modelLoaded(loadedDescription(), m_template != nullptr);
    }
    gpu::DeviceOptions o;
    o.threads = prediction.settings.threads;
    o.memoryLimit = uint64_t(std::max<qint64>(0, prediction.settings.vramBudget));
    const QString backend = prediction.settings.backend.isEmpty() ? QStringLiteral("cpu") : prediction.settings.backend;
    auto device = gpu::createDevice(backend.toStdString(), o);
    if (!device) return emit failed(QString::fromStdString(device.error().message));
    m_device = std::move(*device);
    m_cpuDevice.reset();
    m_threads = prediction.settings.threads;
    m_plan = prediction.plan;
    m_contextLength = prediction.settings.contextLength;
    m_neuronCache = prediction.settings.neuronCache;
    m_neuronPredicted = prediction.settings.neuronMode == QLatin1String("predicted");
    m_neuronCold.clear();
    int coldOnCpu = 0;
    for (bool cpu : prediction.coldOnCpu) {
        m_neuronCold.push_back(cpu ? ColdNeurons::Cpu : ColdNeurons::Ship);
        coldOnCpu += cpu;
    }
    QString cache;
    if (m_neuronCache > 0)
        cache = tr(", neuron cache %1 per layer (%2; cold neurons on the CPU in %3 of %4 layers)")
                    .arg(m_neuronCache)
                    .arg(prediction.settings.neuronMode)
                    .arg(coldOnCpu)
                    .arg(prediction.coldOnCpu.size());
    emit deviceChanged(QString::fromStdString(m_device->info().backend), describe(*m_model, *m_device), QString());
    emit planApplied(tr("%1 — plan applied: predicted %2 tokens/s, KV cache %3%4")
                         .arg(describe(*m_model, *m_device))
                         .arg(prediction.tokensPerSecond, 0, 'f', 1)
                         .arg(QString::fromUtf8(gpu::kvTypeName(m_plan->kvType)))
                         .arg(cache));
}

}  // namespace spillway::ui
