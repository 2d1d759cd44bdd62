#include "core/plan/neuron_cache_model.h"

#include "core/hw/probe.h"
#include "core/plan/neuron_cache.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace spillway::plan {

ColdNeuronChoice chooseColdNeurons(const ColdNeuronLayer& l, const ColdNeuronSpeeds& s)
{
    auto per = [](double bytes, double rate) { return bytes > 0 ? bytes / std::max(rate, 1.0) : 0.0; };
    const double active = std::max(l.active, 0.0);
    const double misses = active * (1.0 - std::clamp(l.lruHitRate, 0.0, 1.0));
    ColdNeuronChoice c;
    c.shipSeconds = per(misses * l.readBytes, s.ssd) + per(misses * l.sliceBytes, s.copy) +
                    per(active * l.computeBytes, s.device);
    const bool measured = s.copy > 0 && s.device > 0 && (s.sameProcessor || s.cpu > 0);
    if (l.staticHitRate < 0.0 || !measured) {
        c.cpuSeconds = c.shipSeconds;  // nothing to pin by, or no speeds to go by: ship
        return c;
    }
    const double hot = active * std::clamp(l.staticHitRate, 0.0, 1.0), cold = active - hot;
    const double coldRead = per(cold * l.readBytes, s.ssd);
    if (s.sameProcessor)
        c.cpuSeconds = coldRead + per(active * l.computeBytes, s.device);
    else
        c.cpuSeconds = std::max(per(hot * l.computeBytes, s.device), coldRead + per(cold * l.computeBytes, s.cpu));
    if (c.cpuSeconds < c.shipSeconds) c.choice = ColdNeurons::Cpu;
    return c;
}

ColdNeuronSpeeds coldNeuronSpeeds(const hw::HardwareProfile& profile, const std::string& backend, gpu::DType rows)
{
    ColdNeuronSpeeds s;
    s.ssd = profile.storage.sequentialBytesPerSecond;
    auto rate = [&](const std::vector<hw::FormatThroughput>& list) {
        for (const auto& f : list)
            if (f.type == rows) return f.bytesPerSecond;
        return 0.0;
    };
    for (const auto& d : profile.devices)
        if (d.backend == backend) {
            s.copy = d.hostToDevicePinned;
            s.device = rate(d.matvec);
            s.sameProcessor = d.caps.hostPointers;
        }
    s.cpu = rate(profile.host.cpuMatvec);
    if (s.cpu <= 0)
        for (const auto& d : profile.devices)
            if (d.backend == "cpu") s.cpu = rate(d.matvec);
    return s;
}

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
        // The runtime's own bookkeeping (LRU, no window), token by token.
        NeuronCache cache(t.neurons, out.capacity, EvictionPolicy::Lru);
        for (size_t tok = 0; tok < t.tokens(); ++tok)
            cache.update(std::span<const uint32_t>(t.ids.data() + t.offsets[tok], t.offsets[tok + 1] - t.offsets[tok]));
        const uint64_t active = cache.stats().active, hits = cache.stats().hits, loaded = cache.stats().loaded;
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
