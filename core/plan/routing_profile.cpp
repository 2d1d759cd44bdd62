#include "core/plan/routing_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/hw/probe.h"
#include "core/model/model_config.h"
#include "storage/atomic_file.h"

namespace spillway::plan {

namespace fs = std::filesystem;

bool RoutingProfile::fits(const LlamaConfig& c) const
{
    return layers == c.nLayers && experts == c.nExperts && used == c.nExpertsUsed &&
           counts.size() == size_t(layers) * size_t(experts);
}

std::vector<double> RoutingProfile::choiceRates(int layer) const
{
    std::vector<double> q(size_t(experts), experts ? double(used) / double(experts) : 0.0);
    if (empty() || layer < 0 || layer >= layers) return q;
    const std::span<const uint64_t> row = layerCounts(layer);
    double total = 0;
    for (int e = 0; e < experts; ++e) total += double(row[e]) + 0.5;
    for (int e = 0; e < experts; ++e) q[size_t(e)] = double(used) * (double(row[e]) + 0.5) / total;
    return q;
}

std::vector<int> RoutingProfile::hottest(int layer) const
{
    std::vector<int> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    if (empty() || layer < 0 || layer >= layers) return order;
    const std::span<const uint64_t> row = layerCounts(layer);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    return order;
}

std::string RoutingProfile::toJson() const
{
    nlohmann::ordered_json layersJson = nlohmann::ordered_json::array();
    for (int l = 0; l < layers; ++l)
        layersJson.push_back(std::vector<uint64_t>(layerCounts(l).begin(), layerCounts(l).end()));
    nlohmann::ordered_json j = {{"format", "spillway-routing-1"}, {"source", source},   {"layers", layers},
                                {"experts", experts},             {"used", used},       {"tokens", tokens},
                                {"counts", layersJson}};
    return j.dump(1);
}

Result<RoutingProfile> RoutingProfile::fromJson(const std::string& text)
{
    const auto bad = [](const std::string& why) {
        return makeError(ErrorCode::InvalidArgument, "routing profile: " + why);
    };
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not JSON");
    if (j.value("format", "") != "spillway-routing-1") return bad("not a spillway-routing-1 file");
    RoutingProfile p;
    try {
        p.source = j.value("source", "");
        p.layers = j.at("layers").get<int>();
        p.experts = j.at("experts").get<int>();
        p.used = j.at("used").get<int>();
        p.tokens = j.at("tokens").get<uint64_t>();
        const nlohmann::json& rows = j.at("counts");
        if (p.layers < 1 || p.experts < 1 || p.used < 1 || p.used > p.experts || !rows.is_array() ||
            rows.size() != size_t(p.layers))
            return bad("its shape does not add up");
        for (const nlohmann::json& row : rows) {
            if (!row.is_array() || row.size() != size_t(p.experts)) return bad("a layer without a count per expert");
            uint64_t sum = 0;
            for (const nlohmann::json& n : row) {
                p.counts.push_back(n.get<uint64_t>());
                sum += p.counts.back();
                // A token chooses an expert once at most.
                if (p.counts.back() > p.tokens) return bad("an expert chosen more often than there were tokens");
            }
            if (sum != p.tokens * uint64_t(p.used)) return bad("a layer's counts are not tokens x used");
        }
    } catch (const nlohmann::json::exception& e) {
        return bad(e.what());
    }
    return p;
}

Status RoutingProfile::save(const std::string& path) const
{
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    auto file = storage::AtomicFile::create(path);
    if (!file) return file.error();
    const std::string text = toJson() + "\n";
    SPILLWAY_TRY(file->write(text.data(), text.size()));
    return file->commit();
}

Result<RoutingProfile> RoutingProfile::load(const std::string& path)
{
    std::ifstream in(path);
    if (!in) return makeError(ErrorCode::Io, path + ": cannot open the routing profile");
    std::stringstream text;
    text << in.rdbuf();
    auto p = fromJson(text.str());
    if (!p) return makeError(p.error().code, path + ": " + p.error().message);
    return p;
}

std::string routingProfilePath(const std::string& modelPath)
{
    std::error_code ec;
    fs::path model = fs::absolute(modelPath, ec);
    if (!model.has_filename()) model = model.parent_path();  // a package folder written "pkg/"
    uint64_t size = fs::is_regular_file(model, ec) ? fs::file_size(model, ec) : 0;
    if (ec) size = 0;
    char tail[32];
    std::snprintf(tail, sizeof tail, "-%llx.json", static_cast<unsigned long long>(size));
    return (fs::path(hw::defaultProbeCacheFile()).parent_path() / "routing" / (model.filename().string() + tail)).string();
}

RoutingProfile keptRoutingProfile(const std::string& modelPath, const LlamaConfig& config, std::string* note)
{
    if (!config.moe()) return {};
    const std::string path = routingProfilePath(modelPath);
    std::error_code ec;
    if (!fs::exists(path, ec)) return {};
    auto p = RoutingProfile::load(path);
    if (!p) {
        if (note) *note = p.error().message + " (not used)";
        return {};
    }
    if (!p->fits(config)) {
        if (note) *note = path + ": a routing profile of another shape (not used)";
        return {};
    }
    return std::move(*p);
}

namespace {

// q with every rate at most 1 and the sum kept: the excess of the ones above goes to the others in
// proportion to what each still has room for (a few rounds settle it).
std::vector<double> capped(std::vector<double> q)
{
    for (int round = 0; round < 64; ++round) {
        double excess = 0, room = 0;
        for (double& r : q) {
            if (r > 1.0) {
                excess += r - 1.0;
                r = 1.0;
            }
            room += 1.0 - r;
        }
        if (excess <= 1e-12 || room <= 0) break;
        for (double& r : q) r += excess * (1.0 - r) / room;
    }
    return q;
}

}  // namespace

RoutingDraw::RoutingDraw(const RoutingProfile& profile, uint64_t seed)
    : m_rng(seed), m_order(size_t(profile.experts))
{
    for (int l = 0; l < profile.layers; ++l) m_rates.push_back(capped(profile.choiceRates(l)));
}

void RoutingDraw::draw(int layer, std::span<int> out)
{
    const std::vector<double>& q = m_rates.at(size_t(layer));
    std::iota(m_order.begin(), m_order.end(), 0);
    std::shuffle(m_order.begin(), m_order.end(), m_rng);
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(m_rng);
    size_t taken = 0;
    double end = 0;  // where the current expert's stretch ends
    for (size_t k = 0; k < m_order.size() && taken < out.size(); ++k) {
        end += q[size_t(m_order[k])];
        // A point in this stretch (at most one: a stretch is at most 1 long).
        if (u + double(taken) < end) out[taken++] = m_order[k];
    }
    // Rounding can leave the last point just past the sum: take the last experts not yet drawn.
    for (size_t k = m_order.size(); taken < out.size() && k-- > 0;)
        if (std::find(out.begin(), out.begin() + long(taken), m_order[k]) == out.begin() + long(taken))
            out[taken++] = m_order[k];
}

std::vector<double> expectedMisses(const std::vector<double>& q, int slots)
{
    std::vector<double> misses(q);
    const int n = int(q.size());
    if (slots <= 0 || n == 0) return misses;
    if (slots >= n) return std::vector<double>(q.size(), 0.0);
    // sum_i (1 - (1 - q_i)^T) grows with T from 0 towards the number of experts chosen at all.
    const auto stays = [](double r, double t) { return r >= 1.0 ? 0.0 : std::exp(t * std::log1p(-r)); };
    const auto resident = [&](double t) {
        double s = 0;
        for (double r : q) s += 1.0 - stays(r, t);
        return s;
    };
    double lo = 0, hi = 1;
    for (int i = 0; i < 200 && resident(hi) < double(slots); ++i) hi *= 2;
    for (int i = 0; i < 100; ++i) {
        const double mid = 0.5 * (lo + hi);
        (resident(mid) < double(slots) ? lo : hi) = mid;
    }
    const double t = 0.5 * (lo + hi);
    for (size_t i = 0; i < q.size(); ++i) misses[i] = q[i] * stays(q[i], t);
    return misses;
}

double hitRate(const std::vector<double>& q, const std::vector<double>& misses)
{
    const double chosen = std::accumulate(q.begin(), q.end(), 0.0);
    const double missed = std::accumulate(misses.begin(), misses.end(), 0.0);
    return chosen > 0 ? 1.0 - missed / chosen : 0.0;
}

std::vector<int> allotSlots(const std::vector<std::vector<double>>& rates, int minSlots, int maxSlots, int total)
{
    const size_t layers = rates.size();
    std::vector<int> slots(layers, minSlots);
    if (layers == 0 || maxSlots <= minSlots) return slots;
    const auto missed = [&](size_t l, int n) {
        const std::vector<double> m = expectedMisses(rates[l], n);
        return std::accumulate(m.begin(), m.end(), 0.0);
    };
    // Per layer: its expected misses now, and the gain of one more slot.
    std::vector<double> now(layers), gain(layers);
    for (size_t l = 0; l < layers; ++l) {
        now[l] = missed(l, minSlots);
        gain[l] = now[l] - missed(l, minSlots + 1);
    }
    int left = total - int(layers) * minSlots;
    while (left > 0) {
        size_t best = layers;
        for (size_t l = 0; l < layers; ++l)
            if (slots[l] < maxSlots &&
                (best == layers || gain[l] > gain[best] * (1 + 1e-9) ||
                 (gain[l] >= gain[best] * (1 - 1e-9) && slots[l] < slots[best])))  // even gains: the fewer slots
                best = l;
        if (best == layers) break;
        ++slots[best];
        --left;
        now[best] -= gain[best];
        gain[best] = slots[best] < maxSlots ? now[best] - missed(best, slots[best] + 1) : 0.0;
    }
    return slots;
}

}  // namespace spillway::plan
