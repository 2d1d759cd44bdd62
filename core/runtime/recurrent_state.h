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

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"
#include "gpu/device.h"

namespace spillway {

class RecurrentState {
public:
    RecurrentState() = default;
    // `buffer`: plan::recurrentStateBytes(c) of device memory. maxSnapshots: how many are kept
    // (the oldest go first).
    RecurrentState(const LlamaConfig& c, gpu::Device& device, gpu::Buffer buffer, int maxSnapshots);

    bool active() const { return m_stateFloats > 0; }
    // Layer `layer`'s convolution inputs and state matrices (a linear layer's only).
    float* convState(int layer) const { return base(layer); }
    float* ssmState(int layer) const { return base(layer) + m_convFloats; }

    // The tokens the state holds: [0, position()); -1 when a failed pass left it unknown.
    int position() const { return m_position; }
    void setPosition(int position) { m_position = position; }
    // Zeros: no token taken.
    void clear();

    // Asks for a snapshot at `position` (taken when a pass brings the state there).
    void want(int position);
    // Called by the layer step after linear layer `layer` has run the token at position - 1.
    void tokenDone(int layer, int position);
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
    uint64_t snapshotBytes() const { return uint64_t(m_snapshots.size()) * bytes(); }

private:
    struct Snapshot {
        int position = 0;
        std::vector<float> data;  // every linear layer's state, in the device buffer's order
        int layersDone = 0;       // while pending: linear layers captured so far
        std::vector<char> done;   // per linear layer
    };
    float* base(int layer) const { return m_buffer.as<float>() + size_t(m_ordinal[size_t(layer)]) * m_layerFloats; }

    gpu::Device* m_device = nullptr;
    gpu::Buffer m_buffer;
    std::vector<int> m_ordinal;  // per layer: its index among the linear layers (-1: none)
    int m_linearLayers = 0;
    uint64_t m_convFloats = 0, m_layerFloats = 0, m_stateFloats = 0;
    int m_position = 0;
    int m_maxSnapshots = 0;
    std::vector<Snapshot> m_snapshots;  // by position, ascending
    std::vector<Snapshot> m_pending;
};

}  // namespace spillway
