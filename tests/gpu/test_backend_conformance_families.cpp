// Conformance of a GPU backend's ops for the 2026 families (gpt-oss; Qwen3.5 / Qwen3-Next)
// against the CPU device: attention with learned sinks, a sliding window and a ring cache, and
// Device::deltaNet (Gated DeltaNet), fused and unfused, with the key heads tiled or grouped, one
// token and a prompt's batch. A backend whose caps lack an op skips its test with the reason.
//
// Tolerances (relative L2 over a whole output, as test_backend_conformance.cpp):
//   attention with sinks / window / ring                 <= 1e-5, caches bit-identical
//   deltaNet outputs and state matrices                  <= 1e-4 (the CPU runs a batch in the
//                                                        chunked form, the GPU step by step)
//   deltaNet convolution state                           exact (it holds the last inputs)

#include <string>
#include <vector>

#include "conformance_support.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace conformance;

namespace {

// Positions stored one at a time by the op (kNew / vNew), each step's output held to the CPU's.
TEST_F(BackendConformance, AttentionWithSinksWindowAndRing)
{
    if (!gpu().info().caps.attentionSinks || !gpu().info().caps.slidingWindow)
        GTEST_SKIP() << "the " << kBackend << " backend has no attention sinks or sliding window yet";
    struct Case { int window, ring; bool sinks; };
    for (KvType type : {KvType::F32, KvType::F16, KvType::Q8})
        for (Case cs : {Case{0, 0, true}, Case{5, 0, false}, Case{5, 8, true}, Case{16, 16, true}}) {
            SCOPED_TRACE(std::string(kvTypeName(type)) + " window " + std::to_string(cs.window) + " ring " +
                         std::to_string(cs.ring) + (cs.sinks ? " sinks" : ""));
            const int heads = 8, kvHeads = 2, headDim = 64, steps = 40;
            const int rows = cs.ring > 0 ? cs.ring : steps;
            const size_t kvDim = size_t(kvHeads) * headDim;
            const size_t cacheBytes = size_t(rows) * kvDim * kvElementBytes(type), vectors = size_t(rows) * kvHeads;
            std::vector<uint8_t> k(cacheBytes, 0), v(cacheBytes, 0);
            std::vector<float> kScales(vectors, 0.0f), vScales(vectors, 0.0f);
            const std::vector<float> sinks = randomFloats(heads, rng, -2.0f, 3.0f);
            DeviceData dk(gpu(), k), dv(gpu(), v), dks(gpu(), kScales), dvs(gpu(), vScales), dsinks(gpu(), sinks);
            DeviceData dkNew(gpu(), kvDim * 4), dvNew(gpu(), kvDim * 4), out(gpu(), heads * headDim * 4);
            std::vector<float> want(size_t(heads) * headDim);
            double worst = 0.0;
            for (int pos = 0; pos < steps; ++pos) {
                const std::vector<float> q = randomFloats(want.size(), rng, -2.0f, 2.0f);
                const std::vector<float> kNew = randomFloats(kvDim, rng, -2.0f, 2.0f), vNew = randomFloats(kvDim, rng);
                AttentionArgs a{q.data(), k.data(), v.data(), want.data(), nullptr, heads, kvHeads, headDim, pos + 1,
                                1.0f / std::sqrt(float(headDim))};
                a.kvType = type;
                a.kScales = kScales.data();
                a.vScales = vScales.data();
                a.kNew = kNew.data();
                a.vNew = vNew.data();
                a.sinks = cs.sinks ? sinks.data() : nullptr;
                a.window = cs.window;
                a.ring = cs.ring;
                cpu().attention(a);
                gpu().synchronize();
                DeviceData dq(gpu(), q);
                gpu().upload(dkNew.f(), kNew.data(), kvDim * 4);
                gpu().upload(dvNew.f(), vNew.data(), kvDim * 4);
                poison(gpu(), out.f(), want.size());
                AttentionArgs g = a;
                g.q = dq.f(); g.kCache = dk.f(); g.vCache = dv.f(); g.out = out.f();
                g.kScales = dks.f(); g.vScales = dvs.f(); g.kNew = dkNew.f(); g.vNew = dvNew.f();
                g.sinks = cs.sinks ? dsinks.f() : nullptr;
                gpu().attention(g);
                const std::vector<float> got = download(gpu(), out.f(), want.size());
                EXPECT_EQ(unwritten(got), 0u) << "step " << pos;
                worst = std::max(worst, relL2(got, want));
            }
            EXPECT_LE(worst, 1e-5);
            std::vector<uint8_t> gotK(cacheBytes), gotV(cacheBytes);
            gpu().download(gotK.data(), dk.buffer.data(), cacheBytes);
            gpu().download(gotV.data(), dv.buffer.data(), cacheBytes);
            EXPECT_TRUE(gotK == k) << "K cache bits differ";
            EXPECT_TRUE(gotV == v) << "V cache bits differ";
        }
    expectHealthy();
}

// A prompt batch through a sliding window with sinks (Device::attentionBatch) against the CPU's
// batch (its matrix products).
TEST_F(BackendConformance, AttentionBatchWithSinksAndWindow)
{
    if (!gpu().info().caps.attentionSinks || !gpu().info().caps.slidingWindow)
        GTEST_SKIP() << "the " << kBackend << " backend has no attention sinks or sliding window yet";
    for (auto [queries, before, window] : {std::tuple{33, 3, 8}, {9, 40, 16}, {12, 0, 128}}) {
        SCOPED_TRACE(std::to_string(queries) + " queries after " + std::to_string(before) + ", window " +
                     std::to_string(window));
        const int heads = 8, kvHeads = 2, headDim = 64, nPos = before + queries;
        const size_t rowStride = size_t(heads) * headDim + 3, kvDim = size_t(kvHeads) * headDim;
        std::vector<float> cache = randomFloats(size_t(nPos) * kvDim, rng);
        const std::vector<float> q = randomFloats(rowStride * queries, rng, -2.0f, 2.0f);
        const std::vector<float> kNew = randomFloats(kvDim * queries, rng), vNew = randomFloats(kvDim * queries, rng);
        const std::vector<float> sinks = randomFloats(heads, rng, -1.0f, 4.0f);
        std::vector<float> cpuK = cache, cpuV = cache, want(rowStride * queries, 0.0f);
        AttentionArgs c{q.data(), cpuK.data(), cpuV.data(), want.data(), nullptr, heads, kvHeads, headDim, nPos,
                        1.0f / std::sqrt(float(headDim))};
        c.kNew = kNew.data();
        c.vNew = vNew.data();
        c.sinks = sinks.data();
        c.window = window;
        cpu().attentionBatch(c, queries, rowStride);
        DeviceData dq(gpu(), q), dk(gpu(), cache), dv(gpu(), cache), dkNew(gpu(), kNew), dvNew(gpu(), vNew),
            dsinks(gpu(), sinks), out(gpu(), rowStride * queries * 4);
        poison(gpu(), out.f(), rowStride * queries);
        AttentionArgs g = c;
        g.q = dq.f(); g.kCache = dk.f(); g.vCache = dv.f(); g.out = out.f();
        g.kNew = dkNew.f(); g.vNew = dvNew.f(); g.sinks = dsinks.f();
        gpu().attentionBatch(g, queries, rowStride);
        const std::vector<float> all = download(gpu(), out.f(), rowStride * queries);
        std::vector<float> got, wantRows;
        for (int i = 0; i < queries; ++i) {
            got.insert(got.end(), all.begin() + i * rowStride, all.begin() + i * rowStride + heads * headDim);
            wantRows.insert(wantRows.end(), want.begin() + i * rowStride, want.begin() + i * rowStride + heads * headDim);
        }
        EXPECT_EQ(unwritten(got), 0u);
        EXPECT_LE(relL2(got, wantRows), 1e-5);
    }
    expectHealthy();
}

struct DeltaShape {
    int kHeads, vHeads, stateDim, headVDim, kernel;
    bool fused, tiled;
};

std::string describe(const DeltaShape& s)
{
    return std::to_string(s.kHeads) + "/" + std::to_string(s.vHeads) + " heads, state " + std::to_string(s.stateDim) +
           "x" + std::to_string(s.headVDim) + ", " + std::to_string(s.kernel) + " taps" + (s.fused ? ", fused" : "") +
           (s.tiled ? ", tiled" : "");
}

// Token runs of n = 37 (a prompt's batch, two chunks on the CPU), then 1 and 5, each carrying the
// states of the one before; token inputs `pad` floats apart beyond what they need.
TEST_F(BackendConformance, DeltaNetFollowsTheCpu)
{
    if (!gpu().info().caps.deltaNet) GTEST_SKIP() << "the " << kBackend << " backend has no Gated DeltaNet yet";
    for (const DeltaShape& s : {DeltaShape{2, 4, 32, 16, 4, false, false}, DeltaShape{2, 4, 32, 16, 4, true, false},
                                DeltaShape{2, 6, 48, 24, 3, false, true}, DeltaShape{2, 4, 128, 128, 4, false, true},
                                DeltaShape{1, 2, 128, 128, 4, true, false}}) {
        SCOPED_TRACE(describe(s));
        const int keyDim = s.kHeads * s.stateDim, valueDim = s.vHeads * s.headVDim;
        const int convDim = 2 * keyDim + valueDim;
        // One token's floats: [qkv (convDim, or the fused layout with z inside) | z | beta | alpha | out].
        const int qkvFloats = s.fused ? convDim + valueDim : convDim;
        const int zAt = qkvFloats, betaAt = zAt + (s.fused ? 0 : valueDim);
        const int alphaAt = betaAt + s.vHeads, outAt = alphaAt + s.vHeads;
        const size_t stride = size_t(outAt + valueDim + 7);
        const std::vector<float> convWeight = randomFloats(size_t(convDim) * s.kernel, rng, -0.6f, 0.6f);
        const std::vector<float> dtBias = randomFloats(s.vHeads, rng, -1.0f, 1.0f);
        const std::vector<float> aLog = randomFloats(s.vHeads, rng, -1.5f, -0.05f);
        const std::vector<float> normWeight = randomFloats(s.headVDim, rng, 0.5f, 1.5f);
        std::vector<float> convState = randomFloats(size_t(s.kernel - 1) * convDim, rng);
        std::vector<float> state = randomFloats(size_t(s.vHeads) * s.headVDim * s.stateDim, rng, -0.2f, 0.2f);
        DeviceData dConv(gpu(), convWeight), dDt(gpu(), dtBias), dA(gpu(), aLog), dNorm(gpu(), normWeight),
            dConvState(gpu(), convState), dState(gpu(), state);
        for (int n : {37, 1, 5}) {
            SCOPED_TRACE(std::to_string(n) + " tokens");
            std::vector<float> tokens = randomFloats(stride * n, rng, -1.5f, 1.5f);
            // The args over one copy of the inputs and states (the host's or the device's).
            auto bind = [&](DeltaNetArgs& x, float* t, const float* conv, const float* dt, const float* al,
                            const float* norm, float* cs, float* st) {
                x.qkv = t;
                x.z = s.fused ? nullptr : t + zAt;
                x.beta = t + betaAt;
                x.alpha = s.fused ? nullptr : t + alphaAt;
                x.convWeight = conv;
                x.dtBias = dt;
                x.a = al;
                x.normWeight = norm;
                x.convState = cs;
                x.state = st;
                x.out = t + outAt;
            };
            DeltaNetArgs c;
            bind(c, tokens.data(), convWeight.data(), dtBias.data(), aLog.data(), normWeight.data(), convState.data(),
                 state.data());
            c.kHeads = s.kHeads;
            c.vHeads = s.vHeads;
            c.stateDim = s.stateDim;
            c.headVDim = s.headVDim;
            c.kernel = s.kernel;
            c.fused = s.fused;
            c.tiled = s.tiled;
            c.n = n;
            c.stride = stride;
            DeviceData dTokens(gpu(), tokens);
            for (int i = 0; i < n; ++i) poison(gpu(), dTokens.f(size_t(i) * stride + outAt), size_t(valueDim));
            cpu().deltaNet(c);
            DeltaNetArgs g = c;
            bind(g, dTokens.f(), dConv.f(), dDt.f(), dA.f(), dNorm.f(), dConvState.f(), dState.f());
            gpu().deltaNet(g);
            const std::vector<float> all = download(gpu(), dTokens.f(), stride * n);
            std::vector<float> got, want;
            for (int i = 0; i < n; ++i) {
                got.insert(got.end(), all.begin() + i * stride + outAt, all.begin() + i * stride + outAt + valueDim);
                want.insert(want.end(), tokens.begin() + i * stride + outAt, tokens.begin() + i * stride + outAt + valueDim);
            }
            EXPECT_EQ(unwritten(got), 0u);
            EXPECT_LE(relL2(got, want), 1e-4);
            EXPECT_LE(relL2(download(gpu(), dState.f(), state.size()), state), 1e-4) << "state matrices";
            EXPECT_TRUE(download(gpu(), dConvState.f(), convState.size()) == convState) << "convolution state";
            // Carry on from the CPU's states, so that each run is held to the rule alone.
            gpu().upload(dState.f(), state.data(), state.size() * sizeof(float));
        }
    }
    expectHealthy();
}

}  // namespace
