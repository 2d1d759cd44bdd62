#pragma once
// One conversation's state on a device: activation buffers and the KV cache, all allocated up
// front, and the weight streamer that executes the session's placement. forward() allocates
// nothing. A pass is the embedding, a LayerStep per layer (attention and the FFN: layer_step.h)
// and the head; the pieces it composes are their own classes: the KV cache (kv_cache.h),
// HeteGen's CPU/GPU row split (row_split.h) and the activation-sparse FFN (sparse_ffn.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "core/plan/placement.h"
#include "core/plan/session_memory.h"
#include "core/runtime/expert_cache.h"
#include "core/runtime/kv_cache.h"
#include "core/runtime/layer_step.h"
#include "core/runtime/recurrent_state.h"
#include "core/runtime/row_split.h"
#include "core/runtime/sparse_ffn.h"
#include "core/runtime/weight_streamer.h"
#include "gpu/device.h"

namespace spillway {

struct SessionOptions {
    int contextLength = 0;  // <= 0: the model's trained context, capped at 4096 tokens
    int batch = 32;         // prompt tokens processed per pass over the weights
    // forward() returns the logits of every token it ran, (n, vocab) with row i for tokens[i],
    // instead of the last token's only; it then takes at most `batch` tokens per call. For
    // perplexity and other per-position measures: the head runs on every token.
    bool everyLogits = false;
    // Where the weights live. Unset: everything on the device (used in place from the mapped
    // file on the CPU device).
    std::optional<plan::Placement> placement;
    StreamerOptions streamer;
    // Element type of the KV cache: f32 (exact, the default); f16 or q8 (int8 with a float scale
    // per position and kv head) take 1/2 or about 1/4 of the bytes, at a small cost in accuracy.
    gpu::KvType kvType = gpu::KvType::F32;
    NeuronCacheOptions neuronCache;
    // Mixtures of experts: the slots of the cache that brings in the experts a placement leaves
    // on the SSD (expert_cache.h); unused otherwise.
    ExpertCacheOptions experts;
    // Mixtures of experts, benchmarks only: each token's experts drawn at this profile's rates
    // instead of the router's choice (plan::RoutingDraw, the same seed every session: runs draw
    // alike): a known routing skew on a random-weight model. The outputs are not the model's.
    std::shared_ptr<const plan::RoutingProfile> drawnRouting;
    // Hybrid models (linear-attention layers): how many snapshots of the recurrent state are
    // kept in host memory (recurrent_state.h; at most 1 GiB of them, at least 2), and every how
    // many positions a prompt leaves one besides those the generator asks for (keepStateAt).
    int stateSnapshots = plan::kStateSnapshots;
    int stateSnapshotInterval = 1024;
};

class LlamaSession {
public:
    static Result<std::unique_ptr<LlamaSession>> create(const LlamaModel& model, gpu::Device& device,
                                                        const SessionOptions& options);
    static Result<std::unique_ptr<LlamaSession>> create(const LlamaModel& model, gpu::Device& device,
                                                        int contextLength);
    ~LlamaSession();
    LlamaSession(const LlamaSession&) = delete;
    LlamaSession& operator=(const LlamaSession&) = delete;

    int contextLength() const { return m_ctx; }
    int batch() const { return m_batch; }
    gpu::KvType kvType() const { return m_options.kvType; }
    // Device bytes of this session's KV cache (keys, values and Q8 scales).
    uint64_t kvCacheBytes() const { return kvCacheBytes(m_model.config(), m_ctx, m_options.kvType, m_batch); }
    const LlamaModel& model() const { return m_model; }
    // The device this session computes on (the engine's, or the CPU after a fallback).
    const gpu::Device& device() const { return m_device; }
    const WeightStreamer& streamer() const { return *m_streamer; }
    // What the neuron cache loaded (zeros when it is off).
    NeuronCacheReport neuronCacheReport() const { return m_sparse ? m_sparse->report() : NeuronCacheReport{}; }
    // What the expert cache brought in (zeros when no experts lie on the SSD).
    ExpertCacheReport expertCacheReport() const { return m_experts ? m_experts->report() : ExpertCacheReport{}; }
    // How often each expert was chosen, per layer (layer * nExperts + e; empty for dense models).
    const std::vector<uint64_t>& expertCounts() const { return m_step->expertCounts(); }

    // Device bytes a session of this shape allocates besides the weights (KV cache, activations).
    static uint64_t workingBytes(const LlamaConfig& c, int contextLength, int batch,
                                 gpu::KvType kvType = gpu::KvType::F32, bool everyLogits = false);
    // Device bytes of the KV cache alone, for passes of `batch` tokens (plan::kvCacheBytes: the
    // positions every attention layer keeps, a sliding-window layer's ring where that is fewer).
    static uint64_t kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType, int batch);

    // Runs `tokens` at positions pos, pos+1, ... (positions before pos must have been run in
    // this session; all must be < contextLength()) and returns the logits of the last token
    // (vocabSize floats, host-readable, valid until the next call). Prompt tokens go through
    // the layers `batch` at a time, so streamed weights are brought in once per batch.
    // A hybrid model's recurrent state cannot go back: forward() at a position before the one
    // it has reached puts back the latest snapshot at or before it and runs the tokens between
    // again (the session keeps the ids it ran), so any pos up to the end of what was run is
    // right, at the cost of those tokens.
    Result<const float*> forward(std::span<const int32_t> tokens, int pos);
    Result<const float*> forward(int32_t token, int pos) { return forward({&token, 1}, pos); }
    // Asks a hybrid model's session to keep a snapshot of its recurrent state when it reaches
    // `position` (the generator: the prompt's end less one token, where Regenerate and the next
    // turn go back to). Nothing for other models.
    void keepStateAt(int position) { m_state.want(position); }
    // The positions of the snapshots kept (hybrid models; empty otherwise).
    std::vector<int> stateSnapshots() const { return m_state.snapshotPositions(); }
    // Device bytes of the recurrent state (0 without linear-attention layers).
    uint64_t recurrentStateBytes() const { return m_state.bytes(); }
    // Tokens run again to bring the recurrent state back to an earlier position, since creation.
    uint64_t rerunTokens() const { return m_rerunTokens; }

private:
    LlamaSession(const LlamaModel& model, gpu::Device& device);
    Result<const float*> forwardBatch(std::span<const int32_t> tokens, int pos);
    Result<const float*> runBatch(std::span<const int32_t> tokens, int pos);  // forwardBatch's pass
    // The DeviceCompute spans of the pass just synchronized, from the device's marks.
    void recordDeviceSpans(const char* layerName, uint32_t pass);
    void matvec(std::span<const gpu::MatvecJob> jobs) { m_split->run(jobs); }

    const LlamaModel& m_model;
    gpu::Device& m_device;
    int m_ctx = 0;
    int m_batch = 1;
    uint32_t m_pass = 0;
    gpu::RopeParams m_rope;
    std::unique_ptr<WeightStreamer> m_streamer;
    SessionOptions m_options;

    // Activations (device memory), lent to the layer step (layer_step.h says what each holds).
    gpu::Buffer m_ropeFactors;  // Llama 3 RoPE scaling: one divisor per rotated pair
    gpu::Buffer m_x;       // (batch, dim) residual streams of the tokens in flight
    // Per token in flight (`batch` of each, one after another; a single token uses the first):
    gpu::Buffer m_xb;      // (max(dim, qDim, embeddingDim)) normed input / attention output projected
    gpu::Buffer m_q;       // (qDim)
    gpu::Buffer m_att;     // (qDim) attention output before wo
    gpu::Buffer m_hb;      // (ffnDim) gate, then silu(gate) * up
    gpu::Buffer m_hb2;     // (ffnDim) up
    // Shared by all tokens:
    gpu::Buffer m_scores;  // (nHeads, ctx)
    gpu::Buffer m_logits;  // (vocab), or (batch, vocab) with everyLogits
    KvCache m_kv;          // keys and values (kv_cache.h)
    gpu::Buffer m_stateBuffer;  // the linear layers' recurrent state
    RecurrentState m_state;     // (recurrent_state.h)
    std::vector<int32_t> m_history;  // hybrid models: the ids run at each position
    uint64_t m_rerunTokens = 0;
    std::vector<gpu::MatvecJob> m_batchJobs;  // the head's, reused
    std::unique_ptr<float[]> m_hostLogits;  // for devices whose memory the host cannot read
    std::unique_ptr<RowSplit> m_split;    // HeteGen's CPU/GPU row split (row_split.h)
    std::unique_ptr<SparseFfn> m_sparse;  // the activation-sparse FFN (null when off)
    std::unique_ptr<ExpertCache> m_experts;  // experts on the SSD, brought in as chosen (null: none)
    std::unique_ptr<LayerStep> m_step;    // one block on the device (layer_step.h)
    Status m_ffnError;  // a failed bundle read, returned by forward()
    // Per layer and the head, of the pass being traced on a device with its own clock: when the
    // host issued its ops and when it was done with them; the device's marks (takeMarks).
    std::vector<uint64_t> m_issuedNs, m_returnedNs, m_marksNs;
};

}  // namespace spillway
