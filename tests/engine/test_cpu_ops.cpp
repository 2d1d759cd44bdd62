// Conformance of the CPU ops other than matvec (getRow, rmsnorm, rope, attention, swiglu, add,
// the kernel sets' exponentials)
// against double-precision references written here. Tolerances: getRow exact; the others about
// 1e-6 relative (attention 2e-6 absolute).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cpu_test_util.h"
#include "../common/prompt_tolerance.h"
#include "gpu/cpu/cpu_kernels.h"

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

// A prompt batch's attention (Device::attentionBatch) against one query at a time: the queries'
// K and V stored into F32, F16 and Q8 caches alike (bit for bit), the outputs within the prompt
// tolerance from 8 queries on (matrix products) and bit for bit below (one query at a time), at
// a cache that starts empty and one that already holds 40 positions, every kernel set.
TEST(CpuBackend, AttentionBatchMatchesOneQueryAtATime)
{
    std::mt19937_64 rng(21);
    const int nHeads = 8, nKv = 2, headDim = 64, kvDim = nKv * headDim, qDim = nHeads * headDim;
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (KvType type : {KvType::F32, KvType::F16, KvType::Q8}) {
            const size_t elementBytes = type == KvType::F32 ? 4 : type == KvType::F16 ? 2 : 1;
            for (int queries : {1, 2, 7, 8, 32, 33, 130}) {
                for (int before : {0, 40}) {
                    const int nPos = before + queries;
                    // The cache's first `before` positions: random rows stored as one token would.
                    std::vector<uint8_t> kCache(size_t(nPos) * kvDim * elementBytes), vCache(kCache.size());
                    std::vector<float> kScales(size_t(nPos) * nKv), vScales(kScales.size());
                    const std::vector<float> q = randomVector(queries * qDim, rng, 2.0f);
                    const std::vector<float> kNew = randomVector(nPos * kvDim, rng, 2.0f);
                    const std::vector<float> vNew = randomVector(nPos * kvDim, rng);
                    auto args = [&](std::vector<uint8_t>& kc, std::vector<uint8_t>& vc, std::vector<float>& ks,
                                    std::vector<float>& vs, float* out, int positions, int first) {
                        AttentionArgs a;
                        a.q = q.data();
                        a.kCache = kc.data();
                        a.vCache = vc.data();
                        a.kScales = ks.data();
                        a.vScales = vs.data();
                        a.kvType = type;
                        a.out = out;
                        a.nHeads = nHeads;
                        a.nKvHeads = nKv;
                        a.headDim = headDim;
                        a.nPos = positions;
                        a.scale = 1.0f / std::sqrt(float(headDim));
                        a.kNew = kNew.data() + size_t(first) * kvDim;
                        a.vNew = vNew.data() + size_t(first) * kvDim;
                        return a;
                    };
                    std::vector<float> scratchOut(qDim);
                    for (int t = 0; t < before; ++t) {
                        AttentionArgs a = args(kCache, vCache, kScales, vScales, scratchOut.data(), t + 1, t);
                        device->attention(a);
                    }
                    std::vector<uint8_t> kOne = kCache, vOne = vCache;
                    std::vector<float> ksOne = kScales, vsOne = vScales;
                    std::vector<float> batched(size_t(queries) * qDim + 1, kPoison), one(batched.size(), kPoison);
                    AttentionArgs b = args(kCache, vCache, kScales, vScales, batched.data(), nPos, before);
                    device->attentionBatch(b, queries, size_t(qDim));
                    for (int i = 0; i < queries; ++i) {
                        AttentionArgs a = args(kOne, vOne, ksOne, vsOne, one.data() + size_t(i) * qDim, before + i + 1,
                                               before + i);
                        a.q = q.data() + size_t(i) * qDim;
                        device->attention(a);
                    }
                    const std::string name = device->info().kernels + "/" + std::to_string(cfg.threads) + "t kv" +
                                             std::to_string(int(type)) + " queries " + std::to_string(queries) +
                                             " after " + std::to_string(before);
                    ASSERT_EQ(kCache, kOne) << name;
                    ASSERT_EQ(vCache, vOne) << name;
                    if (type == KvType::Q8) {
                        ASSERT_EQ(kScales, ksOne) << name;
                        ASSERT_EQ(vScales, vsOne) << name;
                    }
                    ASSERT_TRUE(isPoison(batched.back())) << name;
                    batched.pop_back();
                    one.pop_back();
                    if (queries < 8) {
                        for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(bitsOf(batched[i]), bitsOf(one[i])) << name;
                    } else {
                        const double error = testing_support::relativeL2(batched, one);
                        EXPECT_LT(error, testing_support::kPromptFloatTolerance) << name;
                        EXPECT_GT(error, 0.0) << name << ": the matrix products ran (other sums)";
                    }
                }
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

// The neuron cache's ops against a double-precision reference: rowSum sums W's rows weighted by
// a (rows with weight 0 are skipped, even if they hold NaN), for every row type and for int8 rows
// with a scale table; scatterRows puts row i at index[i] and leaves the other rows as they were.
TEST(CpuBackend, RowSumAndScatterRows)
{
    std::mt19937_64 rng(14);
    std::uniform_int_distribution<int> q8(-127, 127);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (int threads : {1, 3}) {
        auto device = createCpuDevice(threads, bestCpuKernelSet());
        for (int64_t rows : {1, 5, 300})
            for (int64_t cols : {1, 7, 4099})
                for (int kind = 0; kind < 4; ++kind) {  // F32, F16, BF16, int8 with scales
                    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " kind " + std::to_string(kind));
                    const DType type = kind == 1 ? DType::F16 : kind == 2 ? DType::BF16 : DType::F32;
                    const size_t element = kind == 3 ? 1 : kind == 0 ? 4 : 2;
                    const size_t stride = (size_t(cols) * element + 7) / 4 * 4;  // padded rows
                    std::vector<uint8_t> w(stride * size_t(rows), 0xff);           // 0xff.. is NaN in f32/f16/bf16
                    std::vector<double> value(size_t(rows * cols));
                    const std::vector<float> scales = randomVector(size_t(3 * cols), rng);
                    std::vector<int32_t> group(static_cast<size_t>(rows));
                    std::vector<float> a = randomVector(size_t(rows), rng);
                    for (int64_t r = 0; r < rows; ++r) {
                        group[size_t(r)] = int32_t(r % 3);
                        if (r % 4 == 1) a[size_t(r)] = 0.0f;  // skipped: its row stays NaN
                        for (int64_t c = 0; c < cols && a[size_t(r)] != 0.0f; ++c) {
                            uint8_t* p = w.data() + size_t(r) * stride;
                            const float v = unit(rng);
                            double& want = value[size_t(r * cols + c)];
                            if (kind == 0) {
                                std::memcpy(p + 4 * c, &v, 4);
                                want = v;
                            } else if (kind == 3) {
                                const auto q = int8_t(q8(rng));
                                std::memcpy(p + c, &q, 1);
                                want = double(float(q) * scales[size_t(group[size_t(r)] * cols + c)]);
                            } else {
                                const uint16_t h = kind == 1 ? fp32ToFp16(v) : fp32ToBf16(v);
                                std::memcpy(p + 2 * c, &h, 2);
                                want = kind == 1 ? fp16ToFp32(h) : bf16ToFp32(h);
                            }
                        }
                    }
                    RowSumArgs args;
                    args.w = MatrixView{type, w.data(), rows, cols, stride};
                    args.a = a.data();
                    std::vector<float> y(size_t(cols) + 1, kPoison);
                    args.y = y.data();
                    if (kind == 3) {
                        args.scales = scales.data();
                        args.group = group.data();
                    }
                    device->rowSum(args);
                    for (int64_t c = 0; c < cols; ++c) {
                        double want = 0.0, magnitude = 0.0;
                        for (int64_t r = 0; r < rows; ++r) {
                            if (a[size_t(r)] == 0.0f) continue;
                            want += double(a[size_t(r)]) * value[size_t(r * cols + c)];
                            magnitude += std::fabs(double(a[size_t(r)]) * value[size_t(r * cols + c)]);
                        }
                        ASSERT_NEAR(y[size_t(c)], want, 1e-6 * magnitude + 1e-30) << c;
                    }
                    ASSERT_TRUE(isPoison(y[size_t(cols)]));
                }
        // scatterRows: 4 of 9 rows of 12 bytes (3 floats), into a 16-byte stride.
        std::vector<float> src = randomVector(4 * 3, rng), dst(9 * 4, 0.5f);
        const std::vector<int32_t> index = {7, 0, 3, 8};
        device->scatterRows({dst.data(), 16, src.data(), 12, 12, index.data(), 4});
        for (int slot = 0; slot < 9; ++slot) {
            const auto at = std::find(index.begin(), index.end(), slot);
            for (int k = 0; k < 4; ++k) {
                const float want = at != index.end() && k < 3 ? src[size_t(at - index.begin()) * 3 + size_t(k)] : 0.5f;
                ASSERT_EQ(dst[size_t(slot * 4 + k)], want) << slot << " " << k;
            }
        }
    }
}

// The softmax's exponentials and SiLU of every kernel set (Kernels::expSum, Kernels::swiglu; the
// vector sets' own exp, exp_x86.h) against double precision: within 2 ulp of exp wherever the
// result is a normal float, 0 (or expf's subnormal) below, +inf above, NaN kept; the sum is the
// results' sum; SiLU's tails (exp overflowing or underflowing) stay finite and right.
TEST(CpuBackend, ExponentialsOnEveryKernelSet)
{
    std::vector<float> xs;
    for (float x = -120.0f; x <= 89.0f; x += 0.01953125f) xs.push_back(x);  // every residue class of ln2
    for (float x : {-0.0f, 0.0f, 1e-30f, -1e-30f, -87.3f, -87.4f, 88.7f, 88.75f, 1000.0f, -1000.0f}) xs.push_back(x);
    std::mt19937_64 rng(77);
    std::uniform_real_distribution<float> wide(-100.0f, 90.0f);
    for (int i = 0; i < 20000; ++i) xs.push_back(wide(rng));
    for (CpuKernelSet set : testing_support::kernelSetsThisCpuRuns()) {
        const cpu::Kernels& k = cpu::kernelsFor(set);
        const std::string name = cpuKernelSetName(set);
        for (size_t n : {size_t{1}, size_t{7}, size_t{17}, xs.size()}) {  // vector tails
            std::vector<float> y(xs.begin(), xs.begin() + std::ptrdiff_t(n));
            const double sum = k.expSum(y.data(), int(n), 0.0f);
            double want = 0.0;
            for (size_t i = 0; i < n; ++i) {
                const double e = std::exp(double(xs[i]));
                if (e < 1.1754943508222875e-38) {
                    ASSERT_LE(y[i], 1.2e-38f) << name << " exp(" << xs[i] << ")";
                } else if (e > 3.4028234663852886e38) {
                    ASSERT_TRUE(std::isinf(y[i]) && y[i] > 0) << name << " exp(" << xs[i] << ") = " << y[i];
                } else {
                    ASSERT_LE(std::fabs(y[i] - e), 2.0 * e * 0x1p-24) << name << " exp(" << xs[i] << ")";
                }
                want += y[i];
            }
            if (std::isfinite(want)) {
                EXPECT_NEAR(sum, want, 1e-12 * want) << name << " n " << n;
            } else {
                EXPECT_TRUE(std::isinf(sum)) << name;
            }
        }
        // A shift, as a softmax subtracts its maximum, and a NaN.
        std::vector<float> s = {3.0f, 1.0f, NAN, -200.0f};
        k.expSum(s.data(), 4, 3.0f);
        EXPECT_EQ(s[0], 1.0f) << name;
        EXPECT_NEAR(s[1], std::exp(-2.0), 2.0 * std::exp(-2.0) * 0x1p-24) << name;
        EXPECT_TRUE(std::isnan(s[2])) << name << ": a NaN score stays a NaN";
        EXPECT_EQ(s[3], 0.0f) << name;
        // SiLU across the range and at its tails.
        std::vector<float> g, u;
        for (float x = -120.0f; x <= 120.0f; x += 0.37f) {
            g.push_back(x);
            u.push_back(0.5f + 0.001f * x);
        }
        std::vector<float> out(g.size(), kPoison);
        k.swiglu(g.data(), u.data(), out.data(), int(g.size()));
        for (size_t i = 0; i < g.size(); ++i) {
            const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
            ASSERT_TRUE(std::isfinite(out[i])) << name << " silu(" << g[i] << ")";
            ASSERT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-30) << name << " silu(" << g[i] << ")";
        }
    }
}
