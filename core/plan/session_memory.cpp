#include "core/plan/session_memory.h"

#include <algorithm>

namespace spillway::plan {

int resolveContext(const LlamaConfig& c, int contextLength)
{
    return contextLength > 0 ? contextLength : std::min(c.trainedContext, 4096);
}

SessionBuffers sessionBuffers(const LlamaConfig& c, int ctx, int batch, gpu::KvType kv, bool everyLogits)
{
    const uint64_t vectors = c.kvPositionsTotal(ctx, batch) * uint64_t(c.nKvHeads);
    const uint64_t kvBytes = vectors * uint64_t(c.headDim) * gpu::kvElementBytes(kv);
    const uint64_t scaleBytes = kv == gpu::KvType::Q8 ? vectors * sizeof(float) : 0;
    // Per token in flight: a prompt batch goes through each matrix in one dispatch.
    const uint64_t b = uint64_t(batch) * sizeof(float);
    const uint64_t newBytes = kv == gpu::KvType::F32 ? 0 : uint64_t(c.kvDim()) * b;
    constexpr uint64_t kFloat = sizeof(float);
    // One token's xb: the normed input, the attention output projected, or an embedding row.
    const uint64_t xbFloats = uint64_t(std::max({c.dim, c.qDim(), c.embeddingDim()}));
    return {
        uint64_t(c.dim) * b,                               // x
        xbFloats * b,                                      // xb
        uint64_t(c.qDim()) * b,                            // q
        uint64_t(c.qDim()) * b,                            // att
        uint64_t(c.nHeads) * uint64_t(ctx) * kFloat,       // scores
        uint64_t(c.hiddenFloats()) * b,                    // hb
        uint64_t(c.hiddenFloats()) * b,                    // hb2
        uint64_t(c.vocabSize) * (everyLogits ? b : kFloat), // logits
        kvBytes,                                           // keys
        kvBytes,                                           // values
        scaleBytes,                                        // key scales
        scaleBytes,                                        // value scales
        newBytes,                                          // the new positions' K
        newBytes,                                          // the new positions' V
        recurrentStateBytes(c),                            // the linear layers' state
    };
}

uint64_t sessionWorkingBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kvType, bool everyLogits)
{
    uint64_t total = 0;
    for (uint64_t bytes : sessionBuffers(c, resolveContext(c, contextLength), std::max(1, batch), kvType, everyLogits))
        total += bytes;
    return total;
}

uint64_t kvCacheBytes(const LlamaConfig& c, int contextLength, gpu::KvType kvType, int batch)
{
    const int ctx = std::max(0, resolveContext(c, contextLength));
    return c.kvPositionsTotal(ctx, batch) * 2 * uint64_t(c.nKvHeads) * gpu::kvVectorBytes(kvType, c.headDim);
}

uint64_t recurrentStateBytes(const LlamaConfig& c)
{
    return uint64_t(c.linearLayers()) * c.recurrentStateFloats() * sizeof(float);
}

uint64_t ringWindowBytes(const LlamaConfig& c, gpu::KvType kv)
{
    return 2 * uint64_t(std::max(c.slidingWindow - 1, 0)) * uint64_t(c.nKvHeads) * gpu::kvVectorBytes(kv, c.headDim);
}

uint64_t stateSnapshotEach(const LlamaConfig& c, int ctx, int batch, gpu::KvType kv)
{
    uint64_t rings = 0;
    for (int l = 0; l < c.nLayers; ++l) rings += c.kvRing(l, ctx, batch) > 0 ? 1 : 0;
    return recurrentStateBytes(c) + rings * ringWindowBytes(c, kv);
}

int stateSnapshotCount(uint64_t each, int requested)
{
    const int fit = int(std::min<uint64_t>((uint64_t(1) << 30) / std::max<uint64_t>(each, 1), 64));
    return std::max(std::min(requested, fit), std::min(requested, 2));
}

uint64_t stateSnapshotBytes(const LlamaConfig& c, int contextLength, int batch, gpu::KvType kv, int requested)
{
    const uint64_t each = stateSnapshotEach(c, resolveContext(c, contextLength), std::max(1, batch), kv);
    return each == 0 ? 0 : uint64_t(std::max(stateSnapshotCount(each, requested), 0)) * each;
}

}  // namespace spillway::plan
