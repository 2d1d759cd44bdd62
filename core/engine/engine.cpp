#include "core/engine/engine.h"

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "core/engine/conversation.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/plan/session_memory.h"
#include "gpu/opaque_device.h"
#include "gpu/registry.h"

namespace spillway::engine {

plan::PlannerInput plannerInput(const LlamaModel& model, const hw::HardwareProfile& profile,
                                const PlanSettings& settings, const NeuronCacheOptions& cache)
{
    plan::PlannerInput in;
    in.model = &model;
    in.profile = profile;
    in.backend = settings.backend.empty() ? std::string("cpu") : settings.backend;
    in.vramBudget = settings.vramBudget;
    in.ramBudget = settings.ramBudget;
    in.contextLength = settings.contextLength;
    in.kvType = settings.kvType;
    in.batch = settings.batch > 0 ? settings.batch : promptBatchFor(in.backend);
    in.prefetchDepth = settings.prefetch;
    in.expertSlots = settings.expertSlots;
    in.routing = settings.routing;
    in.expertCache = settings.expertCache;
    if (!in.routing && model.config().moe())
        in.routing = std::make_shared<const plan::RoutingProfile>(plan::keptRoutingProfile(model.path(), model.config()));
    in.served = SparseFfn::servedTensors(model, cache);
    in.reservedDeviceBytes = SparseFfn::deviceBytes(model, cache, in.backend != "cpu");
    in.neuronCache = SparseFfn::layerCosts(model, cache);
    return in;
}

Result<hw::Calibration> calibrateFromRun(const plan::PlanResult& plan, const hw::HardwareProfile& profile,
                                         const trace::Summary& summary, int tokens, double secondsPerToken,
                                         double ssdBytesPerSecond,
                                         const std::string& cacheFile)
{
    // An engine that was given its plan (the app's Tuning view) measured nothing itself: the
    // profile the plan came from is the cached one.
    std::optional<hw::HardwareProfile> cached;
    if (profile.fingerprint.empty() && profile.devices.empty()) {
        auto read = hw::readCachedProfile(cacheFile);
        if (!read) return read.error();
        cached = std::move(*read);
    }
    const hw::HardwareProfile& p = cached ? *cached : profile;
    hw::RunMeasurement run;
    for (const auto& d : p.devices)
        if (d.name == plan.deviceName) run.backend = d.backend;
    if (run.backend.empty() || tokens <= 0 || !(secondsPerToken > 0) || summary.windowNs == 0)
        return makeError(ErrorCode::InvalidArgument, "no run to calibrate by (no device of the plan, or no tokens)");
    for (const auto& t : plan.placement.tensors) run.weightBytes += t.bytes;
    run.tokens = tokens;
    run.format = plan.weightFormat;
    run.bottleneck = plan.bottleneck;
    run.predictedSecondsPerToken = plan.probeSecondsPerToken;
    run.measuredSecondsPerToken = secondsPerToken;
    const std::pair<const char*, std::pair<trace::Lane, double>> lanes[] = {
        {"ssd", {trace::Lane::SsdRead, plan.probeLanes.ssdRead}},
        {"copy", {trace::Lane::HostToDevice, plan.probeLanes.hostToDevice}},
        {"decompress", {trace::Lane::Decompress, plan.probeLanes.decompress}},
        {"device", {trace::Lane::DeviceCompute, plan.probeLanes.deviceCompute}},
        {"cpu", {trace::Lane::CpuCompute, plan.probeLanes.cpuCompute}}};
    for (const auto& [name, lane] : lanes)
        run.lanes.push_back({name, lane.second, double(summary.lane(lane.first).busyNs) / 1e9 / tokens});
    // The SSD's rate says something of the probe's figure only where it read a real share of the
    // token's time, in reads of the probe's size (1 MiB and up): a tiny model's reads of a few
    // hundred KiB wait on the disk's latency, not its bandwidth.
    const trace::LaneStats& ssd = summary.lane(trace::Lane::SsdRead);
    if (ssd.busyNs > summary.windowNs / 10 && ssd.spans > 0 && ssd.bytes / double(ssd.spans) >= double(1 << 20))
        run.measuredSsdBytesPerSecond = ssdBytesPerSecond;
    return hw::recordRun(p, run, cacheFile);
}

void chooseColdNeurons(const LlamaModel& model, const hw::HardwareProfile& profile, const std::string& backend,
                       NeuronCacheOptions& cache)
{
    if (cache.cold != ColdNeurons::Auto) return;
    cache.coldPerLayer.clear();
    for (const plan::ColdNeuronChoice& choice : SparseFfn::chooseColdNeurons(model, cache, profile, backend))
        cache.coldPerLayer.push_back(choice.choice);
}

void applyMeasuredIo(const hw::HardwareProfile& profile, StreamerOptions& streamer)
{
    const hw::ReadBandwidth* best = nullptr;
    for (const auto& r : profile.storage.sequential)
        if (!best || r.bytesPerSecond > best->bytesPerSecond) best = &r;
    if (best && best->queueDepth > 0 && best->requestBytes >= 4096 && best->requestBytes % 4096 == 0) {
        streamer.ioQueueDepth = best->queueDepth;
        streamer.ioChunkBytes = best->requestBytes;
    }
}

namespace {

// SPILLWAY_TEST_DEVICE (engine.h): an opaque CPU device that fails on cue, or nothing where the
// variable is unset. InvalidArgument for a value it does not understand.
Result<std::unique_ptr<gpu::Device>> testDevice(int threads)
{
    const char* env = std::getenv("SPILLWAY_TEST_DEVICE");
    if (!env || !*env) return std::unique_ptr<gpu::Device>();
    const std::string_view spec(env);
    auto bad = [&] {
        return makeError(ErrorCode::InvalidArgument, "SPILLWAY_TEST_DEVICE='" + std::string(spec) +
                                                         "': expected opaque[,memory=BYTES][,lost-after=RMSNORMS]");
    };
    if (!spec.starts_with("opaque")) return bad();
    uint64_t memory = 0, lostAfter = 0;
    for (size_t at = spec.find(','); at != std::string_view::npos;) {
        const size_t end = spec.find(',', at + 1);
        const std::string item(spec.substr(at + 1, end == std::string_view::npos ? end : end - at - 1));
        const size_t eq = item.find('=');
        if (eq == std::string::npos) return bad();
        char* stop = nullptr;
        const unsigned long long value = std::strtoull(item.c_str() + eq + 1, &stop, 10);
        if (!stop || *stop != 0 || eq + 1 == item.size()) return bad();
        const std::string key = item.substr(0, eq);
        if (key == "memory") memory = value;
        else if (key == "lost-after") lostAfter = value;
        else return bad();
        at = end;
    }
    auto cpu = gpu::createDevice("cpu", {threads, memory});
    if (!cpu) return cpu.error();
    auto opaque = std::make_unique<gpu::OpaqueDevice>(std::move(*cpu));
    if (lostAfter > 0) {
        opaque->failAfterRmsnorms = lostAfter;
        opaque->failWith = makeError(ErrorCode::DeviceLost, "test device: lost");
    }
    return std::unique_ptr<gpu::Device>(std::move(opaque));
}

}  // namespace

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::open(std::shared_ptr<const LlamaModel> model, const EngineOptions& options,
                                             NoticeSink notices, std::unique_ptr<gpu::Device> device)
{
    if (!model) return makeError(ErrorCode::InvalidArgument, "no model to run");
    std::unique_ptr<Engine> e(new Engine);
    e->m_model = std::move(model);
    e->m_notices = std::move(notices);
    e->m_threads = options.threads;
    e->m_device = std::move(device);
    if (!e->m_device) {
        auto test = testDevice(options.threads);
        if (!test) return test.error();
        e->m_device = std::move(*test);
    }
    if (!e->m_device) {
        gpu::DeviceOptions o;
        o.threads = options.threads;
        o.memoryLimit = options.vramBudget;
        auto chosen = gpu::chooseDevice(options.backend, o);
        if (chosen) {
            e->m_device = std::move(chosen->device);
            e->m_why = chosen->why;
        } else if (chosen.error().code != ErrorCode::BackendUnavailable) {
            return chosen.error();  // a backend name that does not exist
        } else {
            e->m_why = chosen.error().message + "; computing on the CPU";
            auto cpu = gpu::createDevice("cpu", {options.threads, 0});
            if (!cpu) return cpu.error();
            e->m_device = std::move(*cpu);
            e->notify(Notice::Kind::BackendUnavailable, e->m_why, chosen.error().message);
        }
    }
    e->m_chat = ChatFormat::fromModel(*e->m_model);
    if (auto s = e->prepare(options); !s) return s.error();
    return e;
}

Status Engine::prepare(const EngineOptions& o)
{
    const LlamaModel& model = *m_model;
    const std::string backend = m_device->info().backend;
    m_session.contextLength = o.contextLength;
    m_session.kvType = o.kvType;
    // Prompt batches: on the CPU, 128 tokens a pass (its matrix products run near the arithmetic's
    // speed from about 64 tokens on: tests/bench/RESULTS.md, issue 28); elsewhere the session's 32.
    m_session.batch = o.batch > 0 ? o.batch : promptBatchFor(backend);
    m_session.streamer.hostBudget = o.ramBudget;
    m_session.streamer.trace = o.trace;
    m_session.streamer.loadProgress = o.loadProgress;
    m_session.neuronCache = o.neuronCache;
    m_session.experts = o.experts;
    m_session.drawnRouting = o.drawnRouting;
    if (o.appliedPlan) {
        m_plan = *o.appliedPlan;
        m_session.placement = m_plan->placement;
        m_session.kvType = m_plan->kvType;
        if (!o.ramBudget) m_session.streamer.hostBudget = m_plan->ramBudget;
        return {};
    }
    if (!o.offloading()) return {};

    hw::ProbeOptions probe = o.probe;
    if (probe.storagePath.empty()) {  // the model's folder
        std::filesystem::path path = std::filesystem::absolute(model.path());
        if (!path.has_filename()) path = path.parent_path();  // a package folder written "pkg/"
        probe.storagePath = path.parent_path().string();
    }
    probe.threads = m_device->info().threads;
    auto profile = hw::probeHardware(probe);
    if (!profile) return profile.error();
    m_profile = std::move(*profile);
    applyMeasuredIo(m_profile, m_session.streamer);  // read the SSD the way the probe found fastest

    chooseColdNeurons(model, m_profile, backend, m_session.neuronCache);  // before costing the cache
    PlanSettings settings;
    settings.backend = backend;
    settings.vramBudget = o.vramBudget;
    settings.ramBudget = o.ramBudget;
    settings.contextLength = o.contextLength;
    settings.kvType = o.kvType;
    settings.batch = m_session.batch;
    settings.prefetch = o.naive ? 0 : o.prefetch;
    settings.expertSlots = o.experts.slotsPerLayer;
    settings.routing = o.routing;
    settings.expertCache = o.experts.enabled;
    const plan::PlannerInput in = plannerInput(model, m_profile, settings, m_session.neuronCache);
    Result<plan::PlanResult> planned = makeError(ErrorCode::Internal, "no plan");
    if (o.tier) {
        plan::Placement p = plan::uniformPlacement(model, *o.tier);
        p.prefetchDepth = in.prefetchDepth;
        planned = plan::predictPlacement(in, p);
    } else {
        planned = plan::planPlacement(in);
    }
    if (!planned) return planned.error();
    if (o.naive) planned->placement.prefetchDepth = 0;
    m_session.placement = planned->placement;
    if (!o.ramBudget) m_session.streamer.hostBudget = planned->ramBudget;
    m_plan = std::move(*planned);
    return {};
}

void Engine::notify(Notice::Kind kind, std::string message, std::string detail) const
{
    if (m_notices) m_notices(Notice{kind, std::move(message), std::move(detail)});
}

Result<gpu::Device*> Engine::cpuDevice()
{
    if (!m_cpu) {
        auto cpu = gpu::createDevice("cpu", {m_threads, 0});
        if (!cpu) return cpu.error();
        m_cpu = std::move(*cpu);
    }
    return m_cpu.get();
}

Result<std::unique_ptr<LlamaSession>> Engine::openSession() { return openSession(m_session); }

Result<std::unique_ptr<LlamaSession>> Engine::openSession(const SessionOptions& options)
{
    if (!m_device) return makeError(ErrorCode::Internal, "the engine gave its device up");
    auto session = LlamaSession::create(*m_model, *m_device, options);
    if (session || m_device->info().caps.hostPointers) return session;
    const std::string backend = m_device->info().backend;
    const Error onDevice = session.error();
    if (onDevice.code == ErrorCode::OutOfDeviceMemory && !options.placement) {
        // All weights on the device was the default: stream them from RAM instead (a plan keeps
        // the ones that fit).
        SessionOptions streamed = options;
        streamed.placement = plan::uniformPlacement(*m_model, plan::Tier::Host);
        session = LlamaSession::create(*m_model, *m_device, streamed);
        if (session) {
            notify(Notice::Kind::StreamsFromRam,
                   "The model does not fit in the " + backend + " device's free memory (" + onDevice.message +
                       "): its weights stream from RAM each token. A plan (the Tuning tab, or --vram-budget) "
                       "keeps the ones that fit on the device.",
                   onDevice.message);
            return session;
        }
    }
    SessionOptions onCpu = options;  // the plan was made for the GPU: the CPU keeps the weights in RAM
    onCpu.placement.reset();
    onCpu.streamer.hostBudget = 0;
    auto cpu = cpuDevice();
    if (!cpu) return onDevice;
    session = LlamaSession::create(*m_model, **cpu, onCpu);
    if (!session) return onDevice;  // the first reason is the one to fix
    notify(Notice::Kind::ComputedOnCpu,
           "The " + backend + " device cannot run this model as set up (" + onDevice.message +
               "): it is computed on the CPU.",
           onDevice.message);
    return session;
}

Result<std::unique_ptr<LlamaSession>> Engine::continueOnCpu(const LlamaSession& lost, const Error& why)
{
    SessionOptions onCpu;
    onCpu.contextLength = lost.contextLength();
    onCpu.batch = lost.batch();
    onCpu.kvType = lost.kvType();
    onCpu.streamer.trace = m_session.streamer.trace;
    auto cpu = cpuDevice();
    if (!cpu) return cpu.error();
    auto session = LlamaSession::create(*m_model, **cpu, onCpu);
    if (!session) return session.error();
    if (!lostDevice()) {  // the first loss: the CPU takes over for good
        const std::string backend = m_device->info().backend;
        m_retired.push_back(std::move(m_device));
        m_device = std::move(m_cpu);
        m_plan.reset();  // made for the lost device
        m_session = onCpu;
        m_why = "the " + backend + " device failed (" + why.message + ")";
        notify(Notice::Kind::DeviceLost, m_why + ": the reply goes on on the CPU, and later replies too.",
               why.message);
    }
    return session;
}

int Engine::contextLength() const { return plan::resolveContext(m_model->config(), m_session.contextLength); }

std::unique_ptr<Conversation> Engine::conversation() { return std::make_unique<Conversation>(*this); }

}  // namespace spillway::engine
