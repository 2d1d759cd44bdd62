// Conformance of the CPU backend: every op, on every kernel set this CPU runs (scalar, avx2,
// avx512), with 1 and 3 threads, against double-precision references written here, decoding
// weights with this file's own code from the byte layouts of gpu/dtype.h.
//
// Tolerances (err = |y - ref| per output row):
//   F32 matvec        err <= 1e-5 * sum_c |w_c x_c|   (float accumulation only)
//   F16, BF16 matvec  err <= 1e-4 * sum_c |w_c x_c|   (weights exact in float; accumulation)
//   Q8_0, Q4_0        x is quantized to Q8 blocks (as llama.cpp does), so per row
//                     err <= sum_blocks sum_c |w_c| * 0.6 * max|x_block| / 127 + 1e-5 sum |w x|,
//                     and over a whole output ||y - ref|| / ||ref|| < 1e-2;
//                     with x exactly representable in Q8: err <= 1e-5 * sum_c |w_c x_c|.
//   getRow            exact. rmsnorm, rope, attention, swiglu: ~1e-6 relative.

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_device.h"
#include "gpu/cpu/thread_pool.h"

using namespace spillway;
using namespace spillway::gpu;

namespace {

// ---- independent references --------------------------------------------------------------------

double refHalf(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -24);
    return sign * std::ldexp(1024 + m, e - 25);
}

double refBf16(uint16_t h)
{
    const int e = (h >> 7) & 0xff, m = h & 0x7f;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0xff) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(m, -133);
    return sign * std::ldexp(128 + m, e - 134);
}

// Nearest fp16 of a finite double, ties to even, by search over the ordered positive codes.
uint16_t refToHalf(double v)
{
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= 65520.0) return sign | 0x7c00;  // halfway above the largest finite rounds to inf
    uint16_t lo = 0, hi = 0x7bff;
    while (lo < hi) {  // largest code whose value <= a
        const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
        if (refHalf(mid) <= a) lo = mid; else hi = mid - 1;
    }
    if (lo == 0x7bff) return sign | lo;
    const double below = refHalf(lo), above = refHalf(lo + 1);
    uint16_t pick = lo;
    if (a - below > above - a || (a - below == above - a && (lo & 1))) pick = lo + 1;
    return sign | pick;
}

uint32_t bitsOf(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float floatOf(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

__attribute__((target("f16c"))) uint16_t hwToHalf(float f) { return _cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float hwFromHalf(uint16_t h) { return _cvtsh_ss(h); }
bool haveF16c() { return __builtin_cpu_supports("avx2"); }  // every AVX2 CPU has F16C

// ---- test weights: bytes in the stored layout plus this file's decoding of them ----------------

struct TestMatrix {
    DType type;
    int64_t rows, cols;
    size_t stride;
    std::vector<uint8_t> bytes;
    std::vector<double> values;  // (rows, cols) decoded
    MatrixView view() const { return {type, bytes.data(), rows, cols, stride}; }
};

void putU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

TestMatrix makeMatrix(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng,
                      size_t padding = 0)
{
    TestMatrix m{type, rows, cols, rowBytes(type, cols) + padding, {}, {}};
    m.bytes.assign(m.stride * rows, 0xcd);
    m.values.resize(rows * cols);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), scale(0.001f, 0.1f);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = m.bytes.data() + r * m.stride;
        double* out = m.values.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            if (type == DType::F32) {
                const float v = unit(rng);
                std::memcpy(row + 4 * c, &v, 4);
                out[c] = v;
            } else if (type == DType::F16 || type == DType::BF16) {
                const float v = unit(rng) * (c % 7 == 0 ? 1e-6f : 1.0f);  // some fp16 subnormals
                const uint16_t h = type == DType::F16 ? fp32ToFp16(v) : fp32ToBf16(v);
                putU16(row + 2 * c, h);
                out[c] = type == DType::F16 ? refHalf(h) : refBf16(h);
            }
        }
        for (int64_t b = 0; b < cols / 32 && (type == DType::Q8_0 || type == DType::Q4_0); ++b) {
            const uint16_t dh = fp32ToFp16(scale(rng));
            const double d = refHalf(dh);
            uint8_t* block = row + b * (type == DType::Q8_0 ? 34 : 18);
            putU16(block, dh);
            for (int i = 0; i < (type == DType::Q8_0 ? 32 : 16); ++i) block[2 + i] = byte(rng);
            for (int i = 0; i < 32; ++i) {
                const int q = type == DType::Q8_0
                                  ? static_cast<int8_t>(block[2 + i])
                                  : ((i < 16 ? block[2 + i] : block[2 + i - 16] >> 4) & 15) - 8;
                out[b * 32 + i] = d * q;
            }
        }
    }
    return m;
}

std::vector<float> randomVector(int64_t n, std::mt19937_64& rng, float amplitude = 1.0f)
{
    std::uniform_real_distribution<float> unit(-amplitude, amplitude);
    std::vector<float> v(n);
    for (float& x : v) x = unit(rng);
    return v;
}

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

const float kPoison = floatOf(0x7fbadbadu);  // a NaN no kernel produces

bool isPoison(float f) { return bitsOf(f) == 0x7fbadbadu; }

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

struct Config {
    CpuKernelSet set;
    int threads;
};

std::vector<Config> configs()
{
    std::vector<Config> list;
    for (int s = 0; s <= static_cast<int>(bestCpuKernelSet()); ++s)
        for (int threads : {1, 3}) list.push_back({static_cast<CpuKernelSet>(s), threads});
    return list;
}

std::string label(const Device& d, DType t, int64_t rows, int64_t cols)
{
    return d.info().kernels + "/" + std::to_string(d.info().threads) + "t " + dtypeName(t) + " " +
           std::to_string(rows) + "x" + std::to_string(cols);
}

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

}  // namespace

// ---- fp16 / bf16 conversions -------------------------------------------------------------------

TEST(Conversions, Fp16ToFp32Exhaustive)
{
    for (uint32_t h = 0; h < 65536; ++h) {
        const float got = fp16ToFp32(static_cast<uint16_t>(h));
        const double want = refHalf(static_cast<uint16_t>(h));
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << std::hex << h;
            ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
        } else {
            ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
            ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
        }
        if (haveF16c()) {
            ASSERT_EQ(bitsOf(got), bitsOf(hwFromHalf(static_cast<uint16_t>(h)))) << std::hex << h;
        }
    }
}

TEST(Conversions, Fp32ToFp16Rounding)
{
    // Every fp16 value round-trips; NaN stays NaN.
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t back = fp32ToFp16(fp16ToFp32(static_cast<uint16_t>(h)));
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff))
            ASSERT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) << std::hex << h;
        else
            ASSERT_EQ(back, h) << std::hex << h;
    }
    // Midpoints between neighbours tie to even; one float ulp off the midpoint decides.
    for (uint16_t h = 0; h < 0x7bff; ++h) {
        const float mid = static_cast<float>((refHalf(h) + refHalf(h + 1)) / 2);  // exact
        const uint16_t even = (h & 1) ? h + 1 : h;
        ASSERT_EQ(fp32ToFp16(mid), even) << std::hex << h;
        ASSERT_EQ(fp32ToFp16(-mid), even | 0x8000) << std::hex << h;
        ASSERT_EQ(fp32ToFp16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
        ASSERT_EQ(fp32ToFp16(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
    }
    EXPECT_EQ(fp32ToFp16(65504.0f), 0x7bff);
    EXPECT_EQ(fp32ToFp16(65519.99f), 0x7bff);
    EXPECT_EQ(fp32ToFp16(65520.0f), 0x7c00);  // tie between 65504 (odd) and 2^16: inf
    EXPECT_EQ(fp32ToFp16(1e10f), 0x7c00);
    EXPECT_EQ(fp32ToFp16(-INFINITY), 0xfc00);
    EXPECT_EQ(fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);        // half the least subnormal
    EXPECT_EQ(fp32ToFp16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);        // 1.5 ulp ties to even (2)
    EXPECT_EQ(fp32ToFp16(-0.0f), 0x8000);
    const uint16_t nan = fp32ToFp16(NAN);
    EXPECT_TRUE((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff));
    // Random floats over the whole range against the search reference and the F16C instruction.
    std::mt19937_64 rng(1);
    for (int i = 0; i < 400000; ++i) {
        const float f = floatOf(static_cast<uint32_t>(rng()));
        const uint16_t got = fp32ToFp16(f);
        if (haveF16c()) {
            ASSERT_EQ(got, hwToHalf(f)) << std::hex << bitsOf(f);
        }
        if (!std::isnan(f)) {
            ASSERT_EQ(got, refToHalf(f)) << std::hex << bitsOf(f);
        }
    }
}

TEST(Conversions, Bf16)
{
    for (uint32_t h = 0; h < 65536; ++h) {
        const double want = refBf16(static_cast<uint16_t>(h));
        const float got = bf16ToFp32(static_cast<uint16_t>(h));
        if (std::isnan(want)) ASSERT_TRUE(std::isnan(got));
        else ASSERT_EQ(static_cast<double>(got), want);
    }
    std::mt19937_64 rng(2);
    for (int i = 0; i < 400000; ++i) {
        const uint32_t u = static_cast<uint32_t>(rng());
        const float f = floatOf(u);
        const uint16_t got = fp32ToBf16(f);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16ToFp32(got)));
            continue;
        }
        // Nearest of the two truncation neighbours, ties to even (overflow goes to inf).
        const uint16_t down = static_cast<uint16_t>(u >> 16);
        const uint32_t rest = u & 0xffff;
        const uint16_t want = (rest > 0x8000 || (rest == 0x8000 && (down & 1))) ? down + 1 : down;
        ASSERT_EQ(got, want) << std::hex << u;
    }
    EXPECT_EQ(fp32ToBf16(floatOf(0x3f808000u)), 0x3f80);  // tie to even (down)
    EXPECT_EQ(fp32ToBf16(floatOf(0x3f818000u)), 0x3f82);  // tie to even (up)
    EXPECT_EQ(fp32ToBf16(INFINITY), 0x7f80);
    EXPECT_TRUE(std::isnan(bf16ToFp32(fp32ToBf16(floatOf(0x7f800001u)))));  // low-payload NaN
}

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

// ---- the other ops -----------------------------------------------------------------------------

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

// ---- memory, info, kernel-set selection --------------------------------------------------------

TEST(CpuBackend, AllocateAndCopy)
{
    auto device = createCpuDevice(1, bestCpuKernelSet());
    auto absurd = device->allocate(size_t{1} << 62);
    ASSERT_FALSE(absurd.ok());
    EXPECT_EQ(absurd.error().code, ErrorCode::OutOfMemory);
    EXPECT_FALSE(absurd.error().message.empty());

    for (size_t bytes : {size_t{1}, size_t{1000}, size_t{5} << 20}) {
        auto buffer = device->allocate(bytes);
        ASSERT_TRUE(buffer.ok());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u);
        EXPECT_EQ(buffer->bytes(), bytes);
        std::vector<uint8_t> src(bytes), back(bytes);
        for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
        device->upload(buffer->data(), src.data(), bytes);
        device->synchronize();
        device->download(back.data(), buffer->data(), bytes);
        EXPECT_EQ(src, back);
    }
}

TEST(CpuBackend, InfoAndKernelSets)
{
    auto device = createCpuDevice(3, CpuKernelSet::Avx512);
    const DeviceInfo& info = device->info();
    EXPECT_EQ(info.backend, "cpu");
    EXPECT_EQ(info.threads, 3);
    EXPECT_TRUE(info.caps.hostPointers);
    EXPECT_GT(info.totalMemory, 0u);
    EXPECT_GT(info.freeMemory, 0u);
    EXPECT_NE(info.name.find("3 threads"), std::string::npos) << info.name;
    // Asking for more than the CPU has falls back to what it has.
    EXPECT_EQ(info.kernels, cpuKernelSetName(bestCpuKernelSet()));
    for (DType t : kAllTypes) EXPECT_TRUE(device->supports(t));

    ::setenv("SPILLWAY_CPU_KERNELS", "scalar", 1);
    EXPECT_EQ(createCpuDevice(1)->info().kernels, "scalar");
    ::setenv("SPILLWAY_CPU_KERNELS", "avx512", 1);
    EXPECT_EQ(createCpuDevice(1)->info().kernels, cpuKernelSetName(bestCpuKernelSet()));
    ::unsetenv("SPILLWAY_CPU_KERNELS");
    EXPECT_EQ(createCpuDevice(0)->info().kernels, cpuKernelSetName(bestCpuKernelSet()));
}

TEST(CpuBackend, HostReadBandwidthIsMeasured)
{
    const double bw = measureHostReadBandwidth(2, size_t{16} << 20, 2);
    EXPECT_GT(bw, 1e8);  // > 0.1 GB/s on anything that runs this
}
