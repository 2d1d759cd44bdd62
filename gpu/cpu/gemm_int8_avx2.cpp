// The prompt path's integer product for Q4_0 weights on AVX2 CPUs without VNNI (compiled with
// -mavx2 -mfma -mf16c); what it computes and the layouts are in gemm_int8_x86.h. vpmaddubsw
// multiplies the unsigned nibbles (0..15) by x's signed bytes and adds pairs into 16-bit lanes;
// the 8 groups of a block add up in those lanes without saturating (16 products of at most
// 15 x 127 = 30,480 < 32,767), and one vpmaddwd per block widens them to the same int32 sums
// the VNNI products make. Q8_0's full-range bytes would saturate the pairs, so Q8_0 keeps the
// float product on this set. A 6-token x 8-row tile.
// No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_int8_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = 6;
constexpr int64_t kRows = 8;

void tile(const uint8_t* x, const uint8_t* wp, int64_t blocks, float* y, int64_t ldc, int64_t tokens, int64_t rows)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 c[kTokens];
    for (int64_t t = 0; t < kTokens; ++t) c[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b, x += gemmInt8XBlockBytes(kTokens), wp += gemmInt8WBlockBytes(kRows)) {
        const Int8XBlock<kTokens> xb(x);
        __m256i acc[kTokens];
        for (int64_t t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_si256();
        for (int64_t g = 0; g < kInt8Groups; ++g) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + g * kRows * 4));
            for (int64_t t = 0; t < kTokens; ++t)
                acc[t] = _mm256_add_epi16(acc[t],
                                          _mm256_maddubs_epi16(wv, _mm256_set1_epi32(xb.words[g * kTokens + t])));
        }
        const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(wp + kInt8Groups * kRows * 4));
        for (int64_t t = 0; t < kTokens; ++t) {
            const __m256i sum = _mm256_add_epi32(_mm256_set1_epi32(xb.start[t]), _mm256_madd_epi16(acc[t], ones));
            c[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(xb.d[t])), c[t]);
        }
    }
    storeInt8Tile(c, y, ldc, tokens, rows);
}

}  // namespace

GemmInt8 gemmInt8Avx2()
{
    return int8Product<kRows, kTokens, tile>("avx2", false);
}

}  // namespace spillway::gpu::cpu
