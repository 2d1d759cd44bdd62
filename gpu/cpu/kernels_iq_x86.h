#pragma once
// The int8 dot products of the iq_expand.h row kernels with AVX2 (and, where the including file
// is compiled for it, AVX-512 BW): |v| times x with v's signs (maddubs), pairs summed and scaled
// per 16 values by madd with the group scales. The same int32 sums as the scalar set.

#include <immintrin.h>

#include "gpu/cpu/iq_expand.h"

namespace spillway::gpu::cpu {

namespace {

static inline __m256i signedProducts256(__m256i v, __m256i x)
{
    return _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(x, v));
}

static inline int32_t hsum256(__m256i a)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

struct Avx2Dot {
    static int32_t scaled(const int8_t* v, const int8_t* x, const int16_t* scale)
    {
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
            const __m256i p = signedProducts256(_mm256_load_si256(reinterpret_cast<const __m256i*>(v + 32 * c)),
                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * c)));
            const __m256i s = _mm256_setr_m128i(_mm_set1_epi16(scale[2 * c]), _mm_set1_epi16(scale[2 * c + 1]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
        }
        return hsum256(acc);
    }
    static int32_t block32(const int8_t* v, const int8_t* x)
    {
        const __m256i p = signedProducts256(_mm256_load_si256(reinterpret_cast<const __m256i*>(v)),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
        return hsum256(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    }
};

#if defined(__AVX512BW__)
struct Avx512Dot {
    static int32_t scaled(const int8_t* v, const int8_t* x, const int16_t* scale)
    {
        // The 16 scales, each repeated for the 8 int16 pair sums of its group.
        const __m512i scales = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale)));
        __m512i acc = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
            const __m512i vv = _mm512_load_si512(v + 64 * c);
            const __m512i xv = _mm512_loadu_si512(x + 64 * c);
            const __mmask64 negative = _mm512_movepi8_mask(vv);
            const __m512i sx = _mm512_mask_sub_epi8(xv, negative, _mm512_setzero_si512(), xv);
            const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(vv), sx);
            const __m512i index = _mm512_add_epi16(
                _mm512_set1_epi16(static_cast<short>(4 * c)),
                _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
                                                   13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                  3));
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_permutexvar_epi16(index, scales)));
        }
        return _mm512_reduce_add_epi32(acc);
    }
    static int32_t block32(const int8_t* v, const int8_t* x) { return Avx2Dot::block32(v, x); }
};
#endif

}  // namespace

}  // namespace spillway::gpu::cpu
