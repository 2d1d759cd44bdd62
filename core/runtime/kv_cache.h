#pragma once
// One session's keys and values on its device: (attention layer, ctx, kvDim) values of the session's
// KvType, the Q8 scales (one float per position and KV head), and, for every type but F32, the
// fp32 scratch where the tokens in flight wait for the attention op to convert their K and V into
// the cache (an F32 cache takes them straight from the projections). Allocated once, with the
// session's other buffers (plan::sessionBuffers sizes them); a position is written when its token
// runs, so a conversation that goes back to an earlier position (an edited turn) writes over it.
// Linear-attention layers (LlamaConfig::AttentionKind::Linear) have no place in it: a layer's
// keys are at its slot among the attention layers (LlamaConfig::kvSlot).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/model/llama_model.h"
#include "gpu/device.h"

namespace spillway {

class KvCache {
public:
    struct Buffers {
        gpu::Buffer keys, values;              // (layer, ctx, kvDim) of `type`
        gpu::Buffer keyScales, valueScales;    // Q8 only: (layer, ctx, nKvHeads) floats
        gpu::Buffer newKeys, newValues;        // all but F32: (batch, kvDim) floats
    };

    KvCache() = default;
    KvCache(const LlamaConfig& c, int ctx, gpu::KvType type, Buffers buffers);

    gpu::KvType type() const { return m_type; }
    int contextLength() const { return m_ctx; }
    // Whether the projections write K and V into the cache directly (F32).
    bool direct() const { return m_type == gpu::KvType::F32; }

    // Where the K (V) of token i of a pass starting at `pos` goes in layer `layer`: its place in
    // an F32 cache, else the scratch the attention op converts from.
    float* newKey(int layer, int pos, int i) const
    {
        return direct() ? reinterpret_cast<float*>(layerBase(m_buffers.keys, layer)) + size_t(pos + i) * m_kvDim
                        : m_buffers.newKeys.as<float>() + size_t(i) * m_kvDim;
    }
    float* newValue(int layer, int pos, int i) const
    {
        return direct() ? reinterpret_cast<float*>(layerBase(m_buffers.values, layer)) + size_t(pos + i) * m_kvDim
                        : m_buffers.newValues.as<float>() + size_t(i) * m_kvDim;
    }
    // The cache's part of an attention op for token i of a pass at `pos` in layer `layer`: the
    // layer's keys and values, their type and scales, and the new K and V where they wait.
    void describe(gpu::AttentionArgs& a, int layer, int pos, int i) const;

private:
    uint8_t* layerBase(const gpu::Buffer& b, int layer) const
    {
        return b.as<uint8_t>() + size_t(m_slots[size_t(layer)]) * m_layerBytes;
    }

    Buffers m_buffers;
    gpu::KvType m_type = gpu::KvType::F32;
    int m_ctx = 0;
    size_t m_kvDim = 0;
    size_t m_layerBytes = 0;    // one layer's keys (or values)
    size_t m_layerVectors = 0;  // one layer's positions x KV heads (Q8 scales)
    std::vector<int> m_slots;   // per layer: its place among the attention layers
};

}  // namespace spillway
