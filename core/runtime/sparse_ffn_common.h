#pragma once
// What the neuron cache's runtime (sparse_ffn.cpp) and its planning figures
// (neuron_cache_plan.cpp) share: which part of a bundle a mode holds, the per-layer capacities and
// each layer's cold-neuron choice. Internal to core/runtime.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/compress/ffn_predictor.h"
#include "core/plan/neuron_cache_model.h"
#include "core/runtime/sparse_ffn.h"
#include "storage/direct_io.h"

namespace spillway::sparse_ffn {

inline constexpr size_t kAlign = storage::kDirectIoAlignment;

using Slice = SparseFfn::Slice;

inline Slice sliceOf(const FfnBundles& b, NeuronCacheMode mode)
{
    if (mode == NeuronCacheMode::Predicted) return {0, b.stride};
    const size_t offset = b.parts == 3 ? b.upOffset() : b.downOffset();
    return {offset, b.stride - offset};
}

// Per-layer capacities: the same for all, or shared out by the densities the predictors recorded
// (predicted mode holds the predicted sets, exact mode the true ones).
inline std::vector<int> layerCapacities(const LlamaConfig& c, const NeuronCacheOptions& o, size_t sliceBytes,
                                        const std::vector<compress::FfnPredictor>& recorded)
{
    const int capacity = std::min(o.capacity, c.ffnDim);
    std::vector<double> density;
    for (const auto& p : recorded) {
        const double d = o.mode == NeuronCacheMode::Predicted ? p.predictedDensity : p.density;
        if (d > 0.0) density.push_back(d);
    }
    if (int(density.size()) != c.nLayers) return std::vector<int>(size_t(c.nLayers), capacity);
    const std::vector<int> neurons(size_t(c.nLayers), c.ffnDim);
    return plan::allocateCacheCapacity(density, neurons, sliceBytes,
                                       uint64_t(capacity) * uint64_t(c.nLayers) * sliceBytes);
}

// Where layer `layer` computes its cold neurons, as the options say (Auto without a per-layer
// choice ships).
inline ColdNeurons coldFor(const NeuronCacheOptions& o, int layer)
{
    if (o.cold != ColdNeurons::Auto) return o.cold;
    if (size_t(layer) < o.coldPerLayer.size() && o.coldPerLayer[size_t(layer)] != ColdNeurons::Auto)
        return o.coldPerLayer[size_t(layer)];
    return ColdNeurons::Ship;
}

}  // namespace spillway::sparse_ffn
