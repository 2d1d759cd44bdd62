// The prompt path's integer product on AVX2 CPUs without VNNI (compiled with -mavx2 -mfma
// -mf16c); what it computes and the layouts are in gemm_int8_x86.h. vpmaddubsw multiplies the
// unsigned weight bytes by x's signed bytes and adds pairs into 16-bit lanes; as many groups of a
// block as cannot saturate them add up there (avx2SpanOf: Q4_0's and Q4_K's nibbles: all 8, 16
// products of at most 15 x 127 = 30,480 < 32,767; Q5_K's and Q5_1's 0..31: 4; Q6_K's 0..63 and
// the other Halves and Single types': 2; the IQ2 and IQ3_XXS bytes up to 127: 1), and a vpmaddwd widens each
// such run to the same int32 sums the VNNI products make. Bytes that saturate one pair (Q8_0,
// IQ4_NL, IQ4_XS) or a Plain block's 8 groups (MXFP4) keep the matvec kernels' or the float
// product on this set (int8TypesOf). A 6-token x 8-row tile.
// No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_int8_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = 6;
constexpr int64_t kRows = 8;

// The integer sums of the tile (ymmTile, gemm_int8_x86.h). vpmaddubsw's pairs of a group are
// at most 2 x maxQ x 127; kSpan groups add up in the 16-bit lanes below 32,767 (Q4_0, Q4_K: 8;
// Q5_K: 4; Q6_K: 2), then one vpmaddwd widens them.
struct Sums {
    template <int64_t kTok, Int8Kind K>
    static void block(const uint8_t* wp, const int32_t* words, int64_t g0, int64_t g1, const int32_t* start,
                      __m256i (&sum)[kTok])
    {
        constexpr int64_t kSpan = avx2SpanOf(K);
        static_assert(kSpan >= 1 && kSpan * 2 * 127 * maxQOf(K) <= 32767, "16-bit lanes that cannot saturate");
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t t = 0; t < kTok; ++t) sum[t] = _mm256_set1_epi32(start[t]);
        for (int64_t s0 = g0; s0 < g1; s0 += kSpan) {
            __m256i acc[kTok];
            for (int64_t t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_si256();
            for (int64_t g = s0; g < s0 + kSpan && g < g1; ++g) {
                const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + g * kRows * 4));
                for (int64_t t = 0; t < kTok; ++t)
                    acc[t] = _mm256_add_epi16(acc[t], _mm256_maddubs_epi16(wv, _mm256_set1_epi32(words[g * kTok + t])));
            }
            for (int64_t t = 0; t < kTok; ++t) sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(acc[t], ones));
        }
    }
};
struct Tiles {
    static constexpr bool kVnni = false;  // SingleFull is never instantiated here
    template <Int8Kind K>
    static void run(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc, int64_t tokens,
                    int64_t rows)
    {
        ymmTile<kRows, kTokens, Sums, K>(x, wp, blocks, y, ldc, tokens, rows);
    }
};

}  // namespace

GemmInt8 gemmInt8Avx2()
{
    return int8Product<kRows, kTokens, Tiles>("avx2");
}

}  // namespace spillway::gpu::cpu
