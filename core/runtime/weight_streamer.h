#pragma once
// The executor of a placement: keeps device-resident weights in device memory, pinned-RAM
// weights in host memory, and brings streamed units (a layer's matrices, or the output head)
// into a ring of device slots before they are used: from RAM by a host→device copy, from the
// SSD by direct reads (into the slot where the device allows it, else through a pinned staging
// buffer per slot). With a prefetch depth k, units L+1..L+k are loaded while L computes: an
// issuer thread enqueues a unit's SSD reads as soon as its slot is free, so the reader's queue
// stays full across unit boundaries, and a completer thread waits for them in order, copies
// staged and RAM-tier weights to the device and marks the unit ready. With k = 0 each unit is
// loaded synchronously before use (the naive baseline).
//
// Units are used in a fixed cyclic order (layers 0..n-1, then the head); acquire/release must
// follow it. Not thread-safe: one inference thread drives it (the loader is internal).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "core/plan/placement.h"
#include "core/plan/streamer_layout.h"
#include "gpu/device.h"

namespace spillway {

namespace trace { class Recorder; }

struct StreamerOptions {
    uint64_t hostBudget = 0;       // pinned host bytes allowed (RAM-tier weights + staging); 0 = any
    int ioQueueDepth = 16;         // direct reads in flight (the probe finds QD 16 of 4 MiB near the best)
    size_t ioChunkBytes = size_t{4} << 20;
    trace::Recorder* trace = nullptr;  // spans of every read, copy and stall; may be null
    // Layer matrices another part of the runtime brings in itself (the neuron cache's FFN
    // weights): not loaded, and absent (data null) from the acquired layers' views. The
    // placement needs no entry for them.
    std::vector<std::string> notStreamed;
    // Called as the weights are copied in at creation (device-tier matrices to the device, RAM-tier
    // ones into pinned memory), with the bytes copied so far and in all; returning false cancels
    // the creation (ErrorCode::Cancelled, nothing kept). Weights used in place (the CPU device's
    // mapping) copy nothing. May be empty.
    std::function<bool(uint64_t done, uint64_t total)> loadProgress;
};

struct StreamerMemory {
    uint64_t residentDeviceBytes = 0;  // device-tier weights and norms in device buffers
    uint64_t slotBytes = 0;            // one slot
    int slotCount = 0;
    uint64_t hostBytes = 0;            // RAM-tier weights
    uint64_t stagingBytes = 0;         // pinned staging for SSD reads, all slots' (0 when direct)
};

// A RAM-tier tensor split by HeteGen's α: the device computes rows [0, deviceRows) from its slot
// (whose view has only those rows); the CPU computes `host` (the other rows) straight from
// pinned RAM. `deviceData` identifies the tensor: it is the device view's data pointer.
struct HostRows {
    const void* deviceData = nullptr;
    int64_t deviceRows = 0;
    gpu::MatrixView host;
};

struct StreamerStats {
    uint64_t ssdBytes = 0;      // read from the SSD
    uint64_t uploadBytes = 0;   // copied host→device
    uint64_t stallNs = 0;       // compute waited for a unit to arrive
    uint64_t unitLoads = 0;
};

class WeightStreamer {
public:
    static Result<std::unique_ptr<WeightStreamer>> create(const LlamaModel& model, gpu::Device& device,
                                                          const plan::Placement& placement,
                                                          const StreamerOptions& options);
    // The device allocations every placement makes besides the weight matrices (unless the
    // weights are used in place): the buffer of norms, biases and other vectors, and OPT's
    // learned positions and embedding projections. What the planner sets aside for them.
    static std::vector<uint64_t> residentExtraAllocations(const LlamaModel& model);
    ~WeightStreamer();
    WeightStreamer(const WeightStreamer&) = delete;
    WeightStreamer& operator=(const WeightStreamer&) = delete;

    // Waits for layer `layer`'s weights to be in device memory; its views stay valid until
    // release(layer). Errors (a failed read) are sticky: every later call returns them too.
    Result<const LlamaLayerWeights*> acquireLayer(int layer);
    Result<const gpu::MatrixView*> acquireHead();
    // Called once the unit's ops were issued: synchronizes the device before the slot can be
    // refilled. unit = layer index, or layers for the head.
    void release(int unit);

    // The split tensors of the unit acquired last (empty for most placements).
    const std::vector<HostRows>& hostRows() const;
    bool hasSplits() const;

    // out = row `token` of the embedding, as F32 in device memory.
    void embedding(int token, float* out);
    const float* outputNorm() const { return m_outputNorm; }
    const float* outputNormBias() const { return m_outputNormBias; }  // LayerNorm models
    // Learned position embeddings (OPT), resident on the device; absent (data null) otherwise.
    const gpu::MatrixView& positionEmbedding() const { return m_positions; }
    // Embedding projections (opt-350m: LlamaWeights::projectIn/projectOut), resident on the
    // device; absent (data null) otherwise.
    const gpu::MatrixView& projectIn() const { return m_projectIn; }
    const gpu::MatrixView& projectOut() const { return m_projectOut; }

    // The layer and head matrices that stay in device memory for the whole session (neither
    // streamed through a slot nor split with the CPU), as matvec reads them: what a decode
    // step reads from device memory every token. (spillway-cli bench reads the same bytes for
    // its ceiling.)
    std::vector<gpu::MatrixView> residentMatrices() const;

    const StreamerMemory& memory() const { return m_memory; }
    StreamerStats stats() const;
    // Spans are tagged with this pass number (the session sets it to its forward-call count).
    void setPass(uint32_t pass);

    struct Impl;

private:
    WeightStreamer() = default;
    std::unique_ptr<Impl> m_impl;
    const float* m_outputNorm = nullptr;
    const float* m_outputNormBias = nullptr;
    gpu::MatrixView m_positions;
    gpu::MatrixView m_projectIn, m_projectOut;
    StreamerMemory m_memory;
};

}  // namespace spillway
