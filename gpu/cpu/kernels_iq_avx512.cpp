// The AVX-512 set's row kernels of the types of iq_expand.h: fused kernels (kernels_iq_fused_x86.h,
// kernels_iq_lattice_x86.h) for every type, with VNNI's vpdpwssd and AVX-512 BW masks for signs;
// IQ4_XS, Q3_K and Q2_K on 512-bit vectors of their own (below).

#include "gpu/cpu/kernels_iq_fused_x86.h"
#include "gpu/cpu/kernels_iq_lattice_x86.h"

namespace spillway::gpu::cpu {

namespace {

struct Avx512IqIsa {
    static __m256i madd16(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
    static __m256i negate(__m256i x, uint32_t bits)
    {
        return _mm256_mask_sub_epi8(x, static_cast<__mmask32>(bits), _mm256_setzero_si256(), x);
    }
    static __m256i bitBytes(uint32_t bits, char value)
    {
        return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), _mm256_set1_epi8(value));
    }
    static __m256i pairScales(__m256i s16, int c)
    {
        const __m256i index = _mm256_setr_epi16(short(2 * c), short(2 * c), short(2 * c), short(2 * c), short(2 * c),
                                                short(2 * c), short(2 * c), short(2 * c), short(2 * c + 1), short(2 * c + 1),
                                                short(2 * c + 1), short(2 * c + 1), short(2 * c + 1), short(2 * c + 1),
                                                short(2 * c + 1), short(2 * c + 1));
        return _mm256_permutexvar_epi16(index, s16);
    }
};

// The sum of a vector's two 256-bit halves, int32 lanes.
static inline __m256i halvesAdded(__m512i v)
{
    return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(__mmask8(0xF), v, 0),
                            _mm512_maskz_extracti64x4_epi64(__mmask8(0xF), v, 1));
}

// IQ4_XS on 512-bit vectors, two sub-blocks of 32 at a time: the levels + 128 as unsigned bytes
// (one vpshufb of 64 nibbles), vpdpbusd against x's bytes (no pairs to saturate), each
// sub-block's int32 sums times its scale, the + 128 taken back as 128 sum_g scale_g bsum_g. The
// same int32 sum as FusedIQ4_XS (and iq_expand.h), half the instructions. (Masked forms of the
// intrinsics: GCC 12 warns about the unmasked ones' undefined pass-through.)
struct FusedIQ4_XS512 {
    static constexpr int kBytes = FusedIQ4_XS::kBytes;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return FusedIQ4_XS::scale(b, fp16); }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        const __m256i sc = iq4xsScales(b);  // int32, one per 32 values
        const __m512i table = _mm512_maskz_broadcast_i32x4(
            __mmask16(0xFFFF), 
            _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), _mm_set1_epi8(char(0x80))));
        const __m512i low4 = _mm512_set1_epi8(0x0f);
        // 128-bit lanes [qs(ib), qs(ib), qs(ib + 1), qs(ib + 1)], shifted by 0, 4, 0, 4: the low
        // nibbles (values 0..15), the high ones (16..31) of each sub-block.
        const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
        const __m512i scales = _mm512_castsi256_si512(sc);
        __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int ib = 0; ib < 8; ib += 2) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 + 16 * ib));
            const __m512i lanes =
                _mm512_maskz_permutexvar_epi64(__mmask8(0xFF), _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(raw));
            const __m512i u = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_maskz_srlv_epi64(__mmask8(0xFF), lanes, shifts), low4));
            const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xq + 32 * ib));
            // int32 lanes 0..7: sub-block ib's, 8..15: ib + 1's.
            const __m512i s = _mm512_maskz_permutexvar_epi32(
                __mmask16(0xFFFF),
                _mm512_setr_epi32(ib, ib, ib, ib, ib, ib, ib, ib, ib + 1, ib + 1, ib + 1, ib + 1, ib + 1, ib + 1, ib + 1, ib + 1),
                scales);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(dot, s));
        }
        // 128 sum_g scale_g bsum_g: the scales as int16 pairs (one per 16 values) against bsums.
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(iqPairUp(sc), iqLoad256(bsums)), 7);
        IqSums r;
        r.sum = _mm256_sub_epi32(halvesAdded(acc), offset);
        return r;
    }
};

// Q2_K and Q3_K on 512-bit vectors, two chunks of 32 (same 32 bytes of quants, the next bit
// pair) at a time: their 2-bit values (Q3_K: | 4 from the hmask, 0..7 unsigned) through
// vpdpbusd into int32 sums of 4 values, two such vectors packed to int16 and multiplied by their
// groups' scales in one vpdpwssd (the packed sums are at most 4 * 7 * 127 in magnitude: no
// saturation); Q3_K's - 4 and Q2_K's mins through the 16-value sums of x, as FusedQ3_K /
// FusedQ2_K. The same int32 sums, fewer instructions.
//
// Vector (h, j) holds chunks c = 4 h + j (low half) and c + 1 (high half), j = 0 or 2, so its
// 128-bit lane L has group 2 c + L's sums of 4. Packed, (h, 0) with (h, 2), lane L holds groups
// 8 h + L and 8 h + 4 + L, four int16 each: the scale vectors below are laid out so.
template <bool kQ3>
static inline __m256i lowBitsSums512(const uint8_t* quants, const uint8_t* hmask, const __m256i scales16, const int8_t* xq)
{
    const __m512i three = _mm512_set1_epi8(3), seven = _mm512_set1_epi8(7);
    const __m512i s512 = _mm512_castsi256_si512(scales16);
    // int16 lane k of scale[h]: group 8 h + 4 ((k / 4) % 2) + k / 8 (GCC 12 has no _mm512_setr_epi16).
    alignas(64) static constexpr int16_t kIndex[2][32] = {
        {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5, 2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7},
        {8, 8, 8, 8, 12, 12, 12, 12, 9, 9, 9, 9, 13, 13, 13, 13, 10, 10, 10, 10, 14, 14, 14, 14, 11, 11, 11, 11, 15, 15, 15, 15}};
    const __m512i scale[2] = {
        _mm512_maskz_permutexvar_epi16(__mmask32(0xFFFFFFFF), _mm512_load_si512(kIndex[0]), s512),
        _mm512_maskz_permutexvar_epi16(__mmask32(0xFFFFFFFF), _mm512_load_si512(kIndex[1]), s512)};
    __m512i hm = _mm512_setzero_si512();
    if constexpr (kQ3) hm = _mm512_maskz_broadcast_i64x4(__mmask8(0xFF), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hmask)));
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
        const __m512i q = _mm512_maskz_broadcast_i64x4(__mmask8(0xFF), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quants + 32 * h)));
        __m512i dot[2];
#pragma GCC unroll 2
        for (int j = 0; j < 4; j += 2) {
            const int c = 4 * h + j;  // chunks c (low half of the vector) and c + 1 (high half)
            const __m512i shift = _mm512_setr_epi64(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 2, 2 * j + 2, 2 * j + 2, 2 * j + 2);
            __m512i u = _mm512_maskz_srlv_epi64(__mmask8(0xFF), q, shift);
            if constexpr (kQ3) {
                // Bit c (low half) and c + 1 (high half) of each hmask byte moved to bit 2; bits
                // 0 and 1 from the quants (vpternlog 0xCA: three ? u : hs), then & 7.
                const __m512i hs = c == 0 ? _mm512_maskz_sllv_epi64(__mmask8(0xFF), hm, _mm512_setr_epi64(2, 2, 2, 2, 1, 1, 1, 1))
                                          : _mm512_maskz_srlv_epi64(__mmask8(0xFF), hm,
                                                                    _mm512_setr_epi64(c - 2, c - 2, c - 2, c - 2, c - 1, c - 1, c - 1, c - 1));
                u = _mm512_and_si512(_mm512_ternarylogic_epi64(three, u, hs, 0xCA), seven);
            } else {
                u = _mm512_and_si512(u, three);
            }
            dot[j / 2] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xq + 32 * c));
        }
        acc = _mm512_dpwssd_epi32(acc, scale[h], _mm512_maskz_packs_epi32(__mmask32(0xFFFFFFFF), dot[0], dot[1]));
    }
    return halvesAdded(acc);
}

struct FusedQ3_K512 {
    static constexpr int kBytes = FusedQ3_K::kBytes;
    static constexpr bool kHasMin = false;
    static float scale(const uint8_t* b, const float* fp16) { return FusedQ3_K::scale(b, fp16); }
    static float minScale(const uint8_t*, const float*) { return 0.0f; }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        const __m256i s16 = FusedQ3_K::scales16(b + 96);
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(s16, iqLoad256(bsums)), 2);
        IqSums r;
        r.sum = _mm256_sub_epi32(lowBitsSums512<true>(b + 32, b, s16, xq), offset);
        return r;
    }
};

struct FusedQ2_K512 {
    static constexpr int kBytes = FusedQ2_K::kBytes;
    static constexpr bool kHasMin = true;
    static float scale(const uint8_t* b, const float* fp16) { return FusedQ2_K::scale(b, fp16); }
    static float minScale(const uint8_t* b, const float* fp16) { return FusedQ2_K::minScale(b, fp16); }
    template <class Isa>
    static IqSums sums(const uint8_t* b, const int8_t* xq, const int16_t* bsums)
    {
        const __m128i sm = iqLoad128(b), low4 = _mm_set1_epi8(0x0f);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, low4));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low4));
        IqSums r;
        r.sum = lowBitsSums512<false>(b + 16, nullptr, sc16, xq);
        r.msum = _mm256_madd_epi16(mn16, iqLoad256(bsums));
        return r;
    }
};

}  // namespace

void fillAvx512IqKernels(Kernels& k)
{
    fillIqFusedX86<Avx512IqIsa>(k);
    fillIqLatticeX86<Avx512IqIsa>(k);
    k.matvec[static_cast<int>(DType::IQ4_XS)] = matvecFused256<Avx512IqIsa, FusedIQ4_XS512>;
    k.matvec[static_cast<int>(DType::Q3_K)] = matvecFused256<Avx512IqIsa, FusedQ3_K512>;
    k.matvec[static_cast<int>(DType::Q2_K)] = matvecFused256<Avx512IqIsa, FusedQ2_K512>;
}

}  // namespace spillway::gpu::cpu
