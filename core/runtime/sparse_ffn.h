#pragma once
// The activation-sparse FFN (SessionOptions::neuronCache), for ReLU models: per layer a neuron
// cache whose slots hold bundles, filled each token with the difference from RAM or the SSD, and
// the FFN computed over the token's active neurons only. A class of its own that LlamaSession
// calls in place of its dense FFN; its planning figures (which tensors it serves, its device
// bytes, per-layer costs and cold-neuron choices) are its static members.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/compress/ffn_predictor.h"
#include "core/model/llama_model.h"
#include "core/plan/neuron_cache.h"
#include "core/plan/neuron_cache_model.h"
#include "gpu/device.h"
#include "storage/direct_io.h"

namespace spillway {

namespace hw {
struct HardwareProfile;
}
namespace trace {
class Recorder;
struct Span;
}
class RowSplit;

// Activation-sparse FFNs (issue 9), for ReLU models: each layer's FFN is computed over its
// active neurons only, their weights coming through a neuron cache of `capacity` bundles
// (neuron_cache.h) that receives, each token, only the neurons it lacks. A bundle is a neuron's
// gate and up rows and its down column (llama_model.h, FfnBundles), read in one piece.
//
// Modes:
//  - Exact: the pre-activation that decides activity (the gate, or OPT's up) is computed in full
//    from the streamed matrix, so the active set is the true one; the cache serves the rest of
//    the FFN (up rows and down columns; OPT: down columns). For Q8_G64 weights (the thesis'
//    ReLU models) the down projection repeats the dense kernel's arithmetic: the logits are the
//    dense path's bit for bit; for other types it sums in fp32 over the active neurons, and the
//    logits agree to rounding.
//  - Predicted: the model's stored low-rank predictors (compress --predictors) choose the
//    neurons before any FFN weight is read; the cache serves the whole FFN. Approximate: a
//    neuron the predictor misses counts as zero.
//    Predictors that read the attention's input (compress --predictor-input attention) choose
//    them before attention runs: the missing bundles are then read from the SSD while it does.
// Sources of the bundles:
//  - Ram: a package's stored bundles, used in place from its mapping; for a model without them,
//    bundles built in RAM when the session starts.
//  - Ssd: a package's stored bundles, read with direct I/O each time neurons are missing; reads
//    of neighbouring neurons are merged into large requests (LLM in a flash §3.2).
// On a GPU the slots live in device memory, each layer's arrivals go up in one upload, and the
// neurons that find no slot are computed on the CPU from RAM (HeteGen's split).
// Hot and cold neurons (PowerInfer): with the activity frequencies compress --predictors
// measured, each layer's hottest neurons are pinned in its slots when the session starts. Cold
// neurons are shipped to the other slots (ColdNeurons::Ship), or the slots all hold hot neurons
// and the CPU computes the cold ones where they lie (ColdNeurons::Cpu): whichever the cost model
// predicts faster for that layer (chooseColdNeurons, from the measured speeds).
enum class NeuronCacheMode { Exact, Predicted };
enum class BundleSource { Ram, Ssd };

struct NeuronCacheOptions {
    // Bundles per layer (0: off, dense FFN). With predictors that recorded their layers' measured
    // densities (a package from compress --predictors), capacity x layers bundles are shared out
    // in proportion to each layer's working set instead (sparser layers get less room).
    int capacity = 0;
    EvictionPolicy policy = EvictionPolicy::Lru;
    int window = 0;    // keep neurons active in the last `window` tokens (LLM in a flash)
    NeuronCacheMode mode = NeuronCacheMode::Exact;
    BundleSource source = BundleSource::Ram;
    // SSD: neighbouring missing neurons closer than this in the file are read in one request
    // (the bytes between come along).
    size_t mergeGapBytes = size_t{32} << 10;
    // Cold neurons (neuron_cache.h). Auto: per layer as `coldPerLayer` says (what
    // SparseFfn::chooseColdNeurons found from measured speeds), shipping where it is empty.
    ColdNeurons cold = ColdNeurons::Auto;
    std::vector<ColdNeurons> coldPerLayer;
    // Layers that ship: neurons active on at least this share of the calibration tokens are
    // pinned (up to half the slots); above 1, none.
    double hotFrequency = kDefaultHotFrequency;
};

struct NeuronCacheReport {
    NeuronCacheStats total;     // over all layers
    uint64_t bundleBytes = 0;   // bytes of one neuron's bundle as the cache holds it (the part the mode uses)
    uint64_t ssdBytes = 0;      // read from the SSD for bundles (alignment and merged gaps included)
    uint64_t ssdRequests = 0;   // read requests issued (after merging)
    uint64_t earlyBytes = 0;    // of ssdBytes, read while attention ran (predictors of its input)
    uint64_t pinnedSsdBytes = 0;  // read when the session started, for the pinned hot neurons (not in ssdBytes)
    uint64_t loadedBytes() const { return total.loaded * bundleBytes; }
    // Bytes put into slots (the loads that found one): what goes to the device.
    uint64_t shippedBytes() const { return (total.loaded - total.slotless) * bundleBytes; }
    std::vector<int> capacities;  // per layer
    std::vector<int> pinned;      // per layer: hot neurons held for good (loaded when the session
                                  // started; not in `total`)
    std::vector<ColdNeurons> cold;  // per layer: Ship or Cpu, as the session ran it
};

class SparseFfn {
public:
    // Where a mode's slice of a bundle starts, and how long it is: exact gated FFNs need the up
    // row and the down column, exact OPT only the down column, predicted modes everything.
    struct Slice {
        size_t offset = 0, bytes = 0;
    };
    // What the session lends the FFN: its scratch activations in device memory (hb and hb2 of
    // ffnDim floats, xb of dim floats), its matrix-vector products (with HeteGen's row split,
    // for the dense pre-activation of exact mode), and its direct-I/O settings.
    struct Shared {
        float* hb = nullptr;
        float* hb2 = nullptr;
        float* xb = nullptr;
        RowSplit* matvec = nullptr;
        int ioQueueDepth = 16;
        size_t ioChunkBytes = size_t{4} << 20;
        trace::Recorder* trace = nullptr;  // may be null
    };
    // Builds the per-layer caches (and bundles in RAM for a model without stored ones) and pins
    // each layer's hot neurons.
    static Result<std::unique_ptr<SparseFfn>> create(const LlamaModel& model, gpu::Device& device,
                                                     const NeuronCacheOptions& options, const Shared& shared);
    ~SparseFfn();

    // The pass (the trace's token) the next calls belong to.
    void setPass(uint32_t pass) { m_pass = pass; }
    // Predictors that read the attention's input (PredictorInput::Attention): the layer's active
    // set is predicted before attention runs, and the reads of its missing bundles are in flight
    // while it does; run() then only waits for them. Nothing for other modes.
    Status startFetch(int layer, const float* attentionIn);
    // x += down · act over the layer's active neurons, act = relu(gate·in - shift) ⊙ up·in
    // (gated) or relu(up·in + b - shift) (OPT); `in` is the FFN's input (normed), one token.
    Status run(const LlamaLayerWeights& L, int layer, const float* in, float* x);
    NeuronCacheReport report() const;

    // The weight tensors the cache serves in place of the streamer (none when it is off).
    static std::vector<std::string> servedTensors(const LlamaModel& model, const NeuronCacheOptions& o);
    // Device bytes its slots take (gpu: for a device that cannot compute on host memory, whose
    // cache also holds the int8 columns' scale tables and the buffers of one upload): what a
    // planner sets aside.
    static uint64_t deviceBytes(const LlamaModel& model, const NeuronCacheOptions& o, bool gpu = false);
    // What each layer's cache loads and computes per token, estimated from the densities and LRU
    // hit-rate curves the model's predictors recorded (empty when it has none, or the cache is
    // off): the planner's input.
    static std::vector<plan::NeuronCacheLayerCost> layerCosts(const LlamaModel& model, const NeuronCacheOptions& o);
    // Per layer, where its cold neurons are best computed with these measured speeds
    // (plan::chooseColdNeurons), from the recorded densities, hit-rate curves and activity
    // frequencies; empty when the model records none (the session then ships).
    static std::vector<plan::ColdNeuronChoice> chooseColdNeurons(const LlamaModel& model, const NeuronCacheOptions& o,
                                                                 const hw::HardwareProfile& profile,
                                                                 const std::string& backend);

private:
    SparseFfn(const LlamaModel& model, gpu::Device& device, const NeuronCacheOptions& options, const Shared& shared);
    Status build();
    Status pinHotNeurons();
    Status runOnHost(const LlamaLayerWeights& L, int layer, const float* in, float* x);
    Status runOnDevice(const LlamaLayerWeights& L, int layer, const float* in, float* x);
    Status fetchBundles(int layer);
    void sendArrivals(int layer);
    const float* activityOnHost(const LlamaLayerWeights& L, const float* in);
    void takeLoads(int layer);
    void planBundleRuns(int layer);
    size_t stageBundleBatch(size_t first);

    struct Layer {
        NeuronCache cache;
        gpu::Buffer slotData;          // (capacity, slice.bytes) on the device
        const uint8_t* ram = nullptr;  // the layer's bundles in memory (Ram source)
        const float* scales = nullptr; // int8 columns: the layer's scale table
        std::vector<uint8_t> built;    // ... when built at load (a model without stored bundles)
        std::vector<float> builtScales;
        uint64_t fileOffset = 0;       // the layer's bundles in the package (Ssd source)
        uint32_t file = 0;
        // On a device without host pointers, int8 columns: each slot's row of the scale table
        // (capacity int32), and the table itself, in device memory.
        gpu::Buffer slotGroups, deviceScales;
        std::vector<float> upBias;  // predicted OPT: the up bias, for the host's activations
        ColdNeurons cold = ColdNeurons::Ship;  // where its cold neurons are computed
    };
    // The cache's lookups of one layer and token, waiting for the first bundle span to carry them.
    struct PendingLookups {
        uint32_t lookups = 0, hits = 0;
        bool pending = false;
    };
    void recordBundles(trace::Span span);
    void flushLookups(int layer);
    // Where the slice of an active neuron without a slot lies: in RAM (read in place), or in the
    // overflow area fetchBundles read it to.
    const uint8_t* slotlessSlice(const Layer& cl, uint32_t j) const;

    const LlamaModel& m_model;
    gpu::Device& m_device;
    NeuronCacheOptions m_options;
    Shared m_shared;
    uint32_t m_pass = 0;
    std::vector<Layer> m_layers;
    FfnBundles m_layout;
    Slice m_slice;
    NeuronCacheMode m_mode = NeuronCacheMode::Exact;
    // SSD source: the package's shards, the reader, and a staging buffer for merged reads.
    std::vector<storage::DirectFile> m_files;
    std::unique_ptr<storage::DirectReader> m_reader;
    gpu::Buffer m_staging;  // host memory, kStagingBytes (or the layer's bundles, if smaller) + 2 pages
    size_t m_mergeGap = 0;
    uint64_t m_ssdBytes = 0, m_ssdRequests = 0;
    // Predicted mode; in exact mode `records` holds the predictors' records (densities, curves
    // and activity frequencies) where the package has them.
    std::vector<compress::FfnPredictor> m_predictors, m_records;
    std::vector<float> m_predictorScratch;
    // Per token, reused.
    std::vector<NeuronLoad> m_loads;
    std::vector<storage::ReadRequest> m_requests;
    struct Run {
        uint64_t begin = 0, end = 0;  // aligned file range
        size_t firstLoad = 0, lastLoad = 0;  // loads [firstLoad, lastLoad] lie in it
        size_t stagingOffset = 0;
    };
    std::vector<Run> m_runs;
    std::vector<uint8_t> m_overflow;     // slices of active neurons that got no slot
    std::vector<int32_t> m_overflowAt;   // per neuron without a slot this token: its load's index (its place in `overflow`)
    std::vector<uint32_t> m_active;
    std::vector<float> m_gateOut;        // (ffnDim) predicted gated mode: the active neurons' gate values
    std::vector<gpu::MatvecJob> m_jobs;  // one-row jobs of the active neurons' rows
    std::vector<float> m_h;              // per active neuron: its activation
    std::vector<float> m_y;              // (dim) the down projection
    std::vector<int8_t> m_hq;            // Q8_G64 down: the activations quantized as the dense kernel does
    std::vector<float> m_hs;
    std::vector<int32_t> m_dots;         // (dim) one group's integer sums
    // A device that cannot compute on host memory (a GPU): slots are `deviceStride` apart (the
    // slice rounded up to 16 bytes). A layer's arrivals are packed in pinned memory (per arrival
    // its slice, then the slots, then the scale-table rows, int32 each), go up in one upload and
    // are scattered to their slots; the rows and the down projection are computed over every
    // resident slot (activations of 0 for those not active now). Active neurons without a slot
    // are computed on the CPU from RAM (HeteGen), and the two down projections are summed.
    bool m_onDevice = false;
    size_t m_deviceStride = 0;
    int m_maxCapacity = 0;
    gpu::Buffer m_packHost, m_packDevice;  // (maxCapacity) * (deviceStride + 8) bytes
    gpu::Buffer m_rowsOut;               // device: (2, maxCapacity) floats, the slots' up (gate) rows . in
    gpu::Buffer m_weights;               // device: (maxCapacity) floats, each slot's activation
    gpu::Buffer m_hostShare;             // device: (dim) floats, the CPU's part of the down projection
    std::vector<int32_t> m_packAt;       // per load: its place in the pack, or -1 (no slot)
    std::vector<float> m_hostRows, m_hostWeights, m_hostIn, m_hostPre, m_spilledRows;
    std::vector<float> m_spilledAct;     // per active neuron without a slot: its activation
    std::vector<uint32_t> m_spilled;     // ... and the neuron
    std::unique_ptr<gpu::Device> m_hostCpu;  // computes the rows of neurons without a slot
    PendingLookups m_lookups;            // the trace's hit counts (recordBundles)
    // startFetch: the layer whose active set and loads are already known, and its first batch of
    // reads in flight (runs [0, last)).
    struct Early {
        int layer = -1;
        storage::DirectReader::Ticket ticket = 0;
        size_t last = 0;
        uint64_t startNs = 0;
    } m_early;
    uint64_t m_earlyBytes = 0;           // read in batches started before attention
    uint64_t m_pinnedSsdBytes = 0;       // read for the pinned neurons when the session started
};

}  // namespace spillway
