#pragma once
// What the prompt path's own matrix products (gemm_avx2.cpp, gemm_avx512.cpp) share: the weight
// rows' transposition into a k-major panel, with AVX2 instructions (which every AVX-512 CPU has),
// and the loops that run a register tile over it.
// Included by files compiled for AVX2 or wider; everything here is internal to each of them.

#include <immintrin.h>

#include <cstdint>

namespace spillway::gpu::cpu {
namespace {

// 8 x 8 transpose of 32-bit lanes: v[i] lane j -> v[j] lane i.
inline void transpose8x8(__m256 v[8])
{
    const __m256 a0 = _mm256_unpacklo_ps(v[0], v[1]), a1 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 a2 = _mm256_unpacklo_ps(v[2], v[3]), a3 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256 a4 = _mm256_unpacklo_ps(v[4], v[5]), a5 = _mm256_unpackhi_ps(v[4], v[5]);
    const __m256 a6 = _mm256_unpacklo_ps(v[6], v[7]), a7 = _mm256_unpackhi_ps(v[6], v[7]);
    const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
    const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
    const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
    const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
    v[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
    v[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
    v[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
    v[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
    v[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
    v[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
    v[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
    v[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

// Rows [0, rows) of w (row-major, ldw floats apart; rows <= kRows, a multiple of 8) into
// panel[k * kRows + i], rows past `rows` as zeros.
template <int64_t kRows>
void transposeRows(const float* w, int64_t ldw, int64_t rows, int64_t cols, float* panel)
{
    static_assert(kRows % 8 == 0, "whole 8 x 8 blocks");
    const __m256 zero = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        for (int64_t g = 0; g < kRows / 8; ++g) {
            __m256 v[8];
            for (int64_t i = 0; i < 8; ++i) {
                const int64_t r = g * 8 + i;
                v[i] = r < rows ? _mm256_loadu_ps(w + r * ldw + k) : zero;
            }
            transpose8x8(v);
            float* out = panel + k * kRows + g * 8;
            for (int64_t j = 0; j < 8; ++j) _mm256_storeu_ps(out + j * kRows, v[j]);
        }
    }
    for (; k < cols; ++k)
        for (int64_t i = 0; i < kRows; ++i) panel[k * kRows + i] = i < rows ? w[i * ldw + k] : 0.0f;
}

// A block of up to kRows weight rows times the packed batch (cpu_kernels.h, GemmRowsFn): the rows
// transposed into `panel`, then `tile` (x panel, w panel, depth, y, ldc, tokens, rows, accumulate)
// over every panel of kTokens tokens, kGemmDepth values of k at a time, later passes added.
template <int64_t kRows, int64_t kTokens, int64_t kDepth, typename Tile>
void gemmRowsWith(Tile tile, const float* packedX, int64_t n, int64_t cols, const float* w, int64_t ldw, int64_t rows,
                  float* y, int64_t ldc, float* panel)
{
    transposeRows<kRows>(w, ldw, rows, cols, panel);
    const int64_t panels = (n + kTokens - 1) / kTokens;
    for (int64_t k0 = 0; k0 < cols; k0 += kDepth) {
        const int64_t kc = cols - k0 < kDepth ? cols - k0 : kDepth;
        const float* wk = panel + k0 * kRows;
        for (int64_t p = 0; p < panels; ++p) {
            const int64_t t0 = p * kTokens;
            const int64_t tokens = n - t0 < kTokens ? n - t0 : kTokens;
            tile(packedX + p * kTokens * cols + k0 * kTokens, wk, kc, y + t0 * ldc, ldc, tokens, rows, k0 > 0);
        }
    }
}

}  // namespace
}  // namespace spillway::gpu::cpu
