#include "core/plan/neuron_cache_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace spillway::plan {

double ActivityTrace::density() const
{
    if (tokens() == 0 || neurons <= 0) return 0.0;
    return double(ids.size()) / (double(tokens()) * double(neurons));
}

std::vector<int> allocateCacheCapacity(std::span<const double> density, std::span<const int> neurons,
                                       uint64_t bundleBytes, uint64_t budgetBytes)
{
    const size_t n = std::min(density.size(), neurons.size());
    std::vector<int> capacity(n, 0);
    if (n == 0 || bundleBytes == 0) return capacity;
    double left = double(budgetBytes / bundleBytes);  // bundles to share out
    std::vector<bool> full(n, false);
    // Water-filling: share in proportion to the working sets; a layer that would get more than
    // it has is filled, and the rest is shared again among the others.
    for (size_t round = 0; round <= n && left >= 1.0; ++round) {
        double weight = 0.0;
        for (size_t l = 0; l < n; ++l)
            if (!full[l]) weight += std::max(density[l], 1e-9) * neurons[l];
        if (weight <= 0.0) break;
        bool filled = false;
        for (size_t l = 0; l < n; ++l) {
            if (full[l]) continue;
            const double share = left * std::max(density[l], 1e-9) * neurons[l] / weight;
            if (double(capacity[l]) + share >= double(neurons[l])) {
                left -= double(neurons[l] - capacity[l]);
                capacity[l] = neurons[l];
                full[l] = true;
                filled = true;
            }
        }
        if (filled) continue;
        double given = 0.0;
        for (size_t l = 0; l < n; ++l) {
            if (full[l]) continue;
            const int add = int(std::floor(left * std::max(density[l], 1e-9) * neurons[l] / weight));
            capacity[l] += add;
            given += add;
        }
        left -= given;
        break;
    }
    return capacity;
}

NeuronCacheResult simulateNeuronCache(std::span<const ActivityTrace> layers, uint64_t bundleBytes,
                                      uint64_t budgetBytes)
{
    NeuronCacheResult r;
    r.budgetBytes = budgetBytes;
    std::vector<double> density;
    std::vector<int> neurons;
    for (const ActivityTrace& t : layers) {
        density.push_back(t.density());
        neurons.push_back(t.neurons);
        r.ffnBytes += uint64_t(std::max(t.neurons, 0)) * bundleBytes;
    }
    const std::vector<int> capacity = allocateCacheCapacity(density, neurons, bundleBytes, budgetBytes);
    r.denseBytesPerToken = double(r.ffnBytes > budgetBytes ? r.ffnBytes - budgetBytes : 0);

    uint64_t activeAll = 0, hitsAll = 0;
    double loadedPerToken = 0.0;
    for (size_t l = 0; l < layers.size(); ++l) {
        const ActivityTrace& t = layers[l];
        NeuronCacheLayer out;
        out.capacity = capacity[l];
        // LRU: cached neurons ordered by the last token they were active for.
        std::vector<int64_t> lastUse(size_t(std::max(t.neurons, 0)), -1);
        std::vector<bool> cached(lastUse.size(), false);
        std::set<std::pair<int64_t, uint32_t>> order;
        uint64_t active = 0, hits = 0, loaded = 0;
        for (size_t tok = 0; tok < t.tokens(); ++tok) {
            for (uint64_t i = t.offsets[tok]; i < t.offsets[tok + 1]; ++i) {
                const uint32_t j = t.ids[i];
                if (j >= lastUse.size()) continue;
                ++active;
                if (cached[j]) {
                    ++hits;
                    order.erase({lastUse[j], j});
                } else {
                    ++loaded;
                    cached[j] = true;
                }
                lastUse[j] = int64_t(tok);
                order.insert({lastUse[j], j});
            }
            // Evict the least recently active beyond the capacity (this token's first only when
            // more are active than fit: those were loaded and used, then dropped).
            while (order.size() > size_t(out.capacity)) {
                const auto oldest = *order.begin();
                order.erase(order.begin());
                cached[oldest.second] = false;
            }
        }
        const double tokens = double(std::max<size_t>(t.tokens(), 1));
        out.hitRate = active > 0 ? double(hits) / double(active) : 1.0;
        out.loadedPerToken = double(loaded) / tokens;
        loadedPerToken += out.loadedPerToken;
        activeAll += active;
        hitsAll += hits;
        r.layers.push_back(out);
    }
    r.bytesPerToken = loadedPerToken * double(bundleBytes);
    r.hitRate = activeAll > 0 ? double(hitsAll) / double(activeAll) : 1.0;
    return r;
}

}  // namespace spillway::plan
