#pragma once
// The matvec form of the block types of iq_blocks.h: each block expanded to int8 values and
// small integer scales, so that a row's dot product with x (quantized as llama.cpp does for these
// types: Q8_K super-blocks for the 256-value types, Q8 blocks of 32 for Q5_1, IQ4_NL and MXFP4)
// is exact int32 sums and a few float products per block, as in ggml's vec_dot kernels:
//
//   256-value types: value i = D * scale[i / 16] * v[i] - Dmin * min[i / 16], so
//     block . x = d_x * (D * sum_g scale_g * (v . xq)_g - Dmin * sum_g min_g * bsum_g)
//   32-value types:  value i = D * v[i] + M, so block . x = D * d_x * (v . xq) + M * d_x * sum(xq)
//
// IQ1_S / IQ1_M (grid value g in {-1, 0, 1} plus a delta of +-1/8) expand to v = 8 g +- 1 with D
// the block scale / 8; IQ2 scales (0.5 + s) / 4 to 2 s + 1 with D = d / 8, IQ3_XXS's (0.5 + s) / 2
// to 2 s + 1 with D = d / 4: all exact rescalings by powers of two. These are the scalar set's
// kernels (kernels_iq_scalar.cpp) and the reference of the AVX2 / AVX-512 ones, which decode
// straight into registers (kernels_iq_fused_x86.h, kernels_iq_lattice_x86.h) to the same int32
// sums and float operations.

#include <cstdint>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/iq_blocks.h"
#include "gpu/cpu/kquant_blocks.h"

namespace spillway::gpu::cpu {

struct Expanded256 {
    alignas(64) int8_t v[256];
    int16_t scale[16];
    int16_t min[16];  // Q2_K only (hasMin)
    float D = 0.0f, Dmin = 0.0f;
    bool hasMin = false;
};

struct Expanded32 {
    alignas(32) int8_t v[32];
    float D = 0.0f, M = 0.0f;  // M: Q5_1 only
};

// 8 bytes 0x00 / 0xff from 8 sign bits (bit j set: byte j is 0xff).
struct SignMasks {
    uint64_t m[256];
    constexpr SignMasks() : m()
    {
        for (int s = 0; s < 256; ++s) {
            uint64_t v = 0;
            for (int j = 0; j < 8; ++j)
                if ((s >> j) & 1) v |= uint64_t(0xff) << (8 * j);
            m[s] = v;
        }
    }
};
inline constexpr SignMasks kSignMasks;

// 8 grid bytes (each 1..127) with the signs applied: -g where the mask byte is 0xff. No carries
// cross bytes: ~g + 1 <= 255 for g >= 1.
static inline uint64_t signedGrid(uint64_t g, uint8_t signs)
{
    const uint64_t m = kSignMasks.m[signs];
    return (g ^ m) + (m & 0x0101010101010101ull);
}

static inline void put8(int8_t* v, uint64_t bytes) { std::memcpy(v, &bytes, 8); }

static inline void setScale32(Expanded256& e, int ib, int s)
{
    e.scale[2 * ib] = e.scale[2 * ib + 1] = static_cast<int16_t>(s);
}

static inline void expandQ2_K(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b + 80)];
    e.Dmin = fp16[loadU16(b + 82)];
    e.hasMin = true;
    for (int g = 0; g < 16; ++g) {
        e.scale[g] = static_cast<int16_t>(b[g] & 0xf);
        e.min[g] = static_cast<int16_t>(b[g] >> 4);
    }
    // Value 128 h + 32 j + l (l < 32): bits 2j..2j+1 of qs[32 h + l]; group 8 h + 2 j + l / 16.
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) e.v[128 * h + 32 * j + l] = static_cast<int8_t>((b[16 + 32 * h + l] >> (2 * j)) & 3);
}

static inline void expandQ3_K(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b + 108)];
    e.hasMin = false;
    int scales[16];
    q3Scales(b + 96, scales);
    for (int g = 0; g < 16; ++g) e.scale[g] = static_cast<int16_t>(scales[g] - 32);
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j) {
            const uint8_t m = static_cast<uint8_t>(1u << (4 * h + j));
            for (int l = 0; l < 32; ++l)
                e.v[128 * h + 32 * j + l] =
                    static_cast<int8_t>(((b[32 + 32 * h + l] >> (2 * j)) & 3) - ((b[l] & m) ? 0 : 4));
        }
}

static inline void expandIQ4_XS(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)];
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        setScale32(e, ib, iq4xsScale(b, ib) - 32);
        const uint8_t* qs = b + 8 + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            e.v[32 * ib + j] = kIq4nlValues[qs[j] & 0xf];
            e.v[32 * ib + j + 16] = kIq4nlValues[qs[j] >> 4];
        }
    }
}

static inline void expandIQ2_XXS(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)] * 0.125f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* idx = b + 2 + 8 * ib;
        const uint32_t aux = loadU32(idx + 4);
        setScale32(e, ib, 2 * static_cast<int>(aux >> 28) + 1);
        for (int l = 0; l < 4; ++l) put8(e.v + 32 * ib + 8 * l, signedGrid(kIq2xxsGrid[idx[l]], iqSigns(aux >> (7 * l))));
    }
}

static inline void expandIQ2_XS(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)] * 0.125f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[66 + ib];
        e.scale[2 * ib] = static_cast<int16_t>(2 * (sc & 0xf) + 1);
        e.scale[2 * ib + 1] = static_cast<int16_t>(2 * (sc >> 4) + 1);
        for (int l = 0; l < 4; ++l) {
            const uint16_t q = loadU16(b + 2 + 2 * (4 * ib + l));
            put8(e.v + 32 * ib + 8 * l, signedGrid(kIq2xsGrid[q & 511], iqSigns(q >> 9)));
        }
    }
}

static inline void expandIQ2_S(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)] * 0.125f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[74 + ib], qh = b[66 + ib];
        e.scale[2 * ib] = static_cast<int16_t>(2 * (sc & 0xf) + 1);
        e.scale[2 * ib + 1] = static_cast<int16_t>(2 * (sc >> 4) + 1);
        for (int l = 0; l < 4; ++l) {
            const int index = b[2 + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300);
            put8(e.v + 32 * ib + 8 * l, signedGrid(kIq2sGrid[index], b[34 + 4 * ib + l]));
        }
    }
}

static inline void expandIQ3_XXS(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)] * 0.25f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t aux = loadU32(b + 66 + 4 * ib);
        setScale32(e, ib, 2 * static_cast<int>(aux >> 28) + 1);
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = uint64_t(kIq3xxsGrid[qs[2 * l]]) | (uint64_t(kIq3xxsGrid[qs[2 * l + 1]]) << 32);
            put8(e.v + 32 * ib + 8 * l, signedGrid(g, iqSigns(aux >> (7 * l))));
        }
    }
}

static inline void expandIQ3_S(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)];
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[106 + ib / 2];
        setScale32(e, ib, 1 + 2 * ((ib % 2) ? (sc >> 4) : (sc & 0xf)));
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint8_t qh = b[66 + ib];
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = uint64_t(kIq3sGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)]) |
                               (uint64_t(kIq3sGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)]) << 32);
            put8(e.v + 32 * ib + 8 * l, signedGrid(g, b[74 + 4 * ib + l]));
        }
    }
}

// 8 IQ1 grid values g (int8 -1, 0, 1) as 8 g + 1 (delta +1/8) or 8 g - 1 (delta -1/8).
static inline void putIq1(int8_t* v, uint64_t g, bool negativeDelta)
{
    for (int j = 0; j < 8; ++j) v[j] = static_cast<int8_t>(8 * gridByte(g, j) + (negativeDelta ? -1 : 1));
}

static inline void expandIQ1_S(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[loadU16(b)] * 0.125f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t qh = loadU16(b + 34 + 2 * ib);
        setScale32(e, ib, 2 * ((qh >> 12) & 7) + 1);
        for (int l = 0; l < 4; ++l)
            putIq1(e.v + 32 * ib + 8 * l, kIq1sGrid[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], qh & 0x8000);
    }
}

static inline void expandIQ1_M(const uint8_t* b, const float* fp16, Expanded256& e)
{
    e.D = fp16[iq1mScaleBits(b)] * 0.125f;
    e.hasMin = false;
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t sc = loadU16(b + 48 + 2 * (ib / 2));
        e.scale[2 * ib] = static_cast<int16_t>(2 * ((sc >> (6 * (ib % 2) + 0)) & 7) + 1);
        e.scale[2 * ib + 1] = static_cast<int16_t>(2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1);
        const uint8_t* qs = b + 4 * ib;
        const uint8_t* qh = b + 32 + 2 * ib;
        putIq1(e.v + 32 * ib + 0, kIq1sGrid[qs[0] | ((qh[0] << 8) & 0x700)], qh[0] & 0x08);
        putIq1(e.v + 32 * ib + 8, kIq1sGrid[qs[1] | ((qh[0] << 4) & 0x700)], qh[0] & 0x80);
        putIq1(e.v + 32 * ib + 16, kIq1sGrid[qs[2] | ((qh[1] << 8) & 0x700)], qh[1] & 0x08);
        putIq1(e.v + 32 * ib + 24, kIq1sGrid[qs[3] | ((qh[1] << 4) & 0x700)], qh[1] & 0x80);
    }
}

static inline void expandQ5_1(const uint8_t* b, const float* fp16, Expanded32& e)
{
    e.D = fp16[loadU16(b)];
    e.M = fp16[loadU16(b + 2)];
    const uint32_t qh = loadU32(b + 4);
    for (int j = 0; j < 16; ++j) {
        e.v[j] = static_cast<int8_t>((b[8 + j] & 0x0f) | (((qh >> j) & 1) << 4));
        e.v[j + 16] = static_cast<int8_t>((b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

static inline void expandNibbles(const uint8_t* qs, const int8_t* table, int8_t* v)
{
    for (int j = 0; j < 16; ++j) {
        v[j] = table[qs[j] & 0xf];
        v[j + 16] = table[qs[j] >> 4];
    }
}

static inline void expandIQ4_NL(const uint8_t* b, const float* fp16, Expanded32& e)
{
    e.D = fp16[loadU16(b)];
    e.M = 0.0f;
    expandNibbles(b + 2, kIq4nlValues, e.v);
}

static inline void expandMXFP4(const uint8_t* b, const float*, Expanded32& e)
{
    e.D = e8m0Half(b[0]);
    e.M = 0.0f;
    expandNibbles(b + 1, kMxfp4Values, e.v);
}

using Expand256Fn = void (*)(const uint8_t*, const float*, Expanded256&);
using Expand32Fn = void (*)(const uint8_t*, const float*, Expanded32&);

// The expansion of a type, for callers that pick it at run time (the prompt path's repacking,
// gemm_int8_x86.h); null for the types above that are not of that size, and for every other type.
static inline Expand256Fn expand256Of(DType t)
{
    switch (t) {
    case DType::Q2_K: return expandQ2_K;
    case DType::Q3_K: return expandQ3_K;
    case DType::IQ4_XS: return expandIQ4_XS;
    case DType::IQ3_XXS: return expandIQ3_XXS;
    case DType::IQ3_S: return expandIQ3_S;
    case DType::IQ2_XXS: return expandIQ2_XXS;
    case DType::IQ2_XS: return expandIQ2_XS;
    case DType::IQ2_S: return expandIQ2_S;
    case DType::IQ1_S: return expandIQ1_S;
    case DType::IQ1_M: return expandIQ1_M;
    default: return nullptr;
    }
}
static inline Expand32Fn expand32Of(DType t)
{
    switch (t) {
    case DType::Q5_1: return expandQ5_1;
    case DType::IQ4_NL: return expandIQ4_NL;
    case DType::MXFP4: return expandMXFP4;
    default: return nullptr;
    }
}

// The row kernels, generic over the expansion and over the set's int8 dot products:
// Dot::scaled(v, xq, scale) returns sum_g scale[g] * (v . xq over values 16 g .. 16 g + 15) of a
// super-block, Dot::block32(v, xq) the dot product of 32 values.
template <Expand256Fn kExpand, int kBlockBytes, class Dot>
static void matvecExpanded256(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / 256;
    Expanded256 e;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        const int64_t laned = blocks - blocks % 8;  // laneTree8's order
        float lane[8] = {}, acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            if (b == laned) acc = laneTree8(lane);
            kExpand(row + b * kBlockBytes, fp16, e);
            const int32_t sum = Dot::scaled(e.v, in.k.qs + b * 256, e.scale);
            const float dx = in.k.d[b];
            // Products through rounded(): FMA contraction in the wider sets would change the bits.
            float term = rounded((e.D * dx) * static_cast<float>(sum));
            if (e.hasMin) {
                const int16_t* bsums = in.k.bsums + b * 16;
                int32_t msum = 0;
                for (int g = 0; g < 16; ++g) msum += int32_t(e.min[g]) * bsums[g];
                term -= rounded((e.Dmin * dx) * static_cast<float>(msum));
            }
            if (b < laned) lane[b % 8] += term;
            else acc += term;
        }
        y[r] = laned == blocks ? laneTree8(lane) : acc;
    }
}

template <Expand32Fn kExpand, int kBlockBytes, class Dot>
static void matvecExpanded32(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1)
{
    const float* fp16 = fp16Table();
    const int64_t blocks = w.cols / 32;
    Expanded32 e;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = rowPointer(w, r);
        const int64_t laned = blocks - blocks % 8;  // laneTree8's order
        float lane[8] = {}, acc = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) {
            if (b == laned) acc = laneTree8(lane);
            kExpand(row + b * kBlockBytes, fp16, e);
            const int32_t dot = Dot::block32(e.v, in.q.qs + b * 32);
            // sum8 / 8 = d_x * sum(xq) exactly (a power-of-two scaling).
            // M's term with d_x * sum(xq) rounded to fp16, as llama.cpp's block_q8_1 keeps it (Q5_1).
            const float sum = e.M != 0.0f ? fp16[fp32ToFp16(in.q.sum8[b] * 0.125f)] : 0.0f;
            const float term = rounded(static_cast<float>(dot) * (e.D * in.q.d[b])) + rounded(e.M * sum);
            if (b < laned) lane[b % 8] += term;
            else acc += term;
        }
        y[r] = laned == blocks ? laneTree8(lane) : acc;
    }
}

// Fills the matvec entries of the types above with Dot's sums. No dequant entries: a prompt
// batch of these types is the integer product (gemm_int8_x86.h, x quantized per token as
// llama.cpp's batches do; its float product on unquantized x moved a quantized model's logits by
// up to 0.5 from llama.cpp's), or, where the set has none that takes the type (the scalar set;
// IQ4_NL, IQ4_XS and MXFP4 on AVX2 without VNNI), the decode kernels, the jobs of one matrix
// grouped so that each block of rows is read from memory once for the whole batch
// (CpuDevice::planMatvec).
template <class Dot>
static void fillIqKernels(Kernels& k)
{
    auto set = [&](DType t, MatvecRowsFn mv) { k.matvec[static_cast<int>(t)] = mv; };
    set(DType::Q2_K, matvecExpanded256<expandQ2_K, 84, Dot>);
    set(DType::Q3_K, matvecExpanded256<expandQ3_K, 110, Dot>);
    set(DType::IQ4_XS, matvecExpanded256<expandIQ4_XS, 136, Dot>);
    set(DType::IQ3_XXS, matvecExpanded256<expandIQ3_XXS, 98, Dot>);
    set(DType::IQ3_S, matvecExpanded256<expandIQ3_S, 110, Dot>);
    set(DType::IQ2_XXS, matvecExpanded256<expandIQ2_XXS, 66, Dot>);
    set(DType::IQ2_XS, matvecExpanded256<expandIQ2_XS, 74, Dot>);
    set(DType::IQ2_S, matvecExpanded256<expandIQ2_S, 82, Dot>);
    set(DType::IQ1_S, matvecExpanded256<expandIQ1_S, 50, Dot>);
    set(DType::IQ1_M, matvecExpanded256<expandIQ1_M, 56, Dot>);
    set(DType::Q5_1, matvecExpanded32<expandQ5_1, 24, Dot>);
    set(DType::IQ4_NL, matvecExpanded32<expandIQ4_NL, 18, Dot>);
    set(DType::MXFP4, matvecExpanded32<expandMXFP4, 17, Dot>);
}

}  // namespace spillway::gpu::cpu
