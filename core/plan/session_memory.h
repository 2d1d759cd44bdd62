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
// keys, values, key scales, value scales, the new positions' K and V), in bytes; 0 where a buffer
// is not needed (the F32 cache has no scales and is written by the K/V projections directly).
// `ctx` is resolved already; `batch` tokens in flight.
using SessionBuffers = std::array<uint64_t, 14>;
SessionBuffers sessionBuffers(const LlamaConfig& c, int ctx, int batch, gpu::KvType kv, bool everyLogits);

// All of them together, for a context length as SessionOptions takes it.
uint64_t sessionWorkingBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kvType,
                             bool everyLogits = false);
// The KV cache alone: contextLength times layers * 2 * kvHeads * kvVectorBytes(kvType, headDim).
uint64_t kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType);

}  // namespace spillway::plan
