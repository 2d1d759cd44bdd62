#pragma once
// The neuron cache, modelled on recorded activity: how many FFN neuron bundles (a neuron's gate
// and up rows and its down column, stored together: LLM in a flash's row-column bundling) a
// device-resident cache must load per token, against streaming the FFN weights densely under
// the same device budget (Tricksy; LLM in a flash §3.3 windowing is LRU over recent tokens).
//
// Each layer keeps up to `capacity` bundles, least recently active evicted first, with the
// runtime's own bookkeeping (core/plan/neuron_cache.h); a token loads the bundles of its
// active neurons the cache lacks (all of them count as loaded even when more neurons are active
// than fit). Capacities come from one device budget, shared out in
// proportion to each layer's measured working set (density x neurons: sparser layers get less
// room), none above its layer's size, what a full layer cannot use going to the others.
// Dense offloading with the same budget keeps `budget` bytes of FFN weights resident and streams
// the rest every token.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/plan/neuron_cache.h"
#include "gpu/dtype.h"

namespace spillway::hw { struct HardwareProfile; }

namespace spillway::plan {

// What one layer's neuron cache costs per token (SparseFfn::layerCosts estimates it
// from the layer's measured density and LRU hit-rate curve): bundle bytes loaded (from the SSD
// or RAM), and weight bytes the FFN computes on (rows of `rowType`, the active neurons').
struct NeuronCacheLayerCost {
    double loadBytes = 0;
    bool fromSsd = false;
    double computeBytes = 0;
    gpu::DType rowType = gpu::DType::F32;
    // Cold neurons the CPU computes (ColdNeurons::Cpu): weight bytes it reads per token (from
    // RAM, or from the staging buffer after loadBytes came from the SSD).
    double cpuComputeBytes = 0;
    bool toDevice = true;  // the loaded bytes go on to the device (false: the CPU computes them)
};

// One layer's figures for the hot/cold choice, per token.
struct ColdNeuronLayer {
    double active = 0;          // active (or predicted active) neurons
    double lruHitRate = 0;      // hit rate of the cache shipping misses (its hot neurons pinned, LRU
                                // over the other slots; recorded by the predictors' training)
    double staticHitRate = -1;  // ... holding the hottest neurons only (-1: frequencies unknown)
    double sliceBytes = 0;      // bytes one shipped bundle moves to the device
    double readBytes = 0;       // bytes one bundle read from the SSD costs (0: bundles in RAM)
    double computeBytes = 0;    // weight bytes one neuron's rows and column take to compute
};

// Measured speeds, bytes per second.
struct ColdNeuronSpeeds {
    double copy = 0;        // host -> device (pinned); a memcpy on the CPU device
    double ssd = 0;         // sequential reads
    double device = 0;      // the device's matvec over the rows' type
    double cpu = 0;         // the CPU's
    bool sameProcessor = false;  // the device is the CPU (it computes on host memory)
};

struct ColdNeuronChoice {
    ColdNeurons choice = ColdNeurons::Ship;
    double shipSeconds = 0, cpuSeconds = 0;  // the layer's predicted FFN seconds per token each way
};

// Ship: misses = active (1 - lruHitRate) bundles are read (SSD) and copied, then the device
// computes every active neuron. Cpu: the slots hold the hottest neurons (active x staticHitRate
// of the work); on a GPU the CPU computes the rest (re-read from the SSD each token when the
// bundles live there) while the device computes the hot part, so the slower of the two counts;
// on the CPU device everything is computed by the same cores, straight from RAM (no copies).
// Cpu is taken only when predicted faster, and never without frequencies.
ColdNeuronChoice chooseColdNeurons(const ColdNeuronLayer& layer, const ColdNeuronSpeeds& speeds);

// The speeds a profile measured for `backend`'s device with rows of `rows` (zeros where it has
// no figure: chooseColdNeurons then never prefers the CPU).
ColdNeuronSpeeds coldNeuronSpeeds(const hw::HardwareProfile& profile, const std::string& backend, gpu::DType rows);

// One layer's active neurons, token by token.
struct ActivityTrace {
    int neurons = 0;
    std::vector<uint32_t> ids;      // every token's active ids, concatenated
    std::vector<uint64_t> offsets;  // token t: ids[offsets[t], offsets[t + 1]); tokens + 1 values
    size_t tokens() const { return offsets.empty() ? 0 : offsets.size() - 1; }
    double density() const;         // mean share of neurons active per token
};

struct NeuronCacheLayer {
    int capacity = 0;               // bundles held
    double hitRate = 0.0;           // share of active neurons found in the cache
    double loadedPerToken = 0.0;    // bundles loaded per token
};

struct NeuronCacheResult {
    uint64_t budgetBytes = 0;
    uint64_t ffnBytes = 0;              // all FFN weights
    double bytesPerToken = 0.0;         // neuron cache: bundles loaded x bundle bytes
    double denseBytesPerToken = 0.0;    // dense offloading: ffnBytes - budget (at least 0)
    double hitRate = 0.0;               // over all layers' active neurons
    std::vector<NeuronCacheLayer> layers;
    // Dense bytes over cache bytes (how many times fewer bytes the cache moves); 0 when the
    // cache moves nothing.
    double reduction() const { return bytesPerToken > 0 ? denseBytesPerToken / bytesPerToken : 0.0; }
};

// Per-layer capacities (bundles) for `budgetBytes`, as described above.
std::vector<int> allocateCacheCapacity(std::span<const double> density, std::span<const int> neurons,
                                       uint64_t bundleBytes, uint64_t budgetBytes);

// Replays the traces (the cache starts empty; the first token of each layer loads everything)
// with capacities from allocateCacheCapacity. bundleBytes: bytes of one neuron's bundle.
NeuronCacheResult simulateNeuronCache(std::span<const ActivityTrace> layers, uint64_t bundleBytes,
                                      uint64_t budgetBytes);

}  // namespace spillway::plan
