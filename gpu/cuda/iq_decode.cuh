#pragma once
// ggml's Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M
// and MXFP4 blocks on the device (layouts: gpu/cpu/iq_blocks.h), in two forms:
//
// - decodeIqValue: one value as a float, in the CPU decoder's float operations one by one
//   (iq_blocks.h, ggml's dequantize_row_*): each product and sum is an explicit _rn intrinsic, so
//   nvcc cannot contract a product and a sum into an FMA where ggml rounds the product first.
//   getRow and the prompt path's fp16 weights (get_row.cu) use it.
// - expandIqSub: the 32 values of sub-block ib (0..7) of a 256-value super-block as 8 words of
//   4 int8 values, with the integer scales of its two groups of 16 (and Q2_K's mins): the values
//   and scales of gpu/cpu/iq_expand.h (IQ1's delta folded in as 8 g +- 1, IQ2 / IQ3's half-step
//   scales as 2 s + 1), so a sub-block's int32 dot product is the CPU's. matvec_iq.cu uses it.
//
// The lattices are gpu/iq_grids.inc's macros expanded into __device__ (global memory) arrays:
// each lane of a warp indexes its own entry, which constant memory would serialize (it serves
// one address per warp at a time); global loads of these 33 KiB stay in L1 / L2. Each .cu that
// includes this file has its own copy (no relocatable device code). IQ4_NL's and MXFP4's 16
// levels are packed at compile time from gpu/iq_grids.h into 4 words each and looked up with
// __byte_perm, 4 values at a time.
//
// Blocks are read in 2-byte halves (rows are only 2-byte aligned: the blocks are 50 .. 136
// bytes); MXFP4's 17-byte blocks are read byte by byte (no alignment at all).

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/dtype.h"
#include "gpu/iq_grids.h"
#include "gpu/iq_grids.inc"

namespace spillway::gpu::cuda {

// ---- tables ---------------------------------------------------------------------------------

static __device__ const uint64_t kIq2xxsGridDev[256] = {SPILLWAY_IQ2XXS_GRID};
static __device__ const uint64_t kIq2xsGridDev[512] = {SPILLWAY_IQ2XS_GRID};
static __device__ const uint64_t kIq2sGridDev[1024] = {SPILLWAY_IQ2S_GRID};
static __device__ const uint32_t kIq3xxsGridDev[256] = {SPILLWAY_IQ3XXS_GRID};
static __device__ const uint32_t kIq3sGridDev[512] = {SPILLWAY_IQ3S_GRID};
static __device__ const uint64_t kIq1sGridDev[2048] = {SPILLWAY_IQ1S_GRID};

// Levels 4k .. 4k + 3 of a 16-level int8 table as one little-endian word (compile time).
constexpr uint32_t packLevels(const int8_t* t, int k)
{
    return uint32_t{static_cast<uint8_t>(t[4 * k])} | (uint32_t{static_cast<uint8_t>(t[4 * k + 1])} << 8) |
           (uint32_t{static_cast<uint8_t>(t[4 * k + 2])} << 16) | (uint32_t{static_cast<uint8_t>(t[4 * k + 3])} << 24);
}
inline constexpr uint32_t kIq4nl0 = packLevels(kIq4nlValues, 0), kIq4nl1 = packLevels(kIq4nlValues, 1),
                          kIq4nl2 = packLevels(kIq4nlValues, 2), kIq4nl3 = packLevels(kIq4nlValues, 3);
inline constexpr uint32_t kMxfp40 = packLevels(kMxfp4Values, 0), kMxfp41 = packLevels(kMxfp4Values, 1),
                          kMxfp42 = packLevels(kMxfp4Values, 2), kMxfp43 = packLevels(kMxfp4Values, 3);

// The table's levels of 4 nibbles (one per byte, each 0..15) as 4 int8 bytes: __byte_perm picks
// by the low 3 bits from the low or the high half of the table, bit 3 chooses the half.
__device__ __forceinline__ uint32_t lookup16(uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3, uint32_t n)
{
    const uint32_t s = (n & 7u) | ((n >> 4) & 0x70u) | ((n >> 8) & 0x700u) | ((n >> 12) & 0x7000u);
    const uint32_t lo = __byte_perm(t0, t1, s), hi = __byte_perm(t2, t3, s);
    const uint32_t high = ((n >> 3) & 0x01010101u) * 0xffu;
    return (lo & ~high) | (hi & high);
}

template <bool kMxfp4>
__device__ __forceinline__ uint32_t levels4(uint32_t nibbles)
{
    if constexpr (kMxfp4) return lookup16(kMxfp40, kMxfp41, kMxfp42, kMxfp43, nibbles);
    else return lookup16(kIq4nl0, kIq4nl1, kIq4nl2, kIq4nl3, nibbles);
}

// ---- loads and small decodings ----------------------------------------------------------------

__device__ __forceinline__ uint32_t iqU16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t iqU32(const uint8_t* p) { return iqU16(p) | (iqU16(p + 2) << 16); }
__device__ __forceinline__ float iqFp16(const uint8_t* p) { return halfToFloat(static_cast<uint16_t>(iqU16(p))); }
// 4 bytes at any address (MXFP4).
__device__ __forceinline__ uint32_t iqBytes4(const uint8_t* p)
{
    return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// The 8 signs of a group from its 7 stored bits, the 8th their parity (gpu/iq_grids.h iqSigns).
__device__ __forceinline__ uint32_t iqSignsDev(uint32_t seven)
{
    seven &= 127u;
    return seven | ((static_cast<uint32_t>(__popc(seven)) & 1u) << 7);
}

// Bytes 0xff where bits 0..3 of `bits` are set (bit j: byte j).
__device__ __forceinline__ uint32_t byteMask4(uint32_t bits)
{
    return (((bits & 0xfu) * 0x00204081u) & 0x01010101u) * 0xffu;  // bit j to bit 8 j, then 0x01 -> 0xff
}

// 4 grid bytes (each 1..127) negated where the mask byte is 0xff: per byte (g ^ m) - m.
__device__ __forceinline__ uint32_t signed4(uint32_t g, uint32_t mask) { return __vsub4(g ^ mask, mask); }

// 4 IQ1 grid values g (int8 -1, 0, 1) as 8 g + 1, or 8 g - 1 where the group's delta is negative.
__device__ __forceinline__ uint32_t iq1Values4(uint32_t g, bool negativeDelta)
{
    const uint32_t eight = (g << 3) & 0xf8f8f8f8u;  // per byte 8 g: 0xf8, 0 or 8
    return negativeDelta ? __vsub4(eight, 0x01010101u) : (eight | 0x01010101u);
}

// The 6-bit scale (before the - 32) of group g (0..15) of a Q3_K super-block; s = block + 96.
__device__ __forceinline__ int q3Scale(const uint8_t* s, int g)
{
    const int low = g < 8 ? (s[g] & 0xf) : (s[g - 8] >> 4);
    const int high = (s[8 + (g % 4)] >> (2 * (g / 4))) & 3;
    return low | (high << 4);
}

// The 6-bit scale (before the - 32) of sub-block ib (0..7) of an IQ4_XS super-block.
__device__ __forceinline__ int iq4xsScale(const uint8_t* b, int ib)
{
    return ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((iqU16(b + 2) >> (2 * ib)) & 3) << 4);
}

// IQ1_M's super-block scale: the top nibbles of its 4 scale words, as an fp16.
__device__ __forceinline__ float iq1mScale(const uint8_t* b)
{
    const uint32_t s0 = iqU16(b + 48), s1 = iqU16(b + 50), s2 = iqU16(b + 52), s3 = iqU16(b + 54);
    const uint32_t bits = (s0 >> 12) | ((s1 >> 8) & 0x00f0u) | ((s2 >> 4) & 0x0f00u) | (s3 & 0xf000u);
    return halfToFloat(static_cast<uint16_t>(bits));
}

// 2^(e - 127) / 2, as gpu/iq_grids.h e8m0Half: MXFP4's scale (its levels are stored doubled).
__device__ __forceinline__ float e8m0HalfDev(uint32_t e)
{
    return __uint_as_float(e >= 2 ? (e - 1) << 23 : (e == 1 ? 0x00400000u : 0x00200000u));
}

// IQ2 / IQ3_XXS sub-block scale d (0.5 + s) / 4 or / 2, in ggml's order of operations.
__device__ __forceinline__ float halfStepScale(float d, uint32_t s, float step)
{
    return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, static_cast<float>(s))), step);
}

// ---- one value, as the CPU decoder gives it ---------------------------------------------------

// Value i of the block at b (i < the type's block size) of one of this file's types.
__device__ inline float decodeIqValue(DType type, const uint8_t* __restrict__ b, int i)
{
    const int ib = i / 32, l = (i % 32) / 8, j = i % 8;  // 256-value types: sub-block, group of 8, value
    const auto sign = [](uint32_t signs, int k) { return (signs >> k) & 1u ? -1.0f : 1.0f; };
    switch (type) {
    case DType::Q2_K: {
        const uint32_t sc = b[i / 16];
        const int q = (b[16 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        const float dl = __fmul_rn(iqFp16(b + 80), static_cast<float>(sc & 0xf));
        const float ml = __fmul_rn(iqFp16(b + 82), static_cast<float>(sc >> 4));
        return __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
    }
    case DType::Q3_K: {
        const int h = i / 128, k = (i % 128) / 32, m = i % 32;
        const int v = ((b[32 + 32 * h + m] >> (2 * k)) & 3) - ((b[m] >> (4 * h + k)) & 1 ? 0 : 4);
        const float dl = __fmul_rn(iqFp16(b + 108), static_cast<float>(q3Scale(b + 96, i / 16) - 32));
        return __fmul_rn(dl, static_cast<float>(v));
    }
    case DType::Q5_1: {
        const int k = i % 16;
        const int x = (i < 16 ? b[8 + k] & 0xf : b[8 + k] >> 4) | static_cast<int>(((iqU32(b + 4) >> i) & 1u) << 4);
        return __fadd_rn(__fmul_rn(static_cast<float>(x), iqFp16(b)), iqFp16(b + 2));
    }
    case DType::IQ4_NL: {
        const uint32_t n = i < 16 ? b[2 + i] & 0xf : b[2 + i - 16] >> 4;
        return __fmul_rn(iqFp16(b), static_cast<float>(static_cast<int8_t>(levels4<false>(n))));
    }
    case DType::IQ4_XS: {
        const int k = i % 32;
        const uint8_t* qs = b + 8 + 16 * ib;
        const uint32_t n = k < 16 ? qs[k] & 0xf : qs[k - 16] >> 4;
        const float dl = __fmul_rn(iqFp16(b), static_cast<float>(iq4xsScale(b, ib) - 32));
        return __fmul_rn(dl, static_cast<float>(static_cast<int8_t>(levels4<false>(n))));
    }
    case DType::IQ2_XXS: {
        const uint8_t* idx = b + 2 + 8 * ib;
        const uint32_t aux = iqU32(idx + 4);
        const float db = halfStepScale(iqFp16(b), aux >> 28, 0.25f);
        const uint32_t g = static_cast<uint32_t>(kIq2xxsGridDev[idx[l]] >> (8 * j)) & 0xffu;
        return __fmul_rn(__fmul_rn(db, static_cast<float>(g)), sign(iqSignsDev(aux >> (7 * l)), j));
    }
    case DType::IQ2_XS: {
        const uint32_t q = iqU16(b + 2 + 2 * (4 * ib + l)), sc = b[66 + ib];
        const float db = halfStepScale(iqFp16(b), l < 2 ? sc & 0xf : sc >> 4, 0.25f);
        const uint32_t g = static_cast<uint32_t>(kIq2xsGridDev[q & 511] >> (8 * j)) & 0xffu;
        return __fmul_rn(__fmul_rn(db, static_cast<float>(g)), sign(iqSignsDev(q >> 9), j));
    }
    case DType::IQ2_S: {
        const uint32_t sc = b[74 + ib], qh = b[66 + ib];
        const float db = halfStepScale(iqFp16(b), l < 2 ? sc & 0xf : sc >> 4, 0.25f);
        const uint32_t index = b[2 + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300u);
        const uint32_t g = static_cast<uint32_t>(kIq2sGridDev[index] >> (8 * j)) & 0xffu;
        return __fmul_rn(__fmul_rn(db, static_cast<float>(g)), sign(b[34 + 4 * ib + l], j));
    }
    case DType::IQ3_XXS: {
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t aux = iqU32(b + 66 + 4 * ib);
        const float db = halfStepScale(iqFp16(b), aux >> 28, 0.5f);
        const uint32_t g = (kIq3xxsGridDev[qs[2 * l + j / 4]] >> (8 * (j % 4))) & 0xffu;
        return __fmul_rn(__fmul_rn(db, static_cast<float>(g)), sign(iqSignsDev(aux >> (7 * l)), j));
    }
    case DType::IQ3_S: {
        const uint32_t sc = b[106 + ib / 2], qh = b[66 + ib];
        const float db = __fmul_rn(iqFp16(b), static_cast<float>(1 + 2 * ((ib % 2) ? (sc >> 4) : (sc & 0xf))));
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t index =
            j < 4 ? qs[2 * l] | ((qh << (8 - 2 * l)) & 256u) : qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
        const uint32_t g = (kIq3sGridDev[index] >> (8 * (j % 4))) & 0xffu;
        return __fmul_rn(__fmul_rn(db, static_cast<float>(g)), sign(b[74 + 4 * ib + l], j));
    }
    case DType::IQ1_S: {
        const uint32_t qh = iqU16(b + 34 + 2 * ib);
        const float dl = __fmul_rn(iqFp16(b), static_cast<float>(2 * ((qh >> 12) & 7) + 1));
        const float delta = (qh & 0x8000u) ? -kIq1Delta : kIq1Delta;
        const uint64_t g = kIq1sGridDev[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8)];
        return __fmul_rn(dl, __fadd_rn(static_cast<float>(static_cast<int8_t>(g >> (8 * j))), delta));
    }
    case DType::IQ1_M: {
        const uint32_t sc = iqU16(b + 48 + 2 * (ib / 2));
        const int s = static_cast<int>((sc >> (6 * (ib % 2) + (l < 2 ? 0 : 3))) & 7);
        const float dl = __fmul_rn(iq1mScale(b), static_cast<float>(2 * s + 1));
        const uint32_t qh = b[32 + 2 * ib + l / 2];
        const uint32_t index = b[4 * ib + l] | ((qh << (l % 2 ? 4 : 8)) & 0x700u);
        const float delta = (qh & (l % 2 ? 0x80u : 0x08u)) ? -kIq1Delta : kIq1Delta;
        const uint64_t g = kIq1sGridDev[index];
        return __fmul_rn(dl, __fadd_rn(static_cast<float>(static_cast<int8_t>(g >> (8 * j))), delta));
    }
    case DType::MXFP4: {
        const uint32_t n = i < 16 ? b[1 + i] & 0xf : b[1 + i - 16] >> 4;
        return __fmul_rn(e8m0HalfDev(b[0]), static_cast<float>(static_cast<int8_t>(levels4<true>(n))));
    }
    default: return __int_as_float(0x7fc00000);
    }
}

// Value c of a row of one of this file's types.
__device__ inline float decodeIqRowValue(DType type, const uint8_t* __restrict__ row, int64_t c)
{
    int size = 256, bytes = 0;
    switch (type) {
    case DType::Q2_K: bytes = 84; break;
    case DType::Q3_K: bytes = 110; break;
    case DType::Q5_1: size = 32, bytes = 24; break;
    case DType::IQ4_NL: size = 32, bytes = 18; break;
    case DType::IQ4_XS: bytes = 136; break;
    case DType::IQ3_XXS: bytes = 98; break;
    case DType::IQ3_S: bytes = 110; break;
    case DType::IQ2_XXS: bytes = 66; break;
    case DType::IQ2_XS: bytes = 74; break;
    case DType::IQ2_S: bytes = 82; break;
    case DType::IQ1_S: bytes = 50; break;
    case DType::IQ1_M: bytes = 56; break;
    case DType::MXFP4: size = 32, bytes = 17; break;
    default: return __int_as_float(0x7fc00000);
    }
    return decodeIqValue(type, row + (c / size) * bytes, static_cast<int>(c % size));
}

// ---- one sub-block of 32, as the CPU's matvec expands it ---------------------------------------

struct IqSub {
    uint32_t v[8];       // values 4k .. 4k + 3 of the sub-block in word k (int8 each)
    int scale0, scale1;  // the integer scales of values 0..15 and 16..31
    int min0, min1;      // Q2_K only
};

// The super-block's float scale D (and Q2_K's Dmin): value = D scale v - Dmin min (iq_expand.h).
template <DType T>
__device__ __forceinline__ float iqSuperScale(const uint8_t* b, float* dmin)
{
    if constexpr (T == DType::Q2_K) {
        *dmin = iqFp16(b + 82);
        return iqFp16(b + 80);
    } else if constexpr (T == DType::Q3_K) return iqFp16(b + 108);
    else if constexpr (T == DType::IQ4_XS || T == DType::IQ3_S) return iqFp16(b);
    else if constexpr (T == DType::IQ3_XXS) return iqFp16(b) * 0.25f;
    else if constexpr (T == DType::IQ1_M) return iq1mScale(b) * 0.125f;
    else return iqFp16(b) * 0.125f;  // IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S: exact power-of-two rescalings
}

template <DType T>
__device__ __forceinline__ void expandIqSub(const uint8_t* __restrict__ b, int ib, IqSub& e)
{
    e.min0 = e.min1 = 0;
    if constexpr (T == DType::Q2_K) {
        // value 32 ib + m: bits 2 (ib % 4) of qs[32 (ib / 4) + m]
        const uint8_t* qs = b + 16 + 32 * (ib / 4);
        const int shift = 2 * (ib % 4);
#pragma unroll
        for (int k = 0; k < 8; ++k) e.v[k] = (iqU32(qs + 4 * k) >> shift) & 0x03030303u;
        e.scale0 = b[2 * ib] & 0xf, e.min0 = b[2 * ib] >> 4;
        e.scale1 = b[2 * ib + 1] & 0xf, e.min1 = b[2 * ib + 1] >> 4;
    } else if constexpr (T == DType::Q3_K) {
        // 2 low bits as Q2_K, bit 2 in hmask bit ib (set: no - 4)
        const uint8_t* qs = b + 32 + 32 * (ib / 4);
        const int shift = 2 * (ib % 4);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const uint32_t low = (iqU32(qs + 4 * k) >> shift) & 0x03030303u;
            const uint32_t high = (iqU32(b + 4 * k) >> ib) & 0x01010101u;
            e.v[k] = __vsub4(low | (high << 2), 0x04040404u);
        }
        e.scale0 = q3Scale(b + 96, 2 * ib) - 32;
        e.scale1 = q3Scale(b + 96, 2 * ib + 1) - 32;
    } else if constexpr (T == DType::IQ4_XS) {
        const uint8_t* qs = b + 8 + 16 * ib;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t n = iqU32(qs + 4 * k);
            e.v[k] = levels4<false>(n & 0x0f0f0f0fu);
            e.v[k + 4] = levels4<false>((n >> 4) & 0x0f0f0f0fu);
        }
        e.scale0 = e.scale1 = iq4xsScale(b, ib) - 32;
    } else if constexpr (T == DType::IQ2_XXS) {
        const uint32_t idx = iqU32(b + 2 + 8 * ib), aux = iqU32(b + 6 + 8 * ib);
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = kIq2xxsGridDev[(idx >> (8 * l)) & 0xffu];
            const uint32_t s = iqSignsDev(aux >> (7 * l));
            e.v[2 * l] = signed4(static_cast<uint32_t>(g), byteMask4(s));
            e.v[2 * l + 1] = signed4(static_cast<uint32_t>(g >> 32), byteMask4(s >> 4));
        }
        e.scale0 = e.scale1 = 2 * static_cast<int>(aux >> 28) + 1;
    } else if constexpr (T == DType::IQ2_XS) {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t q = iqU16(b + 2 + 2 * (4 * ib + l));
            const uint64_t g = kIq2xsGridDev[q & 511];
            const uint32_t s = iqSignsDev(q >> 9);
            e.v[2 * l] = signed4(static_cast<uint32_t>(g), byteMask4(s));
            e.v[2 * l + 1] = signed4(static_cast<uint32_t>(g >> 32), byteMask4(s >> 4));
        }
        const int sc = b[66 + ib];
        e.scale0 = 2 * (sc & 0xf) + 1, e.scale1 = 2 * (sc >> 4) + 1;
    } else if constexpr (T == DType::IQ2_S) {
        const uint32_t low = iqU32(b + 2 + 4 * ib), signs = iqU32(b + 34 + 4 * ib), qh = b[66 + ib];
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t index = ((low >> (8 * l)) & 0xffu) | ((qh << (8 - 2 * l)) & 0x300u);
            const uint64_t g = kIq2sGridDev[index];
            const uint32_t s = signs >> (8 * l);
            e.v[2 * l] = signed4(static_cast<uint32_t>(g), byteMask4(s));
            e.v[2 * l + 1] = signed4(static_cast<uint32_t>(g >> 32), byteMask4(s >> 4));
        }
        const int sc = b[74 + ib];
        e.scale0 = 2 * (sc & 0xf) + 1, e.scale1 = 2 * (sc >> 4) + 1;
    } else if constexpr (T == DType::IQ3_XXS) {
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t aux = iqU32(b + 66 + 4 * ib);
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t s = iqSignsDev(aux >> (7 * l));
            e.v[2 * l] = signed4(kIq3xxsGridDev[qs[2 * l]], byteMask4(s));
            e.v[2 * l + 1] = signed4(kIq3xxsGridDev[qs[2 * l + 1]], byteMask4(s >> 4));
        }
        e.scale0 = e.scale1 = 2 * static_cast<int>(aux >> 28) + 1;
    } else if constexpr (T == DType::IQ3_S) {
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t qh = b[66 + ib], signs = iqU32(b + 74 + 4 * ib);
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t s = signs >> (8 * l);
            e.v[2 * l] = signed4(kIq3sGridDev[qs[2 * l] | ((qh << (8 - 2 * l)) & 256u)], byteMask4(s));
            e.v[2 * l + 1] = signed4(kIq3sGridDev[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u)], byteMask4(s >> 4));
        }
        const int sc = b[106 + ib / 2];
        e.scale0 = e.scale1 = 1 + 2 * ((ib % 2) ? (sc >> 4) : (sc & 0xf));
    } else if constexpr (T == DType::IQ1_S) {
        const uint32_t qh = iqU16(b + 34 + 2 * ib), low = iqU32(b + 2 + 4 * ib);
        const bool negative = qh & 0x8000u;
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = kIq1sGridDev[((low >> (8 * l)) & 0xffu) | (((qh >> (3 * l)) & 7u) << 8)];
            e.v[2 * l] = iq1Values4(static_cast<uint32_t>(g), negative);
            e.v[2 * l + 1] = iq1Values4(static_cast<uint32_t>(g >> 32), negative);
        }
        e.scale0 = e.scale1 = 2 * static_cast<int>((qh >> 12) & 7) + 1;
    } else if constexpr (T == DType::IQ1_M) {
        const uint32_t low = iqU32(b + 4 * ib), qh = iqU16(b + 32 + 2 * ib);  // qh[0] low byte, qh[1] high
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const uint32_t h = (qh >> (8 * (l / 2))) & 0xffu;
            const uint32_t index = ((low >> (8 * l)) & 0xffu) | ((h << (l % 2 ? 4 : 8)) & 0x700u);
            const bool negative = h & (l % 2 ? 0x80u : 0x08u);
            const uint64_t g = kIq1sGridDev[index];
            e.v[2 * l] = iq1Values4(static_cast<uint32_t>(g), negative);
            e.v[2 * l + 1] = iq1Values4(static_cast<uint32_t>(g >> 32), negative);
        }
        const uint32_t sc = iqU16(b + 48 + 2 * (ib / 2));
        e.scale0 = 2 * static_cast<int>((sc >> (6 * (ib % 2))) & 7) + 1;
        e.scale1 = 2 * static_cast<int>((sc >> (6 * (ib % 2) + 3)) & 7) + 1;
    }
}

}  // namespace spillway::gpu::cuda
