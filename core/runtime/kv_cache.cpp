#include "core/runtime/kv_cache.h"

#include <utility>

namespace spillway {

KvCache::KvCache(const LlamaConfig& c, int ctx, gpu::KvType type, Buffers buffers)
    : m_buffers(std::move(buffers)),
      m_type(type),
      m_ctx(ctx),
      m_kvDim(size_t(c.kvDim())),
      m_layerBytes(size_t(ctx) * size_t(c.kvDim()) * gpu::kvElementBytes(type)),
      m_layerVectors(size_t(ctx) * size_t(c.nKvHeads))
{
    m_slots.resize(size_t(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l) m_slots[size_t(l)] = c.kvSlot(l);
}

void KvCache::describe(gpu::AttentionArgs& a, int layer, int pos, int i) const
{
    a.kCache = layerBase(m_buffers.keys, layer);
    a.vCache = layerBase(m_buffers.values, layer);
    a.kvType = m_type;
    if (m_type == gpu::KvType::Q8) {
        a.kScales = m_buffers.keyScales.as<float>() + size_t(m_slots[size_t(layer)]) * m_layerVectors;
        a.vScales = m_buffers.valueScales.as<float>() + size_t(m_slots[size_t(layer)]) * m_layerVectors;
    }
    if (!direct()) {
        a.kNew = newKey(layer, pos, i);
        a.vNew = newValue(layer, pos, i);
    }
}

}  // namespace spillway
