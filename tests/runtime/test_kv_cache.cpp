// KV cache precision (gpu::KvType f32 / f16 / q8):
//   - the names the command line and the settings use, and `--kv-type` errors;
//   - the store (conversion at write time) and the CPU attention op on f16 / q8 caches, for every
//     kernel set, against a double-precision reference written here;
//   - a session's cache bytes follow layers x 2 x kvHeads x headDim x element size (+ scales);
//   - on stories260K, f16 and q8 logits stay close to f32 over the 48-token reference
//     continuations (and pick the same top-1 token), while f32 still gives llama.cpp's text;
//   - the planner gives the bytes a smaller cache frees to weights.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "core/model/llama_model.h"
#include "core/plan/planner.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/kernel_sets.h"
#include "../common/made_up_hardware.h"
#include "../common/tiny_models.h"

using namespace spillway;
using gpu::KvType;

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;
const std::string kModel = kData + "/models/stories260K.gguf";
constexpr KvType kTypes[] = {KvType::F32, KvType::F16, KvType::Q8};

// IEEE half -> double, from the format's definition (independent of the engine's converters).
double refHalf(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -24);
    return sign * std::ldexp(1024 + m, e - 25);
}

std::vector<float> randomVector(size_t n, std::mt19937_64& rng, float range = 1.0f)
{
    std::uniform_real_distribution<float> dist(-range, range);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// A cache of `type` for (ctx, nKv, headDim) values, filled position by position through the
// attention op's store (kNew / vNew), as a session fills it; `keys` / `values` keep the fp32
// vectors that went in, `decodedK` / `decodedV` what the cache holds, decoded in double.
struct TestCache {
    KvType type;
    int ctx, nKv, headDim;
    std::vector<uint8_t> k, v;
    std::vector<float> kScales, vScales;
    std::vector<float> keys, values;
    std::vector<double> decodedK, decodedV;

    TestCache(KvType t, int ctx_, int nKv_, int headDim_)
        : type(t), ctx(ctx_), nKv(nKv_), headDim(headDim_),
          k(size_t(ctx_) * nKv_ * headDim_ * gpu::kvElementBytes(t), 0xcd), v(k.size(), 0xcd),
          kScales(size_t(ctx_) * nKv_, NAN), vScales(kScales.size(), NAN)
    {
    }

    gpu::AttentionArgs args(const float* q, float* out, int nHeads, int nPos) const
    {
        gpu::AttentionArgs a{q, k.data(), v.data(), out, nullptr, nHeads, nKv, headDim, nPos,
                             1.0f / std::sqrt(float(headDim))};
        a.kvType = type;
        a.kScales = kScales.data();
        a.vScales = vScales.data();
        return a;
    }

    double decode(const std::vector<uint8_t>& bytes, const std::vector<float>& scales, size_t i) const
    {
        switch (type) {
        case KvType::F32: {
            float f;
            std::memcpy(&f, bytes.data() + 4 * i, 4);
            return f;
        }
        case KvType::F16: {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            return refHalf(h);
        }
        case KvType::Q8: return double(int8_t(bytes[i])) * scales[i / size_t(headDim)];
        }
        return NAN;
    }

    // Stores position `pos` (its K and V given) with an attention call over [0, pos].
    void store(gpu::Device& device, const std::vector<float>& kNew, const std::vector<float>& vNew,
               int nHeads, int pos, std::mt19937_64& rng)
    {
        const std::vector<float> q = randomVector(size_t(nHeads) * headDim, rng);
        std::vector<float> out(q.size());
        gpu::AttentionArgs a = args(q.data(), out.data(), nHeads, pos + 1);
        a.kNew = kNew.data();
        a.vNew = vNew.data();
        device.attention(a);
        keys.insert(keys.end(), kNew.begin(), kNew.end());
        values.insert(values.end(), vNew.begin(), vNew.end());
        const size_t first = size_t(pos) * nKv * headDim;
        for (size_t i = first; i < first + kNew.size(); ++i) {
            decodedK.push_back(decode(k, kScales, i));
            decodedV.push_back(decode(v, vScales, i));
        }
    }
};

// Double-precision attention of head h over `nPos` positions of (nPos, nKv, headDim) K and V.
std::vector<double> referenceAttention(const std::vector<float>& q, const double* k, const double* v,
                                       int nHeads, int nKv, int headDim, int nPos)
{
    std::vector<double> out(size_t(nHeads) * headDim, 0.0);
    const double scale = 1.0 / std::sqrt(double(headDim));
    for (int h = 0; h < nHeads; ++h) {
        const int g = h / (nHeads / nKv);
        std::vector<double> p(nPos);
        double mx = -1e300, sum = 0.0;
        for (int t = 0; t < nPos; ++t) {
            double s = 0.0;
            for (int i = 0; i < headDim; ++i)
                s += double(q[size_t(h) * headDim + i]) * k[(size_t(t) * nKv + g) * headDim + i];
            p[t] = s * scale;
            mx = std::max(mx, p[t]);
        }
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (int t = 0; t < nPos; ++t)
            for (int i = 0; i < headDim; ++i)
                out[size_t(h) * headDim + i] += p[t] / sum * v[(size_t(t) * nKv + g) * headDim + i];
    }
    return out;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Reference {
    std::string prompt, text;
};

std::vector<Reference> readReferences()
{
    std::vector<Reference> refs;
    std::ifstream in(kData + "/reference/stories260K.greedy48.tsv");
    std::string line;
    while (std::getline(in, line)) {
        const auto tab = line.find('\t');
        if (tab != std::string::npos) refs.push_back({line.substr(0, tab), line.substr(tab + 1)});
    }
    return refs;
}

}  // namespace

TEST(KvType, NamesRoundTripAndOthersAreRejected)
{
    for (KvType t : kTypes) {
        const auto parsed = gpu::parseKvType(gpu::kvTypeName(t));
        ASSERT_TRUE(parsed.has_value()) << gpu::kvTypeName(t);
        EXPECT_EQ(*parsed, t);
    }
    EXPECT_STREQ(gpu::kvTypeName(KvType::F32), "f32");
    EXPECT_STREQ(gpu::kvTypeName(KvType::F16), "f16");
    EXPECT_STREQ(gpu::kvTypeName(KvType::Q8), "q8");
    for (const char* bad : {"", "q4", "F16", "fp16", "int8", "f32 "})
        EXPECT_FALSE(gpu::parseKvType(bad).has_value()) << "'" << bad << "'";
    EXPECT_EQ(gpu::kvVectorBytes(KvType::F32, 64), 256u);
    EXPECT_EQ(gpu::kvVectorBytes(KvType::F16, 64), 128u);
    EXPECT_EQ(gpu::kvVectorBytes(KvType::Q8, 64), 68u);  // 64 int8 + a float scale
}

// Q8 store: scale = max|x| / 127, round half away from zero. With max|x| = 127 the scale is 1
// and x / scale is exact, so the ties show the rounding (nearest-even would give 2, -2, 0, 0).
TEST(KvStore, Q8RoundsHalfAwayFromZeroAndF16RoundsToNearestEven)
{
    auto device = gpu::createCpuDevice(1);
    const int headDim = 8;
    TestCache cache(KvType::Q8, 2, 1, headDim);
    const std::vector<float> k = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.5f, 0.0f};
    const std::vector<float> v(headDim, 0.0f);  // all zero: scale 0, values 0
    std::mt19937_64 rng(1);
    cache.store(*device, k, v, 1, 0, rng);
    const int8_t want[] = {127, 3, -3, 1, -1, 1, -127, 0};
    for (int i = 0; i < headDim; ++i) EXPECT_EQ(int8_t(cache.k[i]), want[i]) << i;
    EXPECT_EQ(cache.kScales[0], 1.0f);
    EXPECT_EQ(cache.vScales[0], 0.0f);
    for (int i = 0; i < headDim; ++i) EXPECT_EQ(int8_t(cache.v[i]), 0) << i;

    TestCache half(KvType::F16, 2, 1, headDim);
    // 1 + 2^-11 is halfway between two halves: ties to even (1.0); 1 + 3 * 2^-11 goes up.
    const std::vector<float> hk = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -0.1f, 65504.0f, 1e-7f, 0, 0, 0};
    half.store(*device, hk, v, 1, 0, rng);
    EXPECT_EQ(half.decodedK[0], 1.0);
    EXPECT_EQ(half.decodedK[1], 1.0 + 0x1p-9);
    EXPECT_NEAR(half.decodedK[2], -0.1, 0.1 * 0x1p-11);
    EXPECT_EQ(half.decodedK[3], 65504.0);
    EXPECT_NEAR(half.decodedK[4], 1e-7, 0x1p-25);  // an fp16 subnormal
}

// The attention op on f16 / q8 caches, every kernel set, against double precision:
//   - on the values the cache holds (decoded here): float rounding only, as tight as f32;
//   - on the fp32 vectors that went in: the conversion's error, bounded by its step size.
TEST(KvAttention, ConvertedCachesMatchDoubleReference)
{
    struct Shape { int nHeads, nKv, headDim, ctx; };
    // 300 > the CPU op's 256-value chunk; 8 heads over 2 KV heads is grouped-query.
    const Shape shapes[] = {{8, 2, 64, 80}, {4, 4, 300, 20}, {6, 3, 8, 40}};
    std::mt19937_64 rng(7);
    double worstInput[3] = {}, worstHeld[3] = {};
    for (gpu::CpuKernelSet set : testing_support::kernelSetsThisCpuRuns())
        for (int threads : {1, 3}) {
            auto device = gpu::createCpuDevice(threads, set);
            for (const Shape& s : shapes)
                for (KvType type : kTypes) {
                    TestCache cache(type, s.ctx, s.nKv, s.headDim);
                    const size_t kvDim = size_t(s.nKv) * s.headDim;
                    for (int pos = 0; pos < s.ctx; ++pos)
                        cache.store(*device, randomVector(kvDim, rng, 2.0f), randomVector(kvDim, rng), s.nHeads,
                                    pos, rng);
                    for (int nPos : {1, 7, s.ctx}) {
                        const std::vector<float> q = randomVector(size_t(s.nHeads) * s.headDim, rng, 2.0f);
                        std::vector<float> out(q.size() + 1, NAN);
                        device->attention(cache.args(q.data(), out.data(), s.nHeads, nPos));
                        const auto held = referenceAttention(q, cache.decodedK.data(), cache.decodedV.data(),
                                                             s.nHeads, s.nKv, s.headDim, nPos);
                        const auto keys = widen(cache.keys), values = widen(cache.values);
                        const auto input = referenceAttention(q, keys.data(), values.data(), s.nHeads, s.nKv,
                                                              s.headDim, nPos);
                        const int ti = int(type);
                        for (size_t i = 0; i < q.size(); ++i) {
                            ASSERT_NEAR(out[i], held[i], 2e-6)
                                << gpu::kvTypeName(type) << " set " << int(set) << " dim " << s.headDim
                                << " nPos " << nPos << " i " << i;
                            worstHeld[ti] = std::max(worstHeld[ti], std::fabs(out[i] - held[i]));
                            worstInput[ti] = std::max(worstInput[ti], std::fabs(out[i] - input[i]));
                        }
                        EXPECT_TRUE(std::isnan(out[q.size()]));  // nothing written past the heads
                    }
                }
        }
    // Conversion error against the fp32 inputs (values in [-1, 1], keys in [-2, 2]): f32 none
    // beyond rounding; f16 about 2^-11 relative; q8 about 1/254 of each vector's max.
    std::printf("attention max |out - double|: on held values f32 %.2e f16 %.2e q8 %.2e; "
                "on fp32 inputs f32 %.2e f16 %.2e q8 %.2e\n",
                worstHeld[0], worstHeld[1], worstHeld[2], worstInput[0], worstInput[1], worstInput[2]);
    EXPECT_LE(worstInput[0], 2e-6);
    EXPECT_LE(worstInput[1], 2e-3);
    EXPECT_LE(worstInput[2], 2e-2);
    EXPECT_GT(worstInput[2], worstInput[1]);  // q8 is coarser than f16: the types really differ
}

// A prompt in batches writes each token's K and V through its own scratch (f16, q8) or straight
// into the cache (f32): every type gives the logits of one token at a time, bit for bit.
TEST(KvSession, PromptBatchesGiveTheLogitsOfOneTokenAtATime)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const std::vector<int> tokens = {1, 403, 407, 261, 378, 66, 400, 259, 280, 288, 301, 270, 500, 14};
    for (KvType type : kTypes) {
        SCOPED_TRACE(gpu::kvTypeName(type));
        const auto oneAtATime = testing_support::logitsAtEachPosition(**model, tokens, 32, type);
        for (int batch : {2, 5, 32})
            testing_support::expectBatchedPromptMatches(**model, tokens, 32, oneAtATime, 11, batch, type);
    }
}

// everyLogits: row i of a batch's logits is token i's, bit for bit; more than a batch per call
// is refused (the rows would not fit).
TEST(KvSession, EveryTokensLogitsInABatch)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const std::vector<int> tokens = {1, 403, 407, 261, 378, 66, 400, 259, 280, 288, 301};
    const auto oneAtATime = testing_support::logitsAtEachPosition(**model, tokens, 32);
    ASSERT_EQ(oneAtATime.size(), tokens.size());
    auto device = gpu::createCpuDevice(2);
    SessionOptions o;
    o.contextLength = 32;
    o.batch = 4;
    o.everyLogits = true;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    const size_t vocab = size_t((*model)->config().vocabSize);
    const std::vector<int32_t> t(tokens.begin(), tokens.end());
    for (size_t pos = 0; pos < t.size(); pos += 4) {
        const size_t n = std::min<size_t>(4, t.size() - pos);
        auto logits = (*session)->forward(std::span<const int32_t>(t.data() + pos, n), int(pos));
        ASSERT_TRUE(logits) << logits.error().message;
        for (size_t i = 0; i < n; ++i)
            EXPECT_EQ(std::vector<float>(*logits + i * vocab, *logits + (i + 1) * vocab), oneAtATime[pos + i])
                << "position " << pos + i;
    }
    auto tooMany = (*session)->forward(std::span<const int32_t>(t.data(), 5), 0);
    ASSERT_FALSE(tooMany);
    EXPECT_EQ(tooMany.error().code, ErrorCode::InvalidArgument);
    EXPECT_GT(LlamaSession::workingBytes((*model)->config(), 32, 4, KvType::F32, true),
              LlamaSession::workingBytes((*model)->config(), 32, 4));
}

TEST(KvSession, CacheBytesFollowTheTypeAndTheFormula)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    const int ctx = 96;
    uint64_t usedF32 = 0;
    for (KvType type : kTypes) {
        auto device = gpu::createCpuDevice(1);
        SessionOptions o;
        o.contextLength = ctx;
        o.kvType = type;
        auto session = LlamaSession::create(**model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        EXPECT_EQ((*session)->kvType(), type);
        const uint64_t elementBytes = type == KvType::F32 ? 4 : type == KvType::F16 ? 2 : 1;
        const uint64_t scaleBytes = type == KvType::Q8 ? 4 : 0;
        const uint64_t perPosition =
            uint64_t(c.nLayers) * 2 * c.nKvHeads * (uint64_t(c.headDim) * elementBytes + scaleBytes);
        EXPECT_EQ((*session)->kvCacheBytes(), perPosition * ctx) << gpu::kvTypeName(type);
        EXPECT_EQ(LlamaSession::kvCacheBytes(c, ctx, type, 32), perPosition * ctx);
        // The device holds exactly the difference (an f16/q8 session adds two kvDim scratch
        // vectors per token of a prompt batch, for their K and V before conversion).
        const uint64_t used = device->memoryStats().used;
        if (type == KvType::F32) {
            usedF32 = used;
        } else {
            const uint64_t scratch = 2 * uint64_t(c.kvDim()) * sizeof(float) * uint64_t((*session)->batch());
            EXPECT_EQ(used + LlamaSession::kvCacheBytes(c, ctx, KvType::F32, 32),
                      usedF32 + perPosition * ctx + scratch)
                << gpu::kvTypeName(type);
            EXPECT_EQ(LlamaSession::workingBytes(c, ctx, 32, type) + LlamaSession::kvCacheBytes(c, ctx, KvType::F32, 32),
                      LlamaSession::workingBytes(c, ctx, 32) + perPosition * ctx + scratch);
        }
        ASSERT_TRUE((*session)->forward(1, 0));
    }
    // An out-of-range type is an error, not a crash.
    auto device = gpu::createCpuDevice(1);
    SessionOptions bad;
    bad.kvType = KvType(7);
    auto session = LlamaSession::create(**model, *device, bad);
    ASSERT_FALSE(session);
    EXPECT_EQ(session.error().code, ErrorCode::InvalidArgument);
}

// f16 and q8 against f32 on stories260K: every reference prompt, its 48-token greedy f32
// continuation fed back (teacher forcing), logits compared at each of the 48 steps; every CPU
// kernel set.
//
// Measured (3 x 48 steps, f32 logits up to 22 in magnitude, smallest f32 top-1 margin 0.11;
// the same for the scalar, AVX2 and AVX-512 kernels):
//   f16 - f32: max 2.1e-2, mean 2.2e-3, top-1 agrees 144/144
//   q8  - f32: max 0.83,   mean 8.7e-2, top-1 agrees 144/144
// (this model's head dimension is 8, so each q8 scale covers only 8 values, but its 5 layers
// amplify little errors: q8 stays well behind f16). The bounds leave 2-5x headroom. A broken
// kernel lands far outside them: the q8 V weights scaled by the K scales instead gave max 22,
// mean 4.1 and top-1 agreement 5/144.
TEST(KvSession, F16AndQ8LogitsStayCloseToF32OnStories260K)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const int vocab = (*model)->config().vocabSize;
    const auto refs = readReferences();
    ASSERT_EQ(refs.size(), 3u);
    for (const std::string& kernels : testing_support::kernelSetNamesThisCpuRuns()) {
        SCOPED_TRACE(kernels);
        setenv("SPILLWAY_CPU_KERNELS", kernels.c_str(), 1);
        auto device = gpu::createCpuDevice(2);
        unsetenv("SPILLWAY_CPU_KERNELS");
        double worst[3] = {}, sumDiff[3] = {}, maxLogit = 0, minMargin = 1e30;
        int agree[3] = {}, steps = 0;
        for (const Reference& ref : refs) {
            // f32 greedy: still llama.cpp's text, and the token sequence the others are fed.
            std::vector<int32_t> tokens;
            {
                auto session = LlamaSession::create(**model, *device, SessionOptions{});
                ASSERT_TRUE(session) << session.error().message;
                SamplerSettings greedy;
                greedy.temperature = 0.0f;
                Sampler sampler(vocab, greedy);
                std::string text = ref.prompt;
                GenerationRequest request;
                request.prompt = ref.prompt;
                request.maxNewTokens = 48;
                request.onToken = [&](std::string_view piece, int32_t) {
                    text += piece;
                    return true;
                };
                auto stats = generate(**session, sampler, request);
                ASSERT_TRUE(stats) << stats.error().message;
                ASSERT_EQ(stats->generatedTokens, 48);
                EXPECT_EQ(text, ref.text);
                tokens = stats->tokens;
            }
            const int promptTokens = int(tokens.size()) - 48;
            std::vector<std::vector<float>> logits[3];  // per type: the 48 steps' logits
            for (KvType type : kTypes) {
                SessionOptions o;
                o.kvType = type;
                auto session = LlamaSession::create(**model, *device, o);
                ASSERT_TRUE(session) << session.error().message;
                auto first = (*session)->forward(std::span(tokens).first(size_t(promptTokens)), 0);
                ASSERT_TRUE(first) << first.error().message;
                logits[int(type)].emplace_back(*first, *first + vocab);
                for (int pos = promptTokens; pos < int(tokens.size()) - 1; ++pos) {
                    auto next = (*session)->forward(tokens[size_t(pos)], pos);
                    ASSERT_TRUE(next) << next.error().message;
                    logits[int(type)].emplace_back(*next, *next + vocab);
                }
            }
            for (size_t step = 0; step < logits[0].size(); ++step) {
                const auto& f32 = logits[0][step];
                // The f32 top-1 is the reference continuation's token.
                EXPECT_EQ(argmax(f32), tokens[size_t(promptTokens) + step]);
                for (int t = 1; t < 3; ++t) {
                    double diff = 0;
                    for (int i = 0; i < vocab; ++i) {
                        const double d = std::fabs(logits[t][step][i] - f32[i]);
                        diff = std::max(diff, d);
                        sumDiff[t] += d;
                        maxLogit = std::max(maxLogit, double(std::fabs(f32[i])));
                    }
                    worst[t] = std::max(worst[t], diff);
                    agree[t] += argmax(logits[t][step]) == argmax(f32) ? 1 : 0;
                }
                std::vector<float> sorted = f32;
                std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
                minMargin = std::min(minMargin, double(sorted[0] - sorted[1]));
                ++steps;
            }
        }
        const double meanF16 = sumDiff[1] / (double(steps) * vocab), meanQ8 = sumDiff[2] / (double(steps) * vocab);
        std::printf("stories260K, %s kernels, %d steps (max |f32 logit| %.1f, smallest top-1 margin %.3f): "
                    "f16 - f32 max %.3e mean %.3e, top-1 agrees %d/%d; q8 - f32 max %.3e mean %.3e, top-1 "
                    "agrees %d/%d\n",
                    kernels.c_str(), steps, maxLogit, minMargin, worst[1], meanF16, agree[1], steps, worst[2], meanQ8,
                    agree[2], steps);
        EXPECT_EQ(steps, 3 * 48);
        EXPECT_GT(worst[1], 0.0);  // the f16 and q8 paths really ran
        EXPECT_GT(worst[2], worst[1]);
        EXPECT_LE(worst[1], 0.1);
        EXPECT_LE(meanF16, 1e-2);
        EXPECT_EQ(agree[1], steps);
        EXPECT_LE(worst[2], 2.0);
        EXPECT_LE(meanQ8, 0.3);
        EXPECT_GE(agree[2], steps - 4);  // a near tie may flip on another machine, not more
    }
}

// An explicit f32 cache is the default: the same logits, bit for bit.
TEST(KvSession, ExplicitF32IsTheDefault)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const int vocab = (*model)->config().vocabSize;
    auto device = gpu::createCpuDevice(2);
    auto a = LlamaSession::create(**model, *device, 64);
    SessionOptions o;
    o.contextLength = 64;
    o.kvType = KvType::F32;
    auto b = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(a && b) << (a ? "" : a.error().message) << (b ? "" : b.error().message);
    const int32_t tokens[] = {1, 403, 407, 261, 378, 500, 17, 300};
    for (int pos = 0; pos < 8; ++pos) {
        auto xr = (*a)->forward(tokens[pos], pos);
        ASSERT_TRUE(xr) << xr.error().message;
        auto yr = (*b)->forward(tokens[pos], pos);
        ASSERT_TRUE(yr) << yr.error().message;
        const float* x = *xr;
        const float* y = *yr;
        ASSERT_EQ(0, std::memcmp(x, y, size_t(vocab) * sizeof(float))) << pos;
    }
}

TEST(KvPlanner, SmallerCacheLeavesMoreDeviceMemoryForWeights)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    const hw::HardwareProfile p = testing_support::madeUpHardware();

    const int ctx = 512;
    // A budget that holds the f32 working set and some of the weights, not all of them.
    const uint64_t budget = LlamaSession::workingBytes(c, ctx, 4) + (400u << 10);
    plan::PlanResult plans[3];
    for (KvType type : kTypes) {
        plan::PlannerInput in;
        in.model = &**model;
        in.profile = p;
        in.vramBudget = budget;
        in.ramBudget = uint64_t(64) << 20;
        in.contextLength = ctx;
        in.batch = 4;
        in.kvType = type;
        auto r = plan::planPlacement(in);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_LE(r->deviceTotal(), budget);
        EXPECT_EQ(r->kvType, type);
        EXPECT_EQ(r->kvCacheBytes, LlamaSession::kvCacheBytes(c, ctx, type, 4));
        EXPECT_NE(plan::planText(*r, false).find(std::string("KV cache ")), std::string::npos);
        EXPECT_NE(plan::planJson(*r).find(std::string("\"kv_type\": \"") + gpu::kvTypeName(type)), std::string::npos);
        plans[int(type)] = std::move(r.value());

        // The runtime, given this plan and a device of exactly the budget, fits in it.
        auto device = gpu::createCpuDevice(1, budget);
        SessionOptions o;
        o.contextLength = ctx;
        o.batch = 4;
        o.kvType = type;
        o.placement = plans[int(type)].placement;
        auto session = LlamaSession::create(**model, *device, o);
        ASSERT_TRUE(session) << gpu::kvTypeName(type) << ": " << session.error().message;
        ASSERT_TRUE((*session)->forward(1, 0));
    }
    std::printf("device weight bytes at a %.1f KiB budget: f32 %llu, f16 %llu, q8 %llu\n", budget / 1024.0,
                (unsigned long long)plans[0].deviceWeightBytes, (unsigned long long)plans[1].deviceWeightBytes,
                (unsigned long long)plans[2].deviceWeightBytes);
    EXPECT_LT(plans[1].deviceWorkingBytes, plans[0].deviceWorkingBytes);
    EXPECT_LT(plans[2].deviceWorkingBytes, plans[1].deviceWorkingBytes);
    EXPECT_GT(plans[1].deviceWeightBytes, plans[0].deviceWeightBytes);
    EXPECT_GE(plans[2].deviceWeightBytes, plans[1].deviceWeightBytes);
    EXPECT_LE(plans[1].ssdBytes, plans[0].ssdBytes);
}

// spillway-cli generate / plan / bench --kv-type: the three names run, anything else is a usage
// error (exit 2) whose one line names the choices.
TEST(KvCli, KvTypeFlag)
{
    const std::string cli = std::string(SPILLWAY_BIN_DIR) + "/spillway-cli";
    const std::string dir = testing::TempDir() + "/test_kv_cache-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    auto run = [&](const std::string& args, std::string* err = nullptr, std::string* out = nullptr) {
        const std::string cmd = "XDG_CACHE_HOME='" + dir + "/cache' '" + cli + "' " + args + " >'" + dir +
                                "/out' 2>'" + dir + "/err' </dev/null";
        const int status = std::system(cmd.c_str());
        auto slurp = [](const std::string& path) {
            std::ifstream in(path);
            return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        };
        if (err) *err = slurp(dir + "/err");
        if (out) *out = slurp(dir + "/out");
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    };
    const std::string model = "-m '" + kModel + "'";
    std::string err, out;
    for (const char* type : {"f32", "f16", "q8"}) {
        EXPECT_EQ(run("generate " + model + " -p 'Once upon a time' -n 8 --temp 0 --kv-type " + type, &err, &out), 0)
            << type << ": " << err;
        EXPECT_EQ(out.rfind("Once upon a time", 0), 0u) << out;
    }
    EXPECT_EQ(run("plan " + model + " --ctx 64 --quick-probe --kv-type q8", &err, &out), 0) << err;
    EXPECT_NE(out.find("KV cache"), std::string::npos) << out;
    EXPECT_NE(out.find("(q8)"), std::string::npos) << out;
    EXPECT_EQ(run("bench " + model + " -n 4 -r 1 --bandwidth-mib 64 --kv-type f16", &err, &out), 0) << err;
    EXPECT_NE(out.find("f16"), std::string::npos) << out;
    for (const char* command : {"generate -p x", "plan", "bench -n 2 -r 1"}) {
        EXPECT_EQ(run(std::string(command) + " " + model + " --kv-type q4", &err), 2) << command;
        EXPECT_NE(err.find("--kv-type"), std::string::npos) << err;
        EXPECT_NE(err.find("f32, f16 or q8"), std::string::npos) << err;
    }
    std::filesystem::remove_all(dir);
}
