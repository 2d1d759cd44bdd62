#pragma once
// The prompt path's weight repacking (gemm_int8_x86.h) of the types that iq_expand.h expands,
// in AVX2 registers: one block straight to the product's unsigned bytes q = v + shift
// (int8TypeOf's shift) and its scales, where the scalar expansion wrote 256 int8 values one by one
// and the repack then added the shift (the expansion was half of an IQ2_XXS prompt's time). Per
// type, on the bit shuffles, level tables and grid loads of the decode kernels
// (kernels_iq_fused_x86.h, kernels_iq_lattice_x86.h); the signs of the lattice types are applied
// to the grid bytes here (q = shift - g where a sign is set), where decode negates x instead.
//
//   256-value types: unpack(block, fp16, v, f): v[j] = the 32 bytes of values 32 j .. 32 j + 31,
//     f[0][j] = D scale of values 32 j .. + 15, f[1][j] = of 32 j + 16 .. + 31, f[2][j], f[3][j]
//     = Dmin min of each (Q2_K; 0 for the rest): D scale computed as expandedSuperBlock computes
//     it from iq_expand.h's Expanded256 (D * float(scale), one rounding), so the bits are the same;
//   32-value types: unpack(block, fp16, d, m) returns the 32 bytes, d = D and m = M (Q5_1; 0).
//
// tests/engine/int8_unpack_check_avx2.cpp checks every type's bytes and floats against iq_expand.h
// on random and ggml's blocks (test_quant_types). Included by files compiled for AVX2 or wider.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gpu/cpu/kernels_iq_lattice_x86.h"  // kernels_iq_fused_x86.h too

namespace spillway::gpu::cpu {

// f[0..3][j] from 16 integer scales (group g = 16 values: lo of block j = group 2 j, hi = 2 j + 1)
// and, where mins is given, 16 mins.
static inline void unpackScaleFloats(float D, const int16_t* scales, float Dmin, const int16_t* mins, float f[4][8])
{
    const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales));
    const __m256 d = _mm256_set1_ps(D);
    // Even int16 lanes (groups 2 j) and odd ones (2 j + 1), sign-extended to int32 in block order.
    const auto even = [](__m256i v) { return _mm256_srai_epi32(_mm256_slli_epi32(v, 16), 16); };
    const auto odd = [](__m256i v) { return _mm256_srai_epi32(v, 16); };
    _mm256_storeu_ps(f[0], _mm256_mul_ps(d, _mm256_cvtepi32_ps(even(s))));
    _mm256_storeu_ps(f[1], _mm256_mul_ps(d, _mm256_cvtepi32_ps(odd(s))));
    if (mins) {
        const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mins));
        const __m256 dm = _mm256_set1_ps(Dmin);
        _mm256_storeu_ps(f[2], _mm256_mul_ps(dm, _mm256_cvtepi32_ps(even(m))));
        _mm256_storeu_ps(f[3], _mm256_mul_ps(dm, _mm256_cvtepi32_ps(odd(m))));
    } else {
        _mm256_storeu_ps(f[2], _mm256_setzero_ps());
        _mm256_storeu_ps(f[3], _mm256_setzero_ps());
    }
}

// 8 int32 scales, one per block of 32 (both halves), as 16 int16.
static inline void unpackScales32(__m256i s32, int16_t out[16])
{
    const __m256i pairs = _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s32, 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pairs);
}

// 8 bytes of 2 x 4-bit scales (block j: byte j, low nibble for values 0..15) as 2 s + 1, int16.
static inline void unpackNibbleScales(const uint8_t* p, int16_t out[16])
{
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), iqNibbleScales16(p));
}

// The grid bytes u of one block of 32 with their signs: shift + u, or shift - u where the sign
// bit (bit i for byte i of `signs`) is set.
static inline __m256i unpackSigned(__m256i u, uint32_t signs, __m256i shift)
{
    return _mm256_blendv_epi8(_mm256_add_epi8(shift, u), _mm256_sub_epi8(shift, u), iqBytesFromBits(signs));
}

struct UnpackQ2_K {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        const __m128i sm = iqLoad128(b), low4 = _mm_set1_epi8(0x0f);
        alignas(32) int16_t sc[16], mn[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc), _mm256_cvtepu8_epi16(_mm_and_si128(sm, low4)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(mn), _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), low4)));
        const __m256i three = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = iqLoad256(b + 16 + 32 * h);
            for (int j = 0; j < 4; ++j) v[4 * h + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
        }
        unpackScaleFloats(fp16[loadU16(b + 80)], sc, fp16[loadU16(b + 82)], mn, f);
    }
};

struct UnpackQ3_K {
    // u = low 2 bits | 4 (bit of the hmask) = v + 4.
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) int16_t sc[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc), FusedQ3_K::scales16(b + 96));
        const __m256i hm = iqLoad256(b);
        const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
        for (int h = 0; h < 2; ++h) {
            const __m256i q = iqLoad256(b + 32 + 32 * h);
            for (int j = 0; j < 4; ++j) {
                const int c = 4 * h + j;
                const __m256i hs = c >= 2 ? _mm256_srli_epi16(hm, c - 2) : _mm256_slli_epi16(hm, 2 - c);
                v[c] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three), _mm256_and_si256(hs, four));
            }
        }
        unpackScaleFloats(fp16[loadU16(b + 108)], sc, 0.0f, nullptr, f);
    }
};

struct UnpackIQ4_XS {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) int16_t s16[16];
        unpackScales32(iq4xsScales(b), s16);
        // The levels + 128 (shift 128) as unsigned bytes.
        const __m256i table = _mm256_xor_si256(iqTable16(kIq4nlValues), _mm256_set1_epi8(char(0x80)));
        for (int ib = 0; ib < 8; ++ib) v[ib] = _mm256_shuffle_epi8(table, iqNibbles32(b + 8 + 16 * ib));
        unpackScaleFloats(fp16[loadU16(b)], s16, 0.0f, nullptr, f);
    }
};

// IQ2_XXS and IQ3_XXS: sign words and scales from 8 aux words, grid bytes of 4 (IQ3: 8) entries.
template <int kShift>
static inline void unpackAuxLattice(__m256i aux, const __m256i u[8], float D, __m256i v[8], float f[4][8])
{
    alignas(32) uint32_t signs[8];
    __m256i s32;
    iqAuxSignsScales(aux, signs, s32);
    alignas(32) int16_t s16[16];
    unpackScales32(s32, s16);
    const __m256i shift = _mm256_set1_epi8(kShift);
    for (int ib = 0; ib < 8; ++ib) v[ib] = unpackSigned(u[ib], signs[ib], shift);
    unpackScaleFloats(D, s16, 0.0f, nullptr, f);
}

struct UnpackIQ2_XXS {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        __m256i u[8];
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t* idx = b + 2 + 8 * ib;
            u[ib] = iqGrid64(kIq2xxsGrid, idx[0], idx[1], idx[2], idx[3]);
        }
        unpackAuxLattice<43>(iqOddWords(b + 2), u, fp16[loadU16(b)] * 0.125f, v, f);
    }
};

struct UnpackIQ3_XXS {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        __m256i u[8];
        for (int ib = 0; ib < 8; ++ib) u[ib] = iqGrid32(kIq3xxsGrid, b + 2 + 8 * ib);
        unpackAuxLattice<62>(iqLoad256(b + 66), u, fp16[loadU16(b)] * 0.25f, v, f);
    }
};

// IQ2_XS and IQ2_S: 32 grid entries of 8 bytes, their sign words and 16 nibble scales at `scales`.
static inline void unpackIq2(const uint64_t* grid, const uint16_t idx[32], const uint32_t signs[8], const uint8_t* scales,
                             float D, __m256i v[8], float f[4][8])
{
    const __m256i shift = _mm256_set1_epi8(43);
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t* i = idx + 4 * ib;
        v[ib] = unpackSigned(iqGrid64(grid, i[0], i[1], i[2], i[3]), signs[ib], shift);
    }
    alignas(32) int16_t s16[16];
    unpackNibbleScales(scales, s16);
    unpackScaleFloats(D, s16, 0.0f, nullptr, f);
}

struct UnpackIQ2_XS {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) uint16_t idx[32];
        alignas(32) uint32_t signs[8];
        iq2xsIndicesSigns(b, idx, signs);
        unpackIq2(kIq2xsGrid, idx, signs, b + 66, fp16[loadU16(b)] * 0.125f, v, f);
    }
};

struct UnpackIQ2_S {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) uint16_t idx[32];
        iq2sIndices(b, idx);
        uint32_t signs[8];
        std::memcpy(signs, b + 34, sizeof signs);  // a byte of signs per 8 values
        unpackIq2(kIq2sGrid, idx, signs, b + 74, fp16[loadU16(b)] * 0.125f, v, f);
    }
};

struct UnpackIQ3_S {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) uint16_t idx[64];
        iq3sIndices(b, idx);
        alignas(32) int16_t s16[16];
        unpackScales32(iq3sScales(b), s16);
        const __m256i shift = _mm256_set1_epi8(15);
        for (int ib = 0; ib < 8; ++ib) v[ib] = unpackSigned(iqGrid32(kIq3sGrid, idx + 8 * ib), loadU32(b + 74 + 4 * ib), shift);
        unpackScaleFloats(fp16[loadU16(b)], s16, 0.0f, nullptr, f);
    }
};

// IQ1: kIq1Offset's entries are 8 g + delta + 9, the product's q (shift 9), by an index whose bit
// 11 is the delta's sign.
static inline void unpackIq1(const uint16_t idx[32], __m256i v[8])
{
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t* i = idx + 4 * ib;
        v[ib] = iqGrid64(kIq1Offset.v, i[0], i[1], i[2], i[3]);
    }
}

struct UnpackIQ1_S {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) uint16_t idx[32];
        iq1sIndices(b, idx);
        unpackIq1(idx, v);
        alignas(32) int16_t s16[16];
        unpackScales32(iq1sScales(b), s16);
        unpackScaleFloats(fp16[loadU16(b)] * 0.125f, s16, 0.0f, nullptr, f);
    }
};

struct UnpackIQ1_M {
    static void unpack(const uint8_t* b, const float* fp16, __m256i v[8], float f[4][8])
    {
        alignas(32) uint16_t idx[32];
        iq1mIndices(b, idx);
        unpackIq1(idx, v);
        alignas(32) int16_t s16[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(s16), iq1mScales16(b));
        unpackScaleFloats(fp16[iq1mScaleBits(b)] * 0.125f, s16, 0.0f, nullptr, f);
    }
};

// ---- blocks of 32 ------------------------------------------------------------------------------

struct UnpackQ5_1 {
    static __m256i unpack(const uint8_t* b, const float* fp16, float& d, float& m)
    {
        d = fp16[loadU16(b)];
        m = fp16[loadU16(b + 2)];
        return _mm256_or_si256(iqNibbles32(b + 8), _mm256_and_si256(iqBytesFromBits(loadU32(b + 4)), _mm256_set1_epi8(0x10)));
    }
};

struct UnpackIQ4_NL {
    static __m256i unpack(const uint8_t* b, const float* fp16, float& d, float& m)
    {
        d = fp16[loadU16(b)];
        m = 0.0f;
        return _mm256_shuffle_epi8(_mm256_xor_si256(iqTable16(kIq4nlValues), _mm256_set1_epi8(char(0x80))), iqNibbles32(b + 2));
    }
};

struct UnpackMXFP4 {
    static __m256i unpack(const uint8_t* b, const float*, float& d, float& m)
    {
        d = e8m0Half(b[0]);
        m = 0.0f;
        return _mm256_shuffle_epi8(_mm256_add_epi8(iqTable16(kMxfp4Values), _mm256_set1_epi8(12)), iqNibbles32(b + 1));
    }
};

using Unpack256Fn = void (*)(const uint8_t*, const float*, __m256i*, float (*)[8]);
using Unpack32Fn = __m256i (*)(const uint8_t*, const float*, float&, float&);

// A type's unpacking, null for the types that are not iq_expand.h's.
static inline Unpack256Fn unpack256Of(DType t)
{
    switch (t) {
    case DType::Q2_K: return UnpackQ2_K::unpack;
    case DType::Q3_K: return UnpackQ3_K::unpack;
    case DType::IQ4_XS: return UnpackIQ4_XS::unpack;
    case DType::IQ3_XXS: return UnpackIQ3_XXS::unpack;
    case DType::IQ3_S: return UnpackIQ3_S::unpack;
    case DType::IQ2_XXS: return UnpackIQ2_XXS::unpack;
    case DType::IQ2_XS: return UnpackIQ2_XS::unpack;
    case DType::IQ2_S: return UnpackIQ2_S::unpack;
    case DType::IQ1_S: return UnpackIQ1_S::unpack;
    case DType::IQ1_M: return UnpackIQ1_M::unpack;
    default: return nullptr;
    }
}
static inline Unpack32Fn unpack32Of(DType t)
{
    switch (t) {
    case DType::Q5_1: return UnpackQ5_1::unpack;
    case DType::IQ4_NL: return UnpackIQ4_NL::unpack;
    case DType::MXFP4: return UnpackMXFP4::unpack;
    default: return nullptr;
    }
}

}  // namespace spillway::gpu::cpu
