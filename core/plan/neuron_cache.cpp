#include "core/plan/neuron_cache.h"

#include <algorithm>
#include <limits>

namespace spillway {

const char* coldNeuronsName(ColdNeurons c)
{
    return c == ColdNeurons::Cpu ? "cpu" : c == ColdNeurons::Ship ? "ship" : "auto";
}

ColdNeurons coldNeuronsOf(std::string_view name)
{
    return name == "cpu" ? ColdNeurons::Cpu : name == "ship" ? ColdNeurons::Ship : ColdNeurons::Auto;
}

NeuronCache::NeuronCache(int neurons, int capacity, EvictionPolicy policy, int window)
    : m_neurons(std::max(neurons, 0)), m_capacity(std::clamp(capacity, 0, std::max(neurons, 0))),
      m_policy(policy), m_window(std::max(window, 0))
{
    m_slotOf.assign(size_t(m_neurons), -1);
    m_lastActive.assign(size_t(m_neurons), 0);
    m_neededNow.assign(size_t(m_neurons), 0);
    m_pinned.assign(size_t(m_neurons), 0);
    m_slotNeuron.assign(size_t(m_capacity), -1);
    m_loadedAt.assign(size_t(m_capacity), 0);
    m_victims.reserve(size_t(m_capacity));
    m_loads.reserve(size_t(m_neurons));
    clear();
}

void NeuronCache::clear()
{
    std::fill(m_slotOf.begin(), m_slotOf.end(), -1);
    std::fill(m_slotNeuron.begin(), m_slotNeuron.end(), -1);
    std::fill(m_pinned.begin(), m_pinned.end(), 0);
    m_pinnedCount = 0;
    m_freeSlots.clear();
    for (int s = m_capacity - 1; s >= 0; --s) m_freeSlots.push_back(s);  // slot 0 first
    m_resident = 0;
}

std::span<const NeuronLoad> NeuronCache::pin(std::span<const uint32_t> neurons)
{
    m_loads.clear();
    for (uint32_t j : neurons) {
        if (j >= m_slotOf.size() || m_pinned[j]) continue;
        if (m_slotOf[j] < 0) {
            if (m_freeSlots.empty()) break;
            const int32_t slot = m_freeSlots.back();
            m_freeSlots.pop_back();
            ++m_resident;
            m_slotOf[j] = slot;
            m_slotNeuron[size_t(slot)] = j;
            m_loadedAt[size_t(slot)] = m_token + 1;
            m_loads.push_back({j, slot});
        }
        m_pinned[j] = 1;
        ++m_pinnedCount;
    }
    return m_loads;
}

std::span<const NeuronLoad> NeuronCache::update(std::span<const uint32_t> active)
{
    const uint64_t now = ++m_token;  // this token's stamp (stamps start at 1; 0 means never)
    m_loads.clear();
    ++m_stats.tokens;
    for (uint32_t j : active)
        if (j < m_neededNow.size()) m_neededNow[j] = now;

    // Eviction order: a slot's key; smaller goes first. Neurons needed now never go; those in
    // the window go only after every other one.
    auto key = [&](int32_t slot) -> uint64_t {
        const auto j = size_t(m_slotNeuron[size_t(slot)]);
        const uint64_t age = m_policy == EvictionPolicy::Lru ? m_lastActive[j] : m_loadedAt[size_t(slot)];
        const bool inWindow = m_window > 0 && m_lastActive[j] + uint64_t(m_window) >= now;
        return (inWindow ? (uint64_t{1} << 62) : 0) + age;
    };
    std::vector<int32_t>& victims = m_victims;  // built lazily: slots whose neuron is not needed now
    victims.clear();
    bool victimsReady = false;
    size_t nextVictim = 0;

    for (uint32_t j : active) {
        if (j >= m_slotOf.size()) continue;
        ++m_stats.active;
        if (m_slotOf[j] >= 0) {
            ++m_stats.hits;
        } else {
            ++m_stats.loaded;
            int32_t slot = -1;
            if (!m_admits) {
                // a static cache: computed where it lies
            } else if (!m_freeSlots.empty()) {
                slot = m_freeSlots.back();
                m_freeSlots.pop_back();
                ++m_resident;
            } else {
                if (!victimsReady) {
                    for (int32_t s = 0; s < m_capacity; ++s)
                        if (m_slotNeuron[size_t(s)] >= 0 && m_neededNow[size_t(m_slotNeuron[size_t(s)])] != now &&
                            !m_pinned[size_t(m_slotNeuron[size_t(s)])])
                            victims.push_back(s);
                    std::sort(victims.begin(), victims.end(),
                              [&](int32_t a, int32_t b) { return key(a) != key(b) ? key(a) < key(b) : a < b; });
                    victimsReady = true;
                }
                if (nextVictim < victims.size()) {
                    slot = victims[nextVictim++];
                    m_slotOf[size_t(m_slotNeuron[size_t(slot)])] = -1;
                }
            }
            if (slot >= 0) {
                m_slotOf[j] = slot;
                m_slotNeuron[size_t(slot)] = j;
                m_loadedAt[size_t(slot)] = now;
            }
            m_stats.slotless += slot < 0;
            m_loads.push_back({j, slot});
        }
    }
    for (uint32_t j : active)
        if (j < m_lastActive.size()) m_lastActive[j] = now;
    return m_loads;
}

}  // namespace spillway
