// The dense float kernels the predictors are trained with (core/compress/linalg.h): GEMM in
// every transpose combination against a double-precision loop, and the logistic residual of
// each instruction set this CPU runs against 1 / (1 + exp(-z)) in double.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/compress/linalg.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/kernel_sets.h"

using namespace spillway;
using namespace spillway::compress;

namespace {

// op(M)[i][j] of a row-major M with leading dimension ld.
float at(const std::vector<float>& m, int64_t ld, bool trans, int64_t i, int64_t j)
{
    return trans ? m[size_t(j * ld + i)] : m[size_t(i * ld + j)];
}

}  // namespace

TEST(Linalg, GemmMatchesADoubleLoopInEveryLayout)
{
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // Odd sizes (no kernel's block divides them) and leading dimensions wider than the rows.
    const int64_t m = 37, n = 53, k = 71;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (float beta : {0.0f, 1.0f, -0.5f}) {
                const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
                std::vector<float> a(size_t((ta ? k : m) * lda)), b(size_t((tb ? n : k) * ldb)),
                    c(size_t(m * ldc));
                for (float& v : a) v = u(rng);
                for (float& v : b) v = u(rng);
                for (float& v : c) v = u(rng);
                std::vector<float> expect = c;
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < n; ++j) {
                        double s = 0.0;
                        for (int64_t p = 0; p < k; ++p) s += double(at(a, lda, ta, i, p)) * at(b, ldb, tb, p, j);
                        const double before = beta == 0.0f ? 0.0 : beta * double(c[size_t(i * ldc + j)]);
                        expect[size_t(i * ldc + j)] = float(0.75 * s + before);
                    }
                if (beta == 0.0f)  // beta 0: C is only written, whatever it held (even NaN)
                    for (int64_t i = 0; i < m; ++i) c[size_t(i * ldc)] = std::nanf("");
                linalg::gemm(ta, tb, m, n, k, 0.75f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
                for (int64_t i = 0; i < m; ++i) {
                    for (int64_t j = 0; j < n; ++j)
                        ASSERT_NEAR(c[size_t(i * ldc + j)], expect[size_t(i * ldc + j)], 1e-4)
                            << "transA " << ta << " transB " << tb << " beta " << beta << " at " << i << "," << j;
                    // The padding past each row of C is not touched.
                    EXPECT_EQ(c[size_t(i * ldc + n)], expect[size_t(i * ldc + n)]);
                }
            }
    // k = 0: C = beta C.
    std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
    linalg::gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

TEST(Linalg, ThreadScopeSetsTheCountAndGivesItBack)
{
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // The training's shapes: a long k (tokens) into (neurons, rank + 1).
    const int64_t m = 1000, n = 33, k = 600;
    std::vector<float> a(size_t(k * m)), b(size_t(k * n)), one(size_t(m * n)), again(one.size()), three(one.size());
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    const int before = linalg::threadCount();
    {
        const linalg::ThreadScope threads(1);
        EXPECT_EQ(linalg::threadCount(), 1);
        linalg::gemm(true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 0.0f, one.data(), n);
        linalg::gemm(true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 0.0f, again.data(), n);
        EXPECT_EQ(one, again);  // the same count: the same bits
    }
    EXPECT_EQ(linalg::threadCount(), before);
    {
        const linalg::ThreadScope threads(3);
        EXPECT_EQ(linalg::threadCount(), 3);
        linalg::gemm(true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 0.0f, three.data(), n);
        {
            const linalg::ThreadScope unchanged(0);
            EXPECT_EQ(linalg::threadCount(), 3);
        }
    }
    EXPECT_EQ(linalg::threadCount(), before);
    for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(one[i], three[i], 1e-4) << i;  // rounding only
}

TEST(Linalg, LogisticResidualMatchesTheSigmoidInEverySet)
{
    using Kernel = void (*)(float*, const uint8_t*, size_t, float);
    std::vector<std::pair<const char*, Kernel>> kernels = {{"scalar", linalg::detail::logisticResidualScalar}};
    testing_support::announceKernelSets();
    const gpu::CpuKernelSet best = gpu::bestCpuKernelSet();
    if (best >= gpu::CpuKernelSet::Avx2) kernels.push_back({"avx2", linalg::detail::logisticResidualAvx2});
    if (best >= gpu::CpuKernelSet::Avx512) kernels.push_back({"avx512", linalg::detail::logisticResidualAvx512});
    kernels.push_back({"dispatched", linalg::logisticResidual});

    // Logits from -200 to 200 (past the clamps at -87 and 88), dense around 0; a count that
    // leaves a tail after every lane width; labels alternating in runs of 3.
    std::vector<float> z;
    for (float v = -200.0f; v <= 200.0f; v += 0.37f) z.push_back(v);
    for (float v = -2.0f; v <= 2.0f; v += 1e-3f) z.push_back(v);
    z.push_back(0.0f);
    z.push_back(-0.0f);
    z.push_back(1e-30f);
    ASSERT_NE(z.size() % 16, 0u);
    std::vector<uint8_t> y;  // any nonzero label is a positive
    for (size_t i = 0; i < z.size(); ++i) y.push_back(uint8_t((i / 3) % 2 ? (i % 7 == 0 ? 2 : 1) : 0));
    const float wPos = 7.5f;
    for (const auto& [name, kernel] : kernels) {
        std::vector<float> out = z;
        kernel(out.data(), y.data(), out.size(), wPos);
        for (size_t i = 0; i < z.size(); ++i) {
            const double s = 1.0 / (1.0 + std::exp(-double(z[i])));
            const double expect = y[i] ? wPos * (s - 1.0) : s;
            // The sigmoid within 1e-6 relative; s - 1 then loses what float loses near s = 1.
            const double tolerance = y[i] ? wPos * (1e-6 * s + 1.2e-7) : 1e-6 * s + 1e-38;
            ASSERT_NEAR(out[i], expect, tolerance) << name << " z " << z[i] << " label " << int(y[i]);
        }
    }
}

TEST(Linalg, MatvecMatchesADoubleLoopInEverySet)
{
    using Kernel = void (*)(const float*, int64_t, int64_t, const float*, const float*, float*);
    std::vector<std::pair<const char*, Kernel>> kernels = {{"scalar", linalg::detail::matvecScalar}};
    testing_support::announceKernelSets();
    const gpu::CpuKernelSet best = gpu::bestCpuKernelSet();
    if (best >= gpu::CpuKernelSet::Avx2) kernels.push_back({"avx2", linalg::detail::matvecAvx2});
    if (best >= gpu::CpuKernelSet::Avx512) kernels.push_back({"avx512", linalg::detail::matvecAvx512});
    kernels.push_back({"dispatched", linalg::matvec});
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // Widths with a tail after every block (1, 15, 67), exactly a block (64), and a predictor's
    // feature width.
    for (int64_t cols : {1, 15, 64, 67, 4096})
        for (bool withBias : {false, true}) {
            const int64_t rows = 37;
            std::vector<float> m(static_cast<size_t>(rows * cols)), v(static_cast<size_t>(cols)), bias(static_cast<size_t>(rows));
            for (float& e : m) e = u(rng);
            for (float& e : v) e = u(rng);
            for (float& e : bias) e = u(rng);
            for (const auto& [name, kernel] : kernels) {
                std::vector<float> y(size_t(rows) + 1, 123.0f);  // one past the end: untouched
                kernel(m.data(), rows, cols, v.data(), withBias ? bias.data() : nullptr, y.data());
                for (int64_t i = 0; i < rows; ++i) {
                    double s = withBias ? bias[size_t(i)] : 0.0;
                    for (int64_t k = 0; k < cols; ++k) s += double(m[size_t(i * cols + k)]) * v[size_t(k)];
                    ASSERT_NEAR(y[size_t(i)], s, 1e-5 * (1.0 + std::sqrt(double(cols))))
                        << name << " cols " << cols << " row " << i;
                }
                EXPECT_EQ(y[size_t(rows)], 123.0f) << name;
            }
        }
}
