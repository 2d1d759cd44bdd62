// The prompt path's own float matrix product for AVX2 + FMA (compiled with -mavx2 -mfma -mf16c;
// chosen at run time only on CPUs that have them). No std containers or out-of-line std
// templates here: see kernels_common.h.
//
// Y[j, r] = sum_k X[j, k] W[r, k] for a prompt batch X (n tokens x cols) and a block of weight
// rows. X is packed once per product into panels of kGemmPanelTokens tokens, k-major
// (packGemmXAvx2), which every thread then shares; each block of up to kGemmPanelRows weight rows
// (dequantized to floats by the caller) is transposed into a k-major panel that stays in L1 while
// a 6 x 16 register tile (12 accumulators) runs over every panel of tokens, kGemmDepth values of
// k at a time. Against OpenBLAS's SGEMM called per block, nothing is packed twice: its packing
// of the whole batch for every block of rows was ~15 % of a prompt's time.

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/gemm_x86.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

namespace {

constexpr int64_t kTokens = kGemmPanelTokens;
constexpr int64_t kRows = kGemmPanelRows;
static_assert(kTokens == 6 && kRows == 16, "the register tile below is 6 tokens x 16 rows");

// The 6 x 16 tile over depth kc: x is a token panel at its first k (6 floats per k), w the rows'
// panel at the same k (16 floats per k). Adds the products to y (token t's 16 values at
// y + t * ldc) where `accumulate`, stores them otherwise; only the first `tokens` tokens and
// `rows` rows are written.
static void tile(const float* x, const float* w, int64_t kc, float* y, int64_t ldc, int64_t tokens,
                 int64_t rows, bool accumulate)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(),
           c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(),
           c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps(),
           c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, x += kTokens, w += kRows) {
        const __m256 w0 = _mm256_load_ps(w), w1 = _mm256_load_ps(w + 8);
        __m256 a = _mm256_broadcast_ss(x + 0);
        c00 = _mm256_fmadd_ps(a, w0, c00);
        c01 = _mm256_fmadd_ps(a, w1, c01);
        a = _mm256_broadcast_ss(x + 1);
        c10 = _mm256_fmadd_ps(a, w0, c10);
        c11 = _mm256_fmadd_ps(a, w1, c11);
        a = _mm256_broadcast_ss(x + 2);
        c20 = _mm256_fmadd_ps(a, w0, c20);
        c21 = _mm256_fmadd_ps(a, w1, c21);
        a = _mm256_broadcast_ss(x + 3);
        c30 = _mm256_fmadd_ps(a, w0, c30);
        c31 = _mm256_fmadd_ps(a, w1, c31);
        a = _mm256_broadcast_ss(x + 4);
        c40 = _mm256_fmadd_ps(a, w0, c40);
        c41 = _mm256_fmadd_ps(a, w1, c41);
        a = _mm256_broadcast_ss(x + 5);
        c50 = _mm256_fmadd_ps(a, w0, c50);
        c51 = _mm256_fmadd_ps(a, w1, c51);
    }
    const __m256 c[kTokens][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (rows == kRows) {
        for (int64_t t = 0; t < tokens; ++t) {
            float* out = y + t * ldc;
            __m256 v0 = c[t][0], v1 = c[t][1];
            if (accumulate) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(out));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(out + 8));
            }
            _mm256_storeu_ps(out, v0);
            _mm256_storeu_ps(out + 8, v1);
        }
        return;
    }
    alignas(32) float part[kRows];
    for (int64_t t = 0; t < tokens; ++t) {
        _mm256_store_ps(part, c[t][0]);
        _mm256_store_ps(part + 8, c[t][1]);
        float* out = y + t * ldc;
        for (int64_t i = 0; i < rows; ++i) out[i] = accumulate ? out[i] + part[i] : part[i];
    }
}

}  // namespace

void packGemmXAvx2(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0, int64_t p1,
                   float* packed)
{
    for (int64_t p = p0; p < p1; ++p) {
        float* out = packed + p * kTokens * cols;
        const int64_t t0 = p * kTokens;
        for (int64_t i = 0; i < kTokens; ++i) {
            const int64_t t = t0 + i;
            if (t < n) {
                const float* row = x + t * lda;
                for (int64_t k = 0; k < cols; ++k) out[k * kTokens + i] = row[k];
            } else {
                for (int64_t k = 0; k < cols; ++k) out[k * kTokens + i] = 0.0f;
            }
        }
    }
}

void gemmRowsAvx2(const float* packedX, int64_t n, int64_t cols, const float* w, int64_t ldw,
                  int64_t rows, float* y, int64_t ldc, float* panel)
{
    // (A lambda, not the function pointer: one type per tile, so the call is direct and inlined.)
    gemmRowsWith<kRows, kTokens, kGemmDepth>([](auto... a) { tile(a...); }, packedX, n, cols, w, ldw, rows, y, ldc,
                                             panel);
}

}  // namespace spillway::gpu::cpu
