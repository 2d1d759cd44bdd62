#pragma once
// What a session of a model allocates on its device besides the weights: the KV cache and the
// activation buffers. The planner budgets with it and LlamaSession (core/runtime) allocates by it,
// so the two always agree.

#include <array>
#include <cstdint>

#include "core/model/llama_model.h"
#include "gpu/device.h"

namespace spillway::plan {

// contextLength <= 0: the model's trained context, capped at 4096 tokens.
int resolveContext(const LlamaConfig& c, int contextLength);

// The session's device buffers in LlamaSession's order (x, xb, q, att, scores, hb, hb2, logits,
// keys, values, key scales, value scales, the new positions' K and V, the recurrent state), in
// bytes; 0 where a buffer is not needed (the F32 cache has no scales and is written by the K/V
// projections directly; a model without linear-attention layers has no recurrent state). The
// KV cache is the attention layers' alone (a sliding-window layer's a ring: kvCacheBytes); the
// recurrent state a fixed size per linear layer,
// whatever the context. `ctx` is resolved already; `batch` tokens in flight.
using SessionBuffers = std::array<uint64_t, 15>;
SessionBuffers sessionBuffers(const LlamaConfig& c, int ctx, int batch, gpu::KvType kv, bool everyLogits);

// All of them together, for a context length as SessionOptions takes it.
uint64_t sessionWorkingBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kvType,
                             bool everyLogits = false);
// The KV cache alone: the positions its layers keep (LlamaConfig::kvPositionsTotal: contextLength
// per full-attention layer, a sliding-window layer's ring where that is fewer, for passes of
// `batch` tokens) * 2 * kvHeads * kvVectorBytes(kvType, headDim).
uint64_t kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType, int batch);
// The linear-attention layers' recurrent state (fp32), the same at every context length.
uint64_t recurrentStateBytes(const LlamaConfig& c);

// State that cannot be cut back (linear layers' states, sliding-window rings) is kept in
// snapshots in host memory (core/runtime/recurrent_state.h): one snapshot's bytes (every linear
// layer's state, the window of every ring layer), 0 for a model with neither; how many a session
// keeps when `requested` are asked for (at most 1 GiB of them and 64, at least 2 where asked);
// and all of them, the RAM the planner sets aside.
constexpr int kStateSnapshots = 8;
// One ring layer's window in a snapshot: window - 1 keys and values of kvVectorBytes per KV head.
uint64_t ringWindowBytes(const LlamaConfig& c, gpu::KvType kv);
uint64_t stateSnapshotEach(const LlamaConfig& c, int ctx, int batch, gpu::KvType kv);
int stateSnapshotCount(uint64_t each, int requested);
uint64_t stateSnapshotBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kv,
                            int requested = kStateSnapshots);

}  // namespace spillway::plan
