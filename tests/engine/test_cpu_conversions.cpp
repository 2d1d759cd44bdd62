// fp16 and bf16 conversions of gpu/dtype.h: exhaustive over every 16-bit code, rounding at and
// around every midpoint, and random floats against a search-based reference and, where the CPU
// has it, the F16C instruction.

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "cpu_test_util.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;

namespace {

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

__attribute__((target("f16c"))) uint16_t hwToHalf(float f) { return _cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float hwFromHalf(uint16_t h) { return _cvtsh_ss(h); }
bool haveF16c() { return __builtin_cpu_supports("avx2"); }  // every AVX2 CPU has F16C

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
