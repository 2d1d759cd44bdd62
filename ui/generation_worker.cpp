#include "generation_worker.h"

#include <QDir>
#include <QFileInfo>
#include <chrono>
#include <random>
#include <string>

#include "core/engine/conversation.h"
#include "core/model/llama_model.h"
#include "core/plan/planner.h"
#include "core/runtime/llama_session.h"
#include "server/openai_client.h"
#include "readable.h"
#include "remote_endpoint.h"

namespace spillway::ui {

namespace {

// How often streamed text goes to the GUI: about one frame at 60 Hz.
constexpr auto kBatchInterval = std::chrono::milliseconds(16);

// "stories260K.gguf (llama, 293K parameters, 5 layers) on <device>": the file or package the user
// chose first, then what it is.
QString describe(const LlamaModel& model, const gpu::Device& device)
{
    const auto& c = model.config();
    const QFileInfo file(QString::fromStdString(model.path()));
    const QString shown = file.fileName().isEmpty() ? QDir(file.filePath()).dirName() : file.fileName();
    const QString kind = !c.name.empty() && c.name != shown.toStdString() && c.name != c.architecture
                             ? QString::fromStdString(c.architecture) + ", " + QString::fromStdString(c.name)
                             : QString::fromStdString(c.architecture);
    const double params = double(model.parameterCount());
    const QString size = params >= 1e9   ? QString::number(params / 1e9, 'f', 1) + "B"
                         : params >= 1e6 ? QString::number(params / 1e6, 'f', 1) + "M"
                                         : QString::number(params / 1e3, 'f', 0) + "K";
    return QStringLiteral("%1 (%2, %3 parameters, %4 layers) on %5")
        .arg(shown, kind, size)
        .arg(c.nLayers)
        .arg(QString::fromStdString(device.info().name));
}

}  // namespace

void TextBatcher::add(std::string_view text)
{
    m_pending.append(text);
    const auto now = std::chrono::steady_clock::now();
    if (now - m_last < kBatchInterval) return;
    const size_t whole = completeUtf8Prefix(m_pending);
    if (whole == 0) return;
    m_send(QString::fromUtf8(m_pending.data(), qsizetype(whole)));
    m_pending.erase(0, whole);
    m_last = now;
}

void TextBatcher::flush()
{
    if (m_pending.empty()) return;
    m_send(QString::fromUtf8(m_pending.data(), qsizetype(m_pending.size())));
    m_pending.clear();
}

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

void GenerationWorker::setDevice(std::unique_ptr<gpu::Device> device) { m_injected = std::move(device); }

engine::EngineOptions GenerationWorker::baseOptions()
{
    engine::EngineOptions o;
    o.backend = m_backend.toStdString();
    o.trace = m_recorder;
    // Runs on this thread, inside Engine::open and the sessions' opening.
    o.loadProgress = [this](uint64_t done, uint64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (done == total || now - m_lastLoadProgress >= std::chrono::milliseconds(50)) {
            m_lastLoadProgress = now;
            emit loadProgress(qint64(done), qint64(total));
        }
        return !m_cancelLoad.load(std::memory_order_relaxed);
    };
    return o;
}

void GenerationWorker::onNotice(const engine::Notice& n)
{
    emit notice(QString::fromStdString(n.message));
    if (n.kind == engine::Notice::Kind::DeviceLost && m_engine)
        emit deviceChanged(QString::fromStdString(m_engine->device().info().backend), loadedDescription(),
                           QString::fromStdString(m_engine->deviceChoice()));
}

void GenerationWorker::loadModel(const QString& path)
{
    if (parseEndpointPath(path)) return loadEndpoint(path);
    const ServerPause pause(this);  // the server starts again on the model that answers after
    // A file that cannot be read leaves the model loaded so far as it is.
    auto model = LlamaModel::load(path.toStdString());
    if (!model) {
        emit failed(QString::fromStdString(model.error().message));
        return;
    }
    // The device stays across models (a plan's budget, or the device a test handed in). Its
    // memory is the old model's until the engine goes: the old one is unloaded first, and what
    // that freed is said.
    std::shared_ptr<const LlamaModel> previous = m_engine ? m_engine->sharedModel() : nullptr;
    const uint64_t usedBefore = m_engine ? m_engine->device().memoryStats().used : 0;
    m_conversation.reset();
    m_contextTokens = 0;
    std::unique_ptr<gpu::Device> device = m_engine ? m_engine->takeDevice() : std::move(m_injected);
    const bool fresh = !device;
    m_engine.reset();
    if (previous && device) {
        const uint64_t usedAfter = device->memoryStats().used;
        emit unloaded(QFileInfo(QString::fromStdString(previous->path())).fileName(),
                      qint64(usedBefore > usedAfter ? usedBefore - usedAfter : 0));
    }
    auto opened = engine::Engine::open(std::move(*model), baseOptions(),
                                       [this](const engine::Notice& n) { onNotice(n); }, std::move(device));
    Error why;
    if (opened) {
        // The weights come in now (with progress), not at the first message.
        m_engine = std::move(*opened);
        m_conversation = m_engine->conversation();
        if (Status s = m_conversation->open(); s) {
            m_remote.reset();  // a remote model answered until now
            if (fresh || previous)
                emit deviceChanged(QString::fromStdString(m_engine->device().info().backend), loadedDescription(),
                                   QString::fromStdString(m_engine->deviceChoice()));
            emit thinkingOffered(thinkingOptions());
            emit modelLoaded(loadedDescription(), m_engine->chat().chatting());
            return;
        } else {
            why = s.error();
        }
        m_conversation.reset();
        device = m_engine->takeDevice();
        m_engine.reset();
    } else {
        why = opened.error();
    }
    // The model before goes on (on the same device where it is still there, else on one chosen
    // afresh); its weights come back at its next reply.
    const bool cancelled = why.code == ErrorCode::Cancelled;
    m_cancelLoad.store(false, std::memory_order_relaxed);
    if (previous) {
        auto back = engine::Engine::open(previous, baseOptions(), [this](const engine::Notice& n) { onNotice(n); },
                                         std::move(device));
        if (back) m_engine = std::move(*back);
    }
    if (cancelled) emit loadCancelled(m_engine ? loadedDescription() : QString());
    else emit failed(QString::fromStdString(why.message));
}

void GenerationWorker::generate(const QVector<MessageItem>& conversation, int maxTokens, double temperature)
{
    GenerationSettings settings;
    settings.maxTokens = maxTokens;
    settings.temperature = temperature;
    generateWith(conversation, settings);
}

void GenerationWorker::generateWith(const QVector<MessageItem>& conversation, const GenerationSettings& settings,
                                    bool continueLast)
{
    if (!m_engine && !m_remote) {
        emit failed(tr("no model is loaded"));
        return;
    }
    std::vector<engine::Message> messages;
    messages.reserve(size_t(conversation.size()) + 1);
    if (!settings.systemPrompt.trimmed().isEmpty()) messages.push_back({"system", settings.systemPrompt.toStdString()});
    for (const MessageItem& m : conversation) {
        // A reply's reasoning goes to the template, which keeps it out of later turns where the
        // model's makers say so (Qwen3's and DeepSeek's templates drop it before the last prompt).
        engine::Message message{m.role.toStdString(), m.content.toStdString()};
        message.reasoning = m.reasoning.toStdString();
        messages.push_back(std::move(message));
    }
    if (m_remote) return generateRemote(messages, settings, continueLast);
    if (!m_conversation) m_conversation = m_engine->conversation();

    TextBatcher text([this](const QString& t) { emit tokens(t); });
    TextBatcher thought([this](const QString& t) { emit reasoningText(t); });
    engine::ReplyOptions options;
    options.maxNewTokens = settings.maxTokens;
    options.continueLast = continueLast;
    options.sampling = settings.sampler(std::random_device{}());
    options.stop = &m_stop;
    options.prompt.thinking = settings.thinking;
    options.prompt.reasoningEffort = settings.reasoningEffort.toStdString();
    options.reasoningBudget = settings.thinking ? settings.reasoningBudget : -1;
    options.onPrompt = [this](const std::string& prompt) { emit promptPrepared(QString::fromStdString(prompt)); };
    options.onToken = [&](std::string_view, int32_t) {
        m_turns.yield();  // a server beside the chat gets its turn between tokens
        return true;
    };
    // The answer and the reasoning apart, in the order they came (a batch is sent before the
    // other part's text).
    engine::ReplyPart last = engine::ReplyPart::Content;
    // The reasoning's time: from its first piece to the answer's first (or the reply's end).
    using Clock = std::chrono::steady_clock;
    std::optional<Clock::time_point> thoughtFrom, thoughtTo;
    options.onPart = [&](engine::ReplyPart part, std::string_view piece) {
        const bool thinking = part == engine::ReplyPart::Reasoning;
        if (thinking && !thoughtFrom) thoughtFrom = Clock::now();
        if (!thinking && thoughtFrom && !thoughtTo && !piece.empty()) thoughtTo = Clock::now();
        if (part != last) (thinking ? text : thought).flush();
        last = part;
        (thinking ? thought : text).add(piece);
        return true;
    };
    Result<engine::ReplyStats> stats = Error{ErrorCode::Internal, "not run"};
    {
        engine::Turns::Held turn(m_turns);
        stats = m_conversation->reply(messages, options);
    }
    thought.flush();
    text.flush();
    if (!stats) {
        emit failed(QString::fromStdString(stats.error().message));
        return;
    }
    if (thoughtFrom)
        emit reasoningTimed(std::chrono::duration<double, std::milli>(thoughtTo.value_or(Clock::now()) - *thoughtFrom).count());
    // Over the conversation so far: its session's cache lives as long as it does.
    const NeuronCacheReport nc = m_conversation->session()->neuronCacheReport();
    if (nc.total.tokens > 0) {
        const double tokens = double(nc.total.tokens) / double(std::max(1, m_engine->model().config().nLayers));
        const double bytes = double(nc.ssdRequests ? nc.ssdBytes : nc.shippedBytes());  // what moved
        emit neuronCacheReport(nc.total.hitRate(), bytes / std::max(1.0, tokens));
    }
    // What the chat holds of the context (the generator never holds more than its positions).
    m_contextTokens = int(stats->tokens.size());
    emit contextUsed(m_contextTokens, m_conversation->contextLength());
    if (stats->droppedMessages > 0)
        emit notice(tr("The conversation is longer than the context: its %n oldest message(s) are left out of what the "
                       "model sees (the system prompt stays).", "", stats->droppedMessages));
    calibrateFrom(*stats, trace::nowNs());
    emit finished(stats->decodeTokensPerSecond(), stats->timeToFirstToken * 1e3, stats->generatedTokens,
                  QString::fromLatin1(engine::endName(stats->end)));
}

void GenerationWorker::calibrateFrom(const engine::ReplyStats& stats, uint64_t endNs)
{
    // Every run calibrates (core/hw/calibration.h): a planned model's reply, long enough to say
    // something, goes into the cached profile; the Tuning view's next prediction uses it.
    const auto& plan = m_engine->plan();
    if (!plan || !m_recorder || stats.generatedTokens < 16 || !(stats.decodeSeconds > 0)) return;
    const uint64_t beginNs = endNs - uint64_t(stats.decodeSeconds * 1e9);
    const std::vector<trace::Span> spans = m_recorder->snapshot();
    const trace::Summary summary = trace::summarize(spans, beginNs, endNs);
    const int tokens = stats.generatedTokens - 1;
    const trace::LaneStats& ssd = summary.lane(trace::Lane::SsdRead);
    (void)engine::calibrateFromRun(*plan, m_engine->profile(), summary, tokens, stats.decodeSeconds / tokens,
                                   ssd.busyNs > 0 ? ssd.bytes / (double(ssd.busyNs) / 1e9) : 0.0);
    RunLanes run;
    run.planKey = planKey(*plan);
    run.tokens = tokens;
    run.secondsPerToken = stats.decodeSeconds / tokens;
    run.predictedSecondsPerToken = plan->secondsPerToken;
    const auto perToken = [&](trace::Lane lane) { return double(summary.lane(lane).busyNs) / 1e9 / tokens; };
    run.ssd = perToken(trace::Lane::SsdRead);
    run.copy = perToken(trace::Lane::HostToDevice);
    run.decompress = perToken(trace::Lane::Decompress);
    run.device = perToken(trace::Lane::DeviceCompute);
    run.cpu = perToken(trace::Lane::CpuCompute);
    emit runMeasured(run);
}

ThinkingOptions GenerationWorker::thinkingOptions() const
{
    const engine::ChatFormat& format = m_engine->chat();
    return {format.mentions("enable_thinking"), format.mentions("reasoning_effort"),
            format.markup() == engine::ReplyMarkup::ThinkTags};
}

QString GenerationWorker::loadedDescription() const
{
    QString d = describe(m_engine->model(), m_engine->device());
    if (const std::string& note = m_engine->chat().note(); !note.empty())
        d += tr(" — its chat template is not used (%1); prompts are continued").arg(QString::fromStdString(note));
    return d;
}

void GenerationWorker::applyPlan(const TuningPrediction& prediction)
{
    if (m_remote) return emit failed(tr("the model answering runs on a remote endpoint: plans are for local models"));
    if (!m_engine || !prediction.plan) return emit failed(tr("no model or plan to apply"));
    const ServerPause pause(this);
    std::shared_ptr<const LlamaModel> model = m_engine->sharedModel();
    const QString variant = prediction.settings.modelPath;
    const bool otherVariant = !variant.isEmpty() && variant.toStdString() != model->path();
    if (otherVariant) {  // another compression variant
        auto loaded = LlamaModel::load(variant.toStdString());
        if (!loaded) return emit failed(QString::fromStdString(loaded.error().message));
        model = std::move(*loaded);
    }
    engine::EngineOptions o = baseOptions();
    o.backend = prediction.settings.backend.isEmpty() ? "cpu" : prediction.settings.backend.toStdString();
    o.threads = prediction.settings.threads;
    o.vramBudget = uint64_t(std::max<qint64>(0, prediction.settings.vramBudget));
    o.contextLength = prediction.settings.contextLength;
    o.appliedPlan = prediction.plan;
    o.neuronCache.capacity = prediction.settings.neuronCache;
    o.neuronCache.mode = prediction.settings.neuronMode == QLatin1String("predicted") ? NeuronCacheMode::Predicted
                                                                                      : NeuronCacheMode::Exact;
    o.neuronCache.source = model->ffnBundles().empty() ? BundleSource::Ram : BundleSource::Ssd;
    int coldOnCpu = 0;
    for (bool cpu : prediction.coldOnCpu) {
        o.neuronCache.coldPerLayer.push_back(cpu ? ColdNeurons::Cpu : ColdNeurons::Ship);
        coldOnCpu += cpu;
    }
    m_conversation.reset();  // its session was on the old device
    auto opened = engine::Engine::open(model, o, [this](const engine::Notice& n) { onNotice(n); });
    if (!opened) return emit failed(QString::fromStdString(opened.error().message));
    m_engine = std::move(*opened);
    if (otherVariant) {
        emit variantApplied(variant);
        emit thinkingOffered(thinkingOptions());
        emit modelLoaded(loadedDescription(), m_engine->chat().chatting());
    }
    QString cache;
    if (o.neuronCache.capacity > 0)
        cache = tr(", neuron cache %1 per layer (%2; cold neurons on the CPU in %3 of %4 layers)")
                    .arg(o.neuronCache.capacity)
                    .arg(prediction.settings.neuronMode)
                    .arg(coldOnCpu)
                    .arg(prediction.coldOnCpu.size());
    const QString description = describe(m_engine->model(), m_engine->device());
    // The meter shows the applied context at once (the chat's tokens go in again at its next reply).
    if (m_contextTokens > 0) emit contextUsed(std::min(m_contextTokens, m_engine->contextLength()), m_engine->contextLength());
    emit deviceChanged(QString::fromStdString(m_engine->device().info().backend), description,
                       QString::fromStdString(m_engine->deviceChoice()));
    emit planApplied(tr("%1 — plan applied: predicted %2 tokens/s, KV cache %3%4")
                         .arg(description)
                         .arg(readable(prediction.tokensPerSecond))
                         .arg(QString::fromUtf8(gpu::kvTypeName(prediction.plan->kvType)))
                         .arg(cache));
}

}  // namespace spillway::ui
