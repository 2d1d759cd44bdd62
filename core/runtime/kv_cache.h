#pragma once
// One session's keys and values on its device: (attention layer, ctx, kvDim) values of the session's
// KvType, the Q8 scales (one float per position and KV head), and, for every type but F32, the
// fp32 scratch where the tokens in flight wait for the attention op to convert their K and V into
// the cache (an F32 cache takes them straight from the projections). Allocated once, with the
// session's other buffers (plan::sessionBuffers sizes them); a position is written when its token
// runs, so a conversation that goes back to an earlier position (an edited turn) writes over it.
// Linear-attention layers (LlamaConfig::AttentionKind::Linear) have no place in it: a layer's
// keys follow those of the attention layers before it. A sliding-window layer keeps a ring of
// LlamaConfig::kvPositions rows where that is fewer than ctx (position t at row t % rows): its
// older keys are gone, so going back further than the ring reaches needs a snapshot of the window
// (saveWindow / restoreWindow; the session's RecurrentState keeps them as it keeps the linear
// layers' states).

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
    // `batch`: the most tokens a pass runs (sizes the rings).
    KvCache(const LlamaConfig& c, int ctx, int batch, gpu::KvType type, Buffers buffers);

    gpu::KvType type() const { return m_type; }
    int contextLength() const { return m_ctx; }
    // Whether the projections write K and V into the cache directly (F32).
    bool direct() const { return m_type == gpu::KvType::F32; }

    // Where the K (V) of token i of a pass starting at `pos` goes in layer `layer`: its place in
    // an F32 cache, else the scratch the attention op converts from.
    float* newKey(int layer, int pos, int i) const
    {
        return direct() ? reinterpret_cast<float*>(layerBase(m_buffers.keys, layer)) + size_t(row(layer, pos + i)) * m_kvDim
                        : m_buffers.newKeys.as<float>() + size_t(i) * m_kvDim;
    }
    float* newValue(int layer, int pos, int i) const
    {
        return direct() ? reinterpret_cast<float*>(layerBase(m_buffers.values, layer)) + size_t(row(layer, pos + i)) * m_kvDim
                        : m_buffers.newValues.as<float>() + size_t(i) * m_kvDim;
    }
    // The cache's part of an attention op for token i of a pass at `pos` in layer `layer`: the
    // layer's keys and values, their type and scales, and the new K and V where they wait.
    void describe(gpu::AttentionArgs& a, int layer, int pos, int i) const;

    // Layer `layer`'s ring size (0: it keeps every position), and whether any layer has one.
    int ring(int layer) const { return m_ring[size_t(layer)]; }
    bool rings() const { return m_rings; }
    // A ring layer's window before `position` (positions [position - window + 1, position), the
    // ones the query at `position` sees besides its own; fewer at the start) to host memory, and
    // back: windowBytes() each, keys, values and (Q8) their scales.
    uint64_t windowBytes() const { return m_windowBytes; }  // plan::ringWindowBytes, 0 without rings
    void saveWindow(gpu::Device& device, int layer, int position, uint8_t* out) const;
    void restoreWindow(gpu::Device& device, int layer, int position, const uint8_t* in) const;

private:
    int row(int layer, int t) const
    {
        const int r = m_ring[size_t(layer)];
        return r > 0 ? t % r : t;
    }
    uint8_t* layerBase(const gpu::Buffer& b, int layer) const
    {
        return b.as<uint8_t>() + size_t(m_first[size_t(layer)]) * m_rowBytes;
    }
    float* layerScales(const gpu::Buffer& b, int layer) const
    {
        return b.as<float>() + size_t(m_first[size_t(layer)]) * m_rowScales;
    }
    // Copies the window's rows between the cache and host memory (save: to the host).
    void copyWindow(gpu::Device& device, int layer, int position, uint8_t* host, bool save) const;

    Buffers m_buffers;
    gpu::KvType m_type = gpu::KvType::F32;
    int m_ctx = 0;
    int m_window = 0;           // LlamaConfig::slidingWindow
    size_t m_kvDim = 0;
    size_t m_rowBytes = 0;      // one position's keys (or values) of one layer
    size_t m_rowScales = 0;     // one position's Q8 scales of one layer (KV heads)
    std::vector<size_t> m_first;  // per layer: its first row among all layers' rows
    std::vector<int> m_ring;      // per layer: its ring's rows, 0 for none
    bool m_rings = false;
    uint64_t m_windowBytes = 0;
};

}  // namespace spillway
