#pragma once
// Hyper-parameters of a Llama-family model, read from GGUF metadata and checked for sense.

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
    enum class AttentionKind : uint8_t { Full, SlidingWindow };
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
