#pragma once
// The engine's front door: for one loaded model, everything between "run this model here" and
// a session that computes: choosing the device (and why a faster one was passed over), the
// probe's measured I/O settings, planning the placement, opening sessions with their fallbacks
// (device out of memory -> weights streamed from RAM -> the CPU; a device lost mid-reply -> the
// CPU from the tokens so far), and the model's chat format. Every front end (spillway-cli's
// generate, bench and plan, the desktop app's workers, a terminal chat, a server) goes through
// it; none builds a device, a planner input or a fallback of its own, so what the CLI prints and
// what the app shows is one event (Notice).
//
// Testing the fallbacks: with SPILLWAY_TEST_DEVICE=opaque[,memory=BYTES][,lost-after=N] in the
// environment, an engine that is handed no device computes on gpu::OpaqueDevice, a CPU device
// that takes a GPU's paths, with that much memory (0: no limit), lost at its Nth RMSNorm (0:
// never). Tests drive spillway-cli and the app through the same failures as the engine's tests.
//
// Threads: an Engine and its Conversations are used from one thread at a time. Conversations
// (conversation.h) hold sessions on the engine's devices: they go before the engine.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/engine/chat_format.h"
#include "core/hw/calibration.h"
#include "core/hw/probe.h"
#include "core/plan/planner.h"
#include "core/runtime/llama_session.h"
#include "core/trace/trace.h"
#include "gpu/device.h"

namespace spillway::trace { class Recorder; }

namespace spillway::engine {

class Conversation;

// What the user should know that did not stop the work. The CLI prints `message` on stderr; the
// app shows it in the chat.
struct Notice {
    enum class Kind {
        BackendUnavailable,  // the backend asked for cannot be used here: the CPU computes
        StreamsFromRam,      // the weights do not fit the device: they stream from RAM each token
        ComputedOnCpu,       // the device cannot hold or run the session: the CPU computes it
        DeviceLost,          // the device failed mid-way: the CPU goes on, for good
    };
    Kind kind;
    std::string message;  // a whole sentence for the user
    std::string detail;   // the underlying error's message ("" where none)
};
using NoticeSink = std::function<void(const Notice&)>;

// What to plan for (the CLI's flags, the app's Tuning tab).
struct PlanSettings {
    std::string backend = "cpu";  // the device planned for
    uint64_t vramBudget = 0;      // 0: the device's free memory
    uint64_t ramBudget = 0;       // 0: half the available RAM
    int contextLength = 0;        // 0: trained, at most 4096
    gpu::KvType kvType = gpu::KvType::F32;
    int batch = 0;                // prompt tokens per pass (sizes the activations); 0: the engine's default for the backend
    int prefetch = 2;             // units loaded ahead of compute (0: the naive baseline)
    int expertSlots = 0;          // mixtures of experts: the expert cache's slots per layer (0: default)
    bool expertCache = true;      // false: experts on the SSD stream whole (ExpertCacheOptions::enabled)
    // Mixtures of experts: how they route; nullptr: the profile `sparsity` kept for the model, if any.
    std::shared_ptr<const plan::RoutingProfile> routing;
};

// Every run calibrates (core/hw/calibration.h): a decode's measured lanes (`summary`, over
// `tokens` tokens), its time per token and the SSD's rate during it, against what `plan`
// predicted from the probe alone, into the cached profile
// (`cacheFile`; "" = the default) when it is still the one `profile` was read from (an empty
// `profile`, an engine given its plan: the cached one as it is). Returns the
// calibration of the run's regime after it (ratio, runs), or why it was not recorded.
Result<hw::Calibration> calibrateFromRun(const plan::PlanResult& plan, const hw::HardwareProfile& profile,
                                         const trace::Summary& summary, int tokens, double secondsPerToken,
                                         double ssdBytesPerSecond,
                                         const std::string& cacheFile = "");

// The planner's input for `model` on the measured machine, the neuron cache's tensors and device
// bytes and its per-layer costs included: the one place it is built.
plan::PlannerInput plannerInput(const LlamaModel& model, const hw::HardwareProfile& profile,
                                const PlanSettings& settings, const NeuronCacheOptions& cache);
// Where each layer's cold neurons run when `cache.cold` is Auto: the cost model's choice from the
// measured speeds, into cache.coldPerLayer (left empty where the model records nothing: ship).
void chooseColdNeurons(const LlamaModel& model, const hw::HardwareProfile& profile, const std::string& backend,
                       NeuronCacheOptions& cache);
// The SSD read size and queue depth the probe found fastest, into `streamer` (unchanged when the
// profile has no usable measurement).
void applyMeasuredIo(const hw::HardwareProfile& profile, StreamerOptions& streamer);

// Prompt tokens per pass on the CPU device unless EngineOptions::batch says otherwise (other
// devices: 32); promptBatchFor gives the default for a backend.
inline constexpr int kCpuPromptBatch = 256;  // measured best of 32..256 per type (tests/bench/RESULTS.md)
inline int promptBatchFor(const std::string& backend) { return backend.empty() || backend == "cpu" ? kCpuPromptBatch : 32; }

struct EngineOptions {
    std::string backend = "auto";  // "cpu", "cuda", "vulkan" or "auto" (gpu::chooseDevice)
    int threads = 0;               // CPU threads; 0 = one per core
    int contextLength = 0;         // 0: trained, at most 4096
    gpu::KvType kvType = gpu::KvType::F32;
    uint64_t vramBudget = 0;       // the device's memory limit; 0 = all free
    uint64_t ramBudget = 0;        // pinned RAM for streamed weights; 0 = the plan's choice
    // Placement. plan: measure the machine (hw::probeHardware, cached) and plan where each tensor
    // lives; also implied by budgets, `tier` and `naive`. tier: every weight there, predicted
    // instead of planned. Without any of them every weight is on the device.
    bool plan = false;
    std::optional<plan::Tier> tier;
    int prefetch = 2;
    int batch = 0;                 // prompt tokens per pass over the weights; 0: kCpuPromptBatch on the CPU, else 32
    bool naive = false;            // load each unit synchronously right before use (baseline)
    hw::ProbeOptions probe;        // storagePath "" = the model's folder
    NeuronCacheOptions neuronCache;
    ExpertCacheOptions experts;    // mixtures of experts whose experts lie on the SSD
    std::shared_ptr<const plan::RoutingProfile> routing;  // nullptr: the one kept for the model
    // Benchmarks only: each token's experts drawn at this profile's rates, not the router's
    // (SessionOptions::drawnRouting; outputs are not the model's). nullptr: the router chooses.
    std::shared_ptr<const plan::RoutingProfile> drawnRouting;
    // A plan made elsewhere (the app's Tuning tab): used as it is, nothing measured or planned.
    std::shared_ptr<const plan::PlanResult> appliedPlan;
    trace::Recorder* trace = nullptr;  // spans of every session go here (not owned)
    // Sessions report the weights they copy in as they open (StreamerOptions::loadProgress:
    // returning false cancels the opening). May be empty.
    std::function<bool(uint64_t done, uint64_t total)> loadProgress;

    bool offloading() const { return plan || vramBudget > 0 || ramBudget > 0 || naive || tier.has_value(); }
};

class Engine {
public:
    // `device`: compute on this one instead of choosing (tests hand in one that fails on cue; the
    // app keeps its device across model loads). Errors: the probe or the planner failing.
    static Result<std::unique_ptr<Engine>> open(std::shared_ptr<const LlamaModel> model, const EngineOptions& options,
                                                NoticeSink notices = {}, std::unique_ptr<gpu::Device> device = nullptr);
    ~Engine();

    const LlamaModel& model() const { return *m_model; }
    std::shared_ptr<const LlamaModel> sharedModel() const { return m_model; }
    // The device that computes: the CPU after a loss.
    gpu::Device& device() { return *m_device; }
    const gpu::Device& device() const { return *m_device; }
    // Why a faster backend was passed over, or could not be used ("" when nothing was).
    const std::string& deviceChoice() const { return m_why; }
    // Set when the weights were planned over the tiers (or a plan was applied).
    const std::optional<plan::PlanResult>& plan() const { return m_plan; }
    // The measured machine (empty unless offloading).
    const hw::HardwareProfile& profile() const { return m_profile; }
    // What sessions are opened with: the plan's placement, the measured I/O settings, the KV type.
    const SessionOptions& sessionOptions() const { return m_session; }
    const ChatFormat& chat() const { return m_chat; }
    // The context sessions are opened with, resolved (0 in the options: the trained one, at most 4096).
    int contextLength() const;
    void setChatFormat(ChatFormat format) { m_chat = std::move(format); }
    // Whether a device was lost and the CPU computes in its place.
    bool lostDevice() const { return !m_retired.empty(); }

    // A session with sessionOptions() (or `options`), with the fallbacks: on a device that is not
    // the host, weights that do not fit stream from RAM; a session the device cannot hold or run
    // is opened on the CPU. Each fallback sends a notice.
    Result<std::unique_ptr<LlamaSession>> openSession();
    Result<std::unique_ptr<LlamaSession>> openSession(const SessionOptions& options);
    // After `why` (ErrorCode::DeviceLost) from a session on the device: the CPU computes from now
    // on (DeviceLost notice); returns a CPU session of `lost`'s shape to go on with. The lost
    // device is kept, unused, until the engine closes (sessions on it may still exist).
    Result<std::unique_ptr<LlamaSession>> continueOnCpu(const LlamaSession& lost, const Error& why);
    // A conversation on this engine (its KV cache kept between turns).
    std::unique_ptr<Conversation> conversation();
    // Gives the device up (the app keeps it for the next model); the engine is unusable after.
    std::unique_ptr<gpu::Device> takeDevice() { return std::move(m_device); }

    void notify(Notice::Kind kind, std::string message, std::string detail = {}) const;

private:
    Engine() = default;
    Status prepare(const EngineOptions& options);
    Result<gpu::Device*> cpuDevice();

    std::shared_ptr<const LlamaModel> m_model;
    std::unique_ptr<gpu::Device> m_device;
    std::unique_ptr<gpu::Device> m_cpu;  // a GPU session's fallback, made when first needed
    std::vector<std::unique_ptr<gpu::Device>> m_retired;  // lost devices
    int m_threads = 0;
    std::string m_why;
    std::optional<plan::PlanResult> m_plan;
    hw::HardwareProfile m_profile;
    SessionOptions m_session;
    ChatFormat m_chat;
    NoticeSink m_notices;
};

}  // namespace spillway::engine
