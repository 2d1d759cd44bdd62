// Bottleneck attribution: a sweep over span start/end points inside a wall-clock window. Between
// two consecutive points the set of busy lanes is constant, so that stretch adds to every busy
// lane's union time once (overlapping spans of one lane do not double count) and to exactly one
// category, chosen by priority (compute > decompress > host→device > SSD read > stalls).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/trace/trace.h"

namespace spillway::trace {

namespace {

struct Edge {
    uint64_t timeNs;
    uint8_t lane;
    int8_t delta;  // +1 span starts, -1 span ends
};

Category categoryOf(const std::array<uint32_t, kLaneCount>& busy)
{
    auto on = [&](Lane l) { return busy[static_cast<size_t>(l)] > 0; };
    if (on(Lane::DeviceCompute) || on(Lane::CpuCompute)) return Category::Compute;
    if (on(Lane::Decompress)) return Category::Decompress;
    if (on(Lane::HostToDevice)) return Category::HostToDevice;
    if (on(Lane::SsdRead)) return Category::SsdRead;
    return Category::Stalls;  // explicit Stall spans and idle gaps alike
}

bool overlaps(const Span& s, uint64_t beginNs, uint64_t endNs)
{
    if (s.endNs <= s.startNs) return s.startNs >= beginNs && s.startNs < endNs;  // an instant
    return s.startNs < endNs && s.endNs > beginNs;
}

// Pads to `width` columns; counts UTF-8 code points, not bytes ("host→device" is 11 columns).
void appendPadded(std::string& out, const std::string& text, size_t width, bool right)
{
    size_t columns = 0;
    for (unsigned char c : text) columns += (c & 0xC0) != 0x80;
    const std::string pad(columns < width ? width - columns : 0, ' ');
    out += right ? pad + text : text + pad;
}

std::string formatSeconds(double s)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6f", s);
    return buf;
}

}  // namespace

const char* categoryName(Category category)
{
    switch (category) {
    case Category::Compute: return "compute";
    case Category::Decompress: return "decompress";
    case Category::HostToDevice: return "host→device";
    case Category::SsdRead: return "SSD read";
    case Category::Stalls: return "stalls";
    case Category::Count: break;
    }
    return "unknown";
}

double Summary::share(Category c) const
{
    if (windowNs == 0) return 0;
    return static_cast<double>(attributedNs[static_cast<size_t>(c)]) /
           static_cast<double>(windowNs);
}

std::string Summary::text() const
{
    if (windowNs == 0) return "no time measured";
    // Whole percents that add up to 100: floor each, then hand the remaining points to the
    // largest remainders (largest-remainder rounding).
    struct Part {
        Category category;
        uint64_t ns;
        int percent;
        double remainder;
    };
    std::vector<Part> parts;
    int total = 0;
    for (size_t i = 0; i < kCategoryCount; ++i) {
        const double exact = 100.0 * static_cast<double>(attributedNs[i]) /
                             static_cast<double>(windowNs);
        const int whole = static_cast<int>(std::floor(exact));
        parts.push_back({static_cast<Category>(i), attributedNs[i], whole, exact - whole});
        total += whole;
    }
    std::vector<Part*> byRemainder;
    for (Part& p : parts) byRemainder.push_back(&p);
    std::stable_sort(byRemainder.begin(), byRemainder.end(),
                     [](const Part* a, const Part* b) { return a->remainder > b->remainder; });
    for (size_t i = 0; total < 100 && i < byRemainder.size(); ++i, ++total)
        ++byRemainder[i]->percent;

    std::stable_sort(parts.begin(), parts.end(),
                     [](const Part& a, const Part& b) { return a.ns > b.ns; });
    std::string out;
    for (const Part& p : parts) {
        if (p.ns == 0 || p.percent == 0) continue;
        if (!out.empty()) out += ", ";
        out += categoryName(p.category);
        out += ' ' + std::to_string(p.percent) + '%';
    }
    return out;
}

Category Summary::bottleneck() const
{
    Category best = Category::Stalls;
    uint64_t bestNs = 0;
    for (Category c : {Category::Compute, Category::Decompress, Category::HostToDevice,
                       Category::SsdRead}) {
        const uint64_t ns = attributedNs[static_cast<size_t>(c)];
        if (ns > bestNs) {
            best = c;
            bestNs = ns;
        }
    }
    return best;
}

Summary summarize(std::span<const Span> spans, uint64_t beginNs, uint64_t endNs)
{
    Summary sum;
    sum.beginNs = beginNs;
    sum.endNs = std::max(beginNs, endNs);
    sum.windowNs = sum.endNs - beginNs;

    std::vector<Edge> edges;
    edges.reserve(spans.size() * 2);
    std::set<uint32_t> tokens;
    for (const Span& s : spans) {
        const size_t lane = static_cast<size_t>(s.lane);
        if (lane >= kLaneCount || !overlaps(s, beginNs, sum.endNs)) continue;
        LaneStats& stats = sum.lanes[lane];
        ++stats.spans;
        tokens.insert(s.token);
        if (s.endNs <= s.startNs) {
            stats.bytes += static_cast<double>(s.bytes);
            continue;
        }
        const uint64_t from = std::max(s.startNs, beginNs);
        const uint64_t to = std::min(s.endNs, sum.endNs);
        stats.bytes += static_cast<double>(s.bytes) * static_cast<double>(to - from) /
                       static_cast<double>(s.endNs - s.startNs);
        edges.push_back({from, static_cast<uint8_t>(lane), +1});
        edges.push_back({to, static_cast<uint8_t>(lane), -1});
    }
    std::sort(edges.begin(), edges.end(),
              [](const Edge& a, const Edge& b) { return a.timeNs < b.timeNs; });

    std::array<uint32_t, kLaneCount> busy{};
    uint64_t previous = beginNs;
    auto account = [&](uint64_t until) {
        const uint64_t length = until - previous;
        if (length == 0) return;
        for (size_t l = 0; l < kLaneCount; ++l)
            if (busy[l] > 0) sum.lanes[l].busyNs += length;
        sum.attributedNs[static_cast<size_t>(categoryOf(busy))] += length;
        previous = until;
    };
    for (const Edge& e : edges) {
        account(e.timeNs);  // the stretch before this point, with the busy set before it
        busy[e.lane] = static_cast<uint32_t>(static_cast<int32_t>(busy[e.lane]) + e.delta);
    }
    account(sum.endNs);

    for (LaneStats& stats : sum.lanes) {
        if (sum.windowNs > 0)
            stats.busyFraction =
                static_cast<double>(stats.busyNs) / static_cast<double>(sum.windowNs);
        if (stats.busyNs > 0)
            stats.bytesPerSecond = stats.bytes * 1e9 / static_cast<double>(stats.busyNs);
    }
    sum.tokens = static_cast<uint32_t>(tokens.size());
    if (!tokens.empty()) {
        sum.firstToken = *tokens.begin();
        sum.lastToken = *tokens.rbegin();
        sum.nsPerToken = static_cast<double>(sum.windowNs) / static_cast<double>(tokens.size());
    }
    return sum;
}

std::vector<Summary> summarizePerToken(std::span<const Span> spans)
{
    std::map<uint32_t, std::vector<Span>> byToken;
    for (const Span& s : spans) byToken[s.token].push_back(s);
    std::vector<Summary> out;
    out.reserve(byToken.size());
    for (const auto& [token, group] : byToken) {
        uint64_t begin = group.front().startNs;
        uint64_t end = group.front().endNs;
        for (const Span& s : group) {
            begin = std::min(begin, s.startNs);
            end = std::max({end, s.endNs, s.startNs});
        }
        out.push_back(summarize(group, begin, end));
    }
    return out;
}

std::string compareWithPrediction(const Summary& measured,
                                  std::span<const LanePrediction> predictions)
{
    const double tokens = measured.tokens > 0 ? measured.tokens : 1.0;
    std::string out;
    appendPadded(out, "lane", 16, false);
    appendPadded(out, "measured s/token", 18, true);
    appendPadded(out, "predicted s/token", 19, true);
    appendPadded(out, "measured/predicted", 20, true);
    out += '\n';
    for (const LanePrediction& p : predictions) {
        if (static_cast<size_t>(p.lane) >= kLaneCount) continue;
        const double seconds = static_cast<double>(measured.lane(p.lane).busyNs) / 1e9 / tokens;
        std::string ratio = "-";
        if (p.seconds > 0) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.2fx", seconds / p.seconds);
            ratio = buf;
        }
        appendPadded(out, laneName(p.lane), 16, false);
        appendPadded(out, formatSeconds(seconds), 18, true);
        appendPadded(out, formatSeconds(p.seconds), 19, true);
        appendPadded(out, ratio, 20, true);
        out += '\n';
    }
    return out;
}

}  // namespace spillway::trace
