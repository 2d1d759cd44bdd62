#pragma once
// Options shared by the commands that run a model with weights spread over device memory, RAM
// and the SSD (generate, bench, plan): budgets, prefetch, naive baseline, trace output.

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "core/engine/engine.h"
#include "core/hw/probe.h"
#include "core/plan/planner.h"
#include "core/runtime/llama_session.h"
#include "core/trace/trace.h"
#include "gpu/device.h"

namespace spillway::cli {

struct OffloadOptions {
    std::string vramBudget;   // "8GiB", "512M", "1073741824"
    std::string ramBudget;
    int prefetch = 2;
    bool naive = false;
    std::string tier;         // "device", "ram" or "ssd": everything there (skips the planner)
    std::string tracePath;    // Chrome trace JSON
    std::string probePath;    // where the SSD is measured; default: the model's folder
    bool remeasure = false;
    bool quickProbe = false;  // small, rough measurements (tests)
    bool alwaysPlan = false;  // plan even without budgets (spillway-cli plan)
    std::string kvType = "f32";  // KV cache element type: f32, f16 or q8 (checked by the parser)

    // The neuron cache (ReLU models): bundles per layer (0 = off), mode and source.
    int neuronCache = 0;
    int expertSlots = 0;      // mixtures of experts: the expert cache's slots per layer (0: auto)
    std::string routing;      // mixtures of experts: a routing profile (default: the one kept)
    std::string drawRouting;  // bench: each token's experts drawn at this profile's rates (synthetic)
    bool noExpertCache = false;  // mixtures of experts: stream stacks on the SSD whole (baseline)
    std::string neuronMode = "exact";
    std::string bundlesFrom = "ram";
    std::string coldNeurons = "auto";  // auto, ship or cpu (neuron_cache.h, ColdNeurons)

    bool offloading() const
    {
        return alwaysPlan || !vramBudget.empty() || !ramBudget.empty() || naive || !tier.empty();
    }
};

void addOffloadOptions(CLI::App* cmd, OffloadOptions& o, bool withTrace);

// --neuron-cache, --neuron-mode, --bundles-from, --cold-neurons (generate, bench, plan).
void addNeuronCacheOptions(CLI::App* cmd, OffloadOptions& o);

// o.kvType as a gpu::KvType (an InvalidArgument error naming the choices for anything else).
Result<gpu::KvType> kvTypeOf(const OffloadOptions& o);

// One line on the neuron cache's hot and cold neurons (pinned, and where the cold ones ran).
std::string hotColdText(const NeuronCacheReport& report);

// "8GiB", "8G", "512MiB", "512M", "64KiB", "1.5GiB", "123" (bytes); binary units.
Result<uint64_t> parseBytes(const std::string& text);

struct OffloadRun {
    std::unique_ptr<trace::Recorder> recorder;  // before the engine: its sessions write to it
    std::unique_ptr<engine::Engine> engine;
    // Shorthands for what the engine set up.
    gpu::Device& device() { return engine->device(); }
    const SessionOptions& session() const { return engine->sessionOptions(); }
    const std::optional<plan::PlanResult>& plan() const { return engine->plan(); }
};

// The engine for `model` on `backend` (with the VRAM budget as the device's memory limit): the
// hardware measured or read from the cache, and the placement planned, when offloading. Its
// notices go to stderr.
Result<OffloadRun> prepareOffload(std::shared_ptr<const LlamaModel> model, const std::string& backend, int threads,
                                  int contextLength, const OffloadOptions& o, bool alwaysTrace);

// An engine notice on stderr, as "spillway-cli: <message>".
void printNotice(const engine::Notice& notice);

}  // namespace spillway::cli
