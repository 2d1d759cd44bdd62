#pragma once
// The quantization of x and the Q8_0 / Q4_0 matvec row kernels for AVX2-class CPUs: the hot
// spot of decoding quantized models on CPUs without AVX-512 (that set has its own, in
// kernels_quant_avx512.cpp, and takes only the helpers and the quantization from here).
// Included only by kernels_avx2.cpp and kernels_avx512.cpp, which compile it with their own
// flags; everything has internal linkage (see kernels_common.h for why). The templates take the
// integer dot products from a policy (`Isa`), so a VNNI variant is one struct away.
//
// Isa provides integer dot products, 8 x int32 lanes each the sum of 4 adjacent products:
//   Q8Shared q8Shared(__m256i x);                 // per block of x, shared by the rows
//   __m256i q8Dot(__m256i w, const Q8Shared&);   // w any int8; x in [-127, 127]
//   Q4Shared q4Shared(__m256i xlo, __m256i xhi);  // per block pair of x, regrouped (see Q4_0)
//   __m256i q4Dot(__m256i lo, __m256i hi, const Q4Shared&);  // sum (lo xlo + hi xhi - 8 x)

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

// Bytes ahead of the block being read that the loops prefetch (see kernels_quant_avx512.cpp).
constexpr size_t kPrefetchAhead = 8192;

static inline void prefetchLine(const uint8_t* p)
{
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// ---- Q8_0: blocks of (fp16 d, 32 x int8) = 34 bytes -------------------------------------------
// One row at a time (rows are consecutive in memory: one sequential stream per thread, which the
// hardware prefetchers follow best), two accumulators to hide the FMA latency. Per block: load 32
// weight bytes, Isa::q8Dot, convert, times d_x, FMA with d_w broadcast from the fp16 table.

template <class Isa>
static inline __m256 q8_0Block(const uint8_t* block, const int8_t* xq, const float* dx,
                               const float* fp16, __m256 acc)
{
    prefetchLine(block + kPrefetchAhead + 33);  // block ends are 34 < 64 bytes apart
    const auto x = Isa::q8Shared(_mm256_load_si256(reinterpret_cast<const __m256i*>(xq)));
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    const __m256 sum =
        _mm256_mul_ps(_mm256_cvtepi32_ps(Isa::q8Dot(wq, x)), _mm256_broadcast_ss(dx));
    return _mm256_fmadd_ps(sum, _mm256_broadcast_ss(fp16 + loadU16(block)), acc);
}

template <class Isa>
static void matvecQ8_0X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 2 <= blocks; b += 2) {
            acc0 = q8_0Block<Isa>(row + b * 34, in.q.qs + b * 32, in.q.d + b, fp16, acc0);
            acc1 = q8_0Block<Isa>(row + b * 34 + 34, in.q.qs + b * 32 + 32, in.q.d + b + 1, fp16,
                                  acc1);
        }
        if (b < blocks)
            acc0 = q8_0Block<Isa>(row + b * 34, in.q.qs + b * 32, in.q.d + b, fp16, acc0);
        y[r] = hsum256(_mm256_add_ps(acc0, acc1));
    }
}

// ---- Q4_0: blocks of (fp16 d, 16 bytes of nibbles) = 18 bytes ----------------------------------
// Two blocks at a time: their 2 x 16 nibble bytes fill one 256-bit register; masking gives the
// low nibbles (values 0..15 of both blocks) and shifting the high ones (values 16..31). x is
// regrouped the same way once per block pair and shared by the rows. The nibbles enter the dot
// product unsigned; Isa subtracts 8 * sum(x) per lane (shared too). Result lanes 0..3 belong to
// the first block, lanes 4..7 to the second.

// Dot of one row's block pair (or one block with `second` = null and zero upper lanes).
template <class Isa>
static inline __m256 q4_0Pair(const uint8_t* first, const uint8_t* second,
                              const typename Isa::Q4Shared& x, __m256 dx, const float* fp16,
                              __m256 acc)
{
    const __m256i lowMask = _mm256_set1_epi8(0x0f);
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + 2));
    const __m256i bytes =
        second ? _mm256_inserti128_si256(
                     _mm256_castsi128_si256(a),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(second + 2)), 1)
               : _mm256_zextsi128_si256(a);
    const __m256i lo = _mm256_and_si256(bytes, lowMask);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), lowMask);
    const __m128 d0 = _mm_broadcast_ss(fp16 + loadU16(first));
    const __m128 d1 = second ? _mm_broadcast_ss(fp16 + loadU16(second)) : _mm_setzero_ps();
    const __m256 scale = _mm256_mul_ps(_mm256_set_m128(d1, d0), dx);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(Isa::q4Dot(lo, hi, x)), scale, acc);
}

template <class Isa, int R>
static inline void q4_0Rows(const uint8_t* const* rows, size_t ahead, const QuantizedX& q,
                            int64_t blocks, const float* fp16, float* out)
{
    // Every loop over j is unrolled, or GCC keeps acc[] in memory and stores it each block.
    __m256 acc[R];
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) acc[j] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
        const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32));
        const __m256i xb = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32 + 32));
        const auto x = Isa::q4Shared(_mm256_permute2x128_si256(xa, xb, 0x20),
                                     _mm256_permute2x128_si256(xa, xb, 0x31));
        const __m256 dx =
            _mm256_set_m128(_mm_broadcast_ss(q.d + b + 1), _mm_broadcast_ss(q.d + b));
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j) {
            // The same pair some row groups further on (36 < 64 bytes: every line).
            prefetchLine(rows[j] + b * 18 + ahead + 35);
            acc[j] = q4_0Pair<Isa>(rows[j] + b * 18, rows[j] + b * 18 + 18, x, dx, fp16, acc[j]);
        }
    }
    if (b < blocks) {  // an odd block count: the last block alone, upper lanes zero
        const __m256i xa = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.qs + b * 32));
        const auto x = Isa::q4Shared(_mm256_zextsi128_si256(_mm256_castsi256_si128(xa)),
                                     _mm256_zextsi128_si256(_mm256_extracti128_si256(xa, 1)));
        const __m256 dx = _mm256_zextps128_ps256(_mm_broadcast_ss(q.d + b));
#pragma GCC unroll 4
        for (int j = 0; j < R; ++j)
            acc[j] = q4_0Pair<Isa>(rows[j] + b * 18, nullptr, x, dx, fp16, acc[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < R; ++j) out[j] = hsum256(acc[j]);
}

template <class Isa>
static void matvecQ4_0X86(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                          int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / kQ8Block;
    // Four rows share each block of x; prefetch whole groups of 4 rows ahead, at least
    // kPrefetchAhead bytes.
    const size_t group = 4 * w.rowStride;
    const size_t ahead = group == 0 ? 0 : group * ((kPrefetchAhead + group - 1) / group);
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const uint8_t* rows[4] = {rowPointer(w, r), rowPointer(w, r + 1), rowPointer(w, r + 2),
                                  rowPointer(w, r + 3)};
        q4_0Rows<Isa, 4>(rows, ahead, in.q, blocks, fp16, y + r);
    }
    for (; r < r1; ++r) {
        const uint8_t* rows[1] = {rowPointer(w, r)};
        q4_0Rows<Isa, 1>(rows, w.rowStride, in.q, blocks, fp16, y + r);
    }
}

}  // namespace spillway::gpu::cpu
