#pragma once
// The placement planner: from measured hardware figures (hw::HardwareProfile), a model and
// budgets, it chooses each weight tensor's tier so that decoding is fastest, and predicts the
// per-token time of every lane (SSD read, host→device copy, decompress, device compute, CPU
// compute) with a pipeline model of the runtime's prefetcher.
//
// Order of placement follows HeteGen's schedule gain: starting with everything on the SSD, the
// move (SSD→RAM, or to the device) that saves the most predicted time per byte of the budget it
// uses is taken first, until nothing more fits. Budgets are hard limits and include the KV
// cache, activations, the streaming slots and the staging buffer.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/hw/probe.h"
#include "core/model/llama_model.h"
#include "core/plan/neuron_cache_model.h"
#include "core/plan/placement.h"
#include "core/plan/routing_profile.h"
#include "gpu/device.h"

namespace spillway::plan {

struct PlannerInput {
    const LlamaModel* model = nullptr;
    hw::HardwareProfile profile;
    std::string backend = "cpu";   // which of profile.devices computes
    uint64_t vramBudget = 0;       // 0: the device's free memory
    uint64_t ramBudget = 0;        // pinned RAM for weights and staging; 0: half the available RAM
    int contextLength = 0;         // <= 0: the model's trained context, capped at 4096
    int batch = 32;                // prompt batch (sizes the activation buffers)
    int prefetchDepth = 2;         // units loaded ahead; 0 = naive
    gpu::KvType kvType = gpu::KvType::F32;  // KV cache element type: sizes the cache, so a
                                            // smaller type leaves more device memory to weights
    // Tensors another part of the runtime brings in (the neuron cache's FFN weights): left out
    // of the placement; and the device bytes that part takes (its slots), set aside first.
    std::vector<std::string> served;
    uint64_t reservedDeviceBytes = 0;
    // Per layer (or empty): the neuron cache's traffic and compute, on the critical path of its
    // layer (bundles are fetched when the layer's FFN needs them).
    std::vector<NeuronCacheLayerCost> neuronCache;
    // Mixtures of experts: the expert cache's slots per layer for experts left on the SSD
    // (0: twice the experts a token uses, as the runtime's default; with a measured routing
    // profile the same slots in all are divided among the layers by it, ExpertPlacement::slotCount).
    int expertSlots = 0;
    bool expertCache = true;  // false: the runtime's is off (ExpertCacheOptions::enabled)
    // How the experts route (measured; nullptr or empty: uniform, the worst case for a cache):
    // the slots' expected hits, which experts the RAM keeps and which fill the slots at start.
    std::shared_ptr<const RoutingProfile> routing;
};

// Seconds per decoded token each lane is busy, and the pipeline's result.
struct LaneTimes {
    double ssdRead = 0, hostToDevice = 0, decompress = 0, deviceCompute = 0, cpuCompute = 0;
};

struct TensorCost {
    double ssdSeconds = 0, copySeconds = 0, computeSeconds = 0;
    double hetegenAlpha = 1.0;     // HeteGen Eq. 9 for a RAM-tier tensor (device share of rows)
};

// A mixture of experts' layer: where its experts are and what the slots are expected to hit.
struct ExpertLayerPlan {
    int layer = 0;
    bool cached = false;     // served by the expert cache (its stacks on the SSD)
    Tier tier = Tier::Ssd;   // where its stacks lie when not cached
    bool split = false;      // not cached, its stacks on different tiers (streamed whole)
    int deviceSlots = 0;     // cached: slots on the device
    int hostExperts = 0;     // cached: experts kept in RAM
    int ssdExperts = 0;      // cached: experts read from the SSD when missed
    double hitRate = 1.0;    // share of the layer's choices found in a slot
    double hostRate = 0.0;   // share found in RAM (copied into a slot)
};

struct PlanResult {
    Placement placement;
    std::vector<TensorCost> costs;         // parallel to placement.tensors
    std::string deviceName;
    uint64_t vramBudget = 0, ramBudget = 0;
    // Memory per tier.
    uint64_t deviceWeightBytes = 0;        // resident weights (and norms)
    uint64_t deviceSlotBytes = 0;          // all streaming slots together
    int slotCount = 0;                     // streaming slots (named so: Qt defines `slots`)
    uint64_t deviceWorkingBytes = 0;       // KV cache, activations, embedding row
    uint64_t kvCacheBytes = 0;             // the KV cache's part of deviceWorkingBytes
    uint64_t recurrentStateBytes = 0;      // hybrid models' linear layers: fixed, whatever the context
    uint64_t stateSnapshotBytes = 0;       // their snapshots and the rings' windows, in RAM (session_memory.h)
    gpu::KvType kvType = gpu::KvType::F32;
    uint64_t hostWeightBytes = 0;          // RAM-tier weights
    uint64_t stagingBytes = 0;
    uint64_t ssdBytes = 0;                 // read from the SSD per token
    uint64_t deviceTotal() const { return deviceWeightBytes + deviceSlotBytes + deviceWorkingBytes; }
    uint64_t hostTotal() const { return hostWeightBytes + stagingBytes + stateSnapshotBytes; }
    // Prediction.
    // Calibrated by earlier runs on this machine where there are any (core/hw/calibration.h):
    // probeLanes and probeSecondsPerToken are the figures from the probe's measurements alone.
    LaneTimes lanes;                       // busy seconds per token
    double secondsPerToken = 0;            // pipeline result (lanes overlap)
    LaneTimes probeLanes;
    double probeSecondsPerToken = 0;
    std::string bottleneck;                // the lane the probe's figures make the slowest: "ssd", "copy", "decompress", "device", "cpu"
    int sizeClass = 0;                     // hw::modelSizeClass of the placed weights
    std::string weightFormat;              // hw::Observation::format of the placed weights
    int calibrationRuns = 0;               // runs the token's figure was calibrated by (0: the probe alone)
    double tokensPerSecond() const { return secondsPerToken > 0 ? 1.0 / secondsPerToken : 0; }
    std::vector<ExpertLayerPlan> expertLayers;  // mixtures of experts, per layer
    std::string routing;                        // the routing the expert figures assume
    std::vector<std::string> notes;
};

Result<PlanResult> planPlacement(const PlannerInput& input);

// Predicts a given placement on the input's hardware (the planner's cost model, exposed for the
// bench and for explaining user-chosen placements).
Result<PlanResult> predictPlacement(const PlannerInput& input, const Placement& placement);

std::string planText(const PlanResult& plan, bool perTensor);
std::string planJson(const PlanResult& plan);

}  // namespace spillway::plan
