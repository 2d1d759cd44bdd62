#include "bottleneck_stats.h"

#include <QCoreApplication>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace spillway::ui {

using trace::Category;
using trace::Lane;

TokenStats computeTokenStats(std::span<const trace::Span> spans)
{
    TokenStats stats;
    trace::Summary& total = stats.total;
    const std::vector<trace::Summary> perToken = trace::summarizePerToken(spans);
    if (perToken.empty()) return stats;

    std::vector<std::pair<uint64_t, uint32_t>> starts;  // (first span start, token)
    starts.reserve(perToken.size());
    total.beginNs = perToken.front().beginNs;
    total.endNs = perToken.front().endNs;
    total.firstToken = perToken.front().firstToken;
    total.lastToken = perToken.back().lastToken;
    for (const trace::Summary& t : perToken) {
        total.beginNs = std::min(total.beginNs, t.beginNs);
        total.endNs = std::max(total.endNs, t.endNs);
        total.windowNs += t.windowNs;
        for (size_t c = 0; c < trace::kCategoryCount; ++c)
            total.attributedNs[c] += t.attributedNs[c];
        for (size_t l = 0; l < trace::kLaneCount; ++l) {
            total.lanes[l].busyNs += t.lanes[l].busyNs;
            total.lanes[l].bytes += t.lanes[l].bytes;
            total.lanes[l].spans += t.lanes[l].spans;
        }
        starts.emplace_back(t.beginNs, t.firstToken);
    }
    total.tokens = static_cast<uint32_t>(perToken.size());
    total.nsPerToken = static_cast<double>(total.windowNs) / total.tokens;
    for (trace::LaneStats& lane : total.lanes) {
        if (total.windowNs > 0)
            lane.busyFraction =
                static_cast<double>(lane.busyNs) / static_cast<double>(total.windowNs);
        if (lane.busyNs > 0)
            lane.bytesPerSecond = lane.bytes * 1e9 / static_cast<double>(lane.busyNs);
    }

    std::sort(starts.begin(), starts.end());
    stats.tokenStartsNs.reserve(starts.size());
    stats.tokenIds.reserve(starts.size());
    for (const auto& [start, token] : starts) {
        stats.tokenStartsNs.push_back(start);
        stats.tokenIds.push_back(token);
    }
    // A prompt batch's pass is not a decoded token: the time from it to the first token is the
    // time to first token, which the status line's tokens/s leaves out too.
    std::vector<uint32_t> promptPasses;
    for (const trace::Span& s : spans)
        if (std::strcmp(s.op, "prompt layer") == 0) promptPasses.push_back(s.token);
    std::sort(promptPasses.begin(), promptPasses.end());
    auto isPrompt = [&](uint32_t token) { return std::binary_search(promptPasses.begin(), promptPasses.end(), token); };
    uint64_t betweenNs = 0;
    size_t pairs = 0;
    for (size_t i = 1; i < starts.size(); ++i)
        if (starts[i].second == starts[i - 1].second + 1 && !isPrompt(starts[i - 1].second)) {
            betweenNs += starts[i].first - starts[i - 1].first;
            ++pairs;
        }
    if (pairs > 0) stats.wallNsPerToken = double(betweenNs) / double(pairs);
    return stats;
}

QString headlineFor(const trace::Summary& total, bool computeOnHost)
{
    auto tr = [](const char* text) { return QCoreApplication::translate("BottleneckView", text); };
    if (total.tokens == 0 || total.windowNs == 0) return tr("No spans recorded yet");

    const Category category = total.bottleneck();
    const int percent = static_cast<int>(std::lround(100.0 * total.share(category)));
    switch (category) {
    case Category::SsdRead:
        return tr("%1% of each token waits on SSD reads").arg(percent);
    case Category::HostToDevice:
        return tr("%1% of each token waits on host→device copies").arg(percent);
    case Category::Decompress:
        return tr("%1% of each token waits on decompression").arg(percent);
    case Category::Compute: {
        const bool cpu = computeOnHost ||
                         total.lane(Lane::CpuCompute).busyNs > total.lane(Lane::DeviceCompute).busyNs;
        return (cpu ? tr("%1% of each token is CPU compute")
                    : tr("%1% of each token is device compute"))
            .arg(percent);
    }
    case Category::Stalls:
    case Category::Count:
        break;
    }
    // bottleneck() says Stalls only when no compute or transfer lane was busy at all.
    return tr("%1% of each token is stalls and idle gaps: no stage was busy")
        .arg(static_cast<int>(std::lround(100.0 * total.share(Category::Stalls))));
}

QString formatDuration(double ns)
{
    const double a = std::abs(ns);
    if (a >= 1e9) return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', a >= 1e10 ? 1 : 2);
    if (a >= 1e6) return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', a >= 1e7 ? 1 : 2);
    if (a >= 1e3) return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', a >= 1e4 ? 1 : 2);
    return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
}

QString formatBytes(uint64_t bytes)
{
    static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
    double value = static_cast<double>(bytes);
    int unit = -1;
    while (value >= 1024 && unit < 3) {
        value /= 1024;
        ++unit;
    }
    return QStringLiteral("%1 %2").arg(value, 0, 'f', 2).arg(QLatin1String(kUnits[unit]));
}

std::vector<CacheLayerStats> computeCacheStats(std::span<const trace::Span> spans, const char* op)
{
    std::vector<CacheLayerStats> layers;
    bool any = false;
    for (const trace::Span& s : spans) {
        if (s.layer < 0 || std::strcmp(s.op, op) != 0) continue;
        if (size_t(s.layer) >= layers.size()) {
            const size_t from = layers.size();
            layers.resize(size_t(s.layer) + 1);
            for (size_t l = from; l < layers.size(); ++l) layers[l].layer = int(l);
        }
        CacheLayerStats& l = layers[size_t(s.layer)];
        l.lookups += s.lookups;
        l.hits += s.hits;
        l.bytes += s.bytes;
        any = any || s.lookups > 0;
    }
    if (!any) layers.clear();
    return layers;
}

}  // namespace spillway::ui
