#pragma once
// How a mixture of experts routes: per layer, how often the router chose each expert over a
// number of tokens (measured on calibration prompts by `spillway-cli sparsity`, or kept from
// generation). The planner places experts by it (the expected hits of the device's expert slots,
// which experts to keep in RAM), and the expert cache fills its slots with the hottest at start.
//
// The expert slots are least recently used caches; their hit rate under a routing with per-token
// choice probabilities q_i is Che's approximation (Che, Tung, Wang 2002, "Hierarchical Web caching
// systems: modeling, design and experimental results") counted in tokens, since a token asks for
// its experts together: with T (tokens) such that sum_i (1 - (1 - q_i)^T) = slots, expert i is
// resident when it was chosen in one of the last T tokens, with probability 1 - (1 - q_i)^T, so
// it misses q_i (1 - q_i)^T times per token. Exact for uniform routing (slots / experts) and for
// slots = experts per token (T = 1); within two points of a simulated cache otherwise
// (tests/engine/test_moe_routing.cpp). Measured counts are smoothed (half a choice added to every
// expert) so that an expert calibration never saw is rare, not impossible.

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway {
struct LlamaConfig;
}

namespace spillway::plan {

struct RoutingProfile {
    int layers = 0, experts = 0, used = 0;  // the model's shape (checked against the model)
    uint64_t tokens = 0;                    // tokens routed per layer
    std::vector<uint64_t> counts;           // layers x experts: how often each was chosen
    std::string source;                     // what was measured ("calibration: 12 prompts")

    bool empty() const { return tokens == 0; }
    // Layer's counts, one per expert.
    std::span<const uint64_t> layerCounts(int layer) const
    {
        return std::span<const uint64_t>(counts).subspan(size_t(layer) * size_t(experts), size_t(experts));
    }
    bool fits(const LlamaConfig& config) const;
    // Per-token choice probabilities of layer's experts (they sum to `used`); uniform when empty.
    std::vector<double> choiceRates(int layer) const;
    // The layer's experts, most often chosen first (ties: lower index first).
    std::vector<int> hottest(int layer) const;

    std::string toJson() const;
    static Result<RoutingProfile> fromJson(const std::string& text);
    Status save(const std::string& path) const;
    static Result<RoutingProfile> load(const std::string& path);
};

// A synthetic routing of a known skew: each token's experts drawn at a profile's rates instead
// of the router's choice (benchmarks of random-weight models under a real model's routing
// statistics: outputs are not the model's). A draw takes `used` distinct experts of the layer,
// expert i with probability q_i (the profile's choice rates; one above 1, which a hand-made
// profile could give, is taken as 1 and the excess spread over the others): systematic sampling
// over a random order (Madow 1949): the experts laid end to end, each q_i long, in an order
// shuffled anew for every draw, and the ones under the points u, u + 1, ..., u + used - 1 taken,
// u uniform in [0, 1).
class RoutingDraw {
public:
    RoutingDraw(const RoutingProfile& profile, uint64_t seed);
    // Layer's experts for one token, into out (its size: the profile's `used`), in drawn order.
    void draw(int layer, std::span<int> out);

private:
    std::vector<std::vector<double>> m_rates;  // per layer, each at most 1, summing to used
    std::mt19937_64 m_rng;
    std::vector<int> m_order;
};

// Where `sparsity` keeps a model's routing profile and the planner looks for it:
// $XDG_CACHE_HOME/spillway/routing/<file name>-<size in hex>.json (~/.cache without XDG_CACHE_HOME).
std::string routingProfilePath(const std::string& modelPath);
// The profile kept for a model, or an empty one when there is none (or it is for another shape:
// `note` then says why it was not used).
RoutingProfile keptRoutingProfile(const std::string& modelPath, const LlamaConfig& config, std::string* note = nullptr);

// A least recently used cache of `slots` experts of one layer under per-token choice rates q (each
// at most 1; Che's approximation, above): per expert, its expected misses per token.
std::vector<double> expectedMisses(const std::vector<double>& q, int slots);
// The share of a layer's choices that hit: 1 - sum(misses) / sum(q).
double hitRate(const std::vector<double>& q, const std::vector<double>& misses);
// Divides `total` expert slots among layers with per-token choice rates rates[l] (each layer at
// least minSlots, at most maxSlots) for the fewest expected misses per token in all: from
// minSlots each, every further slot goes to the layer whose misses it lowers most (a layer whose
// routing is concentrated needs few slots to hold its hot experts; a flat one gains from every
// slot). A layer's misses fall by less with each slot it gets, so taking the largest gain each
// time is optimal. `total` below layers x minSlots gives each minSlots.
std::vector<int> allotSlots(const std::vector<std::vector<double>>& rates, int minSlots, int maxSlots, int total);

}  // namespace spillway::plan
