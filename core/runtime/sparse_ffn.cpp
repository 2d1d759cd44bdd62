// The activation-sparse FFN of LlamaSession (SessionOptions::neuronCache): per layer a neuron
// cache whose slots hold bundles (the part of each neuron's gate row, up row and down column that
// the mode needs), filled with the difference each token from RAM or from the SSD; the FFN is
// computed over the token's active neurons only.

#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/compress/ffn_bundles.h"
#include "core/runtime/sparse_ffn_common.h"
#include "core/compress/ffn_predictor.h"
#include "core/plan/neuron_cache_model.h"
#include "core/runtime/llama_session.h"
#include "core/trace/trace.h"
#include "gpu/host.h"
#include "gpu/half_inline.h"
#include "storage/direct_io.h"

namespace spillway {

using namespace sparse_ffn;

namespace {

// y += a * column, the column in f32, f16 or bf16.
void axpyColumnPortable(float a, const uint8_t* column, gpu::DType type, size_t n, float* y)
{
    if (type == gpu::DType::F32) {
        const auto* c = reinterpret_cast<const float*>(column);
        for (size_t r = 0; r < n; ++r) y[r] += a * c[r];
    } else if (type == gpu::DType::F16) {
        for (size_t r = 0; r < n; ++r) y[r] += a * gpu::detail::halfToFloat(gpu::detail::load16(column + 2 * r));
    } else {
        for (size_t r = 0; r < n; ++r) y[r] += a * gpu::detail::bf16ToFloat(gpu::detail::load16(column + 2 * r));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same with AVX2, FMA and F16C where the CPU has them (the columns of big models are f16;
// the portable half conversion costs more than the arithmetic). Products are fused, so sums
// may differ from the portable loop's in the last bit.
__attribute__((target("avx2,fma,f16c"))) void axpyColumnAvx2(float a, const uint8_t* column, gpu::DType type,
                                                              size_t n, float* y)
{
    const __m256 va = _mm256_set1_ps(a);
    size_t r = 0;
    for (; r + 8 <= n; r += 8) {
        __m256 c;
        if (type == gpu::DType::F32) {
            c = _mm256_loadu_ps(reinterpret_cast<const float*>(column) + r);
        } else {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(column + 2 * r));
            c = type == gpu::DType::F16 ? _mm256_cvtph_ps(h)
                                        : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        }
        _mm256_storeu_ps(y + r, _mm256_fmadd_ps(va, c, _mm256_loadu_ps(y + r)));
    }
    if (r < n) axpyColumnPortable(a, column + r * (type == gpu::DType::F32 ? 4 : 2), type, n - r, y + r);
}
#endif

using AxpyColumn = void (*)(float, const uint8_t*, gpu::DType, size_t, float*);

// y += a * (q * scale), the column's int8 quants times their scales (BundleColumn, group > 0):
// each product q * scale is the down matrix's own value, as in an f32 column.
void axpyInt8Column(float a, const int8_t* q, const float* scale, size_t n, float* y)
{
    for (size_t r = 0; r < n; ++r) y[r] += a * (float(q[r]) * scale[r]);
}

AxpyColumn pickAxpyColumn()
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return axpyColumnAvx2;
#endif
    return axpyColumnPortable;
}

// The cache's lookups of one layer and token, waiting for the first bundle span to carry them.
struct PendingLookups {
    uint32_t lookups = 0, hits = 0;
    bool pending = false;
};

void recordBundles(trace::Recorder* rec, PendingLookups& p, trace::Span span)
{
    if (!rec) return;
    if (p.pending) {
        span.lookups = p.lookups;
        span.hits = p.hits;
        p.pending = false;
    }
    rec->record(span);
}

// After a layer's transfers: the lookups, if no transfer took them (every neuron was resident).
void flushLookups(trace::Recorder* rec, PendingLookups& p, trace::Lane lane, int layer, uint32_t pass)
{
    if (!rec || !p.pending) return;
    const uint64_t now = trace::nowNs();
    recordBundles(rec, p, {lane, layer, trace::kNeuronBundlesOp, 0, now, now, pass});
}

constexpr size_t kStagingBytes = size_t{32} << 20;  // SSD reads are staged in batches of this

}  // namespace

struct LlamaSession::SparseFfn {
    struct Layer {
        NeuronCache cache;
        gpu::Buffer slots;             // (capacity, slice.bytes) on the device
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
    // Where the slice of an active neuron without a slot lies: in RAM (read in place), or in the
    // overflow area fetchBundles read it to.
    const uint8_t* slotlessSlice(const Layer& cl, uint32_t j) const
    {
        if (!reader) return cl.ram + size_t(j) * layout.stride + slice.offset;
        return overflow.data() + size_t(overflowAt[j]) * slice.bytes;
    }
    std::vector<Layer> layers;
    FfnBundles layout;
    Slice slice;
    NeuronCacheMode mode = NeuronCacheMode::Exact;
    // SSD source: the package's shards, the reader, and a staging buffer for merged reads.
    std::vector<storage::DirectFile> files;
    std::unique_ptr<storage::DirectReader> reader;
    gpu::Buffer staging;  // host memory, kStagingBytes (or the layer's bundles, if smaller) + 2 pages
    size_t mergeGap = 0;
    uint64_t ssdBytes = 0, ssdRequests = 0;
    // Predicted mode; in exact mode `records` holds the predictors' records (densities, curves
    // and activity frequencies) where the package has them.
    std::vector<compress::FfnPredictor> predictors, records;
    std::vector<float> predictorScratch;
    // Per token, reused.
    std::vector<NeuronLoad> loads;
    std::vector<storage::ReadRequest> requests;
    struct Run {
        uint64_t begin = 0, end = 0;  // aligned file range
        size_t firstLoad = 0, lastLoad = 0;  // loads [firstLoad, lastLoad] lie in it
        size_t stagingOffset = 0;
    };
    std::vector<Run> runs;
    std::vector<uint8_t> overflow;     // slices of active neurons that got no slot
    std::vector<int32_t> overflowAt;   // per neuron without a slot this token: its load's index (its place in `overflow`)
    std::vector<uint32_t> active;
    std::vector<float> gateOut;        // (ffnDim) predicted gated mode: the active neurons' gate values
    std::vector<gpu::MatvecJob> jobs;  // one-row jobs of the active neurons' rows
    std::vector<float> h;              // per active neuron: its activation
    std::vector<float> y;              // (dim) the down projection
    std::vector<int8_t> hq;            // Q8_G64 down: the activations quantized as the dense kernel does
    std::vector<float> hs;
    std::vector<int32_t> dots;         // (dim) one group's integer sums
    // A device that cannot compute on host memory (a GPU): slots are `deviceStride` apart (the
    // slice rounded up to 16 bytes). A layer's arrivals are packed in pinned memory (per arrival
    // its slice, then the slots, then the scale-table rows, int32 each), go up in one upload and
    // are scattered to their slots; the rows and the down projection are computed over every
    // resident slot (activations of 0 for those not active now). Active neurons without a slot
    // are computed on the CPU from RAM (HeteGen), and the two down projections are summed.
    bool onDevice = false;
    size_t deviceStride = 0;
    int maxCapacity = 0;
    gpu::Buffer packHost, packDevice;  // (maxCapacity) * (deviceStride + 8) bytes
    gpu::Buffer rowsOut;               // device: (2, maxCapacity) floats, the slots' up (gate) rows . in
    gpu::Buffer weights;               // device: (maxCapacity) floats, each slot's activation
    gpu::Buffer hostShare;             // device: (dim) floats, the CPU's part of the down projection
    std::vector<int32_t> packAt;       // per load: its place in the pack, or -1 (no slot)
    std::vector<float> hostRows, hostWeights, hostIn, hostPre, spilledRows;
    std::vector<float> spilledAct;     // per active neuron without a slot: its activation
    std::vector<uint32_t> spilled;     // ... and the neuron
    std::unique_ptr<gpu::Device> hostCpu;  // computes the rows of neurons without a slot
    PendingLookups lookups;            // the trace's hit counts (recordBundles)
    // startNeuronFetch: the layer whose active set and loads are already known, and its first
    // batch of reads in flight (runs [0, last)).
    struct Early {
        int layer = -1;
        storage::DirectReader::Ticket ticket = 0;
        size_t last = 0;
        uint64_t startNs = 0;
    } early;
    uint64_t earlyBytes = 0;           // read in batches started before attention
    uint64_t pinnedSsdBytes = 0;       // read for the pinned neurons when the session started
};

// Here, where SparseFfn is complete.
LlamaSession::LlamaSession(const LlamaModel& model, gpu::Device& device) : m_model(model), m_device(device) {}
LlamaSession::~LlamaSession() = default;

Status LlamaSession::createNeuronCache()
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    const NeuronCacheOptions& o = m_options.neuronCache;
    const std::string& path = m_model.path();
    if (!(c.ffnRelu || !c.ffnGated))
        return makeError(ErrorCode::UnsupportedModel,
                         path + ": the neuron cache needs a ReLU FFN (its activations are exactly "
                                "zero when inactive); this model's is SwiGLU");
    const auto& stored = m_model.ffnBundles();
    if (o.source == BundleSource::Ssd && stored.empty())
        return makeError(ErrorCode::InvalidArgument,
                         path + ": reading neuron bundles from the SSD needs a package that stores them "
                                "(spillway-cli compress --bundles)");
    auto sparse = std::make_unique<SparseFfn>();
    SparseFfn& sp = *sparse;
    sp.mode = o.mode;
    if (o.mode == NeuronCacheMode::Predicted) {
        auto predictors = compress::loadFfnPredictors(m_model);
        if (!predictors) return predictors.error();
        if (predictors->empty())
            return makeError(ErrorCode::InvalidArgument,
                             path + ": the predicted neuron-cache mode needs a package with activation predictors "
                                    "(spillway-cli compress --predictors RANK)");
        sp.predictors = std::move(*predictors);
        int scratch = 0;  // predict()'s features and logits
        for (const auto& p : sp.predictors) scratch = std::max(scratch, p.rank + p.neurons);
        sp.predictorScratch.resize(size_t(scratch));
    }
    if (stored.empty()) {
        auto layout = compress::ffnBundleLayout(m_model);
        if (!layout) return layout.error();
        sp.layout = *layout;
    } else {
        sp.layout = stored.front();
    }
    const FfnBundles& b = sp.layout;
    sp.slice = sliceOf(b, o.mode);
    if (sp.predictors.empty())  // exact mode: the predictors' records only
        if (auto records = compress::loadFfnPredictors(m_model, /*recordsOnly=*/true)) sp.records = std::move(*records);
    const std::vector<int> capacities =
        layerCapacities(c, o, sp.slice.bytes, sp.predictors.empty() ? sp.records : sp.predictors);
    sp.mergeGap = o.mergeGapBytes;
    sp.onDevice = !d.info().caps.hostPointers;
    const bool predicted = o.mode == NeuronCacheMode::Predicted;
    const bool rowsOnDevice = predicted || c.ffnGated;
    if (sp.onDevice && rowsOnDevice && !d.supports(b.rowType))
        return makeError(ErrorCode::BackendUnavailable,
                         path + ": the neuron cache's rows are " + gpu::dtypeName(b.rowType) + ", which the " +
                             d.info().backend + " device cannot compute");
    sp.deviceStride = sp.onDevice ? (sp.slice.bytes + 15) / 16 * 16 : sp.slice.bytes;
    for (int capacity : capacities) sp.maxCapacity = std::max(sp.maxCapacity, std::max(1, capacity));

    for (int l = 0; l < c.nLayers; ++l) {
        const int layerCapacity = std::max(1, capacities[size_t(l)]);
        SparseFfn::Layer layer{NeuronCache(c.ffnDim, layerCapacity, o.policy, o.window), {}, nullptr, nullptr, {}, {}, 0, 0, {}, {}, {},
                               coldFor(o, l)};
        if (!stored.empty()) {
            const FfnBundles& sb = stored[size_t(l)];
            if (sb.rowType != b.rowType || sb.column != b.column)
                return makeError(ErrorCode::ModelFileInvalid, path + ": the layers' FFN bundles differ in type");
            layer.ram = sb.data;
            layer.scales = sb.scales;
            layer.file = sb.file;
            layer.fileOffset = sb.fileOffset;
        } else {
            // No stored bundles: built here, from the model's FFN.
            layer.built.assign(b.stride * size_t(c.ffnDim), 0);
            layer.builtScales.assign(compress::ffnBundleScaleCount(b), 0.0f);
            SPILLWAY_TRY(compress::buildFfnBundles(m_model, l, layer.built.data(), layer.builtScales.data()));
            layer.ram = layer.built.data();
            layer.scales = layer.builtScales.empty() ? nullptr : layer.builtScales.data();
        }
        const ModelTensor* bias = m_model.tensor("blk." + std::to_string(l) + ".ffn_up.bias");
        if (sp.onDevice && predicted && !c.ffnGated && bias) {
            if (bias->type != gpu::DType::F32 || bias->bytes < size_t(c.ffnDim) * sizeof(float))
                return makeError(ErrorCode::ModelFileInvalid, path + ": blk." + std::to_string(l) +
                                                                  ".ffn_up.bias is not ffnDim floats");
            const auto* v = reinterpret_cast<const float*>(bias->data);
            layer.upBias.assign(v, v + c.ffnDim);
        }
        auto slots = d.allocate(std::max<size_t>(size_t(layerCapacity) * sp.deviceStride, 64));
        if (!slots) return slots.error();
        layer.slots = std::move(*slots);
        if (sp.onDevice && b.column.group > 0) {
            auto groups = d.allocate(size_t(layerCapacity) * sizeof(int32_t));
            if (!groups) return groups.error();
            layer.slotGroups = std::move(*groups);
            const size_t scaleBytes = compress::ffnBundleScaleCount(b) * sizeof(float);
            auto scales = d.allocate(std::max<size_t>(scaleBytes, 64));
            if (!scales) return scales.error();
            layer.deviceScales = std::move(*scales);
            d.upload(layer.deviceScales.data(), layer.scales, scaleBytes);
        }
        sp.layers.push_back(std::move(layer));
    }
    if (o.source == BundleSource::Ssd) {
        for (const std::string& file : m_model.dataFiles()) {
            auto f = storage::DirectFile::open(file);
            if (!f) return f.error();
            sp.files.push_back(std::move(*f));
        }
        storage::DirectReaderOptions ro;
        ro.queueDepth = std::clamp(m_options.streamer.ioQueueDepth, 1, 1024);
        ro.chunkBytes = m_options.streamer.ioChunkBytes;
        auto reader = storage::DirectReader::create(ro);
        if (!reader) return reader.error();
        sp.reader = std::move(*reader);
        const size_t layerBytes = (b.stride * size_t(c.ffnDim) + kAlign - 1) / kAlign * kAlign;
        auto staging = d.allocateHost(std::min(kStagingBytes, layerBytes) + 2 * kAlign);
        if (!staging) return staging.error();
        sp.staging = std::move(*staging);
    }
    if (sp.onDevice) {
        const size_t cap = size_t(sp.maxCapacity);
        const size_t packBytes = cap * (sp.deviceStride + 2 * sizeof(int32_t));
        auto packHost = d.allocateHost(packBytes);
        if (!packHost) return packHost.error();
        sp.packHost = std::move(*packHost);
        auto packDevice = d.allocate(packBytes);
        if (!packDevice) return packDevice.error();
        sp.packDevice = std::move(*packDevice);
        auto rows = d.allocate(2 * cap * sizeof(float));
        if (!rows) return rows.error();
        sp.rowsOut = std::move(*rows);
        auto weights = d.allocate(cap * sizeof(float));
        if (!weights) return weights.error();
        sp.weights = std::move(*weights);
        auto share = d.allocate(size_t(c.dim) * sizeof(float));
        if (!share) return share.error();
        sp.hostShare = std::move(*share);
        sp.hostRows.resize(2 * cap);
        sp.hostWeights.resize(cap);
        sp.hostIn.resize(size_t(c.dim));
        sp.hostPre.resize(size_t(c.ffnDim));
        sp.spilledRows.resize(2 * size_t(c.ffnDim));
        sp.spilledAct.reserve(size_t(c.ffnDim));
        sp.spilled.reserve(size_t(c.ffnDim));
        sp.packAt.reserve(size_t(c.ffnDim));
        sp.hostCpu = gpu::createCpuDevice(std::max(1, std::min(4, gpu::cpu::onlineCores() - 2)));
    }
    sp.gateOut.resize(size_t(c.ffnDim));
    sp.jobs.reserve(size_t(c.ffnDim) * 2);
    sp.overflowAt.resize(size_t(c.ffnDim));
    sp.loads.reserve(size_t(c.ffnDim));
    sp.active.reserve(size_t(c.ffnDim));
    sp.h.reserve(size_t(c.ffnDim));
    d.synchronize();
    sp.y.resize(size_t(c.dim));
    m_sparse = std::move(sparse);
    return pinHotNeurons();
}

// Each layer's hot neurons to their slots for good, before the first token (PowerInfer): as many
// as the slots hold where the CPU computes the cold ones, else those active on at least
// hotFrequency of the calibration tokens, up to half the slots.
Status LlamaSession::pinHotNeurons()
{
    SparseFfn& sp = *m_sparse;
    const LlamaConfig& c = m_model.config();
    const NeuronCacheOptions& o = m_options.neuronCache;
    const bool predicted = sp.mode == NeuronCacheMode::Predicted;
    const std::vector<compress::FfnPredictor>& records = sp.predictors.empty() ? sp.records : sp.predictors;
    // Loaded before any token: not on the timeline, and not in the per-token figures.
    trace::Recorder* const recorder = std::exchange(m_options.streamer.trace, nullptr);
    const uint64_t ssdBytes = sp.ssdBytes, ssdRequests = sp.ssdRequests;
    Status status;
    for (int l = 0; l < c.nLayers && status; ++l) {
        SparseFfn::Layer& cl = sp.layers[size_t(l)];
        const bool measured = int(records.size()) == c.nLayers &&
                              !(predicted ? records[size_t(l)].predictedFrequency : records[size_t(l)].frequency).empty();
        if (cl.cold == ColdNeurons::Cpu && !measured) {
            status = makeError(ErrorCode::InvalidArgument,
                               m_model.path() + ": computing cold neurons on the CPU needs the activity frequencies "
                                                "that spillway-cli compress --predictors measures");
            break;
        }
        if (!measured) continue;
        const int capacity = cl.cache.capacity();
        const std::vector<uint32_t> hot =
            cl.cold == ColdNeurons::Cpu ? records[size_t(l)].hottest(capacity, predicted)
            : o.hotFrequency <= 1.0     ? records[size_t(l)].hottest(capacity / 2, predicted, o.hotFrequency)
                                        : std::vector<uint32_t>{};
        const auto loads = cl.cache.pin(hot);
        cl.cache.setAdmitsMisses(cl.cold != ColdNeurons::Cpu);
        sp.loads.assign(loads.begin(), loads.end());
        std::sort(sp.loads.begin(), sp.loads.end(), [](const NeuronLoad& a, const NeuronLoad& z) { return a.neuron < z.neuron; });
        sp.lookups = {};
        status = fetchBundles(l);
        if (status && sp.onDevice) sendArrivals(l);
        m_device.synchronize();  // the pack is written again for the next layer
    }
    sp.loads.clear();
    m_options.streamer.trace = recorder;
    sp.pinnedSsdBytes = sp.ssdBytes - ssdBytes;
    sp.ssdBytes = ssdBytes;
    sp.ssdRequests = ssdRequests;
    return status;
}

NeuronCacheReport LlamaSession::neuronCacheReport() const
{
    NeuronCacheReport r;
    if (!m_sparse) return r;
    r.bundleBytes = m_sparse->slice.bytes;
    r.ssdBytes = m_sparse->ssdBytes;
    r.ssdRequests = m_sparse->ssdRequests;
    r.earlyBytes = m_sparse->earlyBytes;
    r.pinnedSsdBytes = m_sparse->pinnedSsdBytes;
    for (const auto& l : m_sparse->layers) {
        r.capacities.push_back(l.cache.capacity());
        r.pinned.push_back(l.cache.pinned());
        r.cold.push_back(l.cold);
        const NeuronCacheStats& s = l.cache.stats();
        r.total.tokens += s.tokens;
        r.total.active += s.active;
        r.total.hits += s.hits;
        r.total.loaded += s.loaded;
        r.total.slotless += s.slotless;
    }
    return r;
}

// Brings the slices of `loads` (sorted by neuron) to their slots, or, for those without one, to
// the overflow area (at their index among the loads).
Status LlamaSession::fetchBundles(int layer)
{
    SparseFfn& sp = *m_sparse;
    // Reads startNeuronFetch put in flight for this layer (consumed here whatever happens).
    const SparseFfn::Early early = std::exchange(sp.early, {});
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    const size_t stride = sp.layout.stride, sliceBytes = sp.slice.bytes;
    uint8_t* slots = cl.slots.as<uint8_t>();
    size_t spilled = 0;
    for (const NeuronLoad& load : sp.loads) spilled += load.slot < 0;
    // Slotless neurons read from the SSD wait in the overflow area (those in RAM are read in place).
    if (spilled && sp.reader && sp.overflow.size() < sp.loads.size() * sliceBytes)
        sp.overflow.resize(sp.loads.size() * sliceBytes);  // grows only, and only when some find no slot
    // On a GPU a slot's bundle goes to its place in the pinned pack (sparseFfnOnDevice sends the
    // pack up in one upload).
    uint8_t* pack = sp.onDevice ? sp.packHost.as<uint8_t>() : nullptr;
    if (sp.onDevice) {
        sp.packAt.clear();
        int32_t next = 0;
        for (const NeuronLoad& load : sp.loads) sp.packAt.push_back(load.slot >= 0 ? next++ : -1);
    }
    auto destination = [&](size_t i) {
        const NeuronLoad& load = sp.loads[i];
        if (load.slot < 0) return sp.overflow.data() + i * sliceBytes;
        return pack ? pack + size_t(sp.packAt[i]) * sp.deviceStride : slots + size_t(load.slot) * sliceBytes;
    };
    auto put = [&](size_t i, const uint8_t* from) {
        if (pack || sp.loads[i].slot < 0) std::memcpy(destination(i), from, sliceBytes);  // host memory
        else m_device.upload(destination(i), from, sliceBytes);
    };
    trace::Recorder* rec = m_options.streamer.trace;
    if (!sp.reader) {
        // From RAM: each slot's bundle is copied; a slotless one is computed where it lies.
        const uint64_t t0 = rec ? trace::nowNs() : 0;
        const size_t copies = sp.loads.size() - spilled;
        for (size_t i = 0; i < sp.loads.size(); ++i)
            if (sp.loads[i].slot >= 0) put(i, cl.ram + size_t(sp.loads[i].neuron) * stride + sp.slice.offset);
        if (rec && copies && !pack)
            recordBundles(rec, sp.lookups, {trace::Lane::HostToDevice, layer, trace::kNeuronBundlesOp,
                                            copies * sliceBytes, t0, trace::nowNs(), m_pass - 1});
        return {};
    }
    // Merge neighbouring neurons into aligned runs (already done when the reads started early),
    // then read the runs in batches that fit the staging buffer and copy each neuron's slice out
    // of it.
    const bool started = early.layer == layer && early.ticket != 0;
    if (!started) planBundleRuns(layer);
    const storage::DirectFile& file = sp.files[cl.file];
    const uint8_t* staging = sp.staging.as<uint8_t>();
    for (size_t first = 0; first < sp.runs.size();) {
        size_t last = 0;
        storage::DirectReader::Ticket ticket = 0;
        uint64_t t0 = 0;
        if (started && first == 0) {
            last = early.last;
            ticket = early.ticket;
            t0 = early.startNs;
        } else {
            t0 = rec ? trace::nowNs() : 0;
            last = stageBundleBatch(first);
            ticket = sp.reader->enqueue(file, sp.requests);
        }
        SPILLWAY_TRY(sp.reader->wait(ticket));
        const size_t used = size_t(sp.runs[last - 1].stagingOffset + (sp.runs[last - 1].end - sp.runs[last - 1].begin));
        recordBundles(rec, sp.lookups, {trace::Lane::SsdRead, layer, trace::kNeuronBundlesOp, used, t0, trace::nowNs(), m_pass - 1});
        sp.ssdBytes += used;
        sp.ssdRequests += last - first;
        for (size_t r = first; r < last; ++r) {
            const SparseFfn::Run& run = sp.runs[r];
            for (size_t i = run.firstLoad; i <= run.lastLoad; ++i) {
                const uint64_t start = cl.fileOffset + uint64_t(sp.loads[i].neuron) * stride + sp.slice.offset;
                put(i, staging + run.stagingOffset + size_t(start - run.begin));
            }
        }
        first = last;
    }
    return {};
}

// On a GPU: the bundles fetchBundles packed for slots (sp.packAt) go up in one upload, with
// their slot (and scale-table row) indices, and are scattered to their slots.
void LlamaSession::sendArrivals(int layer)
{
    SparseFfn& sp = *m_sparse;
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    const FfnBundles& b = sp.layout;
    gpu::Device& d = m_device;
    trace::Recorder* rec = m_options.streamer.trace;
    size_t arrivals = 0;
    for (const NeuronLoad& load : sp.loads) arrivals += load.slot >= 0;
    if (!arrivals) return;
    uint8_t* pack = sp.packHost.as<uint8_t>();
    auto* slotIndex = reinterpret_cast<int32_t*>(pack + arrivals * sp.deviceStride);
    int32_t* groupIndex = slotIndex + arrivals;
    const bool groups = b.column.group > 0;
    for (size_t i = 0; i < sp.loads.size(); ++i) {
        if (sp.packAt[i] < 0) continue;
        slotIndex[sp.packAt[i]] = sp.loads[i].slot;
        if (groups) groupIndex[sp.packAt[i]] = int32_t(sp.loads[i].neuron / uint32_t(b.column.group));
    }
    const size_t bytes = arrivals * (sp.deviceStride + (groups ? 8 : 4));
    const uint64_t t0 = rec ? trace::nowNs() : 0;
    d.upload(sp.packDevice.data(), pack, bytes);
    recordBundles(rec, sp.lookups, {trace::Lane::HostToDevice, layer, trace::kNeuronBundlesOp, arrivals * sp.slice.bytes,
                                    t0, trace::nowNs(), m_pass - 1});
    const auto* deviceIndex = reinterpret_cast<const int32_t*>(sp.packDevice.as<uint8_t>() + arrivals * sp.deviceStride);
    d.scatterRows({cl.slots.data(), sp.deviceStride, sp.packDevice.data(), sp.deviceStride, sp.deviceStride,
                   deviceIndex, int(arrivals)});
    if (groups)
        d.scatterRows({cl.slotGroups.data(), sizeof(int32_t), deviceIndex + arrivals, sizeof(int32_t),
                       sizeof(int32_t), deviceIndex, int(arrivals)});
}

// Exact mode: the pre-activation that decides activity (the gate, or OPT's up plus its bias)
// through the ReLU, in full, where the host reads it: hb on a device with host pointers, else its
// copy in sp.hostPre.
const float* LlamaSession::activityOnHost(const LlamaLayerWeights& L, const float* in)
{
    const LlamaConfig& c = m_model.config();
    float* hb = m_hb.as<float>();
    const gpu::MatvecJob pre[] = {{c.ffnGated ? L.gate : L.up, in, hb}};
    matvec(pre);
    if (!c.ffnGated && L.upBias) m_device.add(hb, L.upBias, c.ffnDim);
    shiftedRelu(hb, c.ffnDim, c.ffnReluShift);
    if (!m_sparse->onDevice) {
        m_device.synchronize();
        return hb;
    }
    m_device.download(m_sparse->hostPre.data(), hb, size_t(c.ffnDim) * sizeof(float));
    return m_sparse->hostPre.data();
}

// The cache's answer to the layer's active set (sp.active): the bundles to load, in neuron order
// (neighbours merge into one read), and the lookups for the trace.
void LlamaSession::takeLoads(int layer)
{
    SparseFfn& sp = *m_sparse;
    const auto loads = sp.layers[size_t(layer)].cache.update(sp.active);
    sp.loads.assign(loads.begin(), loads.end());
    std::sort(sp.loads.begin(), sp.loads.end(), [](const NeuronLoad& a, const NeuronLoad& z) { return a.neuron < z.neuron; });
    sp.lookups = {uint32_t(sp.active.size()), uint32_t(sp.active.size() - sp.loads.size()), true};
}

// The loads' bundles in the package as aligned runs, neighbours merged (sp.runs).
void LlamaSession::planBundleRuns(int layer)
{
    SparseFfn& sp = *m_sparse;
    const SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    const size_t stride = sp.layout.stride, sliceBytes = sp.slice.bytes;
    sp.runs.clear();
    for (size_t i = 0; i < sp.loads.size(); ++i) {
        const uint64_t start = cl.fileOffset + uint64_t(sp.loads[i].neuron) * stride + sp.slice.offset;
        const uint64_t begin = start / kAlign * kAlign;
        const uint64_t end = (start + sliceBytes + kAlign - 1) / kAlign * kAlign;
        if (!sp.runs.empty() && begin <= sp.runs.back().end + sp.mergeGap &&
            end - sp.runs.back().begin <= sp.staging.bytes() - 2 * kAlign) {
            sp.runs.back().end = std::max(sp.runs.back().end, end);
            sp.runs.back().lastLoad = i;
        } else {
            sp.runs.push_back({begin, end, i, i, 0});
        }
    }
}

// The runs from `first` on that fit the staging buffer, placed in it (sp.requests); returns the
// end of the batch.
size_t LlamaSession::stageBundleBatch(size_t first)
{
    SparseFfn& sp = *m_sparse;
    uint8_t* staging = sp.staging.as<uint8_t>();
    const size_t capacity = sp.staging.bytes();
    sp.requests.clear();
    size_t used = 0, last = first;
    for (; last < sp.runs.size(); ++last) {
        SparseFfn::Run& run = sp.runs[last];
        const size_t bytes = size_t(run.end - run.begin);
        if (used + bytes > capacity) break;
        run.stagingOffset = used;
        sp.requests.push_back({run.begin, bytes, staging + used});
        used += bytes;
    }
    return last;
}

// Predictors that read the attention's input (PredictorInput::Attention): the layer's active set
// is predicted before attention runs, and the reads of its missing bundles (the first staging
// batch) are in flight while it does; sparseFfnBlock then only waits for them.
Status LlamaSession::startNeuronFetch(int layer, const float* attentionIn)
{
    SparseFfn& sp = *m_sparse;
    if (sp.mode != NeuronCacheMode::Predicted || sp.predictors.empty() ||
        sp.predictors[size_t(layer)].input != compress::PredictorInput::Attention)
        return {};
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    if (sp.early.ticket != 0) (void)sp.reader->wait(sp.early.ticket);  // never left unwaited
    const float* x = attentionIn;
    if (sp.onDevice) {
        m_device.download(sp.hostIn.data(), attentionIn, size_t(m_model.config().dim) * sizeof(float));
        x = sp.hostIn.data();
    } else {
        m_device.synchronize();
    }
    sp.predictors[size_t(layer)].predict(x, sp.active, sp.predictorScratch);
    takeLoads(layer);
    sp.early = {};
    sp.early.layer = layer;
    if (!sp.reader) return {};
    planBundleRuns(layer);
    if (sp.runs.empty()) return {};
    sp.early.startNs = m_options.streamer.trace ? trace::nowNs() : 0;
    sp.early.last = stageBundleBatch(0);
    sp.early.ticket = sp.reader->enqueue(sp.files[cl.file], sp.requests);
    for (size_t r = 0; r < sp.early.last; ++r) sp.earlyBytes += sp.runs[r].end - sp.runs[r].begin;
    return {};
}

Status LlamaSession::sparseFfnBlock(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    // x += down · act, act = relu(gate·n - shift) ⊙ up·n (gated) or relu(up·n + b - shift) (OPT),
    // over the active neurons only. `in` is the FFN input (normed).
    if (m_sparse->onDevice) return sparseFfnOnDevice(L, layer, in, x);
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    SparseFfn& sp = *m_sparse;
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    const FfnBundles& b = sp.layout;
    float* hb = m_hb.as<float>();
    float* hb2 = m_hb2.as<float>();
    const size_t dim = size_t(c.dim);
    const bool predicted = sp.mode == NeuronCacheMode::Predicted;

    // 1. The active set: the true one from the full pre-activation through the ReLU (exact), or
    //    the predictor's guess (predicted).
    const bool known = sp.early.layer == layer;  // startNeuronFetch predicted it already
    if (!known) sp.active.clear();
    d.synchronize();  // `in` is read on the host (predictor), and hb below
    if (known) {
        // the active set and the loads are known: nothing to predict
    } else if (!predicted) {
        const float* pre = activityOnHost(L, in);  // hb
        for (int j = 0; j < c.ffnDim; ++j)
            if (pre[j] > 0.0f) sp.active.push_back(uint32_t(j));
    } else {
        sp.predictors[size_t(layer)].predict(in, sp.active, sp.predictorScratch);
    }

    // 2. Only the difference moves: the bundles of active neurons the cache lacks, read in
    //    neuron order (neighbours merge into one read).
    if (!known) {
        takeLoads(layer);
    }
    SPILLWAY_TRY(fetchBundles(layer));
    flushLookups(m_options.streamer.trace, sp.lookups, sp.reader ? trace::Lane::SsdRead : trace::Lane::HostToDevice,
                 layer, m_pass - 1);
    // Where each active neuron's slice is: its slot, or (slotless) RAM or the overflow area.
    for (size_t i = 0; i < sp.loads.size(); ++i)
        if (sp.loads[i].slot < 0) sp.overflowAt[sp.loads[i].neuron] = int32_t(i);
    d.synchronize();

    // 3. The active neurons' rows, with the dense kernel's row arithmetic (so each value is the
    //    dense path's): the up rows (gated), and in predicted mode the gate rows (or OPT's up
    //    rows) too.
    const uint8_t* slots = cl.slots.as<uint8_t>();
    auto rowsView = [&](const uint8_t* base, int64_t rows, size_t partOffset) {
        gpu::MatrixView v;
        v.type = b.rowType;
        v.data = base + partOffset - sp.slice.offset;
        v.rows = rows;
        v.cols = c.dim;
        v.rowStride = sp.slice.bytes;
        return v;
    };
    const bool hasUpRows = c.ffnGated || predicted;  // exact OPT: the cache holds down columns only
    const bool hasGateRows = predicted && c.ffnGated;
    const size_t upPart = c.ffnGated ? b.upOffset() : 0;
    auto sliceOfActive = [&](uint32_t j) {
        const int32_t slot = cl.cache.slotOf(j);
        return slot >= 0 ? slots + size_t(slot) * sp.slice.bytes : sp.slotlessSlice(cl, j);
    };
    // The rows of the active neurons only (one-row jobs in one dispatch), wherever they are.
    float* upOut = hb2;
    float* gateOut = sp.gateOut.data();
    if (hasUpRows && !sp.active.empty()) {
        sp.jobs.clear();
        for (size_t i = 0; i < sp.active.size(); ++i) {
            const uint8_t* at = sliceOfActive(sp.active[i]);
            sp.jobs.push_back({rowsView(at, 1, upPart), in, upOut + i});
            if (hasGateRows) sp.jobs.push_back({rowsView(at, 1, 0), in, gateOut + i});
        }
        d.matvec(sp.jobs);
        d.synchronize();  // read on the host below
    }
    sp.h.resize(sp.active.size());
    for (size_t i = 0; i < sp.active.size(); ++i) {
        const uint32_t j = sp.active[i];
        const float u = hasUpRows ? upOut[i] : 0.0f;
        float act;
        if (!predicted) {
            act = c.ffnGated ? hb[j] * u : hb[j];
        } else if (c.ffnGated) {
            act = std::max(0.0f, gateOut[i] - c.ffnReluShift) * u;
        } else {
            act = std::max(0.0f, u + (L.upBias ? L.upBias[j] : 0.0f) - c.ffnReluShift);
        }
        sp.h[i] = act;
    }

    // 4. down · act over the active neurons, in neuron order.
    std::fill(sp.y.begin(), sp.y.end(), 0.0f);
    const size_t downPart = b.downOffset() - sp.slice.offset;
    static const AxpyColumn axpyColumn = pickAxpyColumn();
    if (b.column.group == 64) {
        // Q8_G64 (the thesis' ReLU models): the dense kernel's own arithmetic, so the result is
        // the dense path's bit for bit. The activations are quantized in groups of 64 over the
        // whole layer (inactive neurons are zeros there too), and per group g, in order,
        // y[r] += (float(sum of q_w q_h over its active neurons) * s_w[g][r]) * s_h[g]; a group
        // without active neurons adds nothing (its sum is 0).
        float* full = hb2;  // (ffnDim): the activations with zeros, then reused below
        std::fill(full, full + c.ffnDim, 0.0f);
        for (size_t i = 0; i < sp.active.size(); ++i) full[sp.active[i]] = sp.h[i];
        const size_t groups = size_t(c.ffnDim) / 64;
        sp.hq.resize(size_t(c.ffnDim));
        sp.hs.resize(groups);
        gpu::cpu::quantizeG64(full, c.ffnDim, sp.hq.data(), sp.hs.data());
        sp.dots.resize(dim);
        for (size_t i = 0, g = 0; g < groups; ++g) {
            if (i == sp.active.size() || sp.active[i] / 64 != g) continue;
            std::fill(sp.dots.begin(), sp.dots.end(), 0);
            for (; i < sp.active.size() && sp.active[i] / 64 == g; ++i) {
                const uint32_t j = sp.active[i];
                const int32_t qh = sp.hq[j];
                if (qh == 0) continue;
                const auto* qw = reinterpret_cast<const int8_t*>(sliceOfActive(j) + downPart);
                for (size_t r = 0; r < dim; ++r) sp.dots[r] += int32_t(qw[r]) * qh;
            }
            const float* sw = cl.scales + g * dim;
            const float sh = sp.hs[g];
            for (size_t r = 0; r < dim; ++r) {
                const float scaled = float(sp.dots[r]) * sw[r];  // separate statements: no fused
                const float term = scaled * sh;                  // multiply-add, as the kernel
                sp.y[r] += term;
            }
        }
    } else {
        for (size_t i = 0; i < sp.active.size(); ++i) {
            if (sp.h[i] == 0.0f) continue;
            const uint32_t j = sp.active[i];
            const uint8_t* s = sliceOfActive(j);
            if (b.column.group > 0)
                axpyInt8Column(sp.h[i], reinterpret_cast<const int8_t*>(s + downPart),
                               cl.scales + size_t(j) / size_t(b.column.group) * dim, dim, sp.y.data());
            else
                axpyColumn(sp.h[i], s + downPart, b.column.type, dim, sp.y.data());
        }
    }
    float* xb = m_xb.as<float>();
    std::memcpy(xb, sp.y.data(), dim * sizeof(float));
    if (L.downBias) d.add(xb, L.downBias, c.dim);
    d.add(x, xb, c.dim);
    return {};
}

// The same on a device that cannot compute on host memory (a GPU): see SparseFfn::onDevice.
Status LlamaSession::sparseFfnOnDevice(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    SparseFfn& sp = *m_sparse;
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    const FfnBundles& b = sp.layout;
    const bool predicted = sp.mode == NeuronCacheMode::Predicted;
    const size_t dim = size_t(c.dim);
    trace::Recorder* rec = m_options.streamer.trace;

    // 1. The active set, on the host. Each layer starts with a download, which waits for every op
    //    issued before it: the pack, weights and share buffers are free to be written again.
    const bool known = sp.early.layer == layer;  // startNeuronFetch predicted it already
    if (!known) sp.active.clear();
    bool haveIn = false;
    if (known) {
        // the active set and the loads are known: nothing to predict
    } else if (!predicted) {
        const float* pre = activityOnHost(L, in);  // sp.hostPre
        for (int j = 0; j < c.ffnDim; ++j)
            if (pre[j] > 0.0f) sp.active.push_back(uint32_t(j));
    } else {
        d.download(sp.hostIn.data(), in, dim * sizeof(float));
        haveIn = true;
        sp.predictors[size_t(layer)].predict(sp.hostIn.data(), sp.active, sp.predictorScratch);
    }

    // 2. The difference: bundles packed in pinned memory (the slotless ones stay in RAM, or in
    //    the overflow area when read from the SSD, for the CPU), one upload, then each to its slot.
    if (!known) {
        takeLoads(layer);
    }
    SPILLWAY_TRY(fetchBundles(layer));
    for (size_t i = 0; i < sp.loads.size(); ++i)
        if (sp.loads[i].slot < 0) sp.overflowAt[sp.loads[i].neuron] = int32_t(i);
    sendArrivals(layer);

    flushLookups(rec, sp.lookups, sp.reader ? trace::Lane::SsdRead : trace::Lane::HostToDevice,
                 layer, m_pass - 1);

    // 3. The rows, over every resident slot on the device and over the slotless neurons on the
    //    CPU: up rows (gated), and in predicted mode the gate rows (or OPT's up rows) too.
    const int resident = cl.cache.resident();
    const bool hasUpRows = c.ffnGated || predicted;
    const bool hasGateRows = predicted && c.ffnGated;
    const size_t upPart = (c.ffnGated ? b.upOffset() : 0) - sp.slice.offset;
    const size_t capacity = size_t(sp.maxCapacity);
    auto rowsAt = [&](const uint8_t* base, int64_t rows, size_t part, size_t stride) {
        gpu::MatrixView v;
        v.type = b.rowType;
        v.data = base + part;
        v.rows = rows;
        v.cols = c.dim;
        v.rowStride = stride;
        return v;
    };
    float* rowsOut = sp.rowsOut.as<float>();
    if (hasUpRows && resident > 0) {
        const uint8_t* slots = cl.slots.as<uint8_t>();
        gpu::MatvecJob jobs[2];
        size_t n = 0;
        jobs[n++] = {rowsAt(slots, resident, upPart, sp.deviceStride), in, rowsOut};
        if (hasGateRows) jobs[n++] = {rowsAt(slots, resident, 0, sp.deviceStride), in, rowsOut + capacity};
        d.matvec({jobs, n});
    }
    sp.spilled.clear();
    for (uint32_t j : sp.active)
        if (cl.cache.slotOf(j) < 0) sp.spilled.push_back(j);
    if (hasUpRows && !sp.spilled.empty()) {
        if (!haveIn) d.download(sp.hostIn.data(), in, dim * sizeof(float));
        haveIn = true;
        sp.jobs.clear();
        for (size_t i = 0; i < sp.spilled.size(); ++i) {
            const uint8_t* at = sp.slotlessSlice(cl, sp.spilled[i]);
            sp.jobs.push_back({rowsAt(at, 1, upPart, sp.slice.bytes), sp.hostIn.data(), sp.spilledRows.data() + i});
            if (hasGateRows)
                sp.jobs.push_back({rowsAt(at, 1, 0, sp.slice.bytes), sp.hostIn.data(),
                                   sp.spilledRows.data() + c.ffnDim + i});
        }
        sp.hostCpu->matvec(sp.jobs);
    }
    if (hasUpRows && resident > 0) {
        d.download(sp.hostRows.data(), rowsOut, size_t(resident) * sizeof(float));
        if (hasGateRows)
            d.download(sp.hostRows.data() + capacity, rowsOut + capacity, size_t(resident) * sizeof(float));
    }

    // 4. Activations: per slot (0 for the resident neurons not active now) and per slotless
    //    neuron. For Q8_G64 down matrices they are quantized as the dense kernel quantizes its
    //    input (groups of 64 over the whole layer), so both compute the same sum up to rounding.
    std::fill(sp.hostWeights.begin(), sp.hostWeights.begin() + resident, 0.0f);
    sp.spilledAct.clear();
    float* full = sp.gateOut.data();  // (ffnDim) scratch: the activations with zeros (Q8_G64)
    const bool quantized = b.column.group == 64;
    if (quantized) std::fill(full, full + c.ffnDim, 0.0f);
    for (size_t i = 0, s = 0; i < sp.active.size(); ++i) {
        const uint32_t j = sp.active[i];
        const int32_t slot = cl.cache.slotOf(j);
        const bool spilledHere = slot < 0;
        const float u = !hasUpRows ? 0.0f : spilledHere ? sp.spilledRows[s] : sp.hostRows[size_t(slot)];
        const float g = !hasGateRows ? 0.0f
                        : spilledHere ? sp.spilledRows[size_t(c.ffnDim) + s]
                                      : sp.hostRows[capacity + size_t(slot)];
        float act;
        if (!predicted) act = c.ffnGated ? sp.hostPre[j] * u : sp.hostPre[j];
        else if (c.ffnGated) act = std::max(0.0f, g - c.ffnReluShift) * u;
        else act = std::max(0.0f, u + (cl.upBias.empty() ? 0.0f : cl.upBias[j]) - c.ffnReluShift);
        if (quantized) full[j] = act;
        if (spilledHere) {
            sp.spilledAct.push_back(act);
            ++s;
        } else {
            sp.hostWeights[size_t(slot)] = act;
        }
    }
    if (quantized) {
        const size_t groups = size_t(c.ffnDim) / 64;
        sp.hq.resize(size_t(c.ffnDim));
        sp.hs.resize(groups);
        gpu::cpu::quantizeG64(full, c.ffnDim, sp.hq.data(), sp.hs.data());
        for (size_t i = 0, s = 0; i < sp.active.size(); ++i) {
            const uint32_t j = sp.active[i];
            const float v = float(sp.hq[j]) * sp.hs[j / 64];
            const int32_t slot = cl.cache.slotOf(j);
            if (slot < 0) sp.spilledAct[s++] = v;
            else sp.hostWeights[size_t(slot)] = v;
        }
    }

    // 5. down . act: the slots' columns on the device, the slotless ones' on the CPU, summed.
    float* xb = m_xb.as<float>();
    if (resident > 0) d.upload(sp.weights.data(), sp.hostWeights.data(), size_t(resident) * sizeof(float));
    gpu::RowSumArgs down;
    const size_t downPart = b.downOffset() - sp.slice.offset;
    down.w.type = b.column.group > 0 ? gpu::DType::F32 : b.column.type;
    down.w.data = cl.slots.as<uint8_t>() + downPart;
    down.w.rows = resident;
    down.w.cols = c.dim;
    down.w.rowStride = sp.deviceStride;
    down.a = sp.weights.as<float>();
    down.y = xb;
    if (b.column.group > 0) {
        down.scales = cl.deviceScales.as<float>();
        down.group = cl.slotGroups.as<int32_t>();
    }
    d.rowSum(down);
    if (!sp.spilled.empty()) {
        static const AxpyColumn axpyColumn = pickAxpyColumn();
        std::fill(sp.y.begin(), sp.y.end(), 0.0f);
        for (size_t i = 0; i < sp.spilled.size(); ++i) {
            if (sp.spilledAct[i] == 0.0f) continue;
            const uint32_t j = sp.spilled[i];
            const uint8_t* column = sp.slotlessSlice(cl, j) + downPart;
            if (b.column.group > 0)
                axpyInt8Column(sp.spilledAct[i], reinterpret_cast<const int8_t*>(column),
                               cl.scales + size_t(j) / size_t(b.column.group) * dim, dim, sp.y.data());
            else
                axpyColumn(sp.spilledAct[i], column, b.column.type, dim, sp.y.data());
        }
        d.upload(sp.hostShare.data(), sp.y.data(), dim * sizeof(float));
        d.add(xb, sp.hostShare.as<float>(), c.dim);
    }
    if (L.downBias) d.add(xb, L.downBias, c.dim);
    d.add(x, xb, c.dim);
    return {};
}

}  // namespace spillway
