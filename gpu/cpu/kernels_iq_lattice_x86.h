#pragma once
// Fused matvec rows of the IQ lattice types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M; x in Q8_K) for the AVX2 and AVX-512 sets, on kernels_iq_fused_x86.h's row loop and Isa.
// Per super-block, the sign words, scales and grid indices of all 8 sub-blocks are unpacked with
// a few vector operations; per sub-block of 32, the grid entries are 4 (IQ3: 8) scalar loads into
// one vector of unsigned values, x is negated where the signs say (Isa::negate), and the int16
// pair sums are madd'ed with the sub-block's scales. IQ1: the delta's sign joins the grid index
// into a table of 8 g + delta + 9 (unsigned), the + 9 taken back through the 16-value sums of x.
// Same int32 sums as iq_expand.h's expansion, the same float operations: the same bits.

#include "gpu/cpu/kernels_iq_fused_x86.h"

namespace spillway::gpu::cpu {

// 8 lanes of 4 x 7 sign bits (at bits 0, 7, 14, 21) -> 4 bytes each, bit 7 of a byte the parity
// of its 7 (iqSigns).
static inline __m256i iqSigns7x4(__m256i a)
{
    const __m256i m7 = _mm256_set1_epi32(0x7f);
    __m256i f = _mm256_and_si256(a, m7);
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a, 7), m7), 8));
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a, 14), m7), 16));
    f = _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a, 21), m7), 24));
    // Bit 0 of each byte becomes the parity of the byte's bits (bits from the next byte only
    // reach bits 4..7 and are not read back).
    __m256i p = _mm256_xor_si256(f, _mm256_srli_epi32(f, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    return _mm256_or_si256(f, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(0x01010101)), 7));
}

// Makes the compiler read `words` back from memory (a mask register loads straight from there)
// rather than pull each word out of the vector it was stored from (two or three instructions).
template <class W>
static inline void iqFromMemory(W& words)
{
    __asm__("" : "+m"(words));
}

// 32 bytes of 7 sign bits each -> with bit 7 their parity.
static inline __m256i iqSigns7Bytes(__m256i f)
{
    __m256i p = _mm256_xor_si256(f, _mm256_srli_epi16(f, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 1));
    return _mm256_or_si256(f, _mm256_slli_epi16(_mm256_and_si256(p, _mm256_set1_epi8(1)), 7));
}

// Grid entries straight from memory into the vector (no round trip through general registers).
static inline __m128i iqGridPair(const uint64_t* grid, int i0, int i1)
{
    const __m128d lo = _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(grid + i0)));
    return _mm_castpd_si128(_mm_loadh_pd(lo, reinterpret_cast<const double*>(grid + i1)));
}

static inline __m256i iqGrid64(const uint64_t* grid, int i0, int i1, int i2, int i3)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(iqGridPair(grid, i0, i1)), iqGridPair(grid, i2, i3), 1);
}

#ifdef SPILLWAY_IQ_GATHER_GRID32  // slower than scalar loads on Zen 5 (31 vs 17 ns per 256 IQ3_XXS values)
// 8 4-byte grid entries by one gather (indices: 8 bytes, or 8 uint16).
static inline __m256i iqGrid32(const uint32_t* grid, const uint8_t* i)
{
    const __m256i index = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(i)));
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(grid), index, 4);
}
static inline __m256i iqGrid32(const uint32_t* grid, const uint16_t* i)
{
    const __m256i index = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i)));
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(grid), index, 4);
}
#else
template <class I>
static inline __m256i iqGrid32(const uint32_t* grid, const I* i)
{
    return _mm256_setr_epi32(static_cast<int>(grid[i[0]]), static_cast<int>(grid[i[1]]), static_cast<int>(grid[i[2]]),
                             static_cast<int>(grid[i[3]]), static_cast<int>(grid[i[4]]), static_cast<int>(grid[i[5]]),
                             static_cast<int>(grid[i[6]]), static_cast<int>(grid[i[7]]));
}
#endif

// 8 odd-numbered or 4-byte words of 64 bytes in order (IQ2_XXS's sign words: dwords 1, 3, .., 15).
static inline __m256i iqOddWords(const uint8_t* p)
{
    const __m256 lo = _mm256_castsi256_ps(iqLoad256(p)), hi = _mm256_castsi256_ps(iqLoad256(p + 32));
    const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permute4x64_epi64(odd, _MM_SHUFFLE(3, 1, 2, 0));
}

// The scales 2 s + 1 of 16 groups from 8 bytes of two nibbles (group 2i low, 2i + 1 high), int16.
static inline __m256i iqNibbleScales16(const uint8_t* p)
{
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), low4 = _mm_set1_epi8(0x0f);
    const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(raw, low4), _mm_and_si128(_mm_srli_epi16(raw, 4), low4));
    return _mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1)));
}

// ---- the indices, signs and scales of a super-block, shared with the prompt product's unpacking
// (int8_unpack_x86.h) -----------------------------------------------------------------------------

// IQ2_XXS / IQ3_XXS: 8 words of 4 x 7 signs and a 4-bit scale s -> the 8 sign words (bit j for
// value j of the 32) and the scales 2 s + 1 (int32, one per 32 values).
static inline void iqAuxSignsScales(__m256i aux, uint32_t signs[8], __m256i& scales)
{
    _mm256_store_si256(reinterpret_cast<__m256i*>(signs), iqSigns7x4(aux));
    scales = _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
}

// IQ2_XS: the 32 9-bit grid indices and the 8 sign words.
static inline void iq2xsIndicesSigns(const uint8_t* b, uint16_t idx[32], uint32_t signs[8])
{
    const __m256i q0 = iqLoad256(b + 2), q1 = iqLoad256(b + 34);
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx), _mm256_and_si256(q0, _mm256_set1_epi16(511)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16), _mm256_and_si256(q1, _mm256_set1_epi16(511)));
    const __m256i s7 = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_store_si256(reinterpret_cast<__m256i*>(signs), iqSigns7Bytes(s7));
}

// IQ2_S: the 32 10-bit grid indices, k = 4 ib + l: qs[k] | ((qh[ib] << (8 - 2 l)) & 0x300).
static inline void iq2sIndices(const uint8_t* b, uint16_t idx[32])
{
    const __m128i qh = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 66));
    const __m256i shifts = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    const __m256i high0 = _mm256_mullo_epi16(
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(qh, _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3))), shifts);
    const __m256i high1 = _mm256_mullo_epi16(
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(qh, _mm_setr_epi8(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7))), shifts);
    const __m256i m = _mm256_set1_epi16(0x300);
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx),
                       _mm256_or_si256(_mm256_cvtepu8_epi16(iqLoad128(b + 2)), _mm256_and_si256(high0, m)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16),
                       _mm256_or_si256(_mm256_cvtepu8_epi16(iqLoad128(b + 18)), _mm256_and_si256(high1, m)));
}

// IQ3_S: the 64 9-bit grid indices, k = qs[k] | bit k % 8 of qh[k / 8] << 8, and the scales
// 1 + 2 s (nibble ib % 2 of byte 106 + ib / 2; int32, one per 32 values).
static inline void iq3sIndices(const uint8_t* b, uint16_t idx[64])
{
    const __m128i qh = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 66));
    const __m256i bitsel = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {  // indices 16 v .. 16 v + 15: qh bytes 2 v, 2 v + 1
        const char lo = char(2 * v), hi = char(2 * v + 1);
        const __m256i h = _mm256_cvtepu8_epi16(
            _mm_shuffle_epi8(qh, _mm_setr_epi8(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi)));
        const __m256i bit8 = _mm256_and_si256(_mm256_cmpeq_epi16(_mm256_and_si256(h, bitsel), bitsel), _mm256_set1_epi16(256));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16 * v),
                           _mm256_or_si256(_mm256_cvtepu8_epi16(iqLoad128(b + 2 + 16 * v)), bit8));
    }
}
static inline __m256i iq3sScales(const uint8_t* b)
{
    const __m256i sc = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(loadU32(b + 106))), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xf));
    return _mm256_add_epi32(_mm256_add_epi32(sc, sc), _mm256_set1_epi32(1));
}

// ---- IQ2_XXS: per 32 values 4 grid bytes and a word of 4 x 7 signs and a 4-bit scale ----------

struct FusedIQ2_XXS {
    static constexpr int kBytes = 66;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)] * 0.125f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        alignas(32) uint32_t signs[8];
        __m256i s32;
        iqAuxSignsScales(iqOddWords(b + 2), signs, s32);
        iqFromMemory(signs);
        const __m256i scales = iqPairUp(s32);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t* idx = b + 2 + 8 * ib;
            const __m256i u = iqGrid64(kIq2xxsGrid, idx[0], idx[1], idx[2], idx[3]);
            const __m256i p = _mm256_maddubs_epi16(u, Isa::negate(iqLoad256(xq + 32 * ib), signs[ib]));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, iqLane(scales, ib));
            else acc1 = Isa::madd16(acc1, p, iqLane(scales, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// ---- IQ2_XS: 32 words of a 9-bit index and 7 signs; scales per 16 values ----------------------

struct FusedIQ2_XS {
    static constexpr int kBytes = 74;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)] * 0.125f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        alignas(32) uint16_t idx[32];
        alignas(32) uint32_t signs[8];
        iq2xsIndicesSigns(b, idx, signs);
        iqFromMemory(signs);
        const __m256i s16 = iqNibbleScales16(b + 66);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t* i = idx + 4 * ib;
            const __m256i u = iqGrid64(kIq2xsGrid, i[0], i[1], i[2], i[3]);
            const __m256i p = _mm256_maddubs_epi16(u, Isa::negate(iqLoad256(xq + 32 * ib), signs[ib]));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, Isa::pairScales(s16, ib));
            else acc1 = Isa::madd16(acc1, p, Isa::pairScales(s16, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// ---- IQ2_S: index low bytes, 8-bit signs, index bits 8-9 per 32 values, scales per 16 ----------

struct FusedIQ2_S {
    static constexpr int kBytes = 82;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)] * 0.125f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        alignas(32) uint16_t idx[32];
        iq2sIndices(b, idx);
        const __m256i s16 = iqNibbleScales16(b + 74);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t* i = idx + 4 * ib;
            const __m256i u = iqGrid64(kIq2sGrid, i[0], i[1], i[2], i[3]);
            const __m256i p = _mm256_maddubs_epi16(u, Isa::negate(iqLoad256(xq + 32 * ib), loadU32(b + 34 + 4 * ib)));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, Isa::pairScales(s16, ib));
            else acc1 = Isa::madd16(acc1, p, Isa::pairScales(s16, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// ---- IQ3_XXS: 8 index bytes per 32 values, 8 words of 4 x 7 signs and a scale ------------------

struct FusedIQ3_XXS {
    static constexpr int kBytes = 98;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)] * 0.25f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        alignas(32) uint32_t signs[8];
        __m256i s32;
        iqAuxSignsScales(iqLoad256(b + 66), signs, s32);
        iqFromMemory(signs);
        const __m256i scales = iqPairUp(s32);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const __m256i u = iqGrid32(kIq3xxsGrid, b + 2 + 8 * ib);
            const __m256i p = _mm256_maddubs_epi16(u, Isa::negate(iqLoad256(xq + 32 * ib), signs[ib]));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, iqLane(scales, ib));
            else acc1 = Isa::madd16(acc1, p, iqLane(scales, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// ---- IQ3_S: 8 index bytes + bit 8 per 32 values, 8-bit signs, 4-bit scales ---------------------

struct FusedIQ3_S {
    static constexpr int kBytes = 110;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)]; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t*)
    {
        alignas(32) uint16_t idx[64];
        iq3sIndices(b, idx);
        const __m256i scales = iqPairUp(iq3sScales(b));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const __m256i u = iqGrid32(kIq3sGrid, idx + 8 * ib);
            const __m256i p = _mm256_maddubs_epi16(u, Isa::negate(iqLoad256(xq + 32 * ib), loadU32(b + 74 + 4 * ib)));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, iqLane(scales, ib));
            else acc1 = Isa::madd16(acc1, p, iqLane(scales, ib));
        }
        IqSums s;
        s.sum = _mm256_add_epi32(acc0, acc1);
        return s;
    }
};

// IQ1 values with their delta, offset to be unsigned: entry i (a grid index and, at bit 11, the
// delta's sign) holds 8 g + delta + 9 (0..18) per byte for grid entry i % 2048, delta -1 where
// bit 11 is set, else +1. The + 9 comes back as 9 sum_g scale_g bsum_g.
// Built at compile time: a constructor run at start-up would be compiled with the file's wider
// instruction set (AVX-512 for kernels_iq_avx512.cpp) and run on every CPU.
struct Iq1Offset {
    uint64_t v[4096];
    constexpr Iq1Offset() : v()
    {
        for (int i = 0; i < 4096; ++i) {
            uint64_t e = 0;
            for (int j = 0; j < 8; ++j)
                e |= uint64_t(8 * gridByte(kIq1sGrid[i % 2048], j) + (i >= 2048 ? -1 : 1) + 9) << (8 * j);
            v[i] = e;
        }
    }
};
inline constexpr Iq1Offset kIq1Offset;

// IQ1_S: the 32 grid indices into kIq1Offset, k = 4 ib + l: qs[k] | ((qh[ib] >> 3 l) & 7) << 8 |
// (qh[ib] >> 15) << 11, and the scales 2 s + 1 (int32, one per 32 values).
static inline void iq1sIndices(const uint8_t* b, uint16_t idx[32])
{
    const __m128i qh = iqLoad128(b + 34);  // 8 x u16
    const __m256i mulLow = _mm256_setr_epi16(256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0);
    const __m256i mulHigh = _mm256_setr_epi16(0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768);
    const __m256i m = _mm256_set1_epi16(0x700), sign = _mm256_set1_epi16(0x800);
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
        const char a = char(8 * v), c = char(8 * v + 1), e = char(8 * v + 2), g = char(8 * v + 3);
        const __m128i spread = _mm_setr_epi8(a, c, a, c, a, c, a, c, e, g, e, g, e, g, e, g);
        const __m128i spread2 = _mm_add_epi8(spread, _mm_set1_epi8(4));
        const __m256i w = _mm256_set_m128i(_mm_shuffle_epi8(qh, spread2), _mm_shuffle_epi8(qh, spread));
        const __m256i high = _mm256_or_si256(_mm256_mullo_epi16(w, mulLow), _mm256_mulhi_epu16(w, mulHigh));
        const __m256i bits = _mm256_or_si256(_mm256_and_si256(high, m), _mm256_and_si256(_mm256_srli_epi16(w, 4), sign));
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16 * v),
                           _mm256_or_si256(_mm256_cvtepu8_epi16(iqLoad128(b + 2 + 16 * v)), bits));
    }
}
static inline __m256i iq1sScales(const uint8_t* b)
{
    const __m256i q32 = _mm256_cvtepu16_epi32(iqLoad128(b + 34));
    return _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(q32, 12), _mm256_set1_epi32(7)), 1),
                            _mm256_set1_epi32(1));
}

// IQ1_M: the 32 grid indices into kIq1Offset, k: qs[k] | (qh[k / 2] << (k even ? 8 : 4)) & 0xf00
// (bit 11: the delta's sign), and the scales of the 16 groups, 2 s + 1 with s = (word k / 4 >>
// 3 (k % 4)) & 7 (int16).
static inline void iq1mIndices(const uint8_t* b, uint16_t idx[32])
{
    const __m128i qh = iqLoad128(b + 32);  // 16 bytes, 2 per 32 values
    const __m256i mul = _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16);
    const __m256i m = _mm256_set1_epi16(0xf00);
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
        const char c0 = char(8 * v);
        const __m128i spread = _mm_setr_epi8(c0, c0, char(c0 + 1), char(c0 + 1), char(c0 + 2), char(c0 + 2), char(c0 + 3),
                                             char(c0 + 3), char(c0 + 4), char(c0 + 4), char(c0 + 5), char(c0 + 5),
                                             char(c0 + 6), char(c0 + 6), char(c0 + 7), char(c0 + 7));
        const __m256i high = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(qh, spread)), mul);
        _mm256_store_si256(reinterpret_cast<__m256i*>(idx + 16 * v),
                           _mm256_or_si256(_mm256_cvtepu8_epi16(iqLoad128(b + 16 * v)), _mm256_and_si256(high, m)));
    }
}
static inline __m256i iq1mScales16(const uint8_t* b)
{
    const __m128i words = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 48));
    const __m256i wv = _mm256_set_m128i(
        _mm_shuffle_epi8(words, _mm_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7)),
        _mm_shuffle_epi8(words, _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3)));
    const __m256i sh = _mm256_srli_epi16(
        _mm256_mullo_epi16(wv, _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1)), 9);
    const __m256i s7 = _mm256_and_si256(sh, _mm256_set1_epi16(7));
    return _mm256_add_epi16(_mm256_add_epi16(s7, s7), _mm256_set1_epi16(1));
}

// ---- IQ1_S: one delta and scale per 32 values; IQ1_M: deltas per 8, scales per 16 ------------
// Both read kIq1Offset (the delta's sign as bit 11 of the index): sum = sum_g s_g (u . x)_g -
// 9 sum_g s_g bsum_g.

struct FusedIQ1_S {
    static constexpr int kBytes = 50;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[loadU16(b)] * 0.125f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        alignas(32) uint16_t idx[32];
        iq1sIndices(b, idx);
        iqFromMemory(idx);
        const __m256i scales = iqPairUp(iq1sScales(b));
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t* i = idx + 4 * ib;
            const __m256i u = iqGrid64(kIq1Offset.v, i[0], i[1], i[2], i[3]);
            const __m256i p = _mm256_maddubs_epi16(u, iqLoad256(xq + 32 * ib));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, iqLane(scales, ib));
            else acc1 = Isa::madd16(acc1, p, iqLane(scales, ib));
        }
        const __m256i offset = _mm256_madd_epi16(scales, iqLoad256(bsums));
        IqSums r;
        r.sum = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_add_epi32(_mm256_slli_epi32(offset, 3), offset));
        return r;
    }
};

struct FusedIQ1_M {
    static constexpr int kBytes = 56;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return fp16[iq1mScaleBits(b)] * 0.125f; }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        alignas(32) uint16_t idx[32];
        iq1mIndices(b, idx);
        iqFromMemory(idx);
        const __m256i s16 = iq1mScales16(b);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ++ib) {
            const uint16_t* i = idx + 4 * ib;
            const __m256i u = iqGrid64(kIq1Offset.v, i[0], i[1], i[2], i[3]);
            const __m256i p = _mm256_maddubs_epi16(u, iqLoad256(xq + 32 * ib));
            if (ib % 2 == 0) acc0 = Isa::madd16(acc0, p, Isa::pairScales(s16, ib));
            else acc1 = Isa::madd16(acc1, p, Isa::pairScales(s16, ib));
        }
        const __m256i offset = _mm256_madd_epi16(s16, iqLoad256(bsums));
        IqSums r;
        r.sum = _mm256_sub_epi32(_mm256_add_epi32(acc0, acc1), _mm256_add_epi32(_mm256_slli_epi32(offset, 3), offset));
        return r;
    }
};

template <class Isa>
static void fillIqLatticeX86(Kernels& k)
{
    auto set = [&](DType t, MatvecRowsFn mv) { k.matvec[static_cast<int>(t)] = mv; };
    set(DType::IQ2_XXS, matvecFused256<Isa, FusedIQ2_XXS>);
    set(DType::IQ2_XS, matvecFused256<Isa, FusedIQ2_XS>);
    set(DType::IQ2_S, matvecFused256<Isa, FusedIQ2_S>);
    set(DType::IQ3_XXS, matvecFused256<Isa, FusedIQ3_XXS>);
    set(DType::IQ3_S, matvecFused256<Isa, FusedIQ3_S>);
    set(DType::IQ1_S, matvecFused256<Isa, FusedIQ1_S>);
    set(DType::IQ1_M, matvecFused256<Isa, FusedIQ1_M>);
}

}  // namespace spillway::gpu::cpu
