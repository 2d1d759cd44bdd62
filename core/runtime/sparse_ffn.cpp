// The activation-sparse FFN of LlamaSession (SessionOptions::neuronCache): per layer a neuron
// cache of bundles (the up row in the model's format, the down column as fp32), filled with the
// difference each token; the FFN computed over the token's active neurons only.

#include <algorithm>
#include <cstring>

#include "core/runtime/llama_session.h"

namespace spillway {

struct LlamaSession::SparseFfn {
    struct Layer {
        NeuronCache cache;
        gpu::Buffer upRows;     // (capacity, upRowBytes): the gated FFN's up rows
        gpu::Buffer downCols;   // (capacity, dim) fp32: down columns
        std::vector<float> downT;  // (ffnDim, dim) fp32, the RAM copy bundles come from
    };
    std::vector<Layer> layers;
    size_t upRowBytes = 0;      // 0 for ungated FFNs (their up is the pre-activation, dense)
    uint64_t bundleBytes = 0;
    std::vector<uint32_t> active;
    std::vector<float> h;       // per active neuron: its activation
    std::vector<float> y;       // (dim) the down projection
};

// Here, where SparseFfn is complete.
LlamaSession::LlamaSession(const LlamaModel& model, gpu::Device& device) : m_model(model), m_device(device) {}
LlamaSession::~LlamaSession() = default;

Status LlamaSession::createNeuronCache()
{
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    const NeuronCacheOptions& o = m_options.neuronCache;
    if (!(c.ffnRelu || !c.ffnGated))
        return makeError(ErrorCode::UnsupportedModel,
                         m_model.path() + ": the neuron cache needs a ReLU FFN (its activations are exactly "
                                          "zero when inactive); this model's is SwiGLU");
    if (!d.info().caps.hostPointers)
        return makeError(ErrorCode::BackendUnavailable,
                         "the neuron cache runs on the CPU device for now, not on " + d.info().backend);
    auto sparse = std::make_unique<SparseFfn>();
    const int capacity = std::min(o.capacity, c.ffnDim);
    const LlamaLayerWeights& first = m_model.weights().layers.front();
    sparse->upRowBytes = c.ffnGated ? gpu::rowBytes(first.up.type, c.dim) : 0;
    sparse->bundleBytes = sparse->upRowBytes + uint64_t(c.dim) * sizeof(float);
    std::vector<float> row(size_t(c.ffnDim));
    for (int l = 0; l < c.nLayers; ++l) {
        const LlamaLayerWeights& L = m_model.weights().layers[size_t(l)];
        SparseFfn::Layer layer{NeuronCache(c.ffnDim, capacity, o.policy, o.window), {}, {}, {}};
        // Down columns, transposed once into RAM: (neuron, dim) rows are the bundles' second part.
        layer.downT.assign(size_t(c.ffnDim) * size_t(c.dim), 0.0f);
        for (int64_t r = 0; r < L.down.rows; ++r) {
            d.getRow(L.down, r, row.data());
            for (int j = 0; j < c.ffnDim; ++j) layer.downT[size_t(j) * size_t(c.dim) + size_t(r)] = row[size_t(j)];
        }
        if (sparse->upRowBytes) {
            auto up = d.allocate(std::max<size_t>(size_t(capacity) * sparse->upRowBytes, 64));
            if (!up) return up.error();
            layer.upRows = std::move(*up);
        }
        auto down = d.allocate(std::max<size_t>(size_t(capacity) * size_t(c.dim) * sizeof(float), 64));
        if (!down) return down.error();
        layer.downCols = std::move(*down);
        sparse->layers.push_back(std::move(layer));
    }
    d.synchronize();
    sparse->y.resize(size_t(c.dim));
    m_sparse = std::move(sparse);
    return {};
}

NeuronCacheReport LlamaSession::neuronCacheReport() const
{
    NeuronCacheReport r;
    if (!m_sparse) return r;
    r.bundleBytes = m_sparse->bundleBytes;
    for (const auto& l : m_sparse->layers) {
        const NeuronCacheStats& s = l.cache.stats();
        r.total.tokens += s.tokens;
        r.total.active += s.active;
        r.total.hits += s.hits;
        r.total.loaded += s.loaded;
    }
    return r;
}

void LlamaSession::sparseFfnBlock(const LlamaLayerWeights& L, int layer, const float* in, float* x)
{
    // x += down · act, act = relu(gate·n - shift) ⊙ up·n (gated) or relu(up·n + b) (OPT), over
    // the active neurons only. `in` is the FFN input (normed).
    const LlamaConfig& c = m_model.config();
    gpu::Device& d = m_device;
    SparseFfn& sp = *m_sparse;
    SparseFfn::Layer& cl = sp.layers[size_t(layer)];
    float* hb = m_hb.as<float>();
    float* hb2 = m_hb2.as<float>();
    const size_t dim = size_t(c.dim);

    // 1. The pre-activation in full (the active set is the true one), through the ReLU.
    const gpu::MatvecJob pre[] = {{c.ffnGated ? L.gate : L.up, in, hb}};
    matvec(pre);
    if (!c.ffnGated && L.upBias) d.add(hb, L.upBias, c.ffnDim);
    shiftedRelu(hb, c.ffnDim, c.ffnReluShift);
    d.synchronize();  // hb is read on the host below
    sp.active.clear();
    for (int j = 0; j < c.ffnDim; ++j)
        if (hb[j] > 0.0f) sp.active.push_back(uint32_t(j));

    // 2. Only the difference moves: the bundles of active neurons the cache lacks.
    const auto* upSource = static_cast<const uint8_t*>(L.up.data);
    for (const NeuronLoad& load : cl.cache.update(sp.active)) {
        if (load.slot < 0) continue;  // no room: computed from RAM below
        const size_t s = size_t(load.slot);
        if (sp.upRowBytes)
            d.upload(cl.upRows.as<uint8_t>() + s * sp.upRowBytes, upSource + size_t(load.neuron) * L.up.rowStride,
                     sp.upRowBytes);
        d.upload(cl.downCols.as<float>() + s * dim, cl.downT.data() + size_t(load.neuron) * dim, dim * sizeof(float));
    }

    // 3. The activations: gated FFNs multiply by up·n, from the cached rows (the dense kernel's
    //    row arithmetic, so each value is the dense path's).
    sp.h.resize(sp.active.size());
    if (sp.upRowBytes) {
        gpu::MatrixView cached = L.up;
        cached.data = cl.upRows.data();
        cached.rows = cl.cache.resident();  // slots fill from 0: [0, resident) hold bundles
        cached.rowStride = sp.upRowBytes;
        if (cached.rows > 0) {
            const gpu::MatvecJob up[] = {{cached, in, hb2}};
            d.matvec(up);
            d.synchronize();  // hb2 is read on the host below
        }
        for (size_t i = 0; i < sp.active.size(); ++i) {
            const uint32_t j = sp.active[i];
            const int32_t slot = cl.cache.slotOf(j);
            float u = 0.0f;
            if (slot >= 0) {
                u = hb2[slot];
            } else {  // not cached: its row straight from where it lives
                gpu::MatrixView one = L.up;
                one.data = upSource + size_t(j) * L.up.rowStride;
                one.rows = 1;
                d.matvec(one, in, &u);
            }
            sp.h[i] = hb[j] * u;
        }
    } else {
        for (size_t i = 0; i < sp.active.size(); ++i) sp.h[i] = hb[sp.active[i]];
    }
    d.synchronize();

    // 4. down · act over the active neurons, in neuron order.
    std::fill(sp.y.begin(), sp.y.end(), 0.0f);
    for (size_t i = 0; i < sp.active.size(); ++i) {
        const uint32_t j = sp.active[i];
        const int32_t slot = cl.cache.slotOf(j);
        const float* col = slot >= 0 ? cl.downCols.as<float>() + size_t(slot) * dim : cl.downT.data() + size_t(j) * dim;
        const float a = sp.h[i];
        for (size_t r = 0; r < dim; ++r) sp.y[r] += a * col[r];
    }
    float* xb = m_xb.as<float>();
    std::memcpy(xb, sp.y.data(), dim * sizeof(float));
    if (L.downBias) d.add(xb, L.downBias, c.dim);
    d.add(x, xb, c.dim);
}

}  // namespace spillway
