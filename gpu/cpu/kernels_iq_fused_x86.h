#pragma once
// Fused matvec rows of Q2_K, Q3_K, IQ4_XS (x in Q8_K) and Q5_1, IQ4_NL, MXFP4 (x in Q8 blocks of
// 32) for the AVX2 and AVX-512 sets: each block decoded straight into 256-bit registers (bit
// shuffles, vpshufb level tables) instead of iq_expand.h's scalar expansion. Included only by
// kernels_iq_avx2.cpp and kernels_iq_avx512.cpp, which compile it with their own flags and Isa
// (kernels_iq_lattice_x86.h has the IQ lattice types); everything has internal linkage.
//
// Bits: the integer sums are exact, so each super-block gives the int32 sum_g scale_g (v . x)_g
// of iq_expand.h's expansion (however it is regrouped: offsets and deltas come back through the
// 16-value sums of x), and the float operations are matvecExpanded256 / matvecExpanded32's, in
// their order: the same bits as the scalar set.
//
// Isa provides, on 256-bit vectors:
//   __m256i madd16(__m256i acc, __m256i a, __m256i b);   // acc + sums of adjacent int16 a * b
//   __m256i negate(__m256i x, uint32_t bits);            // byte j of x negated where bit j is set
//   __m256i bitBytes(uint32_t bits, char value);         // byte j = value where bit j is set, else 0
//   __m256i pairScales(__m256i s16, int c);              // [s16[2c] x 8 | s16[2c + 1] x 8] (int16)

#include <immintrin.h>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/iq_blocks.h"
#include "gpu/cpu/kernels_common.h"
#include "gpu/cpu/kernels_x86_quant.h"  // prefetchLine, kPrefetchAhead

namespace spillway::gpu::cpu {

static inline __m256i iqLoad256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline __m128i iqLoad128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
static inline uint64_t iqLoadU64(const void* p)
{
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

static inline int32_t iqHsum(__m256i a)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

// Byte i is 0xff where bit i of `bits` is set, else 0 (AVX2).
static inline __m256i iqBytesFromBits(uint32_t bits)
{
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

// Signed a . b products in int16 pairs: |a| unsigned times b with a's sign (|a| <= 127 or b's
// values within +-127: no saturation).
static inline __m256i iqSignedPairs(__m256i a, __m256i b)
{
    return _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
}

// int32 lanes s -> (s & 0xffff) | s << 16: permutevar8x32 of one lane then splats s to 16 int16.
static inline __m256i iqPairUp(__m256i s)
{
    return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s, 16));
}

static inline __m256i iqLane(__m256i v, int c) { return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(c)); }

// Prefetches the block `bytes` long at `block` + kPrefetchAhead (every cache line it touches).
template <int kBytes>
static inline void iqPrefetch(const uint8_t* block)
{
    const uint8_t* p = block + kPrefetchAhead;
#pragma GCC unroll 4
    for (int o = 0; o < kBytes; o += 64) prefetchLine(p + o);
    if (kBytes % 64 != 0) prefetchLine(p + kBytes - 1);
}

// ---- the row loop of the 256-value types ------------------------------------------------------
// T::sums(block, xq, bsums) gives the int32 sum (and, kHasMin, msum) of one super-block; the float
// part is matvecExpanded256's.

struct IqSums {
    __m256i sum = _mm256_setzero_si256(), msum = _mm256_setzero_si256();  // 8 int32 lanes each
};

// [sum v0, ..., sum v7] of 8 vectors of 8 int32.
static inline __m256i iqSum8x8(const __m256i* v)
{
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// v, materialized: vector products through here are not contracted into FMAs (GCC's intrinsics
// are plain vector arithmetic), as rounded() for scalars.
static inline __m256 roundedPs(__m256 v)
{
    __asm__("" : "+x"(v));
    return v;
}

template <class Isa, class T>
static void matvecFused256(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / 256;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 lanes = _mm256_setzero_ps();
        int64_t b = 0;
        // 8 super-blocks at a time: their sums reduced together and the float products of all 8
        // in one vector (each lane matvecExpanded256's operations), added to the lanes
        // (laneTree8's order).
        for (; b + 8 <= blocks; b += 8) {
            __m256i sums[8], msums[8];
            alignas(32) float D[8], Dmin[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                const uint8_t* block = row + (b + k) * T::kBytes;
                iqPrefetch<T::kBytes>(block);
                const IqSums s = T::template sums<Isa>(block, in.k.qs + (b + k) * 256, in.k.bsums + (b + k) * 16);
                sums[k] = s.sum;
                msums[k] = s.msum;
                D[k] = T::scale(block, fp16);
                if constexpr (T::kHasMin) Dmin[k] = T::minScale(block, fp16);
            }
            const __m256 dx = _mm256_loadu_ps(in.k.d + b);
            __m256 term = roundedPs(_mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(D), dx), _mm256_cvtepi32_ps(iqSum8x8(sums))));
            if constexpr (T::kHasMin)
                term = _mm256_sub_ps(term, roundedPs(_mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(Dmin), dx),
                                                                   _mm256_cvtepi32_ps(iqSum8x8(msums)))));
            lanes = _mm256_add_ps(lanes, term);
        }
        alignas(32) float lane[8];
        _mm256_store_ps(lane, lanes);
        float acc = laneTree8(lane);
        for (; b < blocks; ++b) {
            const uint8_t* block = row + b * T::kBytes;
            const IqSums s = T::template sums<Isa>(block, in.k.qs + b * 256, in.k.bsums + b * 16);
            const float dx = in.k.d[b];
            const float D = T::scale(block, fp16);
            float term = rounded((D * dx) * static_cast<float>(iqHsum(s.sum)));
            if constexpr (T::kHasMin) {
                const float Dmin = T::minScale(block, fp16);
                term -= rounded((Dmin * dx) * static_cast<float>(iqHsum(s.msum)));
            }
            acc += term;
        }
        y[r] = acc;
    }
}

// ---- Q2_K -------------------------------------------------------------------------------------
// Chunk c = 4 h + j (values 32 c .. 32 c + 31) is bits 2j, 2j + 1 of the 32 bytes at 16 + 32 h;
// scales and mins are the nibbles of the 16 bytes at 0, the min term one madd with bsums.

struct FusedQ2_K {
    static constexpr int kBytes = 84;
    static constexpr bool kHasMin = true;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b + 80)]; }
    static float minScale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b + 82)]; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        const __m128i sm = iqLoad128(b), low4 = _mm_set1_epi8(0x0f);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, low4));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low4));
        const __m256i three = _mm256_set1_epi8(3);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i q = iqLoad256(b + 16 + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * h + j;
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
                const __m256i p = _mm256_maddubs_epi16(u, iqLoad256(xq + 32 * c));
                if (j % 2 == 0) acc0 = Isa::madd16(acc0, p, Isa::pairScales(sc16, c));
                else acc1 = Isa::madd16(acc1, p, Isa::pairScales(sc16, c));
            }
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        s.msum = _mm256_madd_epi16(mn16, iqLoad256(bsums));
        return s;
    }
};

// ---- Q3_K -------------------------------------------------------------------------------------
// u = q | 4 h (0..7) unsigned, v = u - 4: sum = sum_g s_g (u . x)_g - 4 sum_g s_g bsum_g.

struct FusedQ3_K {
    static constexpr int kBytes = 110;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b + 108)]; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    // The 16 scales - 32 as int16 (q3Scales with 32-bit word operations).
    static __m256i scales16(const uint8_t* s)
    {
        const uint32_t w0 = loadU32(s), w1 = loadU32(s + 4), w2 = loadU32(s + 8);
        const uint32_t s0 = (w0 & 0x0f0f0f0fu) | ((w2 << 4) & 0x30303030u);
        const uint32_t s1 = (w1 & 0x0f0f0f0fu) | ((w2 << 2) & 0x30303030u);
        const uint32_t s2 = ((w0 >> 4) & 0x0f0f0f0fu) | (w2 & 0x30303030u);
        const uint32_t s3 = ((w1 >> 4) & 0x0f0f0f0fu) | ((w2 >> 2) & 0x30303030u);
        const __m128i bytes = _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2),
                                             static_cast<int>(s3));
        return _mm256_cvtepi8_epi16(_mm_sub_epi8(bytes, _mm_set1_epi8(32)));
    }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        const __m256i s16 = scales16(b + 96);
        const __m256i hm = iqLoad256(b);
        const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i q = iqLoad256(b + 32 + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * h + j;
                // bit c of each hmask byte moved to bit 2
                const __m256i hs = c >= 2 ? _mm256_srli_epi16(hm, c - 2) : _mm256_slli_epi16(hm, 2 - c);
                const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three),
                                                  _mm256_and_si256(hs, four));
                const __m256i p = _mm256_maddubs_epi16(u, iqLoad256(xq + 32 * c));
                if (j % 2 == 0) acc0 = Isa::madd16(acc0, p, Isa::pairScales(s16, c));
                else acc1 = Isa::madd16(acc1, p, Isa::pairScales(s16, c));
            }
        }
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(s16, iqLoad256(bsums)), 2);
        IqSums s;
        s.sum = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), offset);
        return s;
    }
};

// ---- IQ4_XS -----------------------------------------------------------------------------------
// Each sub-block's 16 bytes of nibbles -> 32 levels by vpshufb; the 8 6-bit scales in one vector.

static inline __m256i iqNibbles32(const uint8_t* p)
{
    const __m128i raw = iqLoad128(p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

static inline __m256i iqTable16(const int8_t* t) { return _mm256_broadcastsi128_si256(iqLoad128(t)); }

// The 8 scales - 32 of an IQ4_XS super-block (int32, one per 32 values).
static inline __m256i iq4xsScales(const uint8_t* b)
{
    const __m256i low = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(loadU32(b + 4))),
                                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i high = _mm256_srlv_epi32(_mm256_set1_epi32(loadU16(b + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(0xf)),
                                            _mm256_slli_epi32(_mm256_and_si256(high, _mm256_set1_epi32(3)), 4)),
                            _mm256_set1_epi32(32));
}

struct FusedIQ4_XS {
    static constexpr int kBytes = 136;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)]; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        const __m256i scales = iqPairUp(iq4xsScales(b));
        const __m256i table = iqTable16(kIq4nlValues);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const __m256i v = _mm256_shuffle_epi8(table, iqNibbles32(b + 8 + 16 * ib));
            const __m256i p = iqSignedPairs(v, iqLoad256(xq + 32 * ib));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, iqLane(scales, ib));
            else acc1 = Isa::madd16(acc1, p, iqLane(scales, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// ---- blocks of 32: Q5_1, IQ4_NL, MXFP4 --------------------------------------------------------
// T::dot(block, xq) gives 8 int32 summing to v . xq; 8 blocks are reduced together, the float
// part is matvecExpanded32's, block after block.

// The float term of one block of 32 with integer dot `dot` (matvecExpanded32's operations).
template <class T>
static inline float fused32Term(const uint8_t* block, int32_t dot, const QuantizedX& q, int64_t b, const float* fp16)
{
    const float D = T::scale(block, fp16);
    if constexpr (T::kHasMin) {
        const float M = fp16[loadU16(block + 2)];
        const float sum = M != 0.0f ? fp16[_cvtss_sh(q.sum8[b] * 0.125f, 0)] : 0.0f;  // = fp32ToFp16 (RNE)
        return rounded(static_cast<float>(dot) * (D * q.d[b])) + rounded(M * sum);
    } else {
        return rounded(static_cast<float>(dot) * (D * q.d[b])) + rounded(0.0f * 0.0f);
    }
}

template <class Isa, class T>
static void matvecFused32(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / 32;
    const QuantizedX& q = in.q;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        __m256 lanes = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 8 <= blocks; b += 8) {
            const uint8_t* block = row + b * T::kBytes;
            iqPrefetch<8 * T::kBytes>(block);
            __m256i dots[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) dots[k] = T::template dot<Isa>(block + k * T::kBytes, q.qs + (b + k) * 32);
            // matvecExpanded32's float operations, one lane per block, added to the lanes.
            alignas(32) float D[8], M[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                D[k] = T::scale(block + k * T::kBytes, fp16);
                if constexpr (T::kHasMin) M[k] = fp16[loadU16(block + k * T::kBytes + 2)];
            }
            const __m256 product = roundedPs(
                _mm256_mul_ps(_mm256_cvtepi32_ps(iqSum8x8(dots)), _mm256_mul_ps(_mm256_load_ps(D), _mm256_loadu_ps(q.d + b))));
            __m256 offset = _mm256_setzero_ps();  // rounded(0 * 0) where there is no M
            if constexpr (T::kHasMin) {
                // d_x sum(x) through fp16 (vcvtps2ph rounds to nearest even, as fp32ToFp16), 0 where M is 0.
                const __m256 sx = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(q.sum8 + b), _mm256_set1_ps(0.125f)), 0));
                const __m256 m = _mm256_load_ps(M);
                const __m256 sum = _mm256_and_ps(_mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_NEQ_UQ), sx);
                offset = roundedPs(_mm256_mul_ps(m, sum));
            }
            lanes = _mm256_add_ps(lanes, _mm256_add_ps(product, offset));
        }
        alignas(32) float lane[8];
        _mm256_store_ps(lane, lanes);
        float acc = laneTree8(lane);
        for (; b < blocks; ++b) {
            const uint8_t* block = row + b * T::kBytes;
            acc += fused32Term<T>(block, iqHsum(T::template dot<Isa>(block, q.qs + b * 32)), q, b, fp16);
        }
        y[r] = acc;
    }
}

struct FusedQ5_1 {
    static constexpr int kBytes = 24;
    static constexpr bool kHasMin = true;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)]; }
    template <class Isa>
    static __m256i dot(const uint8_t* b, const int8_t* xq)
    {
        const __m256i u = _mm256_or_si256(iqNibbles32(b + 8), Isa::bitBytes(loadU32(b + 4), 0x10));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(u, iqLoad256(xq)), _mm256_set1_epi16(1));
    }
};

struct FusedIQ4_NL {
    static constexpr int kBytes = 18;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)]; }
    template <class Isa>
    static __m256i dot(const uint8_t* b, const int8_t* xq)
    {
        const __m256i v = _mm256_shuffle_epi8(iqTable16(kIq4nlValues), iqNibbles32(b + 2));
        return _mm256_madd_epi16(iqSignedPairs(v, iqLoad256(xq)), _mm256_set1_epi16(1));
    }
};

// e8m0Half of every exponent byte (at compile time, as kIq1Offset).
struct E8m0Table {
    float v[256];
    constexpr E8m0Table() : v()
    {
        for (int e = 0; e < 256; ++e) v[e] = e8m0Half(static_cast<uint8_t>(e));
    }
};
inline constexpr E8m0Table kE8m0Table;

struct FusedMXFP4 {
    static constexpr int kBytes = 17;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float*) { return kE8m0Table.v[b[0]]; }
    template <class Isa>
    static __m256i dot(const uint8_t* b, const int8_t* xq)
    {
        const __m256i v = _mm256_shuffle_epi8(iqTable16(kMxfp4Values), iqNibbles32(b + 1));
        return _mm256_madd_epi16(iqSignedPairs(v, iqLoad256(xq)), _mm256_set1_epi16(1));
    }
};

template <class Isa>
static void fillIqFusedX86(Kernels& k)
{
    auto set = [&](DType t, MatvecRowsFn mv) { k.matvec[static_cast<int>(t)] = mv; };
    set(DType::Q2_K, matvecFused256<Isa, FusedQ2_K>);
    set(DType::Q3_K, matvecFused256<Isa, FusedQ3_K>);
    set(DType::IQ4_XS, matvecFused256<Isa, FusedIQ4_XS>);
    set(DType::Q5_1, matvecFused32<Isa, FusedQ5_1>);
    set(DType::IQ4_NL, matvecFused32<Isa, FusedIQ4_NL>);
    set(DType::MXFP4, matvecFused32<Isa, FusedMXFP4>);
}

}  // namespace spillway::gpu::cpu
