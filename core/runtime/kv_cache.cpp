#include "core/runtime/kv_cache.h"

#include "core/plan/session_memory.h"

#include <algorithm>
#include <utility>

namespace spillway {

KvCache::KvCache(const LlamaConfig& c, int ctx, int batch, gpu::KvType type, Buffers buffers)
    : m_buffers(std::move(buffers)),
      m_type(type),
      m_ctx(ctx),
      m_window(c.slidingWindow),
      m_kvDim(size_t(c.kvDim())),
      m_rowBytes(size_t(c.kvDim()) * gpu::kvElementBytes(type)),
      m_rowScales(size_t(c.nKvHeads))
{
    m_first.resize(size_t(c.nLayers));
    m_ring.assign(size_t(c.nLayers), 0);
    size_t rows = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        m_first[size_t(l)] = rows;
        rows += size_t(c.kvPositions(l, ctx, batch));
        m_ring[size_t(l)] = c.kvRing(l, ctx, batch);
        m_rings = m_rings || m_ring[size_t(l)] > 0;
    }
    m_windowBytes = m_rings ? plan::ringWindowBytes(c, type) : 0;
}

void KvCache::describe(gpu::AttentionArgs& a, int layer, int pos, int i) const
{
    a.kCache = layerBase(m_buffers.keys, layer);
    a.vCache = layerBase(m_buffers.values, layer);
    a.kvType = m_type;
    a.ring = m_ring[size_t(layer)];
    if (m_type == gpu::KvType::Q8) {
        a.kScales = layerScales(m_buffers.keyScales, layer);
        a.vScales = layerScales(m_buffers.valueScales, layer);
    }
    if (!direct()) {
        a.kNew = newKey(layer, pos, i);
        a.vNew = newValue(layer, pos, i);
    }
}

void KvCache::copyWindow(gpu::Device& device, int layer, int position, uint8_t* host, bool save) const
{
    // Host layout: keys (window - 1 rows), values, key scales, value scales; row j holds
    // position position - (window - 1) + j (rows before position 0 are left as they are).
    const int rows = std::max(m_window - 1, 0);
    const size_t scaleBytes = m_type == gpu::KvType::Q8 ? m_rowScales * sizeof(float) : 0;
    uint8_t* hostKeys = host;
    uint8_t* hostValues = hostKeys + size_t(rows) * m_rowBytes;
    uint8_t* hostKeyScales = hostValues + size_t(rows) * m_rowBytes;
    uint8_t* hostValueScales = hostKeyScales + size_t(rows) * scaleBytes;
    auto move = [&](uint8_t* h, uint8_t* d, size_t bytes) {
        if (save)
            device.download(h, d, bytes);
        else
            device.upload(d, h, bytes);
    };
    for (int t = std::max(0, position - rows); t < position; ++t) {
        const size_t j = size_t(t - (position - rows)), r = size_t(row(layer, t));
        move(hostKeys + j * m_rowBytes, layerBase(m_buffers.keys, layer) + r * m_rowBytes, m_rowBytes);
        move(hostValues + j * m_rowBytes, layerBase(m_buffers.values, layer) + r * m_rowBytes, m_rowBytes);
        if (scaleBytes == 0) continue;
        move(hostKeyScales + j * scaleBytes, reinterpret_cast<uint8_t*>(layerScales(m_buffers.keyScales, layer) + r * m_rowScales),
             scaleBytes);
        move(hostValueScales + j * scaleBytes,
             reinterpret_cast<uint8_t*>(layerScales(m_buffers.valueScales, layer) + r * m_rowScales), scaleBytes);
    }
}

void KvCache::saveWindow(gpu::Device& device, int layer, int position, uint8_t* out) const
{
    copyWindow(device, layer, position, out, true);
}

void KvCache::restoreWindow(gpu::Device& device, int layer, int position, const uint8_t* in) const
{
    copyWindow(device, layer, position, const_cast<uint8_t*>(in), false);
}

}  // namespace spillway
