#include "core/runtime/recurrent_state.h"

#include <algorithm>

namespace spillway {

RecurrentState::RecurrentState(const LlamaConfig& c, gpu::Device& device, gpu::Buffer buffer, int maxSnapshots,
                               const KvCache* kv)
    : m_device(&device), m_buffer(std::move(buffer)), m_maxSnapshots(std::max(0, maxSnapshots))
{
    m_ordinal.assign(size_t(c.nLayers), -1);
    for (int l = 0; l < c.nLayers; ++l)
        if (c.linearLayer(l)) m_ordinal[size_t(l)] = m_linearLayers++;
    if (kv && kv->rings()) {
        m_kv = kv;
        m_windowOrdinal.assign(size_t(c.nLayers), -1);
        for (int l = 0; l < c.nLayers; ++l)
            if (kv->ring(l) > 0) {
                m_windowOrdinal[size_t(l)] = m_windowLayers++;
                m_ringRows = m_ringRows == 0 ? kv->ring(l) : std::min(m_ringRows, kv->ring(l));
            }
        m_window = c.slidingWindow;
        m_windowBytes = kv->windowBytes();
    }
    m_convFloats = uint64_t(std::max(c.ssmConvKernel - 1, 0)) * uint64_t(c.ssmConvDim());
    m_layerFloats = c.recurrentStateFloats();
    m_stateFloats = m_layerFloats * uint64_t(m_linearLayers);
    clear();
}

void RecurrentState::clear()
{
    m_position = 0;
    m_ringStart = 0;
    if (m_stateFloats == 0) return;
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

void RecurrentState::begin(Snapshot& s) const
{
    if (!s.done.empty()) return;
    s.data.resize(m_stateFloats);
    s.window.resize(size_t(m_windowLayers) * m_windowBytes);
    s.done.assign(size_t(m_linearLayers + m_windowLayers), 0);
}

void RecurrentState::tokenDone(int layer, int position)
{
    for (Snapshot& s : m_pending) {
        if (s.position != position) continue;
        const int linear = m_ordinal[size_t(layer)];
        const int ring = ringLayer(layer) ? m_windowOrdinal[size_t(layer)] : -1;
        if (linear < 0 && ring < 0) return;
        begin(s);
        const size_t at = linear >= 0 ? size_t(linear) : size_t(m_linearLayers + ring);
        if (s.done[at]) return;
        if (linear >= 0)
            m_device->download(s.data.data() + size_t(linear) * m_layerFloats, base(layer), m_layerFloats * sizeof(float));
        else
            m_kv->saveWindow(*m_device, layer, position, s.window.data() + size_t(ring) * m_windowBytes);
        s.done[at] = 1;
        ++s.layersDone;
        return;
    }
}

int RecurrentState::nextWanted(int after, int upTo) const
{
    int next = upTo;
    for (const Snapshot& s : m_pending)
        if (s.position > after && s.position < next) next = s.position;
    return next;
}

void RecurrentState::passRan(int pos, int n, bool ok)
{
    if (!ok) {
        m_position = -1;
        return;
    }
    m_position = pos + n;
    if (m_windowLayers > 0) m_ringStart = std::max(m_ringStart, pos + n - m_ringRows);
}

bool RecurrentState::resumableAt(int pos) const
{
    return m_linearLayers == 0 && m_position >= 0 && pos <= m_position && m_ringStart <= std::max(0, pos - m_window + 1);
}

void RecurrentState::finishPass(bool ok)
{
    if (!ok) {
        for (Snapshot& s : m_pending) {
            s.data.clear();
            s.window.clear();
            s.done.clear();
            s.layersDone = 0;
        }
        return;
    }
    for (auto it = m_pending.begin(); it != m_pending.end();) {
        if (it->layersDone < m_linearLayers + m_windowLayers) {
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
        if (m_stateFloats > 0) m_device->upload(m_buffer.data(), it->data.data(), m_stateFloats * sizeof(float));
        for (int l = 0; l < int(m_windowOrdinal.size()); ++l)
            if (m_windowOrdinal[size_t(l)] >= 0)
                m_kv->restoreWindow(*m_device, l, it->position,
                                    it->window.data() + size_t(m_windowOrdinal[size_t(l)]) * m_windowBytes);
        m_position = it->position;
        m_ringStart = std::max(0, m_position - m_window + 1);
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
