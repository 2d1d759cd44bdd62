#include "core/runtime/llama_session.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace spillway {

Result<std::unique_ptr<LlamaSession>> LlamaSession::create(const LlamaModel& model,
                                                           gpu::Device& device, int contextLength)
{
    const LlamaConfig& c = model.config();
    int ctx = contextLength > 0 ? contextLength : std::min(c.trainedContext, 4096);
    if (ctx > (1 << 22))
        return makeError(ErrorCode::InvalidArgument, "context length " + std::to_string(ctx) + " is too large");
    if (!device.info().caps.hostPointers)
        return makeError(ErrorCode::BackendUnavailable,
                         "backend '" + device.info().backend + "' cannot run models in place yet");
    auto s = std::unique_ptr<LlamaSession>(new LlamaSession(model, device));
    s->m_ctx = ctx;
    s->m_rope.rotaryDims = c.ropeDims;
    s->m_rope.base = c.ropeBase;
    s->m_rope.freqScale = c.ropeFreqScale;
    s->m_rope.neox = false;

    struct Need { gpu::Buffer* buffer; uint64_t floats; };
    const uint64_t kvFloats = uint64_t(c.nLayers) * uint64_t(ctx) * uint64_t(c.kvDim());
    const Need needs[] = {
        {&s->m_x, uint64_t(c.dim)},       {&s->m_xb, uint64_t(std::max(c.dim, c.qDim()))},
        {&s->m_q, uint64_t(c.qDim())},    {&s->m_att, uint64_t(c.qDim())},
        {&s->m_scores, uint64_t(c.nHeads) * uint64_t(ctx)},
        {&s->m_hb, uint64_t(c.ffnDim)},   {&s->m_hb2, uint64_t(c.ffnDim)},
        {&s->m_logits, uint64_t(c.vocabSize)},
        {&s->m_keys, kvFloats},           {&s->m_values, kvFloats},
    };
    for (const auto& n : needs) {
        auto b = device.allocate(n.floats * sizeof(float));
        if (!b) return b.error();
        *n.buffer = std::move(b.value());
    }
    return s;
}

const float* LlamaSession::forward(int token, int pos)
{
    const LlamaConfig& c = m_model.config();
    const LlamaWeights& w = m_model.weights();
    gpu::Device& d = m_device;
    float* x = m_x.as<float>();
    float* xb = m_xb.as<float>();
    float* q = m_q.as<float>();
    float* att = m_att.as<float>();
    float* hb = m_hb.as<float>();
    float* hb2 = m_hb2.as<float>();
    const size_t kvDim = size_t(c.kvDim());
    const size_t layerStride = size_t(m_ctx) * kvDim;  // floats per layer in the KV cache

    assert(token >= 0 && token < c.vocabSize && pos >= 0 && pos < m_ctx);
    d.getRow(w.tokenEmbedding, token, x);
    for (int l = 0; l < c.nLayers; ++l) {
        const LlamaLayerWeights& L = w.layers[size_t(l)];
        float* keys = m_keys.as<float>() + size_t(l) * layerStride;    // (ctx, kvDim)
        float* values = m_values.as<float>() + size_t(l) * layerStride;
        float* k = keys + size_t(pos) * kvDim;  // this position's K and V go straight to the cache
        float* v = values + size_t(pos) * kvDim;

        // Attention: x += wo · attention(rope(wq·n), rope(wk·n), wv·n), n = rmsnorm(x)
        d.rmsnorm(x, L.attnNorm, xb, c.dim, c.normEps);
        const gpu::MatvecJob qkv[] = {{L.wq, xb, q}, {L.wk, xb, k}, {L.wv, xb, v}};
        d.matvec(qkv);
        d.rope(q, c.nHeads, c.headDim, pos, m_rope);
        d.rope(k, c.nKvHeads, c.headDim, pos, m_rope);
        gpu::AttentionArgs a;
        a.q = q;
        a.kCache = keys;
        a.vCache = values;
        a.out = att;
        a.scores = m_scores.as<float>();
        a.nHeads = c.nHeads;
        a.nKvHeads = c.nKvHeads;
        a.headDim = c.headDim;
        a.nPos = pos + 1;
        a.scale = 1.0f / std::sqrt(float(c.headDim));
        d.attention(a);
        d.matvec(L.wo, att, xb);
        d.add(x, xb, c.dim);

        // Feed-forward: x += down · (silu(gate·n) ⊙ up·n), n = rmsnorm(x)
        d.rmsnorm(x, L.ffnNorm, xb, c.dim, c.normEps);
        const gpu::MatvecJob gateUp[] = {{L.gate, xb, hb}, {L.up, xb, hb2}};
        d.matvec(gateUp);
        d.swiglu(hb, hb2, hb, c.ffnDim);
        d.matvec(L.down, hb, xb);
        d.add(x, xb, c.dim);
    }
    d.rmsnorm(x, w.outputNorm, x, c.dim, c.normEps);
    d.matvec(w.output, x, m_logits.as<float>());
    d.synchronize();
    return m_logits.as<float>();
}

}  // namespace spillway
