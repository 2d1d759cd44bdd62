#pragma once
// One conversation's state on a device: activation buffers and the KV cache, all allocated up
// front, and the weight streamer that executes the session's placement. forward() allocates
// nothing.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "core/plan/placement.h"
#include "core/plan/neuron_cache_model.h"
#include "core/runtime/kv_cache.h"
#include "core/plan/neuron_cache.h"
#include "core/runtime/weight_streamer.h"
#include "gpu/device.h"

namespace spillway {

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
    // LlamaSession::chooseColdNeurons found from measured speeds), shipping where it is empty.
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
};

class LlamaSession {
public:
    static Result<std::unique_ptr<LlamaSession>> create(const LlamaModel& model, gpu::Device& device,
                                                        const SessionOptions& options);
    static Result<std::unique_ptr<LlamaSession>> create(const LlamaModel& model, gpu::Device& device,
                                                        int contextLength);
    ~LlamaSession();

    int contextLength() const { return m_ctx; }
    int batch() const { return m_batch; }
    gpu::KvType kvType() const { return m_options.kvType; }
    // Device bytes of this session's KV cache (keys, values and Q8 scales).
    uint64_t kvCacheBytes() const { return kvCacheBytes(m_model.config(), m_ctx, m_options.kvType); }
    const LlamaModel& model() const { return m_model; }
    const WeightStreamer& streamer() const { return *m_streamer; }
    // What the neuron cache loaded (zeros when it is off).
    NeuronCacheReport neuronCacheReport() const;

    // Device bytes a session of this shape allocates besides the weights (KV cache, activations).
    static uint64_t workingBytes(const LlamaConfig& c, int contextLength, int batch,
                                 gpu::KvType kvType = gpu::KvType::F32, bool everyLogits = false);
    // The weight tensors the neuron cache serves in place of the streamer (none when it is off),
    // and the device bytes its slots take: what a planner leaves out and sets aside.
    static std::vector<std::string> neuronCacheTensors(const LlamaModel& model, const NeuronCacheOptions& o);
    // gpu: for a device that cannot compute on host memory, whose cache also holds the int8
    // columns' scale tables and the buffers of one upload.
    static uint64_t neuronCacheDeviceBytes(const LlamaModel& model, const NeuronCacheOptions& o, bool gpu = false);
    // What each layer's cache loads and computes per token, estimated from the densities and LRU
    // hit-rate curves the model's predictors recorded (empty when it has none, or the cache is
    // off): the planner's input.
    static std::vector<plan::NeuronCacheLayerCost> neuronCacheCosts(const LlamaModel& model,
                                                                    const NeuronCacheOptions& o);
    // Per layer, where its cold neurons are best computed with these measured speeds
    // (plan::chooseColdNeurons), from the recorded densities, hit-rate curves and activity
    // frequencies; empty when the model records none (the session then ships).
    static std::vector<plan::ColdNeuronChoice> chooseColdNeurons(const LlamaModel& model, const NeuronCacheOptions& o,
                                                                 const hw::HardwareProfile& profile,
                                                                 const std::string& backend);
    // Device bytes of the KV cache alone: contextLength (resolved as in SessionOptions) times
    // layers * 2 * kvHeads * kvVectorBytes(kvType, headDim).
    static uint64_t kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType);

    // Runs `tokens` at positions pos, pos+1, ... (positions before pos must have been run in
    // this session; all must be < contextLength()) and returns the logits of the last token
    // (vocabSize floats, host-readable, valid until the next call). Prompt tokens go through
    // the layers `batch` at a time, so streamed weights are brought in once per batch.
    Result<const float*> forward(std::span<const int32_t> tokens, int pos);
    Result<const float*> forward(int32_t token, int pos) { return forward({&token, 1}, pos); }

private:
    LlamaSession(const LlamaModel& model, gpu::Device& device);  // sparse_ffn.cpp (SparseFfn is complete there)
    Result<const float*> forwardBatch(std::span<const int32_t> tokens, int pos);
    // The DeviceCompute spans of the pass just synchronized, from the device's marks.
    void recordDeviceSpans(const char* layerName, uint32_t pass);
    void layerStep(const LlamaLayerWeights& L, int layer, float* x, int n, int pos);
    Status sparseFfnBlock(const LlamaLayerWeights& L, int layer, const float* in, float* x);
    Status sparseFfnOnDevice(const LlamaLayerWeights& L, int layer, const float* in, float* x);
    Status fetchBundles(int layer);
    void sendArrivals(int layer);
    Status pinHotNeurons();
    const float* activityOnHost(const LlamaLayerWeights& L, const float* in);
    void takeLoads(int layer);
    void planBundleRuns(int layer);
    size_t stageBundleBatch(size_t first);
    Status startNeuronFetch(int layer, const float* attentionIn);
    Status createNeuronCache();
    void shiftedNormRelu(float* xb);
    void shiftedRelu(float* v, int n, float shift);  // v = max(0, v - shift), on the device
    // The block's input norm: RMSNorm, or LayerNorm with its bias.
    void norm(const float* x, const float* weight, const float* bias, float* out);  // relu-llama: xb = max(0, xb - shift) after an in-layer norm
    // Runs the jobs on the device, and the CPU's share of any split (HeteGen) tensor among them.
    void matvec(std::span<const gpu::MatvecJob> jobs);

    const LlamaModel& m_model;
    gpu::Device& m_device;
    int m_ctx = 0;
    int m_batch = 1;
    uint32_t m_pass = 0;
    gpu::RopeParams m_rope;
    std::unique_ptr<WeightStreamer> m_streamer;
    SessionOptions m_options;

    // Activations (device memory).
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
    std::vector<gpu::MatvecJob> m_batchJobs;  // layerStep's, reused
    std::unique_ptr<float[]> m_hostLogits;  // for devices whose memory the host cannot read
    // HeteGen splits on a device that cannot compute on host memory: a CPU device for the host
    // rows, and host copies of x and of the host rows' results.
    std::unique_ptr<gpu::Device> m_hostCpu;
    std::unique_ptr<float[]> m_hostX, m_hostY;
    // The neuron cache (null when off): sparse_ffn.cpp.
    struct SparseFfn;
    std::unique_ptr<SparseFfn> m_sparse;
    Status m_ffnError;  // a failed bundle read, returned by forward()
    // Per layer and the head, of the pass being traced on a device with its own clock: when the
    // host issued its ops and when it was done with them; the device's marks (takeMarks).
    std::vector<uint64_t> m_issuedNs, m_returnedNs, m_marksNs;
};

}  // namespace spillway
