// The prompt path's integer product for Q8_0, Q4_0, the K-quants and the IQ types on AVX2 CPUs with AVX-VNNI (the
// 256-bit vpdpbusd of Alder Lake and later; compiled with -mavxvnni; chosen at run time only on
// CPUs that have it); what it computes and the layouts are in gemm_int8_x86.h. A 6-token x 8-row
// tile: per block of 32 values of k, 6 ymm integer sums (8 vpdpbusd each), then scaled into 6
// float accumulators (Q6_K: per half block; Q4_K / Q5_K: and their mins subtracted).
// No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_int8_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = 6;
constexpr int64_t kRows = 8;

// The integer sums of the tile (ymmTile, gemm_int8_x86.h): vpdpbusd on 8 rows.
struct Sums {
    template <int64_t kTok, Int8Kind K>
    static void block(const uint8_t* wp, const int32_t* words, int64_t g0, int64_t g1, const int32_t* start,
                      __m256i (&acc)[kTok])
    {
        for (int64_t t = 0; t < kTok; ++t) acc[t] = _mm256_set1_epi32(start[t]);
        for (int64_t g = g0; g < g1; ++g) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + g * kRows * 4));
            for (int64_t t = 0; t < kTok; ++t)
                acc[t] = _mm256_dpbusd_avx_epi32(acc[t], wv, _mm256_set1_epi32(words[g * kTok + t]));
        }
    }
};
struct Tiles {
    static constexpr bool kVnni = true;
    template <Int8Kind K>
    static void run(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc, int64_t tokens,
                    int64_t rows)
    {
        ymmTile<kRows, kTokens, Sums, K>(x, wp, blocks, y, ldc, tokens, rows);
    }
};

}  // namespace

GemmInt8 gemmInt8AvxVnni()
{
    return int8Product<kRows, kTokens, Tiles>("avx-vnni");
}

}  // namespace spillway::gpu::cpu
