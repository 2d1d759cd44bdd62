#pragma once
// One transformer block on the device, for the tokens of one pass: attention (with the session's
// KV cache) and the FFN, dense or through the activation-sparse FFN. LlamaSession runs the
// embedding, one LayerStep per layer and the head; the step owns no memory, it works in the
// session's activation buffers. A linear-attention layer (hybrid models) runs a Gated DeltaNet
// mixer on its recurrent state (recurrent_state.h) where attention would be.
//   x += wo · attention(rope(wq·n), rope(wk·n), wv·n), n = norm(x)    (pre-norm; post-norm
//   x += down · (act(gate·n) ⊙ up·n), n = norm(x)                      norms after the adds)

#include <memory>
#include <vector>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "core/plan/routing_profile.h"
#include "core/runtime/expert_cache.h"
#include "core/runtime/kv_cache.h"
#include "core/runtime/recurrent_state.h"
#include "gpu/device.h"

namespace spillway {

class RowSplit;
class SparseFfn;

class LayerStep {
public:
    // The session's activations (device memory): per token in flight, `batch` of each one after
    // another; scores are shared by all tokens.
    struct Buffers {
        float* xb = nullptr;      // (max(dim, qDim, embeddingDim)) normed input / attention output projected
        float* q = nullptr;       // (qDim)
        float* att = nullptr;     // (qDim) attention output before wo
        float* hb = nullptr;      // (ffnDim) gate, then act(gate) * up
        float* hb2 = nullptr;     // (ffnDim) up
        float* scores = nullptr;  // (nHeads, ctx)
    };
    // sparse: the activation-sparse FFN in place of the dense one (null: dense).
    LayerStep(const LlamaConfig& config, gpu::Device& device, const Buffers& buffers, const KvCache& kv,
              const gpu::RopeParams& rope, RowSplit& matvec, SparseFfn* sparse);

    // n tokens (at positions pos...) through layer `layer`, step by step: each matrix gets every
    // token's job in one dispatch (a device that groups jobs on the same matrix reads it once for
    // all), and attention runs token by token in order. A token goes through the same operations
    // in the same order whatever n is, so a prompt batch gives the results of one token at a time,
    // bit for bit. The sparse FFN and HeteGen's splits take one token per call (n = 1). An error
    // (a failed bundle read of the sparse FFN) is returned once the layer's ops are issued.
    Status run(const LlamaLayerWeights& L, int layer, float* x, int n, int pos);
    // The block's input norm: RMSNorm, or LayerNorm with its bias.
    void norm(const float* x, const float* weight, const float* bias, float* out);
    // Floats of one token's xb.
    static size_t xbFloats(const LlamaConfig& c);
    // v = max(0, v - shift), on the device (ReLU models' activations; the sparse FFN's too).
    static void shiftedRelu(gpu::Device& device, float* v, int n, float shift);

    // The cache that brings in the experts of the layers it serves (set by the session).
    void setExpertCache(ExpertCache* cache) { m_experts = cache; }
    // The linear-attention layers' state (set by the session of a hybrid model).
    void setRecurrentState(RecurrentState* state) { m_state = state; }
    // Each token's experts drawn at `profile`'s rates from now on instead of the router's top k
    // (plan::RoutingDraw: a benchmark's synthetic routing; the weights are still the router's
    // probabilities of the drawn experts).
    void drawRouting(const plan::RoutingProfile& profile, uint64_t seed)
    {
        m_draw = std::make_unique<plan::RoutingDraw>(profile, seed);
    }
    // How often each expert was chosen, per layer: counts[layer * nExperts + e] (mixtures of
    // experts; empty otherwise), since the step was made.
    const std::vector<uint64_t>& expertCounts() const { return m_expertCounts; }
    // The experts the last pass chose for its tokens: token i's j-th at [i * nExpertsUsed + j],
    // in order of probability (the last layer run).
    const std::vector<int>& lastChoice() const { return m_choice; }

private:
    // gate = act(gate) * up over n values: SwiGLU, or the architecture's clamped one.
    void activate(float* gate, const float* up, int n);
    Status experts(const LlamaLayerWeights& L, int layer, float* x, int n);
    // A Gated DeltaNet mixer (linear-attention layer) in place of attention: its projections for
    // the n tokens in one dispatch each, then the state stepped token by token (layer_step.cpp).
    void linearAttention(const LlamaLayerWeights& L, int layer, float* x, int n, int pos);
    // Parts the q projection of a gated attention (per head [q_h | gate_h], in hb) into q and
    // the gates (hb2).
    void splitGatedQuery(const float* projected, float* q, float* gates);

    const LlamaConfig& m_c;
    gpu::Device& m_device;
    Buffers m_buf;
    const KvCache& m_kv;
    const gpu::RopeParams& m_rope;
    RowSplit& m_matvec;
    SparseFfn* m_sparse;
    std::vector<gpu::MatvecJob> m_jobs;  // reused
    // Mixture of experts: the router's logits on the host, each token's choice and weights.
    std::vector<float> m_routerLogits, m_weight, m_sharedWeight, m_probs, m_hostInput;
    std::vector<int> m_choice, m_order, m_distinct;
    std::vector<char> m_picked;  // per expert: chosen by a token of the pass
    std::vector<ExpertViews> m_views;
    ExpertCache* m_experts = nullptr;  // the experts the placement leaves on the SSD (null: none)
    RecurrentState* m_state = nullptr;  // hybrid models' linear layers (null: none)
    std::vector<uint64_t> m_expertCounts;
    std::unique_ptr<plan::RoutingDraw> m_draw;  // null: the router chooses
};

}  // namespace spillway
