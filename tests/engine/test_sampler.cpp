// The sampler: greedy, seeded reproducibility, and that each filter keeps what it should.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/runtime/sampler.h"

using namespace spillway;

namespace {
std::vector<float> randomLogits(int n, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    return v;
}
}  // namespace

TEST(Sampler, GreedyIsArgmax)
{
    SamplerSettings s;
    s.temperature = 0.0f;
    Sampler sampler(1000, s);
    for (uint64_t seed = 0; seed < 20; ++seed) {
        const auto logits = randomLogits(1000, seed);
        EXPECT_EQ(sampler.sample(logits), argmax(logits));
    }
}

TEST(Sampler, SameSeedSameTokensAndOtherSeedOtherTokens)
{
    SamplerSettings s;
    s.temperature = 1.5f;
    s.topK = 0;
    s.topP = 1.0f;
    s.minP = 0.0f;
    auto run = [&](uint64_t seed) {
        s.seed = seed;
        Sampler sampler(500, s);
        std::vector<int32_t> out;
        for (uint64_t i = 0; i < 64; ++i) out.push_back(sampler.sample(randomLogits(500, i)));
        return out;
    };
    EXPECT_EQ(run(7), run(7));
    EXPECT_NE(run(7), run(8));
}

TEST(Sampler, FrequenciesFollowTheSoftmax)
{
    const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
    SamplerSettings s;
    s.temperature = 1.0f;
    s.topK = 0;
    s.topP = 1.0f;
    s.minP = 0.0f;
    s.seed = 3;
    Sampler sampler(4, s);
    std::vector<int> counts(4);
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[size_t(sampler.sample(logits))];
    double z = 0;
    for (float l : logits) z += std::exp(l);
    for (size_t i = 0; i < 4; ++i) {
        const double p = std::exp(logits[i]) / z;
        EXPECT_NEAR(double(counts[i]) / n, p, 4 * std::sqrt(p * (1 - p) / n) + 1e-3) << i;
    }
}

TEST(Sampler, TopKTopPAndMinPKeepOnlyTheirSets)
{
    // Probabilities at T=1 (after softmax): token 0 dominant, a long tail.
    std::vector<float> logits(100, -5.0f);
    logits[10] = 4.0f;
    logits[20] = 3.5f;
    logits[30] = 3.0f;
    logits[40] = 1.0f;
    auto sampled = [&](SamplerSettings s) {
        Sampler sampler(100, s);
        std::map<int32_t, int> seen;
        for (int i = 0; i < 3000; ++i) ++seen[sampler.sample(logits)];
        return seen;
    };
    SamplerSettings base;
    base.temperature = 1.0f;
    base.topK = 0;
    base.topP = 1.0f;
    base.minP = 0.0f;

    SamplerSettings k = base;
    k.topK = 2;
    for (const auto& [id, n] : sampled(k)) EXPECT_TRUE(id == 10 || id == 20) << id;

    SamplerSettings p = base;  // p(10) ~ .50, p(20) ~ .30, p(30) ~ .18: top-p .75 keeps two
    p.topP = 0.75f;
    for (const auto& [id, n] : sampled(p)) EXPECT_TRUE(id == 10 || id == 20) << id;

    SamplerSettings m = base;  // min-p .3 of p(10) keeps 20 and 30 (>= .15), not 40
    m.minP = 0.3f;
    const auto seen = sampled(m);
    for (const auto& [id, n] : seen) EXPECT_TRUE(id == 10 || id == 20 || id == 30) << id;
    EXPECT_EQ(seen.size(), 3u);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens)
{
    std::vector<float> logits(10, 0.0f);
    logits[3] = 2.0f;
    logits[4] = 1.5f;
    SamplerSettings s;
    s.temperature = 0.0f;
    s.repeatPenalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.5
    Sampler sampler(10, s);
    EXPECT_EQ(sampler.sample(logits), 3);
    sampler.accept(3);
    EXPECT_EQ(sampler.sample(logits), 4);
    // Negative logits are multiplied: a penalized negative token sinks further.
    std::vector<float> negative(10, -1.0f);
    negative[5] = -0.5f;
    negative[6] = -0.6f;
    sampler.accept(5);
    EXPECT_EQ(sampler.sample(negative), 6);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtractByCount)
{
    std::vector<float> logits(10, 0.0f);
    logits[3] = 2.0f;
    logits[4] = 1.5f;
    logits[5] = 1.0f;
    SamplerSettings s;
    s.temperature = 0.0f;
    s.presencePenalty = 0.6f;  // 3 once seen: 2.0 - 0.6 = 1.4 < 1.5
    Sampler presence(10, s);
    EXPECT_EQ(presence.sample(logits), 3);
    presence.accept(3);
    EXPECT_EQ(presence.sample(logits), 4);
    // However often a token was seen, the presence penalty counts once: 3 stays at 1.4 > 1.0.
    std::vector<float> two(10, 0.0f);
    two[3] = 2.0f;
    two[4] = 1.0f;
    Sampler once(10, s);
    for (int i = 0; i < 3; ++i) once.accept(3);
    EXPECT_EQ(once.sample(two), 3);

    s.presencePenalty = 0.0f;
    s.frequencyPenalty = 0.3f;
    Sampler frequency(10, s);
    frequency.accept(3);  // 2.0 - 0.3 = 1.7: still first
    EXPECT_EQ(frequency.sample(logits), 3);
    frequency.accept(3);  // 2.0 - 0.6 = 1.4 < 1.5
    EXPECT_EQ(frequency.sample(logits), 4);
    // Negative penalties favour what was said.
    s.frequencyPenalty = -1.5f;
    Sampler favour(10, s);
    favour.accept(5);  // 1.0 + 1.5 = 2.5 > 2.0
    EXPECT_EQ(favour.sample(logits), 5);
}
