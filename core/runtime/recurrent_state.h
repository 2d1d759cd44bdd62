#pragma once
// The recurrent state of a hybrid model's linear-attention layers (Gated DeltaNet), where a KV
// cache would be: one fixed-size block per linear layer on the session's device (the
// convolution's last inputs and each value head's state matrix; LlamaConfig::
// recurrentStateFloats), plus the position it has reached: it holds tokens [0, position()).
//
// A KV cache can go back to any earlier position (an edited turn writes over the positions
// after it); a recurrent state cannot be cut back, so the session keeps snapshots of it, in host
// memory, at positions it is asked for (want(): the generator's prompt end, every N tokens of a
// long prompt). Going back to position p restores the latest snapshot at or before p (or the
// empty state) and the session runs the tokens between again. A snapshot is taken during a pass,
// layer by layer, right after the layer has run the token that reaches its position, so a
// position inside a prompt batch costs no extra pass over the weights.
//
// The rings of sliding-window layers (kv_cache.h) are the same kind of state: once a ring has
// gone round, the keys before it are gone. A snapshot holds each ring layer's window too, and a
// model with rings but no linear layers goes back without one while the rings still hold the
// window before the position (ringStart()).

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"
#include "core/runtime/kv_cache.h"
#include "gpu/device.h"

namespace spillway {

class RecurrentState {
public:
    RecurrentState() = default;
    // `buffer`: plan::recurrentStateBytes(c) of device memory. maxSnapshots: how many are kept
    // (the oldest go first). `kv`: the session's cache, whose ring layers join the state (null,
    // or a cache without rings: none).
    RecurrentState(const LlamaConfig& c, gpu::Device& device, gpu::Buffer buffer, int maxSnapshots,
                   const KvCache* kv = nullptr);

    bool active() const { return m_stateFloats > 0 || m_windowLayers > 0; }
    // Layer `layer`'s convolution inputs and state matrices (a linear layer's only).
    float* convState(int layer) const { return base(layer); }
    float* ssmState(int layer) const { return base(layer) + m_convFloats; }

    // The tokens the state holds: [0, position()); -1 when a failed pass left it unknown.
    int position() const { return m_position; }
    // After a pass over [pos, pos + n): ok, the state holds [0, pos + n) (the rings, their last
    // rows); else unknown.
    void passRan(int pos, int n, bool ok);
    // Whether the state can go back to `pos` as it is: no linear layers, and the rings still hold
    // the window before pos (their rows from ringStart() on are those of the tokens kept).
    bool resumableAt(int pos) const;
    void resumeAt(int pos) { m_position = pos; }
    int ringStart() const { return m_ringStart; }
    // Zeros: no token taken.
    void clear();

    // Asks for a snapshot at `position` (taken when a pass brings the state there).
    void want(int position);
    // Called by the layer step after linear layer `layer` has run the token at position - 1, and
    // after ring layer `layer` has stored the keys of a batch that holds it.
    void tokenDone(int layer, int position);
    // The first wanted position in (after, upTo), else upTo: where a batch of a linear layer
    // stops for a snapshot before it goes on (the layer step runs the tokens between in one go).
    int nextWanted(int after, int upTo) const;
    bool ringLayer(int layer) const { return m_windowOrdinal.empty() ? false : m_windowOrdinal[size_t(layer)] >= 0; }
    // At the end of a pass that ran without error: the wanted snapshots every linear layer has
    // given are kept; the others stay wanted. After a failed pass: all partial ones dropped.
    void finishPass(bool ok);
    // The latest snapshot at or before `position` put back (position() is then its position),
    // or, without one, the empty state (position 0). Returns the position reached.
    int restoreAtOrBefore(int position);
    // Snapshots after `position` belong to tokens that are being replaced: dropped (wanted ones
    // stay wanted: they are taken of whatever tokens then reach them).
    void dropAfter(int position);

    std::vector<int> snapshotPositions() const;
    uint64_t bytes() const { return m_stateFloats * sizeof(float); }  // the device's part

private:
    struct Snapshot {
        int position = 0;
        std::vector<float> data;     // every linear layer's state, in the device buffer's order
        std::vector<uint8_t> window; // every ring layer's window (KvCache::saveWindow), in order
        int layersDone = 0;          // while pending: layers captured so far
        std::vector<char> done;      // per linear layer, then per ring layer
    };
    void begin(Snapshot& s) const;
    float* base(int layer) const { return m_buffer.as<float>() + size_t(m_ordinal[size_t(layer)]) * m_layerFloats; }

    gpu::Device* m_device = nullptr;
    gpu::Buffer m_buffer;
    std::vector<int> m_ordinal;  // per layer: its index among the linear layers (-1: none)
    int m_linearLayers = 0;
    uint64_t m_convFloats = 0, m_layerFloats = 0, m_stateFloats = 0;
    const KvCache* m_kv = nullptr;
    std::vector<int> m_windowOrdinal;  // per layer: its index among the ring layers (-1: none)
    int m_windowLayers = 0, m_window = 0, m_ringRows = 0;
    uint64_t m_windowBytes = 0;
    int m_ringStart = 0;  // the rings hold positions [m_ringStart, m_position)
    int m_position = 0;
    int m_maxSnapshots = 0;
    std::vector<Snapshot> m_snapshots;  // by position, ascending
    std::vector<Snapshot> m_pending;
};

}  // namespace spillway
