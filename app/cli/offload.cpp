#include "offload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/model/llama_model.h"

namespace spillway::cli {

namespace {

std::string kvTypeError(const std::string& value)
{
    return "'" + value + "' is not a KV cache type (choose f32, f16 or q8)";
}

}  // namespace

void addOffloadOptions(CLI::App* cmd, OffloadOptions& o, bool withTrace)
{
    cmd->add_option("--vram-budget", o.vramBudget, "Device memory to use, e.g. 8GiB (default: all free)");
    cmd->add_option("--ram-budget", o.ramBudget, "Pinned RAM for weights and staging, e.g. 16GiB (default: half the available)");
    cmd->add_option("--prefetch", o.prefetch, "Units (layers) loaded ahead of compute")->check(CLI::Range(0, 16));
    cmd->add_flag("--naive", o.naive, "Baseline: load each layer synchronously right before use");
    cmd->add_option("--tier", o.tier, "Put every weight on one tier instead of planning")
        ->check(CLI::IsMember({"device", "ram", "ssd"}));
    cmd->add_option("--probe-path", o.probePath, "Folder whose SSD the probe measures (default: the model's)");
    cmd->add_flag("--remeasure", o.remeasure, "Measure the hardware again instead of using the cached profile");
    cmd->add_flag("--quick-probe", o.quickProbe, "Small, rough hardware measurements (for tests)");
    if (withTrace) cmd->add_option("--trace", o.tracePath, "Write a Chrome trace (open in Perfetto) of the run");
    const CLI::Validator kvTypes(
        [](std::string& value) -> std::string {
            return gpu::parseKvType(value) ? std::string() : kvTypeError(value);
        },
        "f32|f16|q8", "KV cache type");
    cmd->add_option("--kv-type", o.kvType,
                    "KV cache precision: f32 (exact, default), f16 (half the bytes) or q8 (int8 with a "
                    "scale per vector, about a quarter)")
        ->check(kvTypes);
}

void addNeuronCacheOptions(CLI::App* cmd, OffloadOptions& o)
{
    cmd->add_option("--neuron-cache", o.neuronCache,
                    "ReLU models: compute the FFN over the active neurons only, through a cache of this many "
                    "neuron bundles per layer that loads the difference each token")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--expert-slots", o.expertSlots,
                    "Mixtures of experts whose experts lie on the SSD: slots per layer of the cache they are read "
                    "into as tokens choose them (default: twice the experts a token uses on average, divided among "
                    "the layers by the routing profile where there is one)")
        ->check(CLI::Range(0, 1 << 16));
    cmd->add_flag("--no-expert-cache", o.noExpertCache,
                  "Mixtures of experts: stream the expert stacks left on the SSD whole each token, as dense "
                  "offloading does (a baseline for the expert cache)");
    cmd->add_option("--routing", o.routing,
                    "Mixtures of experts: how they route, a profile written by `sparsity` (default: the one it "
                    "kept for the model; without one, routing is taken as uniform)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--neuron-mode", o.neuronMode,
                    "exact (the gate decides which neurons are active; default) or predicted (the package's "
                    "activation predictors do, before any FFN weight is read: approximate)")
        ->check(CLI::IsMember({"exact", "predicted"}));
    cmd->add_option("--bundles-from", o.bundlesFrom,
                    "Where missing neuron bundles come from: ram (default) or ssd (direct reads from a package "
                    "written with compress --bundles)")
        ->check(CLI::IsMember({"ram", "ssd"}));
    cmd->add_option("--cold-neurons", o.coldNeurons,
                    "Neurons the cache lacks: ship them to its slots (ship), keep the slots for the hottest "
                    "neurons and compute the others on the CPU where they lie (cpu), or let the cost model pick "
                    "per layer from the measured speeds (auto, default; ships when nothing is measured)")
        ->check(CLI::IsMember({"auto", "ship", "cpu"}));
}

std::string hotColdText(const NeuronCacheReport& r)
{
    int cpu = 0, pinned = 0;
    for (ColdNeurons c : r.cold) cpu += c == ColdNeurons::Cpu;
    for (int p : r.pinned) pinned += p;
    const double tokens = double(std::max<uint64_t>(1, r.total.tokens));  // layer-tokens
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%d hot neurons pinned; cold neurons computed on the CPU in %d of %zu layers, shipped in the "
                  "others; %.1f per layer and token computed where they lie",
                  pinned, cpu, r.cold.size(), double(r.total.slotless) / tokens);
    return buf;
}

Result<gpu::KvType> kvTypeOf(const OffloadOptions& o)
{
    if (auto t = gpu::parseKvType(o.kvType)) return *t;
    return makeError(ErrorCode::InvalidArgument, "--kv-type: " + kvTypeError(o.kvType));
}

Result<uint64_t> parseBytes(const std::string& text)
{
    size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (...) {
        return makeError(ErrorCode::InvalidArgument, "'" + text + "' is not a size (e.g. 8GiB, 512M)");
    }
    std::string unit = text.substr(used);
    double scale = 1;
    if (unit.empty() || unit == "B") scale = 1;
    else if (unit == "K" || unit == "KiB" || unit == "KB") scale = 1024.0;
    else if (unit == "M" || unit == "MiB" || unit == "MB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB" || unit == "GB") scale = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TiB" || unit == "TB") scale = 1024.0 * 1024 * 1024 * 1024;
    else return makeError(ErrorCode::InvalidArgument, "'" + text + "': unknown unit '" + unit + "'");
    if (!(value > 0) || !std::isfinite(value) || value * scale > 1e18)
        return makeError(ErrorCode::InvalidArgument, "'" + text + "' is not a positive size");
    return uint64_t(value * scale);
}

void printNotice(const engine::Notice& notice)
{
    std::fflush(stdout);
    std::fprintf(stderr, "\nspillway-cli: %s\n", notice.message.c_str());
}

Result<OffloadRun> prepareOffload(std::shared_ptr<const LlamaModel> model, const std::string& backend, int threads,
                                  int contextLength, const OffloadOptions& o, bool alwaysTrace)
{
    OffloadRun run;
    engine::EngineOptions e;
    auto kvType = kvTypeOf(o);
    if (!kvType) return kvType.error();
    e.kvType = *kvType;
    if (!o.vramBudget.empty()) {
        auto b = parseBytes(o.vramBudget);
        if (!b) return b.error();
        e.vramBudget = *b;
    }
    if (!o.ramBudget.empty()) {
        auto b = parseBytes(o.ramBudget);
        if (!b) return b.error();
        e.ramBudget = *b;
    }
    e.backend = backend;
    e.threads = threads;
    e.contextLength = contextLength;
    e.plan = o.alwaysPlan;
    if (!o.tier.empty())
        e.tier = o.tier == "device" ? plan::Tier::Device : o.tier == "ram" ? plan::Tier::Host : plan::Tier::Ssd;
    e.prefetch = o.prefetch;
    e.naive = o.naive;
    e.probe.storagePath = o.probePath;
    e.probe.remeasure = o.remeasure;
    e.probe.quick = o.quickProbe;
    e.neuronCache.capacity = o.neuronCache;
    e.neuronCache.mode = o.neuronMode == "predicted" ? NeuronCacheMode::Predicted : NeuronCacheMode::Exact;
    e.neuronCache.source = o.bundlesFrom == "ssd" ? BundleSource::Ssd : BundleSource::Ram;
    e.neuronCache.cold = coldNeuronsOf(o.coldNeurons);
    e.experts.slotsPerLayer = o.expertSlots;
    e.experts.enabled = !o.noExpertCache;
    const auto loadRouting = [&](const std::string& path) -> Result<std::shared_ptr<const plan::RoutingProfile>> {
        auto routing = plan::RoutingProfile::load(path);
        if (!routing) return routing.error();
        if (!routing->fits(model->config()))
            return makeError(ErrorCode::InvalidArgument, path + ": a routing profile of another model's shape");
        return std::make_shared<const plan::RoutingProfile>(std::move(*routing));
    };
    if (!o.routing.empty()) {
        auto routing = loadRouting(o.routing);
        if (!routing) return routing.error();
        e.routing = std::move(*routing);
    }
    if (!o.drawRouting.empty()) {
        auto drawn = loadRouting(o.drawRouting);
        if (!drawn) return drawn.error();
        e.drawnRouting = std::move(*drawn);
    }
    if (alwaysTrace || !o.tracePath.empty()) {
        run.recorder = std::make_unique<trace::Recorder>();
        e.trace = run.recorder.get();
    }
    auto opened = engine::Engine::open(std::move(model), e, printNotice);
    if (!opened) return opened.error();
    run.engine = std::move(*opened);
    return run;
}

}  // namespace spillway::cli
