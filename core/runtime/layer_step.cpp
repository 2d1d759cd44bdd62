#include "core/runtime/layer_step.h"

#include <algorithm>
#include <cmath>

#include "core/runtime/row_split.h"
#include "core/runtime/sparse_ffn.h"

namespace spillway {

LayerStep::LayerStep(const LlamaConfig& config, gpu::Device& device, const Buffers& buffers, const KvCache& kv,
                     const gpu::RopeParams& rope, RowSplit& matvec, SparseFfn* sparse)
    : m_c(config), m_device(device), m_buf(buffers), m_kv(kv), m_rope(rope), m_matvec(matvec), m_sparse(sparse)
{
}

size_t LayerStep::xbFloats(const LlamaConfig& c) { return size_t(std::max({c.dim, c.qDim(), c.embeddingDim()})); }

void LayerStep::shiftedRelu(gpu::Device& device, float* v, int n, float shift)
{
    gpu::PointwiseArgs relu;
    relu.op = gpu::PointwiseOp::ShiftedRelu;
    relu.x = relu.out = v;
    relu.n = n;
    relu.shift = shift;
    device.pointwise(relu);
}

Status LayerStep::run(const LlamaLayerWeights& L, int layer, float* x, int n, int pos)
{
    const LlamaConfig& c = m_c;
    Status failed;
    gpu::Device& d = m_device;
    const size_t dim = size_t(c.dim), qDim = size_t(c.qDim());
    const size_t ffn = size_t(c.ffnDim), xbStride = size_t(xbFloats(c));
    auto xOf = [&](int i) { return x + size_t(i) * dim; };
    auto xbOf = [&](int i) { return m_buf.xb + size_t(i) * xbStride; };
    auto qOf = [&](int i) { return m_buf.q + size_t(i) * qDim; };
    auto attOf = [&](int i) { return m_buf.att + size_t(i) * qDim; };
    auto hbOf = [&](int i) { return m_buf.hb + size_t(i) * ffn; };
    auto hb2Of = [&](int i) { return m_buf.hb2 + size_t(i) * ffn; };
    // An F32 cache takes the tokens' K and V straight from the projections; other types get
    // them in fp32 scratch, and the attention op converts them into the cache (kv_cache.h).
    auto kOf = [&](int i) { return m_kv.newKey(layer, pos, i); };
    auto vOf = [&](int i) { return m_kv.newValue(layer, pos, i); };
    std::vector<gpu::MatvecJob>& jobs = m_jobs;

    // A block's input is norm(x) in xb (pre-norm) or x itself (post-norm: normed after the add).
    auto inputOf = [&](int i) -> const float* { return c.postNorm ? xOf(i) : xbOf(i); };
    auto normInputs = [&](const float* weight, const float* bias) {
        if (c.postNorm) return;
        for (int i = 0; i < n; ++i) {
            norm(xOf(i), weight, bias, xbOf(i));
            if (c.normReluShift >= 0.0f) shiftedRelu(d, xbOf(i), c.dim, c.normReluShift);  // relu-llama
        }
    };

    // Attention.
    normInputs(L.attnNorm, L.attnNormBias);
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.wq, inputOf(i), qOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.wk, inputOf(i), kOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.wv, inputOf(i), vOf(i)});
    m_matvec.run(jobs);
    // A neuron cache whose predictors read the attention's input starts this layer's reads now.
    if (m_sparse) failed = m_sparse->startFetch(layer, inputOf(0));
    for (int i = 0; i < n; ++i) {
        float* q = qOf(i);
        float* k = kOf(i);
        float* v = vOf(i);
        if (L.qBias) d.add(q, L.qBias, c.qDim());
        if (L.kBias) d.add(k, L.kBias, c.kvDim());
        if (L.vBias) d.add(v, L.vBias, c.kvDim());
        if (L.qNorm)  // Qwen3: each head normalized on its own
            for (int h = 0; h < c.nHeads; ++h) d.rmsnorm(q + h * c.headDim, L.qNorm, q + h * c.headDim, c.headDim, c.normEps);
        if (L.kNorm)
            for (int h = 0; h < c.nKvHeads; ++h) d.rmsnorm(k + h * c.headDim, L.kNorm, k + h * c.headDim, c.headDim, c.normEps);
        if (!c.learnedPositions) {
            d.rope(q, c.nHeads, c.headDim, pos + i, m_rope);
            d.rope(k, c.nKvHeads, c.headDim, pos + i, m_rope);
        }
        if (c.kvCacheStep > 0.0f) {
            // An int8 cache with one fixed scale: the values it could hold, kept as floats.
            gpu::PointwiseArgs snap;
            snap.op = gpu::PointwiseOp::SnapToGrid;
            snap.n = c.kvDim();
            snap.step = c.kvCacheStep;
            snap.x = snap.out = k;
            d.pointwise(snap);
            snap.x = snap.out = v;
            d.pointwise(snap);
        }
    }
    {
        // The batch's queries at once (causal: token i sees positions up to pos + i).
        gpu::AttentionArgs a;
        m_kv.describe(a, layer, pos, 0);
        a.q = qOf(0);
        a.out = attOf(0);
        a.scores = m_buf.scores;
        a.nHeads = c.nHeads;
        a.nKvHeads = c.nKvHeads;
        a.headDim = c.headDim;
        a.nPos = pos + n;
        a.scale = 1.0f / std::sqrt(float(c.headDim));
        if (n == 1)
            d.attention(a);
        else
            d.attentionBatch(a, n, qDim);
    }
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.wo, attOf(i), xbOf(i)});
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) {
        if (L.oBias) d.add(xbOf(i), L.oBias, c.dim);
        d.add(xOf(i), xbOf(i), c.dim);
        if (c.postNorm) norm(xOf(i), L.attnNorm, L.attnNormBias, xOf(i));
    }

    // FFN.
    normInputs(L.ffnNorm, L.ffnNormBias);
    if (m_sparse) {
        Status ran = m_sparse->run(L, layer, inputOf(0), xOf(0));
        if (failed) failed = std::move(ran);
        if (c.postNorm) norm(xOf(0), L.ffnNorm, L.ffnNormBias, xOf(0));
        return failed;
    }
    jobs.clear();
    if (c.ffnGated)
        for (int i = 0; i < n; ++i) jobs.push_back({L.gate, inputOf(i), hbOf(i)});
    for (int i = 0; i < n; ++i) jobs.push_back({L.up, inputOf(i), c.ffnGated ? hb2Of(i) : hbOf(i)});
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) {
        if (!c.ffnGated) {
            if (L.upBias) d.add(hbOf(i), L.upBias, c.ffnDim);
            shiftedRelu(d, hbOf(i), c.ffnDim, c.ffnReluShift);
            continue;
        }
        if (L.upBias) d.add(hb2Of(i), L.upBias, c.ffnDim);
        if (c.ffnRelu) {
            gpu::PointwiseArgs glu;
            glu.op = gpu::PointwiseOp::ShiftedReluGlu;
            glu.x = hbOf(i);
            glu.y = hb2Of(i);
            glu.out = hbOf(i);
            glu.n = c.ffnDim;
            glu.shift = c.ffnReluShift;
            d.pointwise(glu);
        } else {
            d.swiglu(hbOf(i), hb2Of(i), hbOf(i), c.ffnDim);
        }
    }
    jobs.clear();
    for (int i = 0; i < n; ++i) jobs.push_back({L.down, hbOf(i), xbOf(i)});
    m_matvec.run(jobs);
    for (int i = 0; i < n; ++i) {
        if (L.downBias) d.add(xbOf(i), L.downBias, c.dim);
        d.add(xOf(i), xbOf(i), c.dim);
        if (c.postNorm && !c.ffnGated) norm(xOf(i), L.ffnNorm, L.ffnNormBias, xOf(i));
    }
    return failed;
}

void LayerStep::norm(const float* x, const float* weight, const float* bias, float* out)
{
    const LlamaConfig& c = m_c;
    if (c.layerNorm)
        m_device.layernorm(x, weight, bias, out, c.dim, c.normEps);
    else
        m_device.rmsnorm(x, weight, out, c.dim, c.normEps);
}

}  // namespace spillway
