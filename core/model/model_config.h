#pragma once
// Hyper-parameters of a Llama-family model, read from GGUF metadata and checked for sense.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway {

namespace gguf { class File; class Metadata; }

struct LlamaConfig {
    std::string architecture;  // general.architecture ("llama", ...)
    std::string name;          // general.name, if any
    int dim = 0;               // embedding length
    int nLayers = 0;
    int nHeads = 0;
    int nKvHeads = 0;          // grouped-query attention: nHeads % nKvHeads == 0
    int headDim = 0;           // dim / nHeads unless the file says otherwise
    int ffnDim = 0;            // feed-forward hidden size
    int vocabSize = 0;
    int trainedContext = 0;    // {arch}.context_length
    float normEps = 1e-5f;     // RMSNorm epsilon
    float ropeBase = 10000.0f;
    float ropeFreqScale = 1.0f;  // linear RoPE scaling: positions are multiplied by this
    int ropeDims = 0;          // rotated dims per head
    bool synthetic = false;    // made by make-synthetic: real shapes, random weights
    bool ropeNeox = false;     // RoPE rotates pairs (i, i + d/2) instead of (2i, 2i+1)
    // Llama 3 RoPE scaling (rope.scaling.type "llama3"): low frequencies slowed by ropeFactor,
    // high ones kept, a smooth ramp between. ropeFactor 0: none.
    float ropeFactor = 0.0f, ropeLowFreqFactor = 1.0f, ropeHighFreqFactor = 4.0f;
    int ropeOriginalContext = 8192;

    // OPT: LayerNorm (with bias) instead of RMSNorm, learned positions (row pos + 2 of
    // position_embd) instead of RoPE, an ungated ReLU FFN (up -> relu -> down), biases.
    bool layerNorm = false;
    bool learnedPositions = false;
    int positionOffset = 0;
    bool ffnGated = true;
    // Post-LayerNorm OPT (do_layer_norm_before = false, opt-350m): each block's LayerNorm
    // follows its residual add, and there is no final norm before the head.
    bool postNorm = false;
    // Width of the token embeddings and the head's input (word_embed_proj_dim), when it differs
    // from dim: proj_in.weight (dim, embedDim) lifts an embedding to dim, proj_out.weight
    // (embedDim, dim) brings the last hidden state down before the head. 0: dim, no projections.
    int embedDim = 0;

    // Activation sparsity by design ("relu-llama": the thesis' shifted-ReLU models).
    // normReluShift >= 0: each in-layer RMSNorm's output becomes max(0, h - shift).
    float normReluShift = -1.0f;
    // The FFN gate: SiLU, or max(0, gate - ffnReluShift) when ffnRelu.
    bool ffnRelu = false;
    float ffnReluShift = 0.0f;
    // > 0: K and V are rounded to multiples of this step within int8's range before they enter
    // the cache (an int8 cache with one fixed scale, as the thesis' runtime keeps it).
    float kvCacheStep = 0.0f;

    // Mixture of experts (Mixtral as `llama` with expert tensors, qwen2moe, qwen3moe, olmoe):
    // nExperts > 0. Each token's FFN is the weighted sum of nExpertsUsed of nExperts experts
    // (gated FFNs of expertFfnDim), chosen by a router (softmax over every expert's logit, the
    // top nExpertsUsed taken in order of probability, their probabilities the weights,
    // renormalized to sum 1 where expertWeightsNormalized), plus a shared expert of
    // sharedExpertFfnDim (qwen2moe; 0: none) scaled by sigmoid(its gate . x).
    int nExperts = 0;
    int nExpertsUsed = 0;
    int expertFfnDim = 0;
    int sharedExpertFfnDim = 0;
    bool expertWeightsNormalized = false;
    // OLMoE: q and k are RMS-normed over the whole projection (qDim, kvDim values), not per head.
    bool qkNormWhole = false;

    // How a mixture's router weighs the experts it chose: Softmax, the probabilities of a softmax
    // over every expert's logit (renormalized where expertWeightsNormalized); SoftmaxOfChosen,
    // a softmax over the chosen experts' logits only (gpt-oss: top k logits first).
    enum class RouterWeights : uint8_t { Softmax, SoftmaxOfChosen };
    RouterWeights routerWeights = RouterWeights::Softmax;
    // The experts' activation: SwiGLU, or gpt-oss's clamped one (PointwiseOp::ClampedSwiglu:
    // gate clamped above at swigluLimit, up to +-swigluLimit, silu with swigluAlpha, times up + 1).
    bool clampedSwiglu = false;
    float swigluAlpha = 1.702f, swigluLimit = 7.0f;

    // Attention kinds, per layer: Full (every position before), or SlidingWindow (the last
    // slidingWindow positions). Empty: every layer Full. attentionSinks: each layer's softmax
    // takes a learned logit per head (attn_sinks) that carries no value (gpt-oss).
    // Linear: no attention and no KV cache, a Gated DeltaNet mixer with a recurrent state of
    // fixed size (Qwen3.5, Qwen3-Next; the `ssm*` fields below).
    enum class AttentionKind : uint8_t { Full, SlidingWindow, Linear };
    std::vector<AttentionKind> attentionKinds;
    int slidingWindow = 0;
    bool attentionSinks = false;
    AttentionKind attentionKind(int layer) const
    {
        return attentionKinds.empty() ? AttentionKind::Full : attentionKinds[size_t(layer)];
    }
    // YaRN RoPE scaling (rope.scaling.type "yarn"): ropeFactor is the context's extension factor,
    // ropeOriginalContext the trained one; the low frequencies are interpolated, the high ones
    // kept, a ramp between dims set by yarnBetaFast / yarnBetaSlow; attention logits times
    // yarnAttnFactor^2 (its magnitude correction, 1 + 0.1 ln(factor) unless the file says).
    bool yarn = false;
    float yarnBetaFast = 32.0f, yarnBetaSlow = 1.0f, yarnAttnFactor = 1.0f;

    // Gated DeltaNet (AttentionKind::Linear layers), as ik_llama.cpp's delta_net computes it:
    // x -> [q k v] (ssmKHeads key heads of ssmStateDim, ssmVHeads value heads of ssmHeadVDim),
    // a causal convolution of ssmConvKernel taps per channel and SiLU, q and k L2-normed, then
    // per value head the delta rule on a (headVDim x stateDim) state with the decay
    // exp(softplus(alpha + dt_bias) * a) and the write strength sigmoid(beta); the output
    // RMS-normed per head and times silu(z); ssm_out back to dim. ssmFusedInput: q, k, v and z
    // come from one ssm_in (and beta, alpha from one ssm_ba) grouped per key head (Qwen3-Next);
    // else from attn_qkv, attn_gate, ssm_beta and ssm_alpha (Qwen3.5). A key head serves
    // ssmVHeads / ssmKHeads value heads: value head h reads key head h % ssmKHeads where
    // ssmTiledHeads (Qwen3.5), h / (ssmVHeads / ssmKHeads) otherwise (Qwen3-Next).
    int ssmConvKernel = 0, ssmKHeads = 0, ssmVHeads = 0, ssmStateDim = 0, ssmHeadVDim = 0;
    bool ssmFusedInput = false, ssmTiledHeads = false;
    int ssmKeyDim() const { return ssmKHeads * ssmStateDim; }
    int ssmValueDim() const { return ssmVHeads * ssmHeadVDim; }
    int ssmConvDim() const { return 2 * ssmKeyDim() + ssmValueDim(); }
    // Floats of one linear layer's recurrent state: the convolution's last kernel - 1 inputs per
    // channel, then each value head's (headVDim x stateDim) matrix. Fixed, whatever the context.
    uint64_t recurrentStateFloats() const
    {
        return uint64_t(std::max(ssmConvKernel - 1, 0)) * uint64_t(ssmConvDim()) +
               uint64_t(ssmVHeads) * uint64_t(ssmHeadVDim) * uint64_t(ssmStateDim);
    }
    bool linearLayer(int layer) const { return attentionKind(layer) == AttentionKind::Linear; }
    int linearLayers() const
    {
        return int(std::count(attentionKinds.begin(), attentionKinds.end(), AttentionKind::Linear));
    }
    // A family with linear layers sets their shapes (ssm*), and only such a family: O(1) for the
    // passes' buffer arithmetic (hiddenFloats).
    bool hybrid() const { return ssmVHeads > 0; }
    // Layers with a KV cache (all but the linear ones), and layer l's place among them.
    int kvLayers() const { return nLayers - linearLayers(); }
    int kvSlot(int layer) const
    {
        int slot = 0;
        for (int l = 0; l < layer; ++l) slot += linearLayer(l) ? 0 : 1;
        return slot;
    }
    // The positions layer l's KV cache keeps for a context of ctx and passes of `batch` tokens:
    // ctx, or for a sliding-window layer a ring of slidingWindow + batch - 1 rows where that is
    // fewer (position t at row t % rows; a pass stores its batch's keys before its queries
    // attend, so the batch's first query still finds its window). 0 for a linear layer.
    int kvPositions(int layer, int ctx, int batch) const
    {
        if (linearLayer(layer)) return 0;
        if (attentionKind(layer) != AttentionKind::SlidingWindow || slidingWindow <= 0) return ctx;
        return int(std::min<int64_t>(ctx, int64_t(slidingWindow) + std::max(batch, 1) - 1));
    }
    // Layer l's ring size where its cache is a ring (kvPositions fewer than ctx), else 0.
    int kvRing(int layer, int ctx, int batch) const
    {
        const int kept = kvPositions(layer, ctx, batch);
        return kept > 0 && kept < ctx ? kept : 0;
    }
    // The sum over the layers of kvPositions: what the KV cache holds, in positions.
    uint64_t kvPositionsTotal(int ctx, int batch) const
    {
        uint64_t total = 0;
        for (int l = 0; l < nLayers; ++l) total += uint64_t(kvPositions(l, ctx, batch));
        return total;
    }
    // Full-attention layers whose q projection carries an output gate: per head [q_h | gate_h]
    // (2 * qDim rows), the attention's output times sigmoid(gate) before wo (Qwen3.5, Qwen3-Next).
    bool attentionOutputGate = false;
    // Multi-section RoPE (rope.dimension_sections, Qwen3.5's interleaved kind): rotated pair i
    // takes the position of section (t, h, w or e) its index falls in. A text token's t, h and w
    // are its position and e is 0, so a pair of the e section does not rotate. All zero: none.
    int ropeSections[4] = {0, 0, 0, 0};
    // Multi-token-prediction layers after the main ones (nextn_predict_layers): in the file and
    // its tensor table (for speculative decoding), not among nLayers, not run.
    int nextnLayers = 0;

    bool moe() const { return nExperts > 0; }
    // Floats per token of the FFN's working vectors (LayerStep's hb and hb2): the dense FFN's
    // hidden values, or a MoE token's routed experts' and shared expert's hidden values side by
    // side, their outputs (one of dim per expert) and the router's logits.
    int hiddenFloats() const;
    // The expert cache's slots per layer for a request (0: twice the experts a token uses), within
    // [nExpertsUsed, nExperts]: what the runtime allocates and the planner costs.
    int expertSlots(int requested) const;
    int qDim() const { return nHeads * headDim; }
    int embeddingDim() const { return embedDim > 0 ? embedDim : dim; }
    int kvDim() const { return nKvHeads * headDim; }
};

// Architectures this engine runs today.
const char* supportedArchitectures();  // "llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, olmoe, opt, relu-llama"

Result<LlamaConfig> llamaConfigFromGguf(const gguf::File& file);
// The same from metadata keyed like GGUF's (a model package's hyper-parameters JSON).
Result<LlamaConfig> llamaConfigFromMetadata(const gguf::Metadata& metadata);

}  // namespace spillway
