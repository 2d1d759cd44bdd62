#pragma once
// The bookkeeping of one layer's neuron cache (Tricksy; LLM in a flash §3.3): `capacity` slots in
// device memory, each holding one neuron's bundle (its gate and up rows and down column). Before
// the layer runs, update() takes the token's active (or predicted) neurons, keeps those already
// resident, gives each missing one a slot, and says which bundles to load where: only the
// difference moves. Eviction picks, among the neurons not needed now, the least recently active
// (LRU) or the longest resident (FIFO); with a window of k tokens, neurons active in the last k
// tokens are evicted only when nothing else can go (LLM in a flash's windowing).
//
// When more neurons are active than fit, the extra ones get no slot (slot -1 in the loads): the
// caller computes them from where they are (HeteGen: on the CPU, from RAM) or streams them
// through a scratch slot; they count as loaded.
//
// It lives in plan/ because both sides use it: the planner simulates it over recorded activity
// (neuron_cache_model.h) and the runtime's activation-sparse FFN drives it token by token.
//
// Hot neurons (PowerInfer) can be pinned before the first token: they take the first slots and
// are never evicted. A cache that does not admit misses (setAdmitsMisses(false)) keeps only its
// pinned neurons: every other active neuron is a slotless load, computed where it lies.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace spillway {

enum class EvictionPolicy { Lru, Fifo };

// What happens to an active neuron the cache lacks (a cold one; PowerInfer's hot/cold split with
// HeteGen's CPU share). Ship: its bundle goes to a slot (LRU among the unpinned slots), and the
// device computes it. Cpu: the slots hold the hottest neurons for good, and the CPU computes the
// others straight from where they lie (RAM, or the SSD's staging buffer), the device adding its
// share to the CPU's. Auto: the cost model picks per layer (plan::chooseColdNeurons).
enum class ColdNeurons { Auto, Ship, Cpu };
// Where cold neurons are shipped, neurons active on at least this share of the calibration tokens
// are pinned (up to half of the slots), unless the options say otherwise.
inline constexpr double kDefaultHotFrequency = 0.5;
const char* coldNeuronsName(ColdNeurons c);  // "auto", "ship", "cpu"
ColdNeurons coldNeuronsOf(std::string_view name);  // the reverse; Auto for anything else

struct NeuronLoad {
    uint32_t neuron = 0;
    int32_t slot = -1;  // -1: not cached (more active neurons than slots)
};

struct NeuronCacheStats {
    uint64_t tokens = 0;
    uint64_t active = 0;   // active neurons seen, over all tokens
    uint64_t hits = 0;     // of those, found resident
    uint64_t loaded = 0;   // bundles to load (misses; not the pinned neurons' first load)
    uint64_t slotless = 0; // of those, given no slot (computed where they lie)
    double hitRate() const { return active ? double(hits) / double(active) : 1.0; }
};

class NeuronCache {
public:
    NeuronCache(int neurons, int capacity, EvictionPolicy policy = EvictionPolicy::Lru, int window = 0);

    // The next token's active neurons (ids < neurons, no duplicates, any order). Returns the
    // bundles to load, valid until the next call.
    std::span<const NeuronLoad> update(std::span<const uint32_t> active);
    // Pins `neurons` (ids < neurons, no duplicates) to the first free slots, as many as fit;
    // returns their loads (valid until the next call). Call it before the first update().
    std::span<const NeuronLoad> pin(std::span<const uint32_t> neurons);
    int pinned() const { return m_pinnedCount; }
    bool isPinned(uint32_t neuron) const { return neuron < m_pinned.size() && m_pinned[neuron]; }
    // false: misses get no slot and evict nothing (a static cache of the pinned neurons).
    void setAdmitsMisses(bool admits) { m_admits = admits; }
    bool admitsMisses() const { return m_admits; }
    // Slot of a resident neuron, or -1.
    int32_t slotOf(uint32_t neuron) const { return neuron < m_slotOf.size() ? m_slotOf[neuron] : -1; }
    int capacity() const { return m_capacity; }
    // Slots are handed out from 0 upward and never freed (evicting reuses the slot): slots
    // [0, resident()) hold bundles.
    int resident() const { return m_resident; }
    const NeuronCacheStats& stats() const { return m_stats; }
    // Drops everything, pinned neurons too; statistics stay.
    void clear();

private:
    int m_neurons, m_capacity;
    EvictionPolicy m_policy;
    int m_window;
    int m_resident = 0;
    int m_pinnedCount = 0;
    bool m_admits = true;
    std::vector<uint8_t> m_pinned;       // per neuron
    uint64_t m_token = 0;
    std::vector<int32_t> m_slotOf;       // per neuron
    std::vector<int64_t> m_slotNeuron;   // per slot: its neuron, or -1
    std::vector<uint64_t> m_lastActive;  // per neuron: last token it was active (+1; 0 never)
    std::vector<uint64_t> m_loadedAt;    // per slot: token it was filled (+1)
    std::vector<uint64_t> m_neededNow;   // per neuron: == m_token + 1 when active this token
    std::vector<int32_t> m_freeSlots;
    std::vector<int32_t> m_victims;      // scratch of update(): slots that may be evicted
    std::vector<NeuronLoad> m_loads;
    NeuronCacheStats m_stats;
};

}  // namespace spillway
