#pragma once
// The neuron cache, modelled on recorded activity: how many FFN neuron bundles (a neuron's gate
// and up rows and its down column, stored together: LLM in a flash's row-column bundling) a
// device-resident cache must load per token, against streaming the FFN weights densely under
// the same device budget (Tricksy; LLM in a flash §3.3 windowing is LRU over recent tokens).
//
// Each layer keeps up to `capacity` bundles, least recently active evicted first, with the
// runtime's own bookkeeping (core/runtime/neuron_cache.h); a token loads the bundles of its
// active neurons the cache lacks (all of them count as loaded even when more neurons are active
// than fit). Capacities come from one device budget, shared out in
// proportion to each layer's measured working set (density x neurons: sparser layers get less
// room), none above its layer's size, what a full layer cannot use going to the others.
// Dense offloading with the same budget keeps `budget` bytes of FFN weights resident and streams
// the rest every token.

#include <cstdint>
#include <span>
#include <vector>

#include "gpu/dtype.h"

namespace spillway::plan {

// What one layer's neuron cache costs per token (LlamaSession::neuronCacheCosts estimates it
// from the layer's measured density and LRU hit-rate curve): bundle bytes loaded (from the SSD
// or RAM), and weight bytes the FFN computes on (rows of `rowType`, the active neurons').
struct NeuronCacheLayerCost {
    double loadBytes = 0;
    bool fromSsd = false;
    double computeBytes = 0;
    gpu::DType rowType = gpu::DType::F32;
};

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
