// The activation-sparse FFN (sparse_ffn.h): per layer a neuron cache whose slots hold bundles (the
// part of each neuron's gate row, up row and down column that the mode needs), filled with the
// difference each token from RAM or from the SSD; the FFN is computed over the token's active
// neurons only.

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
#include "core/runtime/layer_step.h"
#include "core/runtime/row_split.h"
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

constexpr size_t kStagingBytes = size_t{32} << 20;  // SSD reads are staged in batches of this

}  // namespace

SparseFfn::SparseFfn(const LlamaModel& model, gpu::Device& device, const NeuronCacheOptions& options,
                     const Shared& shared)
    : m_model(model), m_device(device), m_options(options), m_shared(shared)
{
}

SparseFfn::~SparseFfn()
{
    if (m_early.ticket != 0) (void)m_reader->wait(m_early.ticket);  // reads never outlive their buffers
}

Result<std::unique_ptr<SparseFfn>> SparseFfn::create(const LlamaModel& model, gpu::Device& device,
                                                     const NeuronCacheOptions& options, const Shared& shared)
{
    auto sparse = std::unique_ptr<SparseFfn>(new SparseFfn(model, device, options, shared));
    SPILLWAY_TRY(sparse->build());
    SPILLWAY_TRY(sparse->pinHotNeurons());
    return sparse;
}

void SparseFfn::recordBundles(trace::Span span)
{
    trace::Recorder* rec = m_shared.trace;
    if (!rec) return;
    if (m_lookups.pending) {
        span.lookups = m_lookups.lookups;
        span.hits = m_lookups.hits;
        m_lookups.pending = false;
    }
    rec->record(span);
}

// After a layer's transfers: the lookups, if no transfer took them (every neuron was resident).
void SparseFfn::flushLookups(int layer)
{
    if (!m_shared.trace || !m_lookups.pending) return;
    const uint64_t now = trace::nowNs();
    recordBundles({m_reader ? trace::Lane::SsdRead : trace::Lane::HostToDevice, layer, trace::kNeuronBundlesOp, 0,
                   now, now, m_pass});
}

const uint8_t* SparseFfn::slotlessSlice(const Layer& cl, uint32_t j) const
{
    if (!m_reader) return cl.ram + size_t(j) * m_layout.stride + m_slice.offset;
    return m_overflow.data() + size_t(m_overflowAt[j]) * m_slice.bytes;
}

Status SparseFfn::build()
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    const NeuronCacheOptions& o = m_options;
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
    m_mode = o.mode;
    if (o.mode == NeuronCacheMode::Predicted) {
        auto predictors = compress::loadFfnPredictors(m_model);
        if (!predictors) return predictors.error();
        if (predictors->empty())
            return makeError(ErrorCode::InvalidArgument,
                             path + ": the predicted neuron-cache mode needs a package with activation predictors "
                                    "(spillway-cli compress --predictors RANK)");
        m_predictors = std::move(*predictors);
        int scratch = 0;  // predict()'s features and logits
        for (const auto& p : m_predictors) scratch = std::max(scratch, p.rank + p.neurons);
        m_predictorScratch.resize(size_t(scratch));
    }
    if (stored.empty()) {
        auto layout = compress::ffnBundleLayout(m_model);
        if (!layout) return layout.error();
        m_layout = *layout;
    } else {
        m_layout = stored.front();
    }
    const FfnBundles& b = m_layout;
    m_slice = sliceOf(b, o.mode);
    if (m_predictors.empty())  // exact mode: the predictors' records only
        if (auto records = compress::loadFfnPredictors(m_model, /*recordsOnly=*/true)) m_records = std::move(*records);
    const std::vector<int> capacities =
        layerCapacities(c, o, m_slice.bytes, m_predictors.empty() ? m_records : m_predictors);
    m_mergeGap = o.mergeGapBytes;
    m_onDevice = !d.info().caps.hostPointers;
    const bool predicted = o.mode == NeuronCacheMode::Predicted;
    const bool rowsOnDevice = predicted || c.ffnGated;
    if (m_onDevice && rowsOnDevice && !d.supports(b.rowType))
        return makeError(ErrorCode::BackendUnavailable,
                         path + ": the neuron cache's rows are " + gpu::dtypeName(b.rowType) + ", which the " +
                             d.info().backend + " device cannot compute");
    m_deviceStride = m_onDevice ? (m_slice.bytes + 15) / 16 * 16 : m_slice.bytes;
    for (int capacity : capacities) m_maxCapacity = std::max(m_maxCapacity, std::max(1, capacity));

    for (int l = 0; l < c.nLayers; ++l) {
        const int layerCapacity = std::max(1, capacities[size_t(l)]);
        Layer layer{NeuronCache(c.ffnDim, layerCapacity, o.policy, o.window), {}, nullptr, nullptr, {}, {}, 0, 0, {}, {}, {},
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
        if (m_onDevice && predicted && !c.ffnGated && bias) {
            if (bias->type != gpu::DType::F32 || bias->bytes < size_t(c.ffnDim) * sizeof(float))
                return makeError(ErrorCode::ModelFileInvalid, path + ": blk." + std::to_string(l) +
                                                                  ".ffn_up.bias is not ffnDim floats");
            const auto* v = reinterpret_cast<const float*>(bias->data);
            layer.upBias.assign(v, v + c.ffnDim);
        }
        auto slots = d.allocate(std::max<size_t>(size_t(layerCapacity) * m_deviceStride, 64));
        if (!slots) return slots.error();
        layer.slotData = std::move(*slots);
        if (m_onDevice && b.column.group > 0) {
            auto groups = d.allocate(size_t(layerCapacity) * sizeof(int32_t));
            if (!groups) return groups.error();
            layer.slotGroups = std::move(*groups);
            const size_t scaleBytes = compress::ffnBundleScaleCount(b) * sizeof(float);
            auto scales = d.allocate(std::max<size_t>(scaleBytes, 64));
            if (!scales) return scales.error();
            layer.deviceScales = std::move(*scales);
            d.upload(layer.deviceScales.data(), layer.scales, scaleBytes);
        }
        m_layers.push_back(std::move(layer));
    }
    if (o.source == BundleSource::Ssd) {
        for (const std::string& file : m_model.dataFiles()) {
            auto f = storage::DirectFile::open(file);
            if (!f) return f.error();
            m_files.push_back(std::move(*f));
        }
        storage::DirectReaderOptions ro;
        ro.queueDepth = std::clamp(m_shared.ioQueueDepth, 1, 1024);
        ro.chunkBytes = m_shared.ioChunkBytes;
        auto reader = storage::DirectReader::create(ro);
        if (!reader) return reader.error();
        m_reader = std::move(*reader);
        const size_t layerBytes = (b.stride * size_t(c.ffnDim) + kAlign - 1) / kAlign * kAlign;
        auto staging = d.allocateHost(std::min(kStagingBytes, layerBytes) + 2 * kAlign);
        if (!staging) return staging.error();
        m_staging = std::move(*staging);
    }
    if (m_onDevice) {
        const size_t cap = size_t(m_maxCapacity);
        const size_t packBytes = cap * (m_deviceStride + 2 * sizeof(int32_t));
        auto packHost = d.allocateHost(packBytes);
        if (!packHost) return packHost.error();
        m_packHost = std::move(*packHost);
        auto packDevice = d.allocate(packBytes);
        if (!packDevice) return packDevice.error();
        m_packDevice = std::move(*packDevice);
        auto rows = d.allocate(2 * cap * sizeof(float));
        if (!rows) return rows.error();
        m_rowsOut = std::move(*rows);
        auto weights = d.allocate(cap * sizeof(float));
        if (!weights) return weights.error();
        m_weights = std::move(*weights);
        auto share = d.allocate(size_t(c.dim) * sizeof(float));
        if (!share) return share.error();
        m_hostShare = std::move(*share);
        m_hostRows.resize(2 * cap);
        m_hostWeights.resize(cap);
        m_hostIn.resize(size_t(c.dim));
        m_hostPre.resize(size_t(c.ffnDim));
        m_spilledRows.resize(2 * size_t(c.ffnDim));
        m_spilledAct.reserve(size_t(c.ffnDim));
        m_spilled.reserve(size_t(c.ffnDim));
        m_packAt.reserve(size_t(c.ffnDim));
        m_hostCpu = gpu::createCpuDevice(std::max(1, std::min(4, gpu::cpu::onlineCores() - 2)));
    }
    m_gateOut.resize(size_t(c.ffnDim));
    m_jobs.reserve(size_t(c.ffnDim) * 2);
    m_overflowAt.resize(size_t(c.ffnDim));
    m_loads.reserve(size_t(c.ffnDim));
    m_active.reserve(size_t(c.ffnDim));
    m_h.reserve(size_t(c.ffnDim));
    d.synchronize();
    m_y.resize(size_t(c.dim));
    return {};
}

// Each layer's hot neurons to their slots for good, before the first token (PowerInfer): as many
// as the slots hold where the CPU computes the cold ones, else those active on at least
// hotFrequency of the calibration tokens, up to half the slots.
Status SparseFfn::pinHotNeurons()
{
    const LlamaConfig& c = m_model.config();
    const NeuronCacheOptions& o = m_options;
    const bool predicted = m_mode == NeuronCacheMode::Predicted;
    const std::vector<compress::FfnPredictor>& records = m_predictors.empty() ? m_records : m_predictors;
    // Loaded before any token: not on the timeline, and not in the per-token figures.
    trace::Recorder* const recorder = std::exchange(m_shared.trace, nullptr);
    const uint64_t ssdBytes = m_ssdBytes, ssdRequests = m_ssdRequests;
    Status status;
    for (int l = 0; l < c.nLayers && status; ++l) {
        Layer& cl = m_layers[size_t(l)];
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
        m_loads.assign(loads.begin(), loads.end());
        std::sort(m_loads.begin(), m_loads.end(), [](const NeuronLoad& a, const NeuronLoad& z) { return a.neuron < z.neuron; });
        m_lookups = {};
        status = fetchBundles(l);
        if (status && m_onDevice) sendArrivals(l);
        m_device.synchronize();  // the pack is written again for the next layer
    }
    m_loads.clear();
    m_shared.trace = recorder;
    m_pinnedSsdBytes = m_ssdBytes - ssdBytes;
    m_ssdBytes = ssdBytes;
    m_ssdRequests = ssdRequests;
    return status;
}

NeuronCacheReport SparseFfn::report() const
{
    NeuronCacheReport r;
    r.bundleBytes = m_slice.bytes;
    r.ssdBytes = m_ssdBytes;
    r.ssdRequests = m_ssdRequests;
    r.earlyBytes = m_earlyBytes;
    r.pinnedSsdBytes = m_pinnedSsdBytes;
    for (const auto& l : m_layers) {
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
Status SparseFfn::fetchBundles(int layer)
{
    // Reads startFetch put in flight for this layer (consumed here whatever happens).
    const Early early = std::exchange(m_early, {});
    Layer& cl = m_layers[size_t(layer)];
    const size_t stride = m_layout.stride, sliceBytes = m_slice.bytes;
    uint8_t* slots = cl.slotData.as<uint8_t>();
    size_t spilled = 0;
    for (const NeuronLoad& load : m_loads) spilled += load.slot < 0;
    // Slotless neurons read from the SSD wait in the overflow area (those in RAM are read in place).
    if (spilled && m_reader && m_overflow.size() < m_loads.size() * sliceBytes)
        m_overflow.resize(m_loads.size() * sliceBytes);  // grows only, and only when some find no slot
    // On a GPU a slot's bundle goes to its place in the pinned pack (runOnDevice sends the
    // pack up in one upload).
    uint8_t* pack = m_onDevice ? m_packHost.as<uint8_t>() : nullptr;
    if (m_onDevice) {
        m_packAt.clear();
        int32_t next = 0;
        for (const NeuronLoad& load : m_loads) m_packAt.push_back(load.slot >= 0 ? next++ : -1);
    }
    auto destination = [&](size_t i) {
        const NeuronLoad& load = m_loads[i];
        if (load.slot < 0) return m_overflow.data() + i * sliceBytes;
        return pack ? pack + size_t(m_packAt[i]) * m_deviceStride : slots + size_t(load.slot) * sliceBytes;
    };
    auto put = [&](size_t i, const uint8_t* from) {
        if (pack || m_loads[i].slot < 0) std::memcpy(destination(i), from, sliceBytes);  // host memory
        else m_device.upload(destination(i), from, sliceBytes);
    };
    trace::Recorder* rec = m_shared.trace;
    if (!m_reader) {
        // From RAM: each slot's bundle is copied; a slotless one is computed where it lies.
        const uint64_t t0 = rec ? trace::nowNs() : 0;
        const size_t copies = m_loads.size() - spilled;
        for (size_t i = 0; i < m_loads.size(); ++i)
            if (m_loads[i].slot >= 0) put(i, cl.ram + size_t(m_loads[i].neuron) * stride + m_slice.offset);
        if (rec && copies && !pack)
            recordBundles({trace::Lane::HostToDevice, layer, trace::kNeuronBundlesOp,
                                            copies * sliceBytes, t0, trace::nowNs(), m_pass});
        return {};
    }
    // Merge neighbouring neurons into aligned runs (already done when the reads started early),
    // then read the runs in batches that fit the staging buffer and copy each neuron's slice out
    // of it.
    const bool started = early.layer == layer && early.ticket != 0;
    if (!started) planBundleRuns(layer);
    const storage::DirectFile& file = m_files[cl.file];
    const uint8_t* staging = m_staging.as<uint8_t>();
    for (size_t first = 0; first < m_runs.size();) {
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
            ticket = m_reader->enqueue(file, m_requests);
        }
        SPILLWAY_TRY(m_reader->wait(ticket));
        const size_t used = size_t(m_runs[last - 1].stagingOffset + (m_runs[last - 1].end - m_runs[last - 1].begin));
        recordBundles({trace::Lane::SsdRead, layer, trace::kNeuronBundlesOp, used, t0, trace::nowNs(), m_pass});
        m_ssdBytes += used;
        m_ssdRequests += last - first;
        for (size_t r = first; r < last; ++r) {
            const Run& run = m_runs[r];
            for (size_t i = run.firstLoad; i <= run.lastLoad; ++i) {
                const uint64_t start = cl.fileOffset + uint64_t(m_loads[i].neuron) * stride + m_slice.offset;
                put(i, staging + run.stagingOffset + size_t(start - run.begin));
            }
        }
        first = last;
    }
    return {};
}

// On a GPU: the bundles fetchBundles packed for slots (m_packAt) go up in one upload, with
// their slot (and scale-table row) indices, and are scattered to their slots.
void SparseFfn::sendArrivals(int layer)
{
    Layer& cl = m_layers[size_t(layer)];
    const FfnBundles& b = m_layout;
    gpu::Device& d = m_device;
    trace::Recorder* rec = m_shared.trace;
    size_t arrivals = 0;
    for (const NeuronLoad& load : m_loads) arrivals += load.slot >= 0;
    if (!arrivals) return;
    uint8_t* pack = m_packHost.as<uint8_t>();
    auto* slotIndex = reinterpret_cast<int32_t*>(pack + arrivals * m_deviceStride);
    int32_t* groupIndex = slotIndex + arrivals;
    const bool groups = b.column.group > 0;
    for (size_t i = 0; i < m_loads.size(); ++i) {
        if (m_packAt[i] < 0) continue;
        slotIndex[m_packAt[i]] = m_loads[i].slot;
        if (groups) groupIndex[m_packAt[i]] = int32_t(m_loads[i].neuron / uint32_t(b.column.group));
    }
    const size_t bytes = arrivals * (m_deviceStride + (groups ? 8 : 4));
    const uint64_t t0 = rec ? trace::nowNs() : 0;
    d.upload(m_packDevice.data(), pack, bytes);
    recordBundles({trace::Lane::HostToDevice, layer, trace::kNeuronBundlesOp, arrivals * m_slice.bytes,
                                    t0, trace::nowNs(), m_pass});
    const auto* deviceIndex = reinterpret_cast<const int32_t*>(m_packDevice.as<uint8_t>() + arrivals * m_deviceStride);
    d.scatterRows({cl.slotData.data(), m_deviceStride, m_packDevice.data(), m_deviceStride, m_deviceStride,
                   deviceIndex, int(arrivals)});
    if (groups)
        d.scatterRows({cl.slotGroups.data(), sizeof(int32_t), deviceIndex + arrivals, sizeof(int32_t),
                       sizeof(int32_t), deviceIndex, int(arrivals)});
}

// Exact mode: the pre-activation that decides activity (the gate, or OPT's up plus its bias)
// through the ReLU, in full, where the host reads it: hb on a device with host pointers, else its
// copy in m_hostPre.
const float* SparseFfn::activityOnHost(const LlamaLayerWeights& L, const float* in)
{
    const LlamaConfig& c = m_model.config();
    float* hb = m_shared.hb;
    const gpu::MatvecJob pre[] = {{c.ffnGated ? L.gate : L.up, in, hb}};
    m_shared.matvec->run(pre);
    if (!c.ffnGated && L.upBias) m_device.add(hb, L.upBias, c.ffnDim);
    LayerStep::shiftedRelu(m_device, hb, c.ffnDim, c.ffnReluShift);
    if (!m_onDevice) {
        m_device.synchronize();
        return hb;
    }
    m_device.download(m_hostPre.data(), hb, size_t(c.ffnDim) * sizeof(float));
    return m_hostPre.data();
}

// The cache's answer to the layer's active set (m_active): the bundles to load, in neuron order
// (neighbours merge into one read), and the lookups for the trace.
void SparseFfn::takeLoads(int layer)
{
    const auto loads = m_layers[size_t(layer)].cache.update(m_active);
    m_loads.assign(loads.begin(), loads.end());
    std::sort(m_loads.begin(), m_loads.end(), [](const NeuronLoad& a, const NeuronLoad& z) { return a.neuron < z.neuron; });
    m_lookups = {uint32_t(m_active.size()), uint32_t(m_active.size() - m_loads.size()), true};
}

// The loads' bundles in the package as aligned runs, neighbours merged (m_runs).
void SparseFfn::planBundleRuns(int layer)
{
    const Layer& cl = m_layers[size_t(layer)];
    const size_t stride = m_layout.stride, sliceBytes = m_slice.bytes;
    m_runs.clear();
    for (size_t i = 0; i < m_loads.size(); ++i) {
        const uint64_t start = cl.fileOffset + uint64_t(m_loads[i].neuron) * stride + m_slice.offset;
        const uint64_t begin = start / kAlign * kAlign;
        const uint64_t end = (start + sliceBytes + kAlign - 1) / kAlign * kAlign;
        if (!m_runs.empty() && begin <= m_runs.back().end + m_mergeGap &&
            end - m_runs.back().begin <= m_staging.bytes() - 2 * kAlign) {
            m_runs.back().end = std::max(m_runs.back().end, end);
            m_runs.back().lastLoad = i;
        } else {
            m_runs.push_back({begin, end, i, i, 0});
        }
    }
}

// The runs from `first` on that fit the staging buffer, placed in it (m_requests); returns the
// end of the batch.
size_t SparseFfn::stageBundleBatch(size_t first)
{
    uint8_t* staging = m_staging.as<uint8_t>();
    const size_t capacity = m_staging.bytes();
    m_requests.clear();
    size_t used = 0, last = first;
    for (; last < m_runs.size(); ++last) {
        Run& run = m_runs[last];
        const size_t bytes = size_t(run.end - run.begin);
        if (used + bytes > capacity) break;
        run.stagingOffset = used;
        m_requests.push_back({run.begin, bytes, staging + used});
        used += bytes;
    }
    return last;
}

// Predictors that read the attention's input (PredictorInput::Attention): the layer's active set
// is predicted before attention runs, and the reads of its missing bundles (the first staging
// batch) are in flight while it does; run() then only waits for them.
Status SparseFfn::startFetch(int layer, const float* attentionIn)
{
    if (m_mode != NeuronCacheMode::Predicted || m_predictors.empty() ||
        m_predictors[size_t(layer)].input != compress::PredictorInput::Attention)
        return {};
    Layer& cl = m_layers[size_t(layer)];
    if (m_early.ticket != 0) (void)m_reader->wait(m_early.ticket);  // never left unwaited
    const float* x = attentionIn;
    if (m_onDevice) {
        m_device.download(m_hostIn.data(), attentionIn, size_t(m_model.config().dim) * sizeof(float));
        x = m_hostIn.data();
    } else {
        m_device.synchronize();
    }
    m_predictors[size_t(layer)].predict(x, m_active, m_predictorScratch);
    takeLoads(layer);
    m_early = {};
    m_early.layer = layer;
    if (!m_reader) return {};
    planBundleRuns(layer);
    if (m_runs.empty()) return {};
    m_early.startNs = m_shared.trace ? trace::nowNs() : 0;
    m_early.last = stageBundleBatch(0);
    m_early.ticket = m_reader->enqueue(m_files[cl.file], m_requests);
    for (size_t r = 0; r < m_early.last; ++r) m_earlyBytes += m_runs[r].end - m_runs[r].begin;
    return {};
}

Status SparseFfn::run(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    return m_onDevice ? runOnDevice(L, layer, in, x) : runOnHost(L, layer, in, x);
}

// On a device that computes on host memory (the CPU): the active neurons' rows and columns are
// computed where they lie, in their slots or (slotless) in RAM or the overflow area.
Status SparseFfn::runOnHost(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    Layer& cl = m_layers[size_t(layer)];
    const FfnBundles& b = m_layout;
    float* hb = m_shared.hb;
    float* hb2 = m_shared.hb2;
    const size_t dim = size_t(c.dim);
    const bool predicted = m_mode == NeuronCacheMode::Predicted;

    // 1. The active set: the true one from the full pre-activation through the ReLU (exact), or
    //    the predictor's guess (predicted).
    const bool known = m_early.layer == layer;  // startFetch predicted it already
    if (!known) m_active.clear();
    d.synchronize();  // `in` is read on the host (predictor), and hb below
    if (known) {
        // the active set and the loads are known: nothing to predict
    } else if (!predicted) {
        const float* pre = activityOnHost(L, in);  // hb
        for (int j = 0; j < c.ffnDim; ++j)
            if (pre[j] > 0.0f) m_active.push_back(uint32_t(j));
    } else {
        m_predictors[size_t(layer)].predict(in, m_active, m_predictorScratch);
    }

    // 2. Only the difference moves: the bundles of active neurons the cache lacks, read in
    //    neuron order (neighbours merge into one read).
    if (!known) {
        takeLoads(layer);
    }
    SPILLWAY_TRY(fetchBundles(layer));
    flushLookups(layer);
    // Where each active neuron's slice is: its slot, or (slotless) RAM or the overflow area.
    for (size_t i = 0; i < m_loads.size(); ++i)
        if (m_loads[i].slot < 0) m_overflowAt[m_loads[i].neuron] = int32_t(i);
    d.synchronize();

    // 3. The active neurons' rows, with the dense kernel's row arithmetic (so each value is the
    //    dense path's): the up rows (gated), and in predicted mode the gate rows (or OPT's up
    //    rows) too.
    const uint8_t* slots = cl.slotData.as<uint8_t>();
    auto rowsView = [&](const uint8_t* base, int64_t rows, size_t partOffset) {
        gpu::MatrixView v;
        v.type = b.rowType;
        v.data = base + partOffset - m_slice.offset;
        v.rows = rows;
        v.cols = c.dim;
        v.rowStride = m_slice.bytes;
        return v;
    };
    const bool hasUpRows = c.ffnGated || predicted;  // exact OPT: the cache holds down columns only
    const bool hasGateRows = predicted && c.ffnGated;
    const size_t upPart = c.ffnGated ? b.upOffset() : 0;
    auto sliceOfActive = [&](uint32_t j) {
        const int32_t slot = cl.cache.slotOf(j);
        return slot >= 0 ? slots + size_t(slot) * m_slice.bytes : slotlessSlice(cl, j);
    };
    // The rows of the active neurons only (one-row jobs in one dispatch), wherever they are.
    float* upOut = hb2;
    float* gateOut = m_gateOut.data();
    if (hasUpRows && !m_active.empty()) {
        m_jobs.clear();
        for (size_t i = 0; i < m_active.size(); ++i) {
            const uint8_t* at = sliceOfActive(m_active[i]);
            m_jobs.push_back({rowsView(at, 1, upPart), in, upOut + i});
            if (hasGateRows) m_jobs.push_back({rowsView(at, 1, 0), in, gateOut + i});
        }
        d.matvec(m_jobs);
        d.synchronize();  // read on the host below
    }
    m_h.resize(m_active.size());
    for (size_t i = 0; i < m_active.size(); ++i) {
        const uint32_t j = m_active[i];
        const float u = hasUpRows ? upOut[i] : 0.0f;
        float act;
        if (!predicted) {
            act = c.ffnGated ? hb[j] * u : hb[j];
        } else if (c.ffnGated) {
            act = std::max(0.0f, gateOut[i] - c.ffnReluShift) * u;
        } else {
            act = std::max(0.0f, u + (L.upBias ? L.upBias[j] : 0.0f) - c.ffnReluShift);
        }
        m_h[i] = act;
    }

    // 4. down · act over the active neurons, in neuron order.
    std::fill(m_y.begin(), m_y.end(), 0.0f);
    const size_t downPart = b.downOffset() - m_slice.offset;
    static const AxpyColumn axpyColumn = pickAxpyColumn();
    if (b.column.group == 64) {
        // Q8_G64 (the thesis' ReLU models): the dense kernel's own arithmetic, so the result is
        // the dense path's bit for bit. The activations are quantized in groups of 64 over the
        // whole layer (inactive neurons are zeros there too), and per group g, in order,
        // y[r] += (float(sum of q_w q_h over its active neurons) * s_w[g][r]) * s_h[g]; a group
        // without active neurons adds nothing (its sum is 0).
        float* full = hb2;  // (ffnDim): the activations with zeros, then reused below
        std::fill(full, full + c.ffnDim, 0.0f);
        for (size_t i = 0; i < m_active.size(); ++i) full[m_active[i]] = m_h[i];
        const size_t groups = size_t(c.ffnDim) / 64;
        m_hq.resize(size_t(c.ffnDim));
        m_hs.resize(groups);
        gpu::cpu::quantizeG64(full, c.ffnDim, m_hq.data(), m_hs.data());
        m_dots.resize(dim);
        for (size_t i = 0, g = 0; g < groups; ++g) {
            if (i == m_active.size() || m_active[i] / 64 != g) continue;
            std::fill(m_dots.begin(), m_dots.end(), 0);
            for (; i < m_active.size() && m_active[i] / 64 == g; ++i) {
                const uint32_t j = m_active[i];
                const int32_t qh = m_hq[j];
                if (qh == 0) continue;
                const auto* qw = reinterpret_cast<const int8_t*>(sliceOfActive(j) + downPart);
                for (size_t r = 0; r < dim; ++r) m_dots[r] += int32_t(qw[r]) * qh;
            }
            const float* sw = cl.scales + g * dim;
            const float sh = m_hs[g];
            for (size_t r = 0; r < dim; ++r) {
                const float scaled = float(m_dots[r]) * sw[r];  // separate statements: no fused
                const float term = scaled * sh;                  // multiply-add, as the kernel
                m_y[r] += term;
            }
        }
    } else {
        for (size_t i = 0; i < m_active.size(); ++i) {
            if (m_h[i] == 0.0f) continue;
            const uint32_t j = m_active[i];
            const uint8_t* s = sliceOfActive(j);
            if (b.column.group > 0)
                axpyInt8Column(m_h[i], reinterpret_cast<const int8_t*>(s + downPart),
                               cl.scales + size_t(j) / size_t(b.column.group) * dim, dim, m_y.data());
            else
                axpyColumn(m_h[i], s + downPart, b.column.type, dim, m_y.data());
        }
    }
    float* xb = m_shared.xb;
    std::memcpy(xb, m_y.data(), dim * sizeof(float));
    if (L.downBias) d.add(xb, L.downBias, c.dim);
    d.add(x, xb, c.dim);
    return {};
}

// The same on a device that cannot compute on host memory (a GPU): see m_onDevice.
Status SparseFfn::runOnDevice(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    Layer& cl = m_layers[size_t(layer)];
    const FfnBundles& b = m_layout;
    const bool predicted = m_mode == NeuronCacheMode::Predicted;
    const size_t dim = size_t(c.dim);

    // 1. The active set, on the host. Each layer starts with a download, which waits for every op
    //    issued before it: the pack, weights and share buffers are free to be written again.
    const bool known = m_early.layer == layer;  // startFetch predicted it already
    if (!known) m_active.clear();
    bool haveIn = false;
    if (known) {
        // the active set and the loads are known: nothing to predict
    } else if (!predicted) {
        const float* pre = activityOnHost(L, in);  // m_hostPre
        for (int j = 0; j < c.ffnDim; ++j)
            if (pre[j] > 0.0f) m_active.push_back(uint32_t(j));
    } else {
        d.download(m_hostIn.data(), in, dim * sizeof(float));
        haveIn = true;
        m_predictors[size_t(layer)].predict(m_hostIn.data(), m_active, m_predictorScratch);
    }

    // 2. The difference: bundles packed in pinned memory (the slotless ones stay in RAM, or in
    //    the overflow area when read from the SSD, for the CPU), one upload, then each to its slot.
    if (!known) {
        takeLoads(layer);
    }
    SPILLWAY_TRY(fetchBundles(layer));
    for (size_t i = 0; i < m_loads.size(); ++i)
        if (m_loads[i].slot < 0) m_overflowAt[m_loads[i].neuron] = int32_t(i);
    sendArrivals(layer);

    flushLookups(layer);

    // 3. The rows, over every resident slot on the device and over the slotless neurons on the
    //    CPU: up rows (gated), and in predicted mode the gate rows (or OPT's up rows) too.
    const int resident = cl.cache.resident();
    const bool hasUpRows = c.ffnGated || predicted;
    const bool hasGateRows = predicted && c.ffnGated;
    const size_t upPart = (c.ffnGated ? b.upOffset() : 0) - m_slice.offset;
    const size_t capacity = size_t(m_maxCapacity);
    auto rowsAt = [&](const uint8_t* base, int64_t rows, size_t part, size_t stride) {
        gpu::MatrixView v;
        v.type = b.rowType;
        v.data = base + part;
        v.rows = rows;
        v.cols = c.dim;
        v.rowStride = stride;
        return v;
    };
    float* rowsOut = m_rowsOut.as<float>();
    if (hasUpRows && resident > 0) {
        const uint8_t* slots = cl.slotData.as<uint8_t>();
        gpu::MatvecJob jobs[2];
        size_t n = 0;
        jobs[n++] = {rowsAt(slots, resident, upPart, m_deviceStride), in, rowsOut};
        if (hasGateRows) jobs[n++] = {rowsAt(slots, resident, 0, m_deviceStride), in, rowsOut + capacity};
        d.matvec({jobs, n});
    }
    m_spilled.clear();
    for (uint32_t j : m_active)
        if (cl.cache.slotOf(j) < 0) m_spilled.push_back(j);
    if (hasUpRows && !m_spilled.empty()) {
        if (!haveIn) d.download(m_hostIn.data(), in, dim * sizeof(float));
        haveIn = true;
        m_jobs.clear();
        for (size_t i = 0; i < m_spilled.size(); ++i) {
            const uint8_t* at = slotlessSlice(cl, m_spilled[i]);
            m_jobs.push_back({rowsAt(at, 1, upPart, m_slice.bytes), m_hostIn.data(), m_spilledRows.data() + i});
            if (hasGateRows)
                m_jobs.push_back({rowsAt(at, 1, 0, m_slice.bytes), m_hostIn.data(),
                                   m_spilledRows.data() + c.ffnDim + i});
        }
        m_hostCpu->matvec(m_jobs);
    }
    if (hasUpRows && resident > 0) {
        d.download(m_hostRows.data(), rowsOut, size_t(resident) * sizeof(float));
        if (hasGateRows)
            d.download(m_hostRows.data() + capacity, rowsOut + capacity, size_t(resident) * sizeof(float));
    }

    // 4. Activations: per slot (0 for the resident neurons not active now) and per slotless
    //    neuron. For Q8_G64 down matrices they are quantized as the dense kernel quantizes its
    //    input (groups of 64 over the whole layer), so both compute the same sum up to rounding.
    std::fill(m_hostWeights.begin(), m_hostWeights.begin() + resident, 0.0f);
    m_spilledAct.clear();
    float* full = m_gateOut.data();  // (ffnDim) scratch: the activations with zeros (Q8_G64)
    const bool quantized = b.column.group == 64;
    if (quantized) std::fill(full, full + c.ffnDim, 0.0f);
    for (size_t i = 0, s = 0; i < m_active.size(); ++i) {
        const uint32_t j = m_active[i];
        const int32_t slot = cl.cache.slotOf(j);
        const bool spilledHere = slot < 0;
        const float u = !hasUpRows ? 0.0f : spilledHere ? m_spilledRows[s] : m_hostRows[size_t(slot)];
        const float g = !hasGateRows ? 0.0f
                        : spilledHere ? m_spilledRows[size_t(c.ffnDim) + s]
                                      : m_hostRows[capacity + size_t(slot)];
        float act;
        if (!predicted) act = c.ffnGated ? m_hostPre[j] * u : m_hostPre[j];
        else if (c.ffnGated) act = std::max(0.0f, g - c.ffnReluShift) * u;
        else act = std::max(0.0f, u + (cl.upBias.empty() ? 0.0f : cl.upBias[j]) - c.ffnReluShift);
        if (quantized) full[j] = act;
        if (spilledHere) {
            m_spilledAct.push_back(act);
            ++s;
        } else {
            m_hostWeights[size_t(slot)] = act;
        }
    }
    if (quantized) {
        const size_t groups = size_t(c.ffnDim) / 64;
        m_hq.resize(size_t(c.ffnDim));
        m_hs.resize(groups);
        gpu::cpu::quantizeG64(full, c.ffnDim, m_hq.data(), m_hs.data());
        for (size_t i = 0, s = 0; i < m_active.size(); ++i) {
            const uint32_t j = m_active[i];
            const float v = float(m_hq[j]) * m_hs[j / 64];
            const int32_t slot = cl.cache.slotOf(j);
            if (slot < 0) m_spilledAct[s++] = v;
            else m_hostWeights[size_t(slot)] = v;
        }
    }

    // 5. down . act: the slots' columns on the device, the slotless ones' on the CPU, summed.
    float* xb = m_shared.xb;
    if (resident > 0) d.upload(m_weights.data(), m_hostWeights.data(), size_t(resident) * sizeof(float));
    gpu::RowSumArgs down;
    const size_t downPart = b.downOffset() - m_slice.offset;
    down.w.type = b.column.group > 0 ? gpu::DType::F32 : b.column.type;
    down.w.data = cl.slotData.as<uint8_t>() + downPart;
    down.w.rows = resident;
    down.w.cols = c.dim;
    down.w.rowStride = m_deviceStride;
    down.a = m_weights.as<float>();
    down.y = xb;
    if (b.column.group > 0) {
        down.scales = cl.deviceScales.as<float>();
        down.group = cl.slotGroups.as<int32_t>();
    }
    d.rowSum(down);
    if (!m_spilled.empty()) {
        static const AxpyColumn axpyColumn = pickAxpyColumn();
        std::fill(m_y.begin(), m_y.end(), 0.0f);
        for (size_t i = 0; i < m_spilled.size(); ++i) {
            if (m_spilledAct[i] == 0.0f) continue;
            const uint32_t j = m_spilled[i];
            const uint8_t* column = slotlessSlice(cl, j) + downPart;
            if (b.column.group > 0)
                axpyInt8Column(m_spilledAct[i], reinterpret_cast<const int8_t*>(column),
                               cl.scales + size_t(j) / size_t(b.column.group) * dim, dim, m_y.data());
            else
                axpyColumn(m_spilledAct[i], column, b.column.type, dim, m_y.data());
        }
        d.upload(m_hostShare.data(), m_y.data(), dim * sizeof(float));
        d.add(xb, m_hostShare.as<float>(), c.dim);
    }
    if (L.downBias) d.add(xb, L.downBias, c.dim);
    d.add(x, xb, c.dim);
    return {};
}

}  // namespace spillway
