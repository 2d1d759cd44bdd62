#pragma once
// Q8_0 / Q4_0 matvec row kernels for AVX2-class CPUs: the hot spot of decoding quantized models.
// Included only by kernels_avx2.cpp and kernels_avx512.cpp; each instantiates these templates
// with its own integer dot-product policy (`Isa`) and its own compiler flags. Everything has
// internal linkage (see kernels_common.h for why).
//
// Per 32-value block and row: one 32-byte load of the weights, an integer dot product with the
// Q8 quantization of x (shared by the rows handled together), and one float FMA with the
// product of the two block scales; rows are taken four at a time so that x is loaded once.
//
// Isa provides:
//   static __m256i dotI8(__m256i w, __m256i x);   // 8 x int32: sums of 4 products w_i * x_i,
//                                                 // w any int8, x in [-127, 127]
//   static __m256i dotU8I8(__m256i u, __m256i x); // same with u in [0, 15] unsigned

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float fp16Scalar(const uint8_t* p) { return _cvtsh_ss(loadU16(p)); }

// x -> Q8 blocks, bit-identical with the scalar version (same float operations per value).
static inline void quantizeQ8X86(const float* x, int64_t n, int8_t* qs, float* d, float* sum8)
{
    const __m256 signMask = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / kQ8Block; ++b) {
        const float* xb = x + b * kQ8Block;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signMask, v0),
                                               _mm256_andnot_ps(signMask, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(signMask, v2),
                                               _mm256_andnot_ps(signMask, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);

        const float scale = amax / 127.0f;
        const __m256 inverse = _mm256_set1_ps(q8Inverse(scale));
        const float stored = _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT));
        constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, inverse), kRound));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, inverse), kRound));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, inverse), kRound));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, inverse), kRound));

        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));

        // Pack 4 x 8 int32 to 32 int8; the packs interleave 128-bit lanes, the permute undoes it.
        const __m256i p01 = _mm256_packs_epi32(i0, i1);
        const __m256i p23 = _mm256_packs_epi32(i2, i3);
        const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
        _mm256_store_si256(reinterpret_cast<__m256i*>(qs + b * kQ8Block), packed);
        d[b] = stored;
        sum8[b] = q8Sum8(stored, _mm_cvtsi128_si32(s4));
    }
}

// ---- Q8_0: blocks of (fp16 d, 32 x int8) = 34 bytes -------------------------------------------

template <class Isa, int R>
static inline void q8_0Rows(const uint8_t* const* rows, const QuantizedX& q, int64_t blocks,
                            float* out)
{
    __m256 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
        const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32));
        const float dx = q.d[b];
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const uint8_t* block = rows[j] + b * 34;
            const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
            const __m256 sum = _mm256_cvtepi32_ps(Isa::dotI8(wq, xq));
            acc[j] = _mm256_fmadd_ps(sum, _mm256_set1_ps(fp16Scalar(block) * dx), acc[j]);
        }
    }
    for (int j = 0; j < R; ++j) out[j] = hsum256(acc[j]);
}

template <class Isa>
static void matvecQ8_0X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const int64_t blocks = w.cols / kQ8Block;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const uint8_t* rows[4] = {rowPointer(w, r), rowPointer(w, r + 1), rowPointer(w, r + 2),
                                  rowPointer(w, r + 3)};
        q8_0Rows<Isa, 4>(rows, in.q, blocks, y + r);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        q8_0Rows<Isa, 1>(rows, in.q, blocks, y + r);
    }
}

// ---- Q4_0: blocks of (fp16 d, 16 bytes of nibbles) = 18 bytes ----------------------------------
// sum_i (n_i - 8) x_i = sum_i n_i x_i - 8 sum_i x_i: the nibbles go into the dot product
// unsigned, and the second term comes precomputed per block of x (QuantizedX::sum8).

template <class Isa, int R>
static inline void q4_0Rows(const uint8_t* const* rows, const QuantizedX& q, int64_t blocks,
                            float* out)
{
    const __m256i lowNibbles = _mm256_set1_epi8(0x0f);
    __m256 acc[R];
    float correction[R];
    for (int j = 0; j < R; ++j) {
        acc[j] = _mm256_setzero_ps();
        correction[j] = 0.0f;
    }
    for (int64_t b = 0; b < blocks; ++b) {
        const __m256i xq = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32));
        const float dx = q.d[b];
        const float sum8 = q.sum8[b];
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            const uint8_t* block = rows[j] + b * 18;
            const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
            // Low nibbles are values 0..15, high nibbles values 16..31.
            const __m256i nibbles =
                _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), lowNibbles);
            const __m256 sum = _mm256_cvtepi32_ps(Isa::dotU8I8(nibbles, xq));
            const float dw = fp16Scalar(block);
            acc[j] = _mm256_fmadd_ps(sum, _mm256_set1_ps(dw * dx), acc[j]);
            correction[j] += dw * sum8;
        }
    }
    for (int j = 0; j < R; ++j) out[j] = hsum256(acc[j]) - correction[j];
}

template <class Isa>
static void matvecQ4_0X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const int64_t blocks = w.cols / kQ8Block;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const uint8_t* rows[4] = {rowPointer(w, r), rowPointer(w, r + 1), rowPointer(w, r + 2),
                                  rowPointer(w, r + 3)};
        q4_0Rows<Isa, 4>(rows, in.q, blocks, y + r);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        q4_0Rows<Isa, 1>(rows, in.q, blocks, y + r);
    }
}

}  // namespace spillway::gpu::cpu
