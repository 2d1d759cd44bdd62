// Conformance of the CPU ops other than matvec (getRow, rmsnorm, rope, attention, swiglu, add)
// against double-precision references written here. Tolerances: getRow exact; the others about
// 1e-6 relative (attention 2e-6 absolute).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cpu_test_util.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;

TEST(CpuBackend, GetRowIsExact)
{
    std::mt19937_64 rng(8);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType type : kAllTypes) {
            const TestMatrix m = makeMatrix(type, 5, 4128, rng, 64);
            for (int64_t r : {0, 3, 4}) {
                std::vector<float> out(4129, kPoison);
                device->getRow(m.view(), r, out.data());
                for (int64_t c = 0; c < 4128; ++c)
                    ASSERT_EQ(out[c], m.values[r * 4128 + c]) << dtypeName(type) << " " << c;
                ASSERT_TRUE(isPoison(out[4128]));
            }
        }
    }
}

TEST(CpuBackend, RmsNorm)
{
    std::mt19937_64 rng(9);
    auto device = createCpuDevice(3, bestCpuKernelSet());
    for (int n : {1, 7, 4096, 5000}) {
        const std::vector<float> x = randomVector(n, rng, 3.0f), w = randomVector(n, rng);
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
        std::vector<float> out(n, kPoison), inPlace = x;
        device->rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
        device->rmsnorm(inPlace.data(), w.data(), inPlace.data(), n, 1e-5f);  // aliasing
        for (int i = 0; i < n; ++i) {
            const double want = x[i] * scale * w[i];
            ASSERT_NEAR(out[i], want, 1e-6 * (std::fabs(want) + 1e-3)) << n << " " << i;
            ASSERT_EQ(bitsOf(inPlace[i]), bitsOf(out[i]));
        }
    }
}

TEST(CpuBackend, Rope)
{
    std::mt19937_64 rng(10);
    auto device = createCpuDevice(1, bestCpuKernelSet());
    struct Case { int heads, headDim, rotary, pos; float base, freqScale; bool neox; };
    const Case cases[] = {
        {4, 64, 64, 0, 10000.f, 1.f, false},    {4, 64, 64, 3, 10000.f, 1.f, false},
        {8, 128, 128, 1234, 10000.f, 1.f, false}, {2, 64, 32, 77, 500000.f, 0.25f, false},
        {4, 64, 64, 3, 10000.f, 1.f, true},     {3, 80, 40, 999, 10000.f, 0.5f, true},
    };
    for (const Case& c : cases) {
        const std::vector<float> x = randomVector(c.heads * c.headDim, rng);
        std::vector<float> y = x;
        device->rope(y.data(), c.heads, c.headDim, c.pos, {c.rotary, c.base, c.freqScale, c.neox});
        for (int h = 0; h < c.heads; ++h) {
            const float* src = x.data() + h * c.headDim;
            const float* got = y.data() + h * c.headDim;
            // Angles as ggml forms them (float recurrence), the rest in double: tight.
            const float thetaScale = std::pow(c.base, -2.0f / c.rotary);
            float theta = static_cast<float>(c.pos);
            for (int k = 0; k < c.rotary / 2; ++k, theta *= thetaScale) {
                const double angle = static_cast<float>(c.freqScale * theta);
                const int i0 = c.neox ? k : 2 * k, i1 = c.neox ? k + c.rotary / 2 : 2 * k + 1;
                const double want0 = src[i0] * std::cos(angle) - src[i1] * std::sin(angle);
                const double want1 = src[i0] * std::sin(angle) + src[i1] * std::cos(angle);
                ASSERT_NEAR(got[i0], want0, 1e-6) << "pair " << k;
                ASSERT_NEAR(got[i1], want1, 1e-6) << "pair " << k;
                // And the exact formula, pos * freqScale * base^(-2k/d), where float angles
                // are still close (small positions).
                if (c.pos <= 3) {
                    const double exact = c.pos * double(c.freqScale) *
                                         std::pow(double(c.base), -2.0 * k / c.rotary);
                    const double want = src[i0] * std::cos(exact) - src[i1] * std::sin(exact);
                    ASSERT_NEAR(got[i0], want, 1e-5);
                }
            }
            for (int i = c.rotary; i < c.headDim; ++i) ASSERT_EQ(got[i], src[i]);  // not rotated
        }
    }
}

TEST(CpuBackend, AttentionGroupedQuery)
{
    std::mt19937_64 rng(11);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        const int nHeads = 8, nKv = 2, headDim = 64, ctx = 100;
        for (int nPos : {1, 5, 77}) {
            const std::vector<float> q = randomVector(nHeads * headDim, rng, 2.0f);
            const std::vector<float> k = randomVector(ctx * nKv * headDim, rng, 2.0f);
            const std::vector<float> v = randomVector(ctx * nKv * headDim, rng);
            for (bool ownScratch : {true, false}) {
                std::vector<float> out(nHeads * headDim + 1, kPoison), scores(nHeads * ctx);
                AttentionArgs a{q.data(), k.data(), v.data(), out.data(),
                                ownScratch ? scores.data() : nullptr, nHeads, nKv, headDim, nPos,
                                1.0f / std::sqrt(float(headDim))};
                device->attention(a);
                for (int h = 0; h < nHeads; ++h) {
                    const int g = h / (nHeads / nKv);
                    std::vector<double> p(nPos);
                    double mx = -1e300, sum = 0;
                    for (int t = 0; t < nPos; ++t) {
                        double s = 0;
                        for (int i = 0; i < headDim; ++i)
                            s += double(q[h * headDim + i]) * k[(t * nKv + g) * headDim + i];
                        p[t] = s * a.scale;
                        mx = std::max(mx, p[t]);
                    }
                    for (double& e : p) sum += (e = std::exp(e - mx));
                    for (int i = 0; i < headDim; ++i) {
                        double want = 0;
                        for (int t = 0; t < nPos; ++t)
                            want += p[t] / sum * v[(t * nKv + g) * headDim + i];
                        ASSERT_NEAR(out[h * headDim + i], want, 2e-6)
                            << h << " " << i << " " << nPos;
                    }
                }
                ASSERT_TRUE(isPoison(out[nHeads * headDim]));
            }
        }
    }
}

TEST(CpuBackend, SwigluAndAdd)
{
    std::mt19937_64 rng(12);
    auto device = createCpuDevice(3, bestCpuKernelSet());
    for (int n : {1, 13, 11008}) {  // the long one is split across the pool
        const std::vector<float> g = randomVector(n, rng, 8.0f), u = randomVector(n, rng);
        std::vector<float> out(n, kPoison), alias = g;
        device->swiglu(g.data(), u.data(), out.data(), n);
        device->swiglu(alias.data(), u.data(), alias.data(), n);
        for (int i = 0; i < n; ++i) {
            const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
            ASSERT_NEAR(out[i], want, 1e-6 * (std::fabs(want) + 1e-6)) << i;
            ASSERT_EQ(bitsOf(alias[i]), bitsOf(out[i]));
        }
        std::vector<float> y = u;
        device->add(y.data(), g.data(), n);
        for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], u[i] + g[i]);
    }
}
