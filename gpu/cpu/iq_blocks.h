#pragma once
// Byte layouts of ggml's Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ1_S, IQ1_M and MXFP4 blocks (gpu/dtype.h) and the decoding of one block to floats in
// ggml's float operations (dequantize_row_* of ggml-quants.c; MXFP4 as ik_llama.cpp and
// llama.cpp decode it), so that getRow and the prompt path see the values llama.cpp would.
// tests/engine/test_quant_types.cpp compares every decoder with values ggml gave, bit for bit.
// Internal to gpu/cpu; everything is static inline (see kernels_common.h for why). A product
// that ggml adds to something goes through rounded(): ggml's decoders are compiled without FMA.
//
//   Q2_K    (84 B)  [0] 16 B scales (low nibble scale, high nibble min, per 16 values)
//                   [16] 64 B 2-bit quants  [80] fp16 d  [82] fp16 dmin
//   Q3_K   (110 B)  [0] 32 B hmask (bit 2 of each value, inverted)  [32] 64 B 2-bit quants
//                   [96] 12 B 6-bit scales (16, offset 32)  [108] fp16 d
//   Q5_1    (24 B)  [0] fp16 d  [2] fp16 m  [4] u32 qh  [8] 16 B nibbles (Q5_0's order)
//   IQ4_NL  (18 B)  [0] fp16 d  [2] 16 B nibbles into kIq4nlValues (Q4_0's order)
//   IQ4_XS (136 B)  [0] fp16 d  [2] u16 scales_h  [4] 4 B scales_l  [8] 128 B nibbles
//   IQ3_XXS (98 B)  [0] fp16 d  [2] 64 B grid indices  [66] 8 x u32 (4 x 7 sign bits, 4-bit scale)
//   IQ3_S  (110 B)  [0] fp16 d  [2] 64 B indices  [66] 8 B index bit 8  [74] 32 B signs  [106] 4 B scales
//   IQ2_XXS (66 B)  [0] fp16 d  [2] 32 x u16: per 32 values 4 grid bytes, then u32 of 4 x 7 signs + scale
//   IQ2_XS  (74 B)  [0] fp16 d  [2] 32 x u16 (9-bit index, 7 sign bits)  [66] 8 B scales (2 x 4 bits)
//   IQ2_S   (82 B)  [0] fp16 d  [2] 32 B index low bytes  [34] 32 B signs  [66] 8 B index bits 8-9
//                   [74] 8 B scales
//   IQ1_S   (50 B)  [0] fp16 d  [2] 32 B index low bytes  [34] 8 x u16 (3 x 3 index bits, 3-bit
//                   scale, delta sign)
//   IQ1_M   (56 B)  [0] 32 B index low bytes  [32] 16 B (index bits 8-10, delta sign, per 8 values)
//                   [48] 4 x u16 scales (3 bits per 16 values; their top nibbles form fp16 d)
//   MXFP4   (17 B)  [0] E8M0 exponent  [1] 16 B nibbles into kMxfp4Values (Q4_0's order)

#include <cstdint>
#include <cstring>

#include "gpu/cpu/kernels_common.h"
#include "gpu/iq_grids.h"

namespace spillway::gpu::cpu {

static inline uint32_t loadU32(const void* p)
{
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

static constexpr int8_t gridByte(uint64_t entry, int j) { return static_cast<int8_t>(entry >> (8 * j)); }

static inline void decodeQ2_K(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b + 80)], dmin = fp16[loadU16(b + 82)];
    const uint8_t* scales = b;
    for (int h = 0; h < 2; ++h) {
        const uint8_t* q = b + 16 + 32 * h;
        for (int j = 0; j < 4; ++j) {
            for (int half = 0; half < 2; ++half) {
                const uint8_t sc = scales[8 * h + 2 * j + half];
                const float dl = d * static_cast<float>(sc & 0xf), ml = dmin * static_cast<float>(sc >> 4);
                float* y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 0; l < 16; ++l)
                    y[l] = rounded(dl * static_cast<float>((q[l + 16 * half] >> (2 * j)) & 3)) - ml;
            }
        }
    }
}

// The 16 signed 6-bit scales of a Q3_K super-block (before the - 32).
static inline void q3Scales(const uint8_t* s, int scales[16])
{
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
        const int high = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        scales[j] = low | (high << 4);
    }
}

static inline void decodeQ3_K(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b + 108)];
    int scales[16];
    q3Scales(b + 96, scales);
    const uint8_t* hm = b;
    for (int h = 0; h < 2; ++h) {
        const uint8_t* q = b + 32 + 32 * h;
        for (int j = 0; j < 4; ++j) {
            const uint8_t m = static_cast<uint8_t>(1u << (4 * h + j));
            for (int half = 0; half < 2; ++half) {
                const float dl = d * static_cast<float>(scales[8 * h + 2 * j + half] - 32);
                float* y = out + 128 * h + 32 * j + 16 * half;
                for (int l = 0; l < 16; ++l) {
                    const int i = l + 16 * half;
                    const int v = ((q[i] >> (2 * j)) & 3) - ((hm[i] & m) ? 0 : 4);
                    y[l] = dl * static_cast<float>(v);
                }
            }
        }
    }
}

static inline void decodeQ5_1(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)], m = fp16[loadU16(b + 2)];
    const uint32_t qh = loadU32(b + 4);
    for (int j = 0; j < 16; ++j) {
        const int x0 = (b[8 + j] & 0x0f) | static_cast<int>(((qh >> j) << 4) & 0x10);
        const int x1 = (b[8 + j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
        out[j] = rounded(static_cast<float>(x0) * d) + m;
        out[j + 16] = rounded(static_cast<float>(x1) * d) + m;
    }
}

static inline void decodeIQ4_NL(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int j = 0; j < 16; ++j) {
        out[j] = d * static_cast<float>(kIq4nlValues[b[2 + j] & 0xf]);
        out[j + 16] = d * static_cast<float>(kIq4nlValues[b[2 + j] >> 4]);
    }
}

// The 6-bit scale (before the - 32) of sub-block ib (0..7) of an IQ4_XS super-block.
static inline int iq4xsScale(const uint8_t* b, int ib)
{
    return ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((loadU16(b + 2) >> (2 * ib)) & 3) << 4);
}

static inline void decodeIQ4_XS(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const float dl = d * static_cast<float>(iq4xsScale(b, ib) - 32);
        const uint8_t* qs = b + 8 + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            out[32 * ib + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xf]);
            out[32 * ib + j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
        }
    }
}

static inline float signOf(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; }

static inline void decodeIQ2_XXS(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* idx = b + 2 + 8 * ib;
        const uint32_t aux = loadU32(idx + 4);
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = kIq2xxsGrid[idx[l]];
            const uint8_t signs = iqSigns(aux >> (7 * l));
            for (int j = 0; j < 8; ++j)
                out[32 * ib + 8 * l + j] = db * static_cast<float>(static_cast<uint8_t>(gridByte(g, j))) * signOf(signs, j);
        }
    }
}

static inline void decodeIQ2_XS(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[66 + ib];
        const float db[2] = {d * (0.5f + static_cast<float>(sc & 0xf)) * 0.25f,
                             d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l) {
            const uint16_t q = loadU16(b + 2 + 2 * (4 * ib + l));
            const uint64_t g = kIq2xsGrid[q & 511];
            const uint8_t signs = iqSigns(q >> 9);
            for (int j = 0; j < 8; ++j)
                out[32 * ib + 8 * l + j] = db[l / 2] * static_cast<float>(static_cast<uint8_t>(gridByte(g, j))) * signOf(signs, j);
        }
    }
}

static inline void decodeIQ2_S(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[74 + ib], qh = b[66 + ib];
        const float db[2] = {d * (0.5f + static_cast<float>(sc & 0xf)) * 0.25f,
                             d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l) {
            const int index = b[2 + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300);
            const uint64_t g = kIq2sGrid[index];
            const uint8_t signs = b[34 + 4 * ib + l];
            for (int j = 0; j < 8; ++j)
                out[32 * ib + 8 * l + j] = db[l / 2] * static_cast<float>(static_cast<uint8_t>(gridByte(g, j))) * signOf(signs, j);
        }
    }
}

static inline void decodeIQ3_XXS(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint32_t aux = loadU32(b + 66 + 4 * ib);
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; ++l) {
            const uint8_t signs = iqSigns(aux >> (7 * l));
            const uint32_t g1 = kIq3xxsGrid[qs[2 * l]], g2 = kIq3xxsGrid[qs[2 * l + 1]];
            for (int j = 0; j < 4; ++j) {
                out[32 * ib + 8 * l + j] = db * static_cast<float>((g1 >> (8 * j)) & 0xff) * signOf(signs, j);
                out[32 * ib + 8 * l + j + 4] = db * static_cast<float>((g2 >> (8 * j)) & 0xff) * signOf(signs, j + 4);
            }
        }
    }
}

static inline void decodeIQ3_S(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t sc = b[106 + ib / 2];
        const float db = d * static_cast<float>(1 + 2 * ((ib % 2) ? (sc >> 4) : (sc & 0xf)));
        const uint8_t* qs = b + 2 + 8 * ib;
        const uint8_t qh = b[66 + ib];
        const uint8_t* signs = b + 74 + 4 * ib;
        for (int l = 0; l < 4; ++l) {
            const uint32_t g1 = kIq3sGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
            const uint32_t g2 = kIq3sGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
            for (int j = 0; j < 4; ++j) {
                out[32 * ib + 8 * l + j] = db * static_cast<float>((g1 >> (8 * j)) & 0xff) * signOf(signs[l], j);
                out[32 * ib + 8 * l + j + 4] = db * static_cast<float>((g2 >> (8 * j)) & 0xff) * signOf(signs[l], j + 4);
            }
        }
    }
}

static inline void decodeIQ1_S(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t qh = loadU16(b + 34 + 2 * ib);
        const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
        const float delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = kIq1sGrid[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
            for (int j = 0; j < 8; ++j) out[32 * ib + 8 * l + j] = dl * (static_cast<float>(gridByte(g, j)) + delta);
        }
    }
}

// IQ1_M's super-block scale: the top nibbles of its 4 scale words, as an fp16.
static inline uint16_t iq1mScaleBits(const uint8_t* b)
{
    const uint16_t s0 = loadU16(b + 48), s1 = loadU16(b + 50), s2 = loadU16(b + 52), s3 = loadU16(b + 54);
    return static_cast<uint16_t>((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000));
}

static inline void decodeIQ1_M(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[iq1mScaleBits(b)];
    for (int ib = 0; ib < 8; ++ib) {
        const uint16_t sc = loadU16(b + 48 + 2 * (ib / 2));
        const float dl1 = d * static_cast<float>(2 * ((sc >> (6 * (ib % 2) + 0)) & 7) + 1);
        const float dl2 = d * static_cast<float>(2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1);
        const uint8_t* qs = b + 4 * ib;
        const uint8_t* qh = b + 32 + 2 * ib;
        const int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                            qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
        const float delta[4] = {(qh[0] & 0x08) ? -kIq1Delta : kIq1Delta, (qh[0] & 0x80) ? -kIq1Delta : kIq1Delta,
                                (qh[1] & 0x08) ? -kIq1Delta : kIq1Delta, (qh[1] & 0x80) ? -kIq1Delta : kIq1Delta};
        for (int l = 0; l < 4; ++l) {
            const uint64_t g = kIq1sGrid[idx[l]];
            const float dl = l < 2 ? dl1 : dl2;
            for (int j = 0; j < 8; ++j) out[32 * ib + 8 * l + j] = dl * (static_cast<float>(gridByte(g, j)) + delta[l]);
        }
    }
}

static inline void decodeMXFP4(const uint8_t* b, float* out)
{
    const float d = e8m0Half(b[0]);
    for (int j = 0; j < 16; ++j) {
        out[j] = d * static_cast<float>(kMxfp4Values[b[1 + j] & 0xf]);
        out[j + 16] = d * static_cast<float>(kMxfp4Values[b[1 + j] >> 4]);
    }
}

// One block of any of this file's types to floats; false for another type.
static inline bool decodeIqBlock(DType type, const uint8_t* b, const float* fp16, float* out)
{
    switch (type) {
    case DType::Q2_K: decodeQ2_K(b, fp16, out); return true;
    case DType::Q3_K: decodeQ3_K(b, fp16, out); return true;
    case DType::Q5_1: decodeQ5_1(b, fp16, out); return true;
    case DType::IQ4_NL: decodeIQ4_NL(b, fp16, out); return true;
    case DType::IQ4_XS: decodeIQ4_XS(b, fp16, out); return true;
    case DType::IQ3_XXS: decodeIQ3_XXS(b, fp16, out); return true;
    case DType::IQ3_S: decodeIQ3_S(b, fp16, out); return true;
    case DType::IQ2_XXS: decodeIQ2_XXS(b, fp16, out); return true;
    case DType::IQ2_XS: decodeIQ2_XS(b, fp16, out); return true;
    case DType::IQ2_S: decodeIQ2_S(b, fp16, out); return true;
    case DType::IQ1_S: decodeIQ1_S(b, fp16, out); return true;
    case DType::IQ1_M: decodeIQ1_M(b, fp16, out); return true;
    case DType::MXFP4: decodeMXFP4(b, out); return true;
    default: return false;
    }
}

}  // namespace spillway::gpu::cpu
