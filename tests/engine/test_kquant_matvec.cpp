// Conformance of the CPU backend for ggml's Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and our Q8_G64: matvec
// on every kernel set this CPU runs (scalar, avx2, avx512; 1 and 3 threads) against a
// double-precision reference decoded by kquant_test_util.h from the ggml layouts; getRow against
// ggml's float decoding, bit for bit; Q8_G64 against a scalar re-implementation of the thesis'
// runtime, bit for bit; several types sharing one x in one dispatch.
//
// Tolerances (per output row; mag = sum_c magnitude_c |x_c|, the terms the kernels add up):
//   x exactly representable by the engine's x quantization (exactX):  err <= 2e-5 mag
//   random x: x is quantized per block of B (32 for Q4_1 / Q5_0, 256 for the K-quants, 64 for
//   Q8_G64) with step max|x_block| / 127, so
//     err <= 2e-5 mag + sum_blocks sum_c |w_c| * 0.6 * max|x_block| / 127,
//   and over a whole output of 33 rows or more ||y - ref|| / ||ref|| < 2e-2 (typically 0.004;
//   random codes give K-quant sub-blocks of large mean, and with 256 columns a few of them make
//   most of a row's value, so the ratio spreads more than for Q8_0: up to 0.012 seen).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/formats/ggml_quants.h"
#include "gpu/cpu/cpu_kernels.h"  // Kernels::gemmInt8: which types take the integer product
#include "kquant_test_util.h"
#include "../common/prompt_tolerance.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;
using namespace spillway::kquant_test;

namespace {

void checkMatvec(const KMatrix& m, const std::vector<float>& x, const float* y, bool exactInput,
                 const std::string& what)
{
    const int block = xBlock(m.type);
    double errNorm = 0, refNorm = 0;
    for (int64_t r = 0; r < m.rows; ++r) {
        ASSERT_FALSE(isPoison(y[r])) << what << " row " << r << " not written";
        double ref = 0, mag = 0, quantBound = 0;
        for (int64_t c = 0; c < m.cols; ++c) {
            const RefValue& v = m.values[r * m.cols + c];
            ref += v.exact * x[c];
            mag += v.magnitude * std::fabs(x[c]);
        }
        for (int64_t b = 0; !exactInput && b < m.cols / block; ++b) {
            double amax = 0, wsum = 0;
            for (int i = 0; i < block; ++i) {
                amax = std::max(amax, std::fabs(double(x[b * block + i])));
                wsum += std::fabs(m.values[r * m.cols + b * block + i].exact);
            }
            quantBound += wsum * 0.6 * amax / 127.0;
        }
        const double err = std::fabs(y[r] - ref);
        ASSERT_LE(err, 2e-5 * mag + quantBound + 1e-30)
            << what << " row " << r << ": got " << y[r] << ", want " << ref;
        errNorm += err * err;
        refNorm += ref * ref;
    }
    if (!exactInput && m.rows >= 33) {
        EXPECT_LT(std::sqrt(errNorm / refNorm), 2e-2) << what;
    }
}

// The thesis' runtime (llama2.c runq.c, export version 2) for one matrix, written out plainly:
// quantize x per group of 64 with roundf, int32 group dots, val += (float)dot * s_w * s_x.
std::vector<float> thesisMatvec(const KMatrix& m, const std::vector<float>& x)
{
    const int64_t groups = m.cols / 64;
    std::vector<int8_t> xq(m.cols);
    std::vector<float> xs(groups);
    for (int64_t g = 0; g < groups; ++g) {
        float wmax = 0.0f;
        for (int i = 0; i < 64; ++i) {
            const float v = std::fabs(x[g * 64 + i]);
            if (v > wmax) wmax = v;
        }
        const float scale = wmax / 127.0f;
        xs[g] = scale;
        for (int i = 0; i < 64; ++i)
            xq[g * 64 + i] = scale == 0.0f ? 0 : int8_t(std::roundf(x[g * 64 + i] / scale));
    }
    std::vector<float> y(m.rows);
    for (int64_t r = 0; r < m.rows; ++r) {
        const uint8_t* row = m.row(r);
        float val = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            float ws;
            std::memcpy(&ws, row + g * 68, 4);
            int32_t ival = 0;
            for (int i = 0; i < 64; ++i)
                ival += int32_t(xq[g * 64 + i]) * int32_t(int8_t(row[g * 68 + 4 + i]));
            volatile float term = float(ival) * ws * xs[g];  // rounded: never fused into the add
            val += term;
        }
        y[r] = val;
    }
    return y;
}

}  // namespace

TEST(KQuantCpu, EveryKernelSetSupportsTheNewTypes)
{
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType t : kNewTypes) EXPECT_TRUE(device->supports(t)) << dtypeName(t);
        for (DType t : kAllTypes) EXPECT_TRUE(device->supports(t)) << dtypeName(t);
    }
}

TEST(KQuantCpu, MatvecEveryTypeShapeAndSet)
{
    std::mt19937_64 rng(11);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        ASSERT_STREQ(device->info().kernels.c_str(), cpuKernelSetName(cfg.set));
        for (DType type : kNewTypes)
            for (int64_t rows : {1, 7, 33, 67})
                for (int64_t cols : {256, 512, 4096, 4352}) {
                    const size_t padding = rows == 33 ? 64 : 0;  // a row stride past the row
                    const KMatrix m = makeKMatrix(type, rows, cols, rng, padding);
                    const std::string what = label(*device, type, rows, cols);
                    for (bool exactInput : {true, false}) {
                        const std::vector<float> x =
                            exactInput ? exactX(cols, rng) : randomVector(cols, rng);
                        std::vector<float> y(rows + 1, kPoison);
                        device->matvec(m.view(), x.data(), y.data());
                        checkMatvec(m, x, y.data(), exactInput,
                                    what + (exactInput ? " exact x" : " random x"));
                        ASSERT_TRUE(isPoison(y[rows])) << what << ": wrote past the output";
                    }
                }
    }
}

// Realistic values (from the quantizer rather than random codes) over a long row: the relative
// error of the whole output stays small.
TEST(KQuantCpu, MatvecOfQuantizedWeights)
{
    std::mt19937_64 rng(12);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t rows = 45, cols = 11008;
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType type : kNewTypes) {
            KMatrix m{type, rows, cols, rowBytes(type, cols), {}, {}};
            m.bytes.resize(m.stride * rows);
            std::vector<float> w(cols);
            for (int64_t r = 0; r < rows; ++r) {
                for (float& v : w) v = normal(rng) * 0.02f;
                gguf::quantizeRow(type, w.data(), cols, m.bytes.data() + r * m.stride);
                const auto decoded = refRow(type, m.row(r), cols);
                m.values.insert(m.values.end(), decoded.begin(), decoded.end());
            }
            std::vector<float> x(cols);
            for (float& v : x) v = normal(rng);
            std::vector<float> y(rows + 1, kPoison);
            device->matvec(m.view(), x.data(), y.data());
            checkMatvec(m, x, y.data(), false, label(*device, type, rows, cols) + " quantized");
        }
    }
}

TEST(KQuantCpu, Q8G64IsTheThesisFormulaBitForBit)
{
    std::mt19937_64 rng(13);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (int64_t cols : {64, 256, 512, 576, 4096, 4352})
            for (int64_t rows : {1, 7, 67}) {
                const KMatrix m = makeKMatrix(DType::Q8_G64, rows, cols, rng, rows == 7 ? 4 : 0);
                std::vector<std::vector<float>> inputs = {randomVector(cols, rng),
                                                          randomVector(cols, rng, 1e-3f)};
                // Values exactly half-way between two steps (roundf and round-to-even differ),
                // and an all-zero group (scale 0).
                std::vector<float> halves(cols);
                for (int64_t i = 0; i < cols; ++i)
                    halves[i] = i % 64 == 0 ? 127.0f : float(int(i % 50) - 25) + 0.5f;
                std::fill(halves.begin(), halves.begin() + 64, 0.0f);
                inputs.push_back(halves);
                for (const auto& x : inputs) {
                    std::vector<float> y(rows, kPoison);
                    device->matvec(m.view(), x.data(), y.data());
                    const std::vector<float> want = thesisMatvec(m, x);
                    for (int64_t r = 0; r < rows; ++r)
                        ASSERT_EQ(bitsOf(y[r]), bitsOf(want[r]))
                            << label(*device, DType::Q8_G64, rows, cols) << " row " << r << ": got "
                            << y[r] << ", want " << want[r];
                }
            }
    }
}

TEST(KQuantCpu, GetRowIsGgmlDequantization)
{
    std::mt19937_64 rng(14);
    auto device = createCpuDevice(1);
    for (DType type : kNewTypes) {
        const KMatrix m = makeKMatrix(type, 5, 768, rng, 8);
        std::vector<float> out(m.cols + 1), viaCompress(m.cols);
        for (int64_t r = 0; r < m.rows; ++r) {
            out[m.cols] = kPoison;
            device->getRow(m.view(), r, out.data());
            gguf::dequantizeRow(type, m.row(r), m.cols, viaCompress.data());
            for (int64_t c = 0; c < m.cols; ++c) {
                const RefValue& v = m.values[r * m.cols + c];
                ASSERT_EQ(bitsOf(out[c]), bitsOf(v.ggml))
                    << dtypeName(type) << " row " << r << " col " << c << ": " << out[c]
                    << " vs " << v.ggml;
                ASSERT_EQ(bitsOf(viaCompress[c]), bitsOf(v.ggml))
                    << dtypeName(type) << " col " << c;
                ASSERT_LE(std::fabs(out[c] - v.exact), 1e-6 * v.magnitude + 1e-30);
            }
            ASSERT_TRUE(isPoison(out[m.cols]));
        }
    }
}

// A prompt batch of 8 or more tokens goes through a matrix product where the kernel set has one:
// Q4_K, Q5_K and Q6_K through the integer product (gemm_int8_x86.h: x quantized to Q8_K as the
// matvec kernels do, so within kPromptIntegerTolerance of the same job alone), the other types
// through a float product (rows to floats; x not quantized there, so within the quantized
// tolerance of the job alone); each job is the product within the matvec's bound above.
TEST(KQuantCpu, PromptBatchesMultiplyMatricesWithinTheTolerance)
{
    std::mt19937_64 rng(16);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        for (DType type : kNewTypes) {
            const KMatrix m = makeKMatrix(type, 130, 512, rng);
            const bool integer = cpu::kernelsFor(cfg.set).gemmInt8.takes(m.view());
            if (cfg.set != CpuKernelSet::Scalar && (type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K))
                EXPECT_TRUE(integer) << label(*device, type, m.rows, m.cols) << ": no integer product";
            for (int n : {7, 8, 33}) {
                std::vector<std::vector<float>> xs, ys;
                std::vector<MatvecJob> jobs;
                for (int j = 0; j < n; ++j) {
                    xs.push_back(randomVector(512, rng));
                    ys.emplace_back(131, kPoison);
                }
                for (int j = 0; j < n; ++j) jobs.push_back({m.view(), xs[size_t(j)].data(), ys[size_t(j)].data()});
                device->matvec(jobs);
                for (int j = 0; j < n; ++j) {
                    const std::string what = label(*device, type, m.rows, m.cols) + " batch " + std::to_string(n) +
                                             " job " + std::to_string(j);
                    checkMatvec(m, xs[size_t(j)], ys[size_t(j)].data(), false, what);
                    EXPECT_TRUE(isPoison(ys[size_t(j)][size_t(m.rows)])) << what;
                    std::vector<float> alone(131, kPoison);
                    device->matvec(m.view(), xs[size_t(j)].data(), alone.data());
                    const std::vector<float> got(ys[size_t(j)].begin(), ys[size_t(j)].begin() + m.rows),
                        want(alone.begin(), alone.begin() + m.rows);
                    if (n < 8) EXPECT_EQ(got, want) << what;  // the matvec kernels, bit for bit
                    else
                        EXPECT_LE(testing_support::relativeL2(got, want),
                                  integer ? testing_support::kPromptIntegerTolerance
                                          : testing_support::kPromptQuantTolerance)
                            << what;
                }
            }
        }
    }
}

TEST(KQuantCpu, SeveralTypesShareOneXInOneDispatch)
{
    std::mt19937_64 rng(15);
    for (const Config& cfg : configs()) {
        auto device = createCpuDevice(cfg.threads, cfg.set);
        const std::vector<float> x = randomVector(4096, rng), x2 = randomVector(512, rng);
        // A Q4_K_M-like layer: Q4_K and Q6_K projections of one x, plus every other x form.
        std::vector<KMatrix> ms;
        ms.push_back(makeKMatrix(DType::Q4_K, 65, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q6_K, 33, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q4_K, 7, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q5_0, 9, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q8_G64, 17, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q5_K, 3, 512, rng));
        ms.push_back(makeKMatrix(DType::Q4_1, 40, 4096, rng));
        ms.push_back(makeKMatrix(DType::Q8_G64, 5, 512, rng));
        auto xFor = [&](const KMatrix& m) { return m.cols == 512 ? x2.data() : x.data(); };
        std::vector<std::vector<float>> ys;
        std::vector<MatvecJob> jobs;
        for (const KMatrix& m : ms) ys.emplace_back(m.rows + 1, kPoison);
        for (size_t i = 0; i < ms.size(); ++i)
            jobs.push_back({ms[i].view(), xFor(ms[i]), ys[i].data()});
        device->matvec(jobs);
        for (size_t i = 0; i < ms.size(); ++i) {
            const std::string what =
                label(*device, ms[i].type, ms[i].rows, ms[i].cols) + " job " + std::to_string(i);
            const std::vector<float> xi(xFor(ms[i]), xFor(ms[i]) + ms[i].cols);
            checkMatvec(ms[i], xi, ys[i].data(), false, what);
            EXPECT_TRUE(isPoison(ys[i][ms[i].rows])) << what;
            // Alone, the same job gives the same bits (x is prepared the same way).
            std::vector<float> alone(ms[i].rows);
            device->matvec(ms[i].view(), xFor(ms[i]), alone.data());
            for (int64_t r = 0; r < ms[i].rows; ++r)
                ASSERT_EQ(bitsOf(alone[r]), bitsOf(ys[i][r])) << what << " row " << r;
        }
    }
}

// The vector sets add the same exact integer sums in another order: with exactly representable
// x their results agree with the scalar set to float rounding.
TEST(KQuantCpu, VectorSetsAgreeWithScalar)
{
    std::mt19937_64 rng(16);
    auto scalar = createCpuDevice(1, CpuKernelSet::Scalar);
    for (const Config& cfg : configs()) {
        if (cfg.set == CpuKernelSet::Scalar || cfg.threads != 1) continue;
        auto device = createCpuDevice(1, cfg.set);
        for (DType type : kNewTypes) {
            const KMatrix m = makeKMatrix(type, 19, 2048, rng);
            const std::vector<float> x = randomVector(2048, rng);
            std::vector<float> a(19), b(19);
            scalar->matvec(m.view(), x.data(), a.data());
            device->matvec(m.view(), x.data(), b.data());
            for (int r = 0; r < 19; ++r) {
                double mag = 0;
                for (int64_t c = 0; c < 2048; ++c)
                    mag += m.values[r * 2048 + c].magnitude * std::fabs(x[c]);
                if (type == DType::Q8_G64) {
                    ASSERT_EQ(bitsOf(a[r]), bitsOf(b[r])) << label(*device, type, 19, 2048);
                } else {
                    ASSERT_LE(std::fabs(a[r] - b[r]), 2e-5 * mag) << label(*device, type, 19, 2048);
                }
            }
        }
    }
}
