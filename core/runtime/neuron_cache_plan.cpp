// The neuron cache's figures for planning (SparseFfn's static members): which FFN tensors it
// serves, the device memory it takes, what each layer loads and computes per token, and where
// each layer's cold neurons are best computed; from the bundle layout and the predictors' records.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/compress/ffn_bundles.h"
#include "core/compress/ffn_predictor.h"
#include "core/plan/neuron_cache_model.h"
#include "core/runtime/sparse_ffn.h"
#include "core/runtime/sparse_ffn_common.h"

namespace spillway {

using namespace sparse_ffn;

std::vector<std::string> SparseFfn::servedTensors(const LlamaModel& model, const NeuronCacheOptions& o)
{
    std::vector<std::string> names;
    if (o.capacity <= 0) return names;
    const LlamaConfig& c = model.config();
    for (int l = 0; l < c.nLayers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        if (o.mode == NeuronCacheMode::Predicted && c.ffnGated) names.push_back(b + "ffn_gate.weight");
        if (o.mode == NeuronCacheMode::Predicted || c.ffnGated) names.push_back(b + "ffn_up.weight");
        names.push_back(b + "ffn_down.weight");
    }
    return names;
}

uint64_t SparseFfn::deviceBytes(const LlamaModel& model, const NeuronCacheOptions& o, bool gpu)
{
    if (o.capacity <= 0) return 0;
    const LlamaConfig& c = model.config();
    auto built = compress::ffnBundleLayout(model);
    const FfnBundles layout = !model.ffnBundles().empty() ? model.ffnBundles().front() : built ? *built : FfnBundles{};
    const uint64_t capacity = uint64_t(std::min(o.capacity, c.ffnDim));
    const uint64_t slice = sliceOf(layout, o.mode).bytes;
    if (!gpu) return uint64_t(c.nLayers) * std::max<uint64_t>(capacity * slice, 64);
    // On a GPU (SparseFfn::runOnDevice): slots 16 bytes apart, and for int8 columns each layer's scale
    // table and slot groups; the pack of the largest layer; rows, activations and the CPU's share.
    const uint64_t stride = (slice + 15) / 16 * 16;
    std::vector<compress::FfnPredictor> records;
    if (auto loaded = compress::loadFfnPredictors(model, /*recordsOnly=*/true)) records = std::move(*loaded);
    const std::vector<int> capacities = layerCapacities(c, o, slice, records);
    uint64_t bytes = 0, widest = 1;
    for (int layerCapacity : capacities) {
        const uint64_t n = uint64_t(std::max(1, layerCapacity));
        widest = std::max(widest, n);
        bytes += std::max<uint64_t>(n * stride, 64);
        if (layout.column.group > 0)
            bytes += n * sizeof(int32_t) + std::max<uint64_t>(compress::ffnBundleScaleCount(layout) * sizeof(float), 64);
    }
    return bytes + widest * (stride + 2 * sizeof(int32_t)) + 3 * widest * sizeof(float) + uint64_t(c.dim) * sizeof(float);
}

namespace {

// What planning the cache goes by, per layer: from the layout and the predictors' records.
struct CacheFigures {
    FfnBundles layout;
    Slice slice;
    std::vector<compress::FfnPredictor> records;  // one per layer
    std::vector<int> capacities;
    bool predicted = false;
    bool pinsHot = false;         // a shipping cache pins its hot neurons (the options' default rule)
    double computePerNeuron = 0;  // weight bytes the FFN computes on per active neuron
    double active(int l, int neurons) const
    {
        const compress::FfnPredictor& p = records[size_t(l)];
        return (predicted ? p.predictedDensity : p.density) * neurons;
    }
};

std::optional<CacheFigures> cacheFigures(const LlamaModel& model, const NeuronCacheOptions& o)
{
    if (o.capacity <= 0) return std::nullopt;
    const LlamaConfig& c = model.config();
    auto built = compress::ffnBundleLayout(model);
    if (model.ffnBundles().empty() && !built) return std::nullopt;
    CacheFigures f;
    f.layout = !model.ffnBundles().empty() ? model.ffnBundles().front() : *built;
    f.slice = sliceOf(f.layout, o.mode);
    auto loaded = compress::loadFfnPredictors(model, /*recordsOnly=*/true);
    if (!loaded || int(loaded->size()) != c.nLayers) return std::nullopt;  // nothing measured to go by
    f.records = std::move(*loaded);
    f.predicted = o.mode == NeuronCacheMode::Predicted;
    f.pinsHot = o.hotFrequency == kDefaultHotFrequency;  // the rule the pinned curves replay
    f.capacities = layerCapacities(c, o, f.slice.bytes, f.records);
    // Bytes of rows the FFN computes on per active neuron (up; gate too in predicted gated mode;
    // none in exact OPT, whose up runs densely as a placed tensor) and its column.
    const size_t rowParts = f.predicted ? size_t(f.layout.parts - 1) : (c.ffnGated ? 1 : 0);
    f.computePerNeuron = double(rowParts * f.layout.rowBytes + f.layout.downBytes);
    return f;
}

}  // namespace

std::vector<plan::NeuronCacheLayerCost> SparseFfn::layerCosts(const LlamaModel& model,
                                                                      const NeuronCacheOptions& o)
{
    std::vector<plan::NeuronCacheLayerCost> costs;
    const auto f = cacheFigures(model, o);
    if (!f) return costs;
    const LlamaConfig& c = model.config();
    for (int l = 0; l < c.nLayers; ++l) {
        const compress::FfnPredictor& p = f->records[size_t(l)];
        const double active = f->active(l, c.ffnDim);
        const int capacity = f->capacities[size_t(l)];
        plan::NeuronCacheLayerCost cost;
        cost.fromSsd = o.source == BundleSource::Ssd;
        cost.rowType = f->layout.rowType;
        // A direct read brings whole 4 KiB pages: about one page more per neuron read alone.
        const double perLoad = double(f->slice.bytes) + (cost.fromSsd ? double(kAlign) : 0.0);
        const double staticHit = p.staticHitRate(capacity, f->predicted);
        if (coldFor(o, l) == ColdNeurons::Cpu && staticHit >= 0.0) {
            // The slots hold the hottest neurons for good; the CPU computes the others, read
            // from the SSD each token when the bundles live there.
            const double cold = active * (1.0 - staticHit);
            cost.loadBytes = cost.fromSsd ? cold * perLoad : 0.0;
            cost.computeBytes = (active - cold) * f->computePerNeuron;
            cost.cpuComputeBytes = cold * f->computePerNeuron;
            cost.toDevice = false;
        } else {
            double hit = p.hitRateAt(double(capacity) / c.ffnDim, f->predicted, f->pinsHot);
            if (hit < 0.0) hit = 0.0;  // no curve recorded: count every active neuron as loaded
            cost.loadBytes = active * (1.0 - hit) * perLoad;
            cost.computeBytes = active * f->computePerNeuron;
        }
        costs.push_back(cost);
    }
    return costs;
}

std::vector<plan::ColdNeuronChoice> SparseFfn::chooseColdNeurons(const LlamaModel& model, const NeuronCacheOptions& o,
                                                                   const hw::HardwareProfile& profile,
                                                                   const std::string& backend)
{
    std::vector<plan::ColdNeuronChoice> choices;
    const auto f = cacheFigures(model, o);
    if (!f) return choices;
    const LlamaConfig& c = model.config();
    const plan::ColdNeuronSpeeds speeds = plan::coldNeuronSpeeds(profile, backend, f->layout.rowType);
    for (int l = 0; l < c.nLayers; ++l) {
        const compress::FfnPredictor& p = f->records[size_t(l)];
        const int capacity = f->capacities[size_t(l)];
        plan::ColdNeuronLayer in;
        in.active = f->active(l, c.ffnDim);
        in.lruHitRate = std::max(0.0, p.hitRateAt(double(capacity) / c.ffnDim, f->predicted, f->pinsHot));
        in.staticHitRate = p.staticHitRate(capacity, f->predicted);
        in.sliceBytes = double(f->slice.bytes);
        in.readBytes = o.source == BundleSource::Ssd ? double(f->slice.bytes) + double(kAlign) : 0.0;
        in.computeBytes = f->computePerNeuron;
        choices.push_back(plan::chooseColdNeurons(in, speeds));
    }
    return choices;
}

}  // namespace spillway
