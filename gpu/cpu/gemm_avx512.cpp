// The prompt path's own float matrix product for AVX-512 (compiled with the AVX-512 flags; chosen
// at run time only on CPUs that have them): gemm_avx2.cpp's scheme with a register tile twice as
// wide. The batch is packed into the same 6-token k-major panels (packGemmXAvx2); each block of
// up to 32 weight rows is transposed into a k-major panel and a 6 x 32 tile (12 accumulators of 16
// floats; per value of k two row loads and six broadcasts feed twelve FMAs) runs over every panel
// of tokens, kGemmDepth values of k at a time. Each output is the same sum in the same order as
// the AVX2 tile's (one FMA per k, passes added in order), so both sets give the same bits.
// No std containers or out-of-line std templates here: see kernels_common.h.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = kGemmPanelTokens;
constexpr int64_t kRows = kGemmPanelRowsAvx512;
static_assert(kTokens == 6 && kRows == 32, "the register tile below is 6 tokens x 32 rows");

// The 6 x 32 tile over depth kc: x is a token panel at its first k (6 floats per k), w the rows'
// panel at the same k (32 floats per k). Adds the products to y (token t's 32 values at
// y + t * ldc) where `accumulate`, stores them otherwise; only the first `tokens` tokens and
// `rows` rows are written.
void tile(const float* x, const float* w, int64_t kc, float* y, int64_t ldc, int64_t tokens, int64_t rows,
          bool accumulate)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(),
           c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps(),
           c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps(),
           c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, x += kTokens, w += kRows) {
        const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
        __m512 a = _mm512_set1_ps(x[0]);
        c00 = _mm512_fmadd_ps(a, w0, c00);
        c01 = _mm512_fmadd_ps(a, w1, c01);
        a = _mm512_set1_ps(x[1]);
        c10 = _mm512_fmadd_ps(a, w0, c10);
        c11 = _mm512_fmadd_ps(a, w1, c11);
        a = _mm512_set1_ps(x[2]);
        c20 = _mm512_fmadd_ps(a, w0, c20);
        c21 = _mm512_fmadd_ps(a, w1, c21);
        a = _mm512_set1_ps(x[3]);
        c30 = _mm512_fmadd_ps(a, w0, c30);
        c31 = _mm512_fmadd_ps(a, w1, c31);
        a = _mm512_set1_ps(x[4]);
        c40 = _mm512_fmadd_ps(a, w0, c40);
        c41 = _mm512_fmadd_ps(a, w1, c41);
        a = _mm512_set1_ps(x[5]);
        c50 = _mm512_fmadd_ps(a, w0, c50);
        c51 = _mm512_fmadd_ps(a, w1, c51);
    }
    const __m512 c[kTokens][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    // Rows past `rows` are masked off (a block's last rows).
    const __mmask16 m0 = rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1);
    const __mmask16 m1 = rows >= 32 ? __mmask16(0xFFFF) : rows > 16 ? __mmask16((1u << (rows - 16)) - 1) : __mmask16(0);
    for (int64_t t = 0; t < tokens; ++t) {
        float* out = y + t * ldc;
        __m512 v0 = c[t][0], v1 = c[t][1];
        if (accumulate) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, out));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, out + 16));
        }
        _mm512_mask_storeu_ps(out, m0, v0);
        _mm512_mask_storeu_ps(out + 16, m1, v1);
    }
}

}  // namespace

void gemmRowsAvx512(const float* packedX, int64_t n, int64_t cols, const float* w, int64_t ldw, int64_t rows,
                    float* y, int64_t ldc, float* panel)
{
    // (A lambda, not the function pointer: one type per tile, so the call is direct and inlined.)
    gemmRowsWith<kRows, kTokens, kGemmDepth>([](auto... a) { tile(a...); }, packedX, n, cols, w, ldw, rows, y, ldc,
                                             panel);
}

}  // namespace spillway::gpu::cpu
