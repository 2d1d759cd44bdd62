#include "core/runtime/recurrent_state.h"

#include <algorithm>

namespace spillway {

RecurrentState::RecurrentState(const LlamaConfig& c, gpu::Device& device, gpu::Buffer buffer, int maxSnapshots)
    : m_device(&device), m_buffer(std::move(buffer)), m_maxSnapshots(std::max(0, maxSnapshots))
{
    m_ordinal.assign(size_t(c.nLayers), -1);
    for (int l = 0; l < c.nLayers; ++l)
        if (c.linearLayer(l)) m_ordinal[size_t(l)] = m_linearLayers++;
    m_convFloats = uint64_t(std::max(c.ssmConvKernel - 1, 0)) * uint64_t(c.ssmConvDim());
    m_layerFloats = c.recurrentStateFloats();
    m_stateFloats = m_layerFloats * uint64_t(m_linearLayers);
    clear();
}

void RecurrentState::clear()
{
    m_position = 0;
    if (!active()) return;
    const std::vector<float> zeros(m_stateFloats, 0.0f);
    m_device->upload(m_buffer.data(), zeros.data(), zeros.size() * sizeof(float));
}

void RecurrentState::want(int position)
{
    if (!active() || m_maxSnapshots == 0 || position <= 0) return;
    for (const Snapshot& s : m_snapshots)
        if (s.position == position) return;
    for (const Snapshot& s : m_pending)
        if (s.position == position) return;
    Snapshot s;
    s.position = position;
    m_pending.push_back(std::move(s));
}

void RecurrentState::tokenDone(int layer, int position)
{
    for (Snapshot& s : m_pending) {
        if (s.position != position) continue;
        const int ordinal = m_ordinal[size_t(layer)];
        if (ordinal < 0) return;
        if (s.data.empty()) {
            s.data.resize(m_stateFloats);
            s.done.assign(size_t(m_linearLayers), 0);
        }
        if (s.done[size_t(ordinal)]) return;
        m_device->download(s.data.data() + size_t(ordinal) * m_layerFloats, base(layer), m_layerFloats * sizeof(float));
        s.done[size_t(ordinal)] = 1;
        ++s.layersDone;
        return;
    }
}

void RecurrentState::finishPass(bool ok)
{
    if (!ok) {
        for (Snapshot& s : m_pending) {
            s.data.clear();
            s.done.clear();
            s.layersDone = 0;
        }
        return;
    }
    for (auto it = m_pending.begin(); it != m_pending.end();) {
        if (it->layersDone < m_linearLayers) {
            ++it;
            continue;
        }
        it->done.clear();
        const int at = it->position;
        auto place = std::lower_bound(m_snapshots.begin(), m_snapshots.end(), at,
                                      [](const Snapshot& s, int p) { return s.position < p; });
        m_snapshots.insert(place, std::move(*it));
        it = m_pending.erase(it);
        // The oldest go first: going back far is rarer than going back a turn.
        while (int(m_snapshots.size()) > m_maxSnapshots) m_snapshots.erase(m_snapshots.begin());
    }
}

int RecurrentState::restoreAtOrBefore(int position)
{
    for (auto it = m_snapshots.rbegin(); it != m_snapshots.rend(); ++it) {
        if (it->position > position) continue;
        m_device->upload(m_buffer.data(), it->data.data(), m_stateFloats * sizeof(float));
        m_position = it->position;
        return m_position;
    }
    clear();
    return 0;
}

void RecurrentState::dropAfter(int position)
{
    std::erase_if(m_snapshots, [&](const Snapshot& s) { return s.position > position; });
}

std::vector<int> RecurrentState::snapshotPositions() const
{
    std::vector<int> out;
    for (const Snapshot& s : m_snapshots) out.push_back(s.position);
    return out;
}

}  // namespace spillway
