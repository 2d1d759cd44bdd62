// Routing profiles of mixtures of experts and what they drive: the expected hits of the expert
// cache's slots (Che's approximation, against a simulated LRU cache), the planner's experts in
// RAM and first slots, and the runtime that keeps them (same logits, bit for bit, as all resident).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/calibrate/routing.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/model_tensors.h"
#include "core/plan/planner.h"
#include "core/plan/routing_profile.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/made_up_hardware.h"
#include "../common/session_logits.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kMoe = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/moe/";

// An LRU cache of `slots` experts fed by tokens that choose `used` distinct experts each, drawn
// without replacement by weights w: its measured hit rate, and each expert's measured rate of
// being chosen per token (what a routing profile records).
double simulateLru(const std::vector<double>& w, int used, int slots, int tokens, unsigned seed, std::vector<double>& rates)
{
    std::mt19937 rng(seed);
    std::list<int> lru;  // most recent first
    uint64_t hits = 0, lookups = 0;
    rates.assign(w.size(), 0.0);
    for (int t = 0; t < tokens; ++t) {
        std::vector<double> left = w;
        std::vector<int> chosen;
        for (int k = 0; k < used; ++k) {
            std::discrete_distribution<int> pick(left.begin(), left.end());
            chosen.push_back(pick(rng));
            left[size_t(chosen.back())] = 0;
        }
        // The runtime's order: a token's hits first (kept), then its misses evict the least recent.
        std::vector<int> misses;
        for (int e : chosen) {
            rates[size_t(e)] += 1.0 / tokens;
            ++lookups;
            const auto it = std::find(lru.begin(), lru.end(), e);
            if (it == lru.end()) {
                misses.push_back(e);
                continue;
            }
            ++hits;
            lru.erase(it);
            lru.push_front(e);
        }
        for (int e : misses) {
            if (int(lru.size()) == slots) lru.pop_back();
            lru.push_front(e);
        }
    }
    return double(hits) / double(lookups);
}

// The test prompt, the options of a session with every weight resident (one token at a time) and
// its logits over the prompt and 8 greedy steps: what every placement must give again.
struct Resident {
    std::vector<int32_t> prompt;
    SessionOptions options;
    std::vector<float> logits;
};

Resident resident(const LlamaModel& model, gpu::Device& device)
{
    Resident r;
    r.prompt = model.tokenizer().encode("Lily and Tom went to the park", true);
    r.options.contextLength = 64;
    r.options.batch = 1;
    r.logits = testing_support::sessionLogits(model, device, r.options, r.prompt, 8);
    return r;
}

plan::RoutingProfile profileOf(const LlamaConfig& c, const std::vector<int>& hotFirst, uint64_t tokens)
{
    // Every layer: the experts in `hotFirst` order take falling shares of the choices.
    plan::RoutingProfile p;
    p.layers = c.nLayers;
    p.experts = c.nExperts;
    p.used = c.nExpertsUsed;
    p.tokens = tokens;
    p.source = "made up";
    for (int l = 0; l < c.nLayers; ++l) {
        std::vector<uint64_t> row(size_t(c.nExperts), 0);
        uint64_t left = tokens * uint64_t(c.nExpertsUsed);
        for (size_t i = 0; i < hotFirst.size(); ++i) {
            const uint64_t n = i + 1 == hotFirst.size() ? left : left / 2;
            row[size_t(hotFirst[i])] = n;
            left -= n;
        }
        p.counts.insert(p.counts.end(), row.begin(), row.end());
    }
    return p;
}

}  // namespace

// A profile goes to JSON and back unchanged; one whose counts do not add up to tokens x used, or
// of another shape, or not JSON at all, is refused with the reason.
TEST(MoeRouting, ProfileRoundTripsAndRefusesWhatDoesNotAddUp)
{
    auto model = LlamaModel::load(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    const plan::RoutingProfile p = profileOf(c, {3, 1, 2, 0, 4, 5, 6, 7}, 100);
    ASSERT_TRUE(p.fits(c));
    testing_support::TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    const std::string path = dir.path() + "/routing.json";
    ASSERT_TRUE(p.save(path));
    auto back = plan::RoutingProfile::load(path);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->counts, p.counts);
    EXPECT_EQ(back->tokens, p.tokens);
    EXPECT_EQ(back->source, p.source);
    EXPECT_EQ(back->hottest(0).front(), 3);
    const std::vector<double> q = back->choiceRates(1);
    EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), double(c.nExpertsUsed), 1e-9);
    EXPECT_GT(q[3], q[1]);
    EXPECT_GT(q[7], 0.0) << "an expert never seen is rare, not impossible";

    plan::RoutingProfile wrong = p;
    wrong.counts[0] += 1;
    auto refused = plan::RoutingProfile::fromJson(wrong.toJson());
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("not tokens x used"), std::string::npos) << refused.error().message;
    plan::RoutingProfile twice = p;  // expert 3 chosen twice by every token: adds up, cannot be
    twice.counts[3] += twice.tokens;
    for (uint64_t e = 0, take = twice.tokens; take > 0; ++e) {
        const uint64_t d = e == 3 ? 0 : std::min(twice.counts[e], take);
        twice.counts[e] -= d;
        take -= d;
    }
    refused = plan::RoutingProfile::fromJson(twice.toJson());
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("more often than there were tokens"), std::string::npos)
        << refused.error().message;
    EXPECT_FALSE(plan::RoutingProfile::fromJson("{\"format\": \"spillway-routing-1\", \"layers\": 2}"));
    EXPECT_FALSE(plan::RoutingProfile::fromJson("not json"));
    plan::RoutingProfile other = p;
    other.experts = 4;
    EXPECT_FALSE(other.fits(c));
}

// The slots' expected hit rate: exactly slots / experts for uniform routing, all hits with a slot
// per expert, more slots never fewer hits, and for skewed routing (tokens choosing 8 distinct
// experts of 64 by Zipf weights, s = 1) within two points of an LRU cache simulated over 20,000
// tokens, given the choice rates that simulation measured (as a routing profile records them).
TEST(MoeRouting, ExpectedHitsMatchASimulatedLruCache)
{
    const std::vector<double> uniform(64, 8.0 / 64.0);
    for (int slots : {8, 16, 32, 48})
        EXPECT_NEAR(plan::hitRate(uniform, plan::expectedMisses(uniform, slots)), slots / 64.0, 1e-9) << slots;
    EXPECT_DOUBLE_EQ(plan::hitRate(uniform, plan::expectedMisses(uniform, 64)), 1.0);
    std::vector<double> zipf(64);
    for (int e = 0; e < 64; ++e) zipf[size_t(e)] = 1.0 / double(e + 1);
    double previous = 0;
    for (int slots : {8, 16, 24, 32, 48}) {
        std::vector<double> q;
        const double simulated = simulateLru(zipf, 8, slots, 20000, unsigned(slots), q);
        EXPECT_NEAR(std::accumulate(q.begin(), q.end(), 0.0), 8.0, 1e-6);
        const double expected = plan::hitRate(q, plan::expectedMisses(q, slots));
        EXPECT_GT(expected, slots / 64.0) << "skew helps a cache, slots " << slots;
        EXPECT_GT(expected, previous) << slots;
        previous = expected;
        EXPECT_NEAR(expected, simulated, 0.02) << "slots " << slots;
    }
}

// The slots divided among layers by their routing: as many in all as asked, each layer within
// [min, max], the fewest expected misses of every division (checked against all of them), a flat
// layer given more than one whose choices fall on a few experts; too few to go round: min each.
TEST(MoeRouting, SlotsGoWhereTheyLowerTheMissesMost)
{
    const int experts = 16, used = 2;
    std::vector<double> flat(experts, double(used) / experts), zipf(experts), few(experts, 0.002);
    double sum = 0;
    for (int e = 0; e < experts; ++e) sum += zipf[size_t(e)] = 1.0 / double(e + 1);
    for (double& q : zipf) q *= used / sum;
    few[0] = few[1] = (used - 0.002 * (experts - 2)) / 2;
    const std::vector<std::vector<double>> rates = {flat, zipf, few};
    const auto missed = [&](const std::vector<int>& slots) {
        double m = 0;
        for (size_t l = 0; l < rates.size(); ++l)
            for (double x : plan::expectedMisses(rates[l], slots[l])) m += x;
        return m;
    };
    for (int total : {6, 9, 12, 20, 30, 48}) {
        const std::vector<int> got = plan::allotSlots(rates, used, experts, total);
        ASSERT_EQ(got.size(), rates.size());
        EXPECT_EQ(std::accumulate(got.begin(), got.end(), 0), total) << total;
        for (int n : got) {
            EXPECT_GE(n, used);
            EXPECT_LE(n, experts);
        }
        double best = 1e9;
        for (int a = used; a <= experts; ++a)
            for (int b = used; b <= experts; ++b) {
                const int c = total - a - b;
                if (c >= used && c <= experts) best = std::min(best, missed({a, b, c}));
            }
        EXPECT_LE(missed(got), best + 1e-9) << "total " << total << ": " << got[0] << " " << got[1] << " " << got[2];
        if (total >= 12 && total < 48) {
            EXPECT_GT(got[0], got[2]) << "total " << total << ": the flat layer gains from each slot, the few-expert one not";
            EXPECT_LT(missed(got), missed({total / 3, total / 3, total / 3}) - 1e-6) << total;
        }
    }
    EXPECT_EQ(plan::allotSlots(rates, used, experts, 4), std::vector<int>(3, used));
    EXPECT_EQ(plan::allotSlots(rates, used, experts, 1000), std::vector<int>(3, experts));
    // Layers that route alike share the slots evenly.
    EXPECT_EQ(plan::allotSlots({flat, flat, flat}, used, experts, 12), std::vector<int>(3, 4));
}

// With a measured routing and no slot count asked for, the planner divides the default slots
// (twice the experts a token uses, in every layer) among the layers by their routing; the plan
// says so, expects more hits than even slots, and the session keeps the division (its report, its
// slot memory) and gives the same logits, bit for bit, as all resident. A count asked for is kept
// in every layer.
TEST(MoeRouting, PlannerSizesEachLayersSlotsByItsRouting)
{
    auto model = LlamaModel::load(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    ASSERT_EQ(c.nLayers, 3);
    // Layer 0 routes evenly, layer 1 to two experts nearly always, layer 2 with falling shares.
    plan::RoutingProfile routing = profileOf(c, {5, 2, 7, 0, 1, 3, 4, 6}, 4000);
    const uint64_t choices = routing.tokens * uint64_t(c.nExpertsUsed);
    for (int e = 0; e < c.nExperts; ++e) {
        routing.counts[size_t(e)] = choices / uint64_t(c.nExperts);
        routing.counts[size_t(c.nExperts + e)] = e < 2 ? choices / 2 - 30 : 10;
    }
    plan::PlannerInput in;
    in.model = model->get();
    in.profile = testing_support::madeUpHardware();
    in.contextLength = 64;
    in.batch = 1;
    in.routing = std::make_shared<const plan::RoutingProfile>(routing);
    plan::Placement given = plan::uniformPlacement(**model, plan::Tier::Device);
    for (auto& t : given.tensors)
        if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
    auto r = plan::predictPlacement(in, given);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->placement.experts.size(), size_t(c.nLayers)) << plan::planText(*r, true);
    const int even = c.expertSlots(0);
    std::vector<int> slots;
    for (const plan::ExpertPlacement& x : r->placement.experts) {
        slots.push_back(x.slotCount);
        EXPECT_EQ(int(x.device.size()), x.slotCount) << "layer " << x.layer << ": its slots start with its hottest";
        EXPECT_EQ(r->expertLayers[size_t(x.layer)].deviceSlots, x.slotCount);
    }
    std::printf("[ INFO     ] slots per layer: %d %d %d (even: %d)\n", slots[0], slots[1], slots[2], even);
    EXPECT_EQ(std::accumulate(slots.begin(), slots.end(), 0), even * c.nLayers);
    EXPECT_GT(slots[0], even) << "the even layer";
    EXPECT_LT(slots[1], even) << "the layer of two experts";
    const std::string text = plan::planText(*r, false);
    EXPECT_NE(text.find("slots per layer, by the routing"), std::string::npos) << text;
    double hits = 0, evenHits = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        const std::vector<double> q = in.routing->choiceRates(l);
        hits += r->expertLayers[size_t(l)].hitRate;
        evenHits += plan::hitRate(q, plan::expectedMisses(q, even));
    }
    EXPECT_GT(hits, evenHits + 0.01);

    auto device = gpu::createCpuDevice(2);
    const Resident all = resident(**model, *device);
    SessionOptions o = all.options;
    o.placement = r->placement;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    const std::vector<float> got = testing_support::sessionLogits(**session, all.prompt, 8);
    ASSERT_EQ(got.size(), all.logits.size());
    EXPECT_EQ(0, std::memcmp(got.data(), all.logits.data(), got.size() * sizeof(float)));
    const ExpertCacheReport sized = (*session)->expertCacheReport();
    EXPECT_EQ(sized.slotsPerLayer, *std::max_element(slots.begin(), slots.end()));
    EXPECT_EQ(sized.fewestSlots, *std::min_element(slots.begin(), slots.end()));
    EXPECT_NE(sized.slotsText().find("by the routing"), std::string::npos) << sized.slotsText();
    // A prompt in batches of 4: a layer with fewer slots than the batch's experts fetches in groups.
    SessionOptions batched = all.options;
    batched.batch = 4;
    const std::vector<float> residentBatched = testing_support::sessionLogits(**model, *device, batched, all.prompt, 2);
    batched.placement = r->placement;
    const std::vector<float> cachedBatched = testing_support::sessionLogits(**model, *device, batched, all.prompt, 2);
    ASSERT_EQ(cachedBatched.size(), residentBatched.size());
    EXPECT_EQ(0, std::memcmp(cachedBatched.data(), residentBatched.data(), cachedBatched.size() * sizeof(float)));
    // The same slot memory as even slots: asked for, the count holds in every layer.
    o.experts.slotsPerLayer = even;
    auto evenSession = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(evenSession) << evenSession.error().message;
    const ExpertCacheReport flat = (*evenSession)->expertCacheReport();
    EXPECT_EQ(flat.fewestSlots, even);
    EXPECT_EQ(flat.slotsPerLayer, even);
    EXPECT_EQ(flat.slotBytes, sized.slotBytes);
    in.expertSlots = even;
    auto asked = plan::predictPlacement(in, given);
    ASSERT_TRUE(asked) << asked.error().message;
    for (const plan::ExpertPlacement& x : asked->placement.experts) EXPECT_EQ(x.slotCount, even) << "layer " << x.layer;
}

// With a routing profile the planner gives the RAM budget to the experts expected to miss most
// often (the hottest rarely do: they are nearly always in a slot) and fills each served layer's
// slots with its hottest other experts; the session running that plan keeps what it says, gives
// the same logits, bit for bit, as all resident, and under the profile's routing finds in its
// slots, in RAM and on the SSD the shares the plan expects.
TEST(MoeRouting, PlannerKeepsTheLikeliestMissesInRamAndTheRuntimeKeepsThePlan)
{
    auto model = LlamaModel::load(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    const std::vector<int> hotFirst = {5, 2, 7, 0, 1, 3, 4, 6};
    auto routing = std::make_shared<const plan::RoutingProfile>(profileOf(c, hotFirst, 4000));
    uint64_t expertStacks = 0;
    for (const ModelTensor& t : (*model)->tensors())
        if (t.name.find("_exps") != std::string::npos) expertStacks += t.bytes;
    const uint64_t expertBytes = expertStacks / uint64_t(c.nLayers) / uint64_t(c.nExperts);
    plan::PlannerInput in;
    in.model = model->get();
    in.profile = testing_support::madeUpHardware();
    in.contextLength = 64;
    in.batch = 4;
    in.expertSlots = 3;
    in.routing = routing;
    // Room in RAM for two experts per layer and a little.
    in.ramBudget = uint64_t(c.nLayers) * 2 * (expertBytes + 768) + (uint64_t(64) << 10);
    // Experts stay on the SSD: the device has room for all else and the slots, not for all the
    // stacks (the planner may still trade something for one layer's: those are then resident).
    plan::Placement given = plan::uniformPlacement(**model, plan::Tier::Device);
    for (auto& t : given.tensors)
        if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
    auto need = plan::predictPlacement(in, given);
    ASSERT_TRUE(need) << need.error().message;
    in.vramBudget = need->deviceTotal() + expertStacks / uint64_t(c.nLayers) / 3 / 2;
    auto r = plan::planPlacement(in);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_FALSE(r->placement.experts.empty()) << plan::planText(*r, true);
    const int cachedLayers = int(r->placement.experts.size());
    int inRam = 0;
    for (const plan::ExpertPlacement& x : r->placement.experts) {
        // The slots start with the hottest experts not kept in RAM (the CPU device uses those
        // where they are).
        std::vector<int> warm;
        for (int e : routing->hottest(x.layer))
            if (warm.size() < 3 && std::find(x.host.begin(), x.host.end(), e) == x.host.end()) warm.push_back(e);
        EXPECT_EQ(x.device, warm) << "layer " << x.layer;
        EXPECT_EQ(x.device.front(), hotFirst.front()) << "the hottest rarely misses: not in RAM";
        // The RAM's experts are those expected to miss most often (the hottest rarely miss: they
        // are nearly always in a slot).
        const std::vector<double> q = routing->choiceRates(x.layer);
        const std::vector<double> misses = plan::expectedMisses(q, 3);
        double leastKept = 1e9, mostLeft = 0;
        for (int e = 0; e < c.nExperts; ++e) {
            const bool kept = std::find(x.host.begin(), x.host.end(), e) != x.host.end();
            (kept ? leastKept : mostLeft) = kept ? std::min(leastKept, misses[size_t(e)]) : std::max(mostLeft, misses[size_t(e)]);
        }
        EXPECT_GE(leastKept, mostLeft) << "layer " << x.layer;
        inRam += int(x.host.size());
    }
    EXPECT_GE(inRam, cachedLayers) << plan::planText(*r, true);
    EXPECT_LE(r->hostTotal(), in.ramBudget);
    ASSERT_EQ(r->expertLayers.size(), size_t(c.nLayers));
    int onDevice = 0;
    for (const plan::ExpertLayerPlan& x : r->expertLayers) onDevice += !x.cached && x.tier == plan::Tier::Device;
    EXPECT_EQ(onDevice + cachedLayers, c.nLayers) << "each layer's stacks resident or cached, none streamed whole";
    const plan::ExpertLayerPlan& first = r->expertLayers[size_t(r->placement.experts.front().layer)];
    ASSERT_TRUE(first.cached);
    // The CPU device uses the RAM's experts where they are: they take no slot, and the slots are
    // a cache of the other experts alone.
    const std::vector<double> q = routing->choiceRates(first.layer);
    std::vector<double> others = q;
    for (int e : r->placement.experts.front().host) others[size_t(e)] = 0;
    std::vector<double> misses = plan::expectedMisses(others, 3);
    for (int e : r->placement.experts.front().host) misses[size_t(e)] = q[size_t(e)];
    EXPECT_NEAR(first.hitRate, plan::hitRate(q, misses), 1e-12);
    EXPECT_GT(first.hostRate, 0.0);
    const std::string text = plan::planText(*r, false);
    EXPECT_NE(text.find("routing measured (made up, 4000 tokens)"), std::string::npos) << text;
    EXPECT_NE(text.find("3 slots on the device"), std::string::npos) << text;
    // Uniform routing, the same budgets: fewer hits expected.
    in.routing = nullptr;
    auto flat = plan::planPlacement(in);
    ASSERT_TRUE(flat) << flat.error().message;
    ASSERT_FALSE(flat->placement.experts.empty());
    EXPECT_NEAR(flat->expertLayers[size_t(flat->placement.experts.front().layer)].hitRate, 3.0 / 8.0, 1e-9);
    // Nothing is known to be hot: the slots start with the experts not in RAM, as many as fit.
    for (const plan::ExpertPlacement& x : flat->placement.experts) {
        std::vector<int> notInRam;
        for (int e = 0; e < c.nExperts; ++e)
            if (notInRam.size() < 3 && std::find(x.host.begin(), x.host.end(), e) == x.host.end()) notInRam.push_back(e);
        EXPECT_EQ(x.device, notInRam) << "layer " << x.layer;
    }

    // The runtime: the plan's experts in RAM and first slots, and the same logits.
    auto device = gpu::createCpuDevice(2);
    const Resident all = resident(**model, *device);
    SessionOptions o = all.options;
    o.placement = r->placement;
    o.experts.slotsPerLayer = 3;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    const ExpertCacheReport atStart = (*session)->expertCacheReport();
    EXPECT_EQ(atStart.hostExperts, inRam);
    EXPECT_GT(atStart.startBytes, 0u);
    EXPECT_EQ(atStart.hits + atStart.misses, 0u);
    const std::vector<float> got = testing_support::sessionLogits(**session, all.prompt, 8);
    ASSERT_EQ(got.size(), all.logits.size());
    EXPECT_EQ(0, std::memcmp(got.data(), all.logits.data(), got.size() * sizeof(float)));

    // What the plan expects is what the runtime does: with each token's experts drawn at the
    // profile's rates, over 600 tokens, the shares of the choices found in a slot, served from RAM
    // and read from the SSD are the plan's (mean over the cached layers) within 3 points.
    o.drawnRouting = routing;
    o.contextLength = 640;
    auto drawn = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(drawn) << drawn.error().message;
    for (int pos = 0; pos < 600; ++pos) {
        const int32_t token = int32_t(5 + (pos * 37) % 400);
        ASSERT_TRUE((*drawn)->forward({&token, 1}, pos));
    }
    const ExpertCacheReport ran = (*drawn)->expertCacheReport();
    double hitsExpected = 0, ramExpected = 0;
    for (const plan::ExpertLayerPlan& x : r->expertLayers)
        if (x.cached) {
            hitsExpected += x.hitRate / cachedLayers;
            ramExpected += x.hostRate / cachedLayers;
        }
    const double lookups = double(ran.hits + ran.misses);
    EXPECT_NEAR(double(ran.hits) / lookups, hitsExpected, 0.03);
    EXPECT_NEAR(double(ran.hostCopies) / lookups, ramExpected, 0.03);
    EXPECT_NEAR(double(ran.misses - ran.hostCopies) / lookups, 1 - hitsExpected - ramExpected, 0.03);
}

// Every expert kept in RAM: after the start no token reads the SSD (a miss is served from RAM:
// used where it is on the CPU device, which computes on host memory), nothing is read ahead, and
// the logits are those of all resident.
TEST(MoeRouting, ExpertsInRamAreServedFromThereNotRead)
{
    for (const char* name : {"tiny-mixtral", "tiny-qwen2moe"}) {
        auto model = LlamaModel::load(kMoe + name + ".gguf");
        ASSERT_TRUE(model) << model.error().message;
        const LlamaConfig& c = (*model)->config();
        auto device = gpu::createCpuDevice(2);
        const Resident all = resident(**model, *device);
        plan::Placement placement = plan::uniformPlacement(**model, plan::Tier::Device);
        for (auto& t : placement.tensors)
            if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
        std::vector<int> every(size_t(c.nExperts));
        std::iota(every.begin(), every.end(), 0);
        for (int l = 0; l < c.nLayers; ++l) placement.experts.push_back({l, {0, 1}, every});
        SessionOptions o = all.options;
        o.placement = placement;
        o.experts.slotsPerLayer = 2;
        auto session = LlamaSession::create(**model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        const std::vector<float> got = testing_support::sessionLogits(**session, all.prompt, 8);
        ASSERT_EQ(got.size(), all.logits.size()) << name;
        EXPECT_EQ(0, std::memcmp(got.data(), all.logits.data(), got.size() * sizeof(float))) << name;
        const ExpertCacheReport r = (*session)->expertCacheReport();
        EXPECT_EQ(r.hostExperts, c.nLayers * c.nExperts) << name;
        EXPECT_EQ(r.ssdBytes, 0u) << name << ": a miss was read from the SSD";
        EXPECT_EQ(r.hostCopies, r.misses) << name;
        EXPECT_GT(r.misses, 0u) << name;
        EXPECT_EQ(r.prefetched, 0u) << name << ": nothing to read ahead";
    }
}

// Calibration counts every token's choices: each layer's counts add up to tokens x used, and the
// profile fits the model it was measured on.
TEST(MoeRouting, CalibrationCountsEveryChoice)
{
    auto model = LlamaModel::load(kMoe + "tiny-olmoe.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    compress::RoutingOptions o;
    o.prompts = {"Lily and Tom went to the park", "Once upon a time there was a cat"};
    o.maxTokensPerPrompt = 16;
    o.continueTokens = 4;
    auto p = compress::measureRouting(**model, *device, o);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_TRUE(p->fits(c));
    EXPECT_GT(p->tokens, 10u);
    EXPECT_LE(p->tokens, 2u * (16u + 4u));
    for (int l = 0; l < c.nLayers; ++l) {
        uint64_t sum = 0;
        for (int e = 0; e < c.nExperts; ++e) sum += p->counts[size_t(l) * size_t(c.nExperts) + size_t(e)];
        EXPECT_EQ(sum, p->tokens * uint64_t(c.nExpertsUsed)) << "layer " << l;
    }
    EXPECT_TRUE(plan::RoutingProfile::fromJson(p->toJson())) << "what is measured loads again";
    auto dense = LlamaModel::load(std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf");
    ASSERT_TRUE(dense) << dense.error().message;
    auto refused = compress::measureRouting(**dense, *device, o);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::UnsupportedModel);
}

// make-synthetic's mixtures of experts route tokens to many experts, none taking every token.
// (With Q4_0's nibbles drawn 0 ... 15, every row had a mean of half a step, a common direction
// each matrix amplified until every token chose the same 8 experts. Random weights still share
// one direction across tokens, the BOS token's values that attention averages in, so the busiest
// expert takes about 70 % of the tokens here and deeper layers concentrate more.)
TEST(MoeRouting, SyntheticMixturesSpreadTheirTokens)
{
    testing_support::TempDir dir;
    ASSERT_FALSE(dir.path().empty());
    for (gpu::DType type : {gpu::DType::Q4_0}) {  // (Q8_0's -128 shifted the mean far less)
        const std::string path = dir.path() + "/olmoe.gguf";
        SyntheticOptions s;
        s.preset = "olmoe-1b-7b";
        s.layers = 2;
        s.type = type;
        ASSERT_TRUE(writeSyntheticModel(s, path));
        auto model = LlamaModel::load(path);
        ASSERT_TRUE(model) << model.error().message;
        const LlamaConfig& c = (*model)->config();
        auto device = gpu::createCpuDevice(2);
        compress::RoutingOptions o;
        o.prompts = {"Once upon a time there was a little girl", "The capital of France is Paris and",
                     "In 1905 Albert Einstein published four papers", "def fibonacci(n): return n"};
        o.maxTokensPerPrompt = 16;
        o.continueTokens = 0;
        auto p = compress::measureRouting(**model, *device, o);
        ASSERT_TRUE(p) << p.error().message;
        for (int l = 0; l < c.nLayers; ++l) {
            const uint64_t* row = p->counts.data() + size_t(l) * size_t(c.nExperts);
            int used = 0;
            uint64_t busiest = 0;
            for (int e = 0; e < c.nExperts; ++e) {
                used += row[e] > 0;
                busiest = std::max(busiest, row[e]);
            }
            EXPECT_GE(used, c.nExperts / 2) << gpu::dtypeName(type) << " layer " << l;
            EXPECT_LT(double(busiest), 0.8 * double(p->tokens)) << gpu::dtypeName(type) << " layer " << l;
        }
    }
}

// A synthetic routing drawn at a profile's rates: every draw takes `used` distinct experts, each
// expert as often as its rate says (within 5 standard deviations over 20,000 draws), the same
// seed draws the same experts, and a rate above 1 (a hand-made profile) is taken as 1, its excess
// spread over the others.
TEST(MoeRouting, DrawnRoutingKeepsEachExpertsRate)
{
    plan::RoutingProfile p;
    p.layers = 2;
    p.experts = 16;
    p.used = 4;
    p.tokens = 1000;
    p.source = "made up";
    for (int l = 0; l < p.layers; ++l) {  // falling shares, in another order in each layer
        std::vector<uint64_t> row(16, 0);
        uint64_t left = p.tokens * uint64_t(p.used);
        for (int i = 0; i < 16; ++i) {
            const uint64_t n = i == 15 ? left : std::min<uint64_t>(left / 3, p.tokens);
            row[size_t(l == 0 ? i : 15 - i)] = n;
            left -= n;
        }
        p.counts.insert(p.counts.end(), row.begin(), row.end());
    }
    ASSERT_TRUE(plan::RoutingProfile::fromJson(p.toJson())) << "a profile as `sparsity` writes them";
    const int draws = 20000;
    plan::RoutingDraw draw(p, 7), same(p, 7), other(p, 8);
    bool differs = false;
    for (int l = 0; l < p.layers; ++l) {
        const std::vector<double> q = p.choiceRates(l);
        std::vector<int> seen(16, 0), got(4), again(4), elsewhere(4);
        for (int t = 0; t < draws; ++t) {
            draw.draw(l, got);
            same.draw(l, again);
            other.draw(l, elsewhere);
            ASSERT_EQ(got, again) << "the same seed draws the same experts";
            differs |= got != elsewhere;
            std::vector<int> sorted = got;
            std::sort(sorted.begin(), sorted.end());
            ASSERT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "an expert drawn twice";
            for (int e : got) {
                ASSERT_GE(e, 0);
                ASSERT_LT(e, 16);
                ++seen[size_t(e)];
            }
        }
        for (int e = 0; e < 16; ++e) {
            const double sd = std::sqrt(q[size_t(e)] * (1 - q[size_t(e)]) / draws);
            EXPECT_NEAR(double(seen[size_t(e)]) / draws, q[size_t(e)], 5 * sd + 1e-9) << "layer " << l << " expert " << e;
        }
    }
    EXPECT_TRUE(differs) << "another seed, other draws";

    plan::RoutingProfile over = p;  // expert 0 chosen twice a token: its rate is capped at 1
    over.layers = 1;
    over.counts.assign(16, 0);
    over.counts[0] = 2 * over.tokens;
    over.counts[1] = over.tokens * uint64_t(over.used) - over.counts[0];
    plan::RoutingDraw capped(over, 1);
    std::vector<int> got(4);
    int others = 0;
    for (int t = 0; t < 2000; ++t) {
        capped.draw(0, got);
        EXPECT_NE(std::find(got.begin(), got.end(), 0), got.end()) << "the capped expert in every draw";
        others += std::count_if(got.begin(), got.end(), [](int e) { return e != 0 && e != 1; });
    }
    EXPECT_GT(others, 0) << "the excess went to the others";
}

// A session given a routing to draw from routes every token by it: per layer, each expert's
// share of the choices is the profile's (within 5 standard deviations, 200 tokens), where the
// router of the same model chooses otherwise; a profile of another shape is refused.
TEST(MoeRouting, SessionDrawsItsExpertsFromTheProfile)
{
    auto model = LlamaModel::load(kMoe + "tiny-olmoe.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    SessionOptions o;
    o.contextLength = 256;
    o.batch = 32;
    // Per layer another hot expert takes 40 % of the choices (80 % of the tokens), the rest share
    // the remainder.
    auto profile = std::make_shared<plan::RoutingProfile>();
    profile->layers = c.nLayers;
    profile->experts = c.nExperts;
    profile->used = c.nExpertsUsed;
    profile->tokens = 1000;
    profile->source = "made up";
    for (int l = 0; l < c.nLayers; ++l) {
        std::vector<uint64_t> row(size_t(c.nExperts), 0);
        const uint64_t all = profile->tokens * uint64_t(c.nExpertsUsed), hot = all * 4 / 10;
        row[size_t((3 * l + 1) % c.nExperts)] = hot;
        for (int e = 0, k = 0; e < c.nExperts; ++e)
            if (row[size_t(e)] == 0) row[size_t(e)] = (all - hot) / uint64_t(c.nExperts - 1) + (k++ == 0 ? (all - hot) % uint64_t(c.nExperts - 1) : 0);
        profile->counts.insert(profile->counts.end(), row.begin(), row.end());
    }
    ASSERT_TRUE(plan::RoutingProfile::fromJson(profile->toJson()));
    std::vector<int32_t> tokens(200);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + (i * 37) % 500);

    const auto countsOf = [&](std::shared_ptr<const plan::RoutingProfile> drawn) {
        SessionOptions d = o;
        d.drawnRouting = std::move(drawn);
        auto session = LlamaSession::create(**model, *device, d);
        EXPECT_TRUE(session) << session.error().message;
        if (!session) return std::vector<uint64_t>{};
        for (size_t at = 0; at < tokens.size(); at += 32) {
            const size_t n = std::min<size_t>(32, tokens.size() - at);
            EXPECT_TRUE((*session)->forward({tokens.data() + at, n}, int(at)));
        }
        return (*session)->expertCounts();
    };
    const std::vector<uint64_t> drawn = countsOf(profile), routed = countsOf(nullptr);
    ASSERT_EQ(drawn.size(), size_t(c.nLayers) * size_t(c.nExperts));
    int routedMatches = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        const std::vector<double> q = profile->choiceRates(l);
        bool routedFits = true;
        for (int e = 0; e < c.nExperts; ++e) {
            const double n = double(tokens.size()), sd = std::sqrt(q[size_t(e)] * (1 - q[size_t(e)]) / n);
            const size_t at = size_t(l) * size_t(c.nExperts) + size_t(e);
            EXPECT_NEAR(double(drawn[at]) / n, q[size_t(e)], 5 * sd) << "layer " << l << " expert " << e;
            routedFits &= std::abs(double(routed[at]) / n - q[size_t(e)]) <= 5 * sd;
        }
        routedMatches += routedFits;
    }
    EXPECT_LT(routedMatches, c.nLayers) << "the router itself routes like the made-up profile: the test shows nothing";

    auto wrong = std::make_shared<plan::RoutingProfile>(*profile);
    wrong->layers = c.nLayers + 1;
    wrong->counts.resize(size_t(wrong->layers) * size_t(c.nExperts), 0);
    SessionOptions bad = o;
    bad.drawnRouting = wrong;
    auto refused = LlamaSession::create(**model, *device, bad);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

// The router lookahead of a layer whose guesses are mostly wrong stops reading ahead and only
// guesses: with each token's experts drawn independently of the hidden state (uniform rates: the
// router's guess is right by chance, a quarter of the time here), the first tokens read ahead,
// later ones read (almost) nothing ahead, and the guesses are still counted.
TEST(MoeRouting, LookaheadStopsReadingWhereItGuessesWrong)
{
    auto model = LlamaModel::load(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto device = gpu::createCpuDevice(2);
    plan::Placement placement = plan::uniformPlacement(**model, plan::Tier::Device);
    for (auto& t : placement.tensors)
        if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
    SessionOptions o;
    o.contextLength = 128;
    o.batch = 1;
    o.placement = placement;
    o.experts.slotsPerLayer = c.nExpertsUsed;
    auto uniform = std::make_shared<plan::RoutingProfile>(profileOf(c, {}, 0));
    uniform->tokens = 100;
    uniform->counts.assign(size_t(c.nLayers) * size_t(c.nExperts), 100 * uint64_t(c.nExpertsUsed) / uint64_t(c.nExperts));
    ASSERT_TRUE(plan::RoutingProfile::fromJson(uniform->toJson()));
    o.drawnRouting = uniform;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    const auto decode = [&](int from, int to) {
        for (int pos = from; pos < to; ++pos) {
            const int32_t token = int32_t(5 + (pos * 37) % 400);
            ASSERT_TRUE((*session)->forward({&token, 1}, pos));
        }
    };
    decode(0, 16);
    const ExpertCacheReport early = (*session)->expertCacheReport();
    decode(16, 32);
    const ExpertCacheReport middle = (*session)->expertCacheReport();
    decode(32, 96);
    const ExpertCacheReport late = (*session)->expertCacheReport().since(middle);
    EXPECT_GT(early.aheadBytes, 0u) << "the first tokens read ahead";
    EXPECT_LT(late.lookaheadAccuracy(), kLookaheadFloor);
    EXPECT_EQ(late.guessed, uint64_t(64 * (c.nLayers - 1) * c.nExpertsUsed)) << "every token still guesses";
    EXPECT_GT(late.unreadGuesses, 0u);
    // Per token, a tenth of what the first 16 read ahead at most.
    EXPECT_LT(double(late.aheadBytes) / 64.0, 0.1 * double(early.aheadBytes) / 16.0)
        << early.aheadBytes << " bytes read ahead in the first 16 tokens, " << late.aheadBytes << " in the last 64";
}
