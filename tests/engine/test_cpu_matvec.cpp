// Conformance of the CPU matvec: every weight type, shape and kernel set this CPU runs (scalar,
// avx2, avx512), with 1 and 3 threads, against double-precision references decoded by
// cpu_test_util.h from the byte layouts of gpu/dtype.h; several jobs in one dispatch; and the
// thread pool under many tiny dispatches.
//
// Tolerances (err = |y - ref| per output row):
//   F32 matvec        err <= 1e-5 * sum_c |w_c x_c|   (float accumulation only)
//   F16, BF16 matvec  err <= 1e-4 * sum_c |w_c x_c|   (weights exact in float; accumulation)
//   Q8_0, Q4_0        x is quantized to Q8 blocks (as llama.cpp does), so per row
//                     err <= sum_blocks sum_c |w_c| * 0.6 * max|x_block| / 127 + 1e-5 sum |w x|,
//                     and over a whole output ||y - ref|| / ||ref|| < 1e-2;
//                     with x exactly representable in Q8: err <= 1e-5 * sum_c |w_c x_c|.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "kquant_test_util.h"  // makeKMatrix: random Q4_K, Q5_K, Q6_K rows
#include "../common/int8_product.h"
#include "../common/prompt_tolerance.h"
#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/thread_pool.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;

namespace {

// x whose Q8 quantization is exact: per block integers k in [-127, 127] times 1/16, with one
// element at +-127/16 so that the block scale is exactly 1/16.
std::vector<float> q8ExactVector(int64_t n, std::mt19937_64& rng)
{
    std::uniform_int_distribution<int> k(-127, 127);
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = k(rng) / 16.0f;
    for (int64_t b = 0; b < n / 32; ++b) v[b * 32 + (b % 32)] = (b & 1 ? -127 : 127) / 16.0f;
    return v;
}

// Checks y = W x with the bounds stated at the top of the file.
void checkMatvec(const TestMatrix& m, const std::vector<float>& x, const float* y, bool exactX,
                 const std::string& what)
{
    const bool quantized = m.type == DType::Q8_0 || m.type == DType::Q4_0;
    const double rel = m.type == DType::F32 ? 1e-5 : (quantized ? 1e-5 : 1e-4);
    double errNorm = 0, refNorm = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
        ASSERT_FALSE(isPoison(y[r])) << what << " row " << r << " not written";
        double ref = 0, magnitude = 0, quantBound = 0;
        for (int64_t c = 0; c < m.cols; ++c) {
            const double wv = m.values[r * m.cols + c];
            ref += wv * x[c];
            magnitude += std::fabs(wv * x[c]);
        }
        for (int64_t b = 0; quantized && !exactX && b < m.cols / 32; ++b) {
            double amax = 0, wsum = 0;
            for (int i = 0; i < 32; ++i) {
                amax = std::max(amax, std::fabs(double(x[b * 32 + i])));
                wsum += std::fabs(m.values[r * m.cols + b * 32 + i]);
            }
            quantBound += wsum * 0.6 * amax / 127.0;
        }
        const double err = std::fabs(y[r] - ref);
        ASSERT_LE(err, rel * magnitude + quantBound + 1e-30)
            << what << " row " << r << ": got " << y[r] << ", want " << ref;
        errNorm += err * err;
        refNorm += ref * ref;
    }
    if (quantized && m.rows >= 33) {
        EXPECT_LT(std::sqrt(errNorm / refNorm), 1e-2) << what;
    }
}

}  // namespace

// ---- matvec ------------------------------------------------------------------------------------

TEST(CpuBackend, MatvecEveryTypeAndShape)
{
    std::mt19937_64 rng(3);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        ASSERT_STREQ(device->info().kernels.c_str(), cpuKernelSetName(cfg.set));
        for (DType type : kAllTypes)
            for (int64_t rows : {1, 7, 33, 257})
                for (int64_t cols : {32, 96, 224, 4128}) {
                    const size_t padding = rows == 33 ? 64 : 0;  // a row stride past the row
                    const TestMatrix m = makeMatrix(type, rows, cols, rng, padding);
                    const std::vector<float> x = randomVector(cols, rng);
                    std::vector<float> y(rows + 1, kPoison);
                    device->matvec(m.view(), x.data(), y.data());
                    checkMatvec(m, x, y.data(), false, label(*device, type, rows, cols));
                    ASSERT_TRUE(isPoison(y[rows])) << "wrote past the output";
                }
    }
}

TEST(CpuBackend, MatvecOddColumnsForFloatTypes)
{
    std::mt19937_64 rng(4);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType type : {DType::F32, DType::F16, DType::BF16})
            for (int64_t cols : {1, 7, 33, 100, 1023}) {
                const TestMatrix m = makeMatrix(type, 9, cols, rng, type == DType::F32 ? 4 : 2);
                const std::vector<float> x = randomVector(cols, rng);
                std::vector<float> y(9, kPoison);
                device->matvec(m.view(), x.data(), y.data());
                checkMatvec(m, x, y.data(), false, label(*device, type, 9, cols));
            }
    }
}

TEST(CpuBackend, MatvecQuantizedWithExactX)
{
    std::mt19937_64 rng(5);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType type : {DType::Q8_0, DType::Q4_0})
            for (int64_t cols : {32, 96, 4128}) {
                const TestMatrix m = makeMatrix(type, 257, cols, rng);
                const std::vector<float> x = q8ExactVector(cols, rng);
                std::vector<float> y(257, kPoison);
                device->matvec(m.view(), x.data(), y.data());
                checkMatvec(m, x, y.data(), true, label(*device, type, 257, cols) + " exact x");
            }
    }
}

TEST(CpuBackend, MatvecSeveralJobsInOneDispatch)
{
    std::mt19937_64 rng(6);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        // Q, K, V style: three matrices on one x (quantized once), plus other types and x's.
        const std::vector<float> x = randomVector(4128, rng), x2 = randomVector(96, rng);
        std::vector<TestMatrix> ms;
        ms.push_back(makeMatrix(DType::Q8_0, 257, 4128, rng));
        ms.push_back(makeMatrix(DType::Q8_0, 33, 4128, rng));
        ms.push_back(makeMatrix(DType::Q4_0, 7, 4128, rng));
        ms.push_back(makeMatrix(DType::F16, 65, 4128, rng));
        ms.push_back(makeMatrix(DType::Q8_0, 1, 96, rng));
        ms.push_back(makeMatrix(DType::F32, 0, 96, rng));  // an empty job is fine
        ms.push_back(makeMatrix(DType::BF16, 40, 96, rng));
        std::vector<std::vector<float>> ys;
        std::vector<MatvecJob> jobs;
        for (const TestMatrix& m : ms) ys.emplace_back(m.rows + 1, kPoison);
        for (size_t i = 0; i < ms.size(); ++i)
            jobs.push_back({ms[i].view(), ms[i].cols == 96 ? x2.data() : x.data(), ys[i].data()});
        device->matvec(jobs);
        for (size_t i = 0; i < ms.size(); ++i) {
            const auto& xi = ms[i].cols == 96 ? x2 : x;
            checkMatvec(ms[i], xi, ys[i].data(), false,
                        label(*device, ms[i].type, ms[i].rows, ms[i].cols) + " job " +
                            std::to_string(i));
            EXPECT_TRUE(isPoison(ys[i][ms[i].rows]));
        }
    }
}

// A prompt batch: runs of jobs on one matrix with different x's (worked through block of rows by
// block of rows for the whole run) give each job's own result bit for bit, as one job per call
// would; a matrix that comes back later in the call, a one-job run and an empty job between
// runs are fine too.
TEST(CpuBackend, MatvecRunsOfJobsOnOneMatrixGiveEachJobsOwnBits)
{
    std::mt19937_64 rng(8);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        std::vector<TestMatrix> ms;
        ms.push_back(makeMatrix(DType::Q8_0, 300, 4128, rng));
        ms.push_back(makeMatrix(DType::F16, 129, 256, rng));
        ms.push_back(makeMatrix(DType::F32, 0, 96, rng));
        ms.push_back(makeMatrix(DType::Q4_0, 71, 4128, rng));
        // Each matrix index repeated: runs of 5, 3, 1 (empty), 4, then the first matrix again.
        const std::vector<std::pair<size_t, int>> runs = {{0, 5}, {1, 3}, {2, 1}, {3, 4}, {0, 2}};
        std::vector<std::vector<float>> xs, ys;
        std::vector<size_t> matrixOf;
        for (const auto& [m, count] : runs)
            for (int k = 0; k < count; ++k) {
                xs.push_back(randomVector(ms[m].cols, rng));
                ys.emplace_back(ms[m].rows + 1, kPoison);
                matrixOf.push_back(m);
            }
        std::vector<MatvecJob> jobs;
        for (size_t j = 0; j < xs.size(); ++j) jobs.push_back({ms[matrixOf[j]].view(), xs[j].data(), ys[j].data()});
        device->matvec(jobs);
        for (size_t j = 0; j < xs.size(); ++j) {
            const TestMatrix& m = ms[matrixOf[j]];
            std::vector<float> alone(m.rows + 1, kPoison);
            device->matvec(m.view(), xs[j].data(), alone.data());
            const std::string what = label(*device, m.type, m.rows, m.cols) + " job " + std::to_string(j);
            EXPECT_EQ(0, std::memcmp(alone.data(), ys[j].data(), size_t(m.rows) * sizeof(float))) << what;
            EXPECT_TRUE(isPoison(ys[j][m.rows])) << what;
            checkMatvec(m, xs[j], ys[j].data(), false, what);
        }
    }
}

// A prompt batch of 8 or more tokens on one matrix goes through a matrix product (CpuDevice::gemm:
// Q8_0 and Q4_0 on AVX-512 through the integer product, gemm_int8_avx512.cpp; otherwise rows
// unpacked to floats, then the kernel set's own product, gemm_avx2.cpp, gemm_avx512.cpp, or
// OpenBLAS SGEMM) where the kernel set unpacks the type fast: each job's result is the exact
// product within the matvec's own bound, and within the prompt tolerance of one job alone (the
// integer product: the tighter kPromptIntegerTolerance; an uploaded Q8_0 copy the same bits); inputs
// and outputs evenly spaced (in place) or not (gathered and scattered); rows that are not a
// multiple of the row block, depths past the tile's pass; every kernel set, 1 and 3 threads, batches of 1, 2, 7, 8, 33 and 512.
// With SPILLWAY_CPU_GEMM=0 the same jobs give one job's bits.
TEST(CpuBackend, PromptBatchesMultiplyMatricesWithinTheTolerance)
{
    std::mt19937_64 rng(12);
    double worst[2] = {0, 0};  // the largest distance from one job alone: float, integer products
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        // {type, rows, cols}: rows not a multiple of the row blocks (16, 32, 64; a last block of
        // 2, 5 and 25 rows: the AVX-512 tile's masks either side of 16); deeper than the register
        // tile's pass (1024 values of k: partial sums added up) and, for F32, a depth that is no
        // multiple of 8 (the tile's tail).
        struct Shape {
            DType type;
            int64_t rows, cols;
        };
        const Shape shapes[] = {{DType::F32, 130, 256},  {DType::F16, 130, 256},  {DType::BF16, 130, 256},
                                {DType::Q8_0, 130, 256}, {DType::Q4_0, 130, 256}, {DType::F32, 37, 1027},
                                {DType::F16, 37, 2088},  {DType::Q8_0, 57, 256}};
        for (const Shape& shape : shapes) {
            const DType type = shape.type;
            const int64_t cols = shape.cols, rows = shape.rows;
            const TestMatrix m = makeMatrix(type, rows, cols, rng);
            for (int n : {1, 2, 7, 8, 32, 33, 512}) {
                if (cols > 256 && n > 33) continue;  // the deep shapes: small batches are enough
                for (bool even : {true, false}) {
                    // Evenly spaced: one (n x cols) buffer; else a vector of its own per job.
                    std::vector<float> xAll(size_t(n * cols)), yAll(size_t(n * (rows + 3)), kPoison);
                    std::vector<std::vector<float>> xs, ys;
                    std::vector<MatvecJob> jobs;
                    for (int j = 0; j < n; ++j) {
                        const std::vector<float> x = randomVector(cols, rng);
                        xs.push_back(x);
                        ys.emplace_back(rows + 1, kPoison);
                        if (even) std::copy(x.begin(), x.end(), xAll.begin() + j * cols);
                    }
                    for (int j = 0; j < n; ++j)
                        jobs.push_back({m.view(), even ? xAll.data() + j * cols : xs[size_t(j)].data(),
                                        even ? yAll.data() + j * (rows + 3) : ys[size_t(j)].data()});
                    device->matvec(jobs);
                    if (type == DType::Q8_0 && even) {
                        // The rows as the device keeps them after an upload (AVX-512: the
                        // Q8_0ScalesLast layout): the same batch, the same bits.
                        auto up = device->uploadMatrix(m.view(), m.stride * size_t(rows));
                        ASSERT_TRUE(up.ok()) << up.error().message;
                        std::vector<float> again(yAll.size(), kPoison);
                        std::vector<MatvecJob> upJobs;
                        for (int j = 0; j < n; ++j)
                            upJobs.push_back({up->view, xAll.data() + j * cols, again.data() + j * (rows + 3)});
                        device->matvec(upJobs);
                        for (int j = 0; j < n; ++j)
                            ASSERT_EQ(0, std::memcmp(again.data() + j * (rows + 3), yAll.data() + j * (rows + 3),
                                                     size_t(rows) * sizeof(float)))
                                << label(*device, type, rows, cols) << " batch " << n << " uploaded, job " << j;
                    }
                    const bool quant = type == DType::Q8_0 || type == DType::Q4_0;
                    // The integer products quantize x as decode does: only the order of the
                    // blocks' float sum differs.
                    const bool integer = cpu::kernelsFor(cfg.set).gemmInt8.takes(m.view());
                    for (int j = 0; j < n; j += n > 40 ? 37 : 1) {
                        const float* y = jobs[size_t(j)].y;
                        const std::string what = label(*device, type, m.rows, m.cols) + " batch " + std::to_string(n) +
                                                 (even ? " even" : " scattered") + " job " + std::to_string(j);
                        checkMatvec(m, xs[size_t(j)], y, false, what);
                        EXPECT_TRUE(isPoison(y[m.rows])) << what;
                        std::vector<float> alone(size_t(rows + 1), kPoison);
                        device->matvec(m.view(), xs[size_t(j)].data(), alone.data());
                        const std::vector<float> got(y, y + m.rows), want(alone.begin(), alone.begin() + m.rows);
                        if (n < 8) {
                            EXPECT_EQ(got, want) << what;  // the matvec kernels, bit for bit
                        } else {
                            EXPECT_LE(testing_support::relativeL2(got, want),
                                      integer ? testing_support::kPromptIntegerTolerance
                                      : quant ? testing_support::kPromptQuantTolerance
                                              : testing_support::kPromptFloatTolerance)
                                << what;
                            if (quant) worst[integer] = std::max(worst[integer], testing_support::relativeL2(got, want));
                        }
                    }
                }
            }
        }
    }
    std::printf("Q8_0/Q4_0 prompt batches from one job alone (relative L2): float product %.2g, integer %.2g\n",
                worst[0], worst[1]);
    // Turned off: the matvec kernels, bit for bit, at any batch size.
    setenv("SPILLWAY_CPU_GEMM", "0", 1);
    auto exact = createCpuDevice(2, bestCpuKernelSet());
    unsetenv("SPILLWAY_CPU_GEMM");
    const TestMatrix m = makeMatrix(DType::F16, 70, 256, rng);
    std::vector<std::vector<float>> xs, ys;
    std::vector<MatvecJob> jobs;
    for (int j = 0; j < 16; ++j) {
        xs.push_back(randomVector(256, rng));
        ys.emplace_back(70, kPoison);
    }
    for (int j = 0; j < 16; ++j) jobs.push_back({m.view(), xs[size_t(j)].data(), ys[size_t(j)].data()});
    exact->matvec(jobs);
    for (int j = 0; j < 16; ++j) {
        std::vector<float> alone(70, kPoison);
        exact->matvec(m.view(), xs[size_t(j)].data(), alone.data());
        EXPECT_EQ(alone, ys[size_t(j)]) << "job " << j;
    }
}

// The packed batch of a K-quant product holds decode's quantization of x (quantizeQ8K) bit for
// bit: each block's qx words and the super-block's dx, and the block's start and last word
// (Q6_K: -32 times each half's sum of qx; Q4_K / Q5_K: start 0, the sum of qx as a float).
void checkPackedQ8K(const cpu::GemmInt8& p, DType type, const std::vector<float>& x, int64_t n, int64_t cols,
                    const std::vector<uint8_t>& packed, const std::string& what)
{
    const int64_t blocks = cols / 32, tokens = p.tokens;
    std::vector<int8_t> qs(static_cast<size_t>(cols));
    std::vector<float> d(static_cast<size_t>(cols / 256));
    std::vector<int16_t> bsums(static_cast<size_t>(cols / 16));
    for (int64_t j = 0; j < n; ++j) {
        cpu::quantizeQ8K(x.data() + j * cols, cols, qs.data(), d.data(), bsums.data());
        const int64_t i = j % tokens;
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* block = packed.data() + size_t((j / tokens * blocks + b) * cpu::gemmInt8XBlockBytes(tokens));
            for (int64_t g = 0; g < 8; ++g)
                ASSERT_EQ(0, std::memcmp(block + (g * tokens + i) * 4, qs.data() + b * 32 + g * 4, 4))
                    << what << ": token " << j << " block " << b << " group " << g << " is not quantizeQ8K's";
            float dx;
            int32_t start, last;
            std::memcpy(&dx, block + (8 * tokens + i) * 4, 4);
            std::memcpy(&start, block + (9 * tokens + i) * 4, 4);
            std::memcpy(&last, block + (10 * tokens + i) * 4, 4);
            ASSERT_EQ(bitsOf(dx), bitsOf(d[size_t(b / 8)])) << what << ": token " << j << " block " << b;
            const int32_t lo = bsums[size_t(2 * b)], hi = bsums[size_t(2 * b + 1)];
            if (type == DType::Q6_K) {
                ASSERT_EQ(start, -32 * lo) << what << ": token " << j << " block " << b;
                ASSERT_EQ(last, -32 * hi) << what << ": token " << j << " block " << b;
            } else {
                ASSERT_EQ(start, 0) << what;
                ASSERT_EQ(bitsOf(float(lo + hi)), uint32_t(last)) << what << ": token " << j << " block " << b;
            }
        }
    }
}

// Every integer product this CPU runs (AVX-512 VNNI, AVX-VNNI, AVX2's vpmaddubsw: the device
// takes the best of its set), called directly: the same bits as each other, and within
// kPromptIntegerTolerance of one token at a time on the decode kernels; Q4_0, Q8_0 stored and
// reordered, Q4_K, Q5_K and Q6_K (random codes: every nibble, high bit, scale and min); rows not
// a multiple of any block, depths of 8 and 33 blocks (K-quants: 1 and 5 super-blocks), batches of
// 1 to 512 (the second token's values halfway between two steps). Each K-quant type must be taken
// by every product (none falls back to floats unseen), its packed x decode's bit for bit.
TEST(CpuBackend, IntegerPromptProductsGiveTheSameBits)
{
    cpu::GemmInt8 variants[3];
    const int count = cpu::gemmInt8Variants(variants);
    if (count == 0) GTEST_SKIP() << "this CPU runs no integer product (no AVX2)";
    std::mt19937_64 rng(21);
    auto device = createCpuDevice(1, bestCpuKernelSet());
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
        for (bool reordered : {false, true})
            for (int64_t rows : {int64_t{57}, int64_t{130}})
                for (int64_t depth : {int64_t{256}, int64_t{1056}}) {
                    if (reordered && type != DType::Q8_0) continue;
                    const bool kQuant = type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K;
                    const int64_t cols = kQuant && depth > 256 ? 1280 : depth;
                    // The bytes of the matrix (either generator) and its view.
                    std::vector<uint8_t> bytes;
                    MatrixView view;
                    if (kQuant) {
                        kquant_test::KMatrix km = kquant_test::makeKMatrix(type, rows, cols, rng);
                        bytes = std::move(km.bytes);
                        view = {type, bytes.data(), rows, cols, km.stride};
                    } else {
                        TestMatrix m = makeMatrix(type, rows, cols, rng);
                        bytes = std::move(m.bytes);
                        view = {type, bytes.data(), rows, cols, m.stride};
                    }
                    std::vector<uint8_t> scalesLast(bytes.size());
                    if (reordered) {
                        cpu::repackQ8_0ScalesLast(view, scalesLast.data(), 0, rows);
                        view.data = scalesLast.data();
                        view.layout = RowLayout::Q8_0ScalesLast;
                    }
                    for (int64_t n : {1, 2, 7, 33, 512}) {
                        if (cols > 256 && n > 33) continue;
                        const int64_t ldc = rows + 5;
                        std::vector<float> x(size_t(n * cols));
                        for (float& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
                        // Token 1: halves between two steps (max 127: a step of 1), where rounding
                        // to nearest even and other roundings differ.
                        for (int64_t k = 0; n > 1 && k < cols; ++k)
                            x[size_t(cols + k)] = k % 256 == 0 ? 127.0f : float(int(k * 7 % 254) - 127) + 0.5f;
                        std::vector<float> first;
                        for (int v = 0; v < count; ++v) {
                            const cpu::GemmInt8& p = variants[v];
                            const std::string what = std::string(p.name) + " " + label(*device, type, rows, cols) +
                                                     (reordered ? " scales last" : "") + " batch " + std::to_string(n);
                            if (kQuant) {
                                ASSERT_TRUE(p.takes(view)) << what;
                            }
                            if (!p.takes(view)) continue;
                            const testing_support::Int8ProductRun run =
                                testing_support::runInt8Product(p, view, x.data(), n, ldc, kPoison);
                            if (kQuant) checkPackedQ8K(p, type, x, n, cols, run.packed, what);
                            const std::vector<float>& y = run.y;
                            testing_support::expectTokensNearDecode(*device, view, x.data(), y, n, ldc, kPoison, what);
                            if (first.empty()) first = y;
                            else ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float))) << what;
                        }
                    }
                }
}

TEST(CpuBackend, ThreadPoolStress)
{
    // 10000 tiny dispatches through a 3-thread device: 48 rows = 3 chunks, so all threads work.
    std::mt19937_64 rng(7);
    auto device = createCpuDevice(3, bestCpuKernelSet());
    const TestMatrix m = makeMatrix(DType::F32, 48, 32, rng);
    std::vector<float> y(48);
    for (int i = 0; i < 10000; ++i) {
        const std::vector<float> x = randomVector(32, rng);
        std::fill(y.begin(), y.end(), kPoison);
        device->matvec(m.view(), x.data(), y.data());
        for (int64_t r = 0; r < 48; ++r) {
            double ref = 0, magnitude = 0;
            for (int c = 0; c < 32; ++c) {
                ref += m.values[r * 32 + c] * x[c];
                magnitude += std::fabs(m.values[r * 32 + c] * x[c]);
            }
            ASSERT_LE(std::fabs(y[r] - ref), 1e-5 * magnitude) << "dispatch " << i;
        }
    }
    // And the pool alone: every thread runs every dispatch exactly once.
    cpu::ThreadPool pool(3);
    std::vector<int> counts(3, 0);
    auto work = [&counts](int thread, int threads) { counts[thread] += threads; };
    for (int i = 0; i < 10000; ++i) pool.run(work);
    for (int c : counts) EXPECT_EQ(c, 30000);
}

// ---- Q8_0 rows reordered by uploadMatrix (RowLayout::Q8_0ScalesLast) ---------------------------

TEST(CpuBackend, UploadedQ8_0MatrixGivesTheSameBits)
{
    // Column counts cover whole groups of 16 blocks, a partial group and an odd last block.
    std::mt19937_64 rng(8);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        const bool reorders = cfg.set == CpuKernelSet::Avx512 && !std::getenv("SPILLWAY_CPU_Q8_0_LAYOUT");
        for (int64_t rows : {1, 7, 33, 257})
            for (int64_t cols : {32, 64, 96, 544, 1056, 2112, 4128}) {
                const size_t padding = rows == 33 ? 64 : 0;
                const TestMatrix m = makeMatrix(DType::Q8_0, rows, cols, rng, padding);
                const std::vector<uint8_t> before = m.bytes;
                const std::string what = label(*device, DType::Q8_0, rows, cols) + " uploaded";
                const size_t bytes = m.stride * size_t(rows);
                const size_t usedBefore = device->memoryStats().used;
                auto up = device->uploadMatrix(m.view(), bytes);
                ASSERT_TRUE(up.ok()) << what << ": " << up.error().message;
                ASSERT_EQ(m.bytes, before) << what << ": the source was modified";
                EXPECT_EQ(device->memoryStats().used, usedBefore + bytes) << what;
                EXPECT_EQ(up->view.layout, reorders ? RowLayout::Q8_0ScalesLast : RowLayout::Stored) << what;
                EXPECT_EQ(up->view.rowStride, m.stride);
                EXPECT_NE(up->view.data, static_cast<const void*>(m.bytes.data()));

                // The same bits as the stored rows, for any x, and within the reference bounds.
                for (bool exact : {false, true}) {
                    const std::vector<float> x = exact ? q8ExactVector(cols, rng) : randomVector(cols, rng);
                    std::vector<float> stored(rows + 1, kPoison), uploaded(rows + 1, kPoison);
                    device->matvec(m.view(), x.data(), stored.data());
                    device->matvec(up->view, x.data(), uploaded.data());
                    for (int64_t r = 0; r < rows; ++r)
                        ASSERT_EQ(bitsOf(uploaded[r]), bitsOf(stored[r])) << what << " row " << r;
                    ASSERT_TRUE(isPoison(uploaded[rows])) << what << ": wrote past the output";
                    checkMatvec(m, x, uploaded.data(), exact, what);
                }
                // getRow decodes either layout to the same values.
                std::vector<float> a(cols), b(cols);
                for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
                    device->getRow(m.view(), r, a.data());
                    device->getRow(up->view, r, b.data());
                    ASSERT_EQ(a, b) << what << " getRow " << r;
                }
            }
    }
}

TEST(CpuBackend, Q8_0ScalesLastRowsOnEveryKernelSet)
{
    // Rows reordered here (not by a device), so every set's kernel for the layout is exercised,
    // also on CPUs whose devices keep the stored rows.
    std::mt19937_64 rng(9);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (int64_t cols : {32, 96, 1056, 4128}) {
            const TestMatrix m = makeMatrix(DType::Q8_0, 45, cols, rng, 32);
            std::vector<uint8_t> reordered(m.bytes.size(), 0xcd);
            cpu::repackQ8_0ScalesLast(m.view(), reordered.data(), 0, m.rows);
            MatrixView v = m.view();
            v.data = reordered.data();
            v.layout = RowLayout::Q8_0ScalesLast;
            const std::vector<float> x = randomVector(cols, rng);
            std::vector<float> y(46, kPoison), stored(46, kPoison);
            device->matvec(v, x.data(), y.data());
            device->matvec(m.view(), x.data(), stored.data());
            const std::string what = label(*device, DType::Q8_0, 45, cols) + " scales last";
            checkMatvec(m, x, y.data(), false, what);
            if (cfg.set != CpuKernelSet::Avx2) {  // AVX2 reads this layout with the scalar kernel
                for (int r = 0; r < 45; ++r) ASSERT_EQ(bitsOf(y[r]), bitsOf(stored[r])) << what << " row " << r;
            }
        }
    }
}
