#pragma once
// Byte layouts of ggml's Q4_1, Q5_0, Q4_K, Q5_K and Q6_K blocks and of our Q8_G64 (see
// gpu/dtype.h), and the decoding of one block to floats with ggml's float operations
// (dequantize_row_* in ggml-quants.c), so that getRow gives the values llama.cpp would.
// Internal to gpu/cpu; everything is static inline (see kernels_common.h for why).
//
//   Q4_1   (20 B)  [0] fp16 d  [2] fp16 m  [4] 16 B nibbles: byte i low = value i, high = i + 16
//   Q5_0   (22 B)  [0] fp16 d  [2] u32 LE qh (bit i = bit 4 of value i)  [6] 16 B nibbles
//   Q4_K  (144 B)  [0] fp16 d  [2] fp16 dmin  [4] 12 B 6-bit scales/mins  [16] 128 B nibbles
//   Q5_K  (176 B)  as Q4_K, then [16] 32 B qh, [48] 128 B nibbles
//   Q6_K  (210 B)  [0] 128 B ql  [128] 64 B qh  [192] 16 x int8 scales  [208] fp16 d
//   Q8_G64 (68 B)  [0] fp32 s  [4] 64 x int8
//
// K-quant element order. Q4_K / Q5_K: 4 chunks of 64 values; chunk c reads nibble bytes
// [32c, 32c + 32): their low nibbles are values 64c + l, their high nibbles 64c + 32 + l; these
// are sub-blocks 2c and 2c + 1 (32 values each, a 6-bit scale and min each). Q5_K's bit 4 of
// value 64c + l is bit 2c of qh[l], of value 64c + 32 + l bit 2c + 1. Q6_K: 2 halves of 128;
// half h, l in [0, 32): values 128h + {l, 32 + l, 64 + l, 96 + l} take the low nibble of
// ql[64h + l], of ql[64h + 32 + l], the high nibble of ql[64h + l], of ql[64h + 32 + l], and
// bits {0-1, 2-3, 4-5, 6-7} of qh[32h + l] as bits 4-5; value v has scale scales[v / 16] and is
// d * scale * (q - 32).

#include <cstdint>
#include <cstring>

#include "gpu/cpu/kernels_common.h"

namespace spillway::gpu::cpu {

inline constexpr int kQK = 256;  // values per K-quant super-block

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12 scale
// bytes: j < 4 in the low 6 bits of bytes j (scale) and j + 4 (min); j >= 4 in the nibbles of
// byte j + 4 with bits 4-5 from the top 2 bits of bytes j - 4 (scale) and j (min).
static inline void kScaleMin(int j, const uint8_t* s, int& scale, int& min)
{
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static inline void kScalesMins(const uint8_t* s, int scales[8], int mins[8])
{
    for (int j = 0; j < 8; ++j) kScaleMin(j, s, scales[j], mins[j]);
}

static inline float fp32At(const uint8_t* p)
{
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

// ---- one block -> floats, in ggml's float arithmetic -------------------------------------------

static inline void decodeQ4_1(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)], m = fp16[loadU16(b + 2)];
    for (int i = 0; i < 16; ++i) {
        out[i] = static_cast<float>(b[4 + i] & 0x0f) * d + m;
        out[i + 16] = static_cast<float>(b[4 + i] >> 4) * d + m;
    }
}

static inline void decodeQ5_0(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)];
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    for (int i = 0; i < 16; ++i) {
        const int lo = (b[6 + i] & 0x0f) | (((qh >> i) & 1) << 4);
        const int hi = (b[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
        out[i] = static_cast<float>(lo - 16) * d;
        out[i + 16] = static_cast<float>(hi - 16) * d;
    }
}

// Q4_K (high = null) and Q5_K (high = the 32 qh bytes): value = (d * scale) * q - dmin * min.
static inline void decodeQ4_5K(const uint8_t* b, const uint8_t* high, const uint8_t* nibbles,
                               const float* fp16, float* out)
{
    const float d = fp16[loadU16(b)], dmin = fp16[loadU16(b + 2)];
    for (int c = 0; c < 4; ++c) {
        int sc0, m0, sc1, m1;
        kScaleMin(2 * c, b + 4, sc0, m0);
        kScaleMin(2 * c + 1, b + 4, sc1, m1);
        const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
        const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
        for (int l = 0; l < 32; ++l) {
            const uint8_t q = nibbles[32 * c + l];
            const int h0 = high ? ((high[l] >> (2 * c)) & 1) << 4 : 0;
            const int h1 = high ? ((high[l] >> (2 * c + 1)) & 1) << 4 : 0;
            out[64 * c + l] = d0 * static_cast<float>((q & 0x0f) + h0) - min0;
            out[64 * c + 32 + l] = d1 * static_cast<float>((q >> 4) + h1) - min1;
        }
    }
}

static inline void decodeQ4_K(const uint8_t* b, const float* fp16, float* out)
{
    decodeQ4_5K(b, nullptr, b + 16, fp16, out);
}

static inline void decodeQ5_K(const uint8_t* b, const float* fp16, float* out)
{
    decodeQ4_5K(b, b + 16, b + 48, fp16, out);
}

// The 6-bit value v (0..63, before the - 32) of a Q6_K super-block.
static inline int q6Value(const uint8_t* b, int v)
{
    const int h = v / 128, part = (v % 128) / 32, l = v % 32;
    const uint8_t low = b[64 * h + 32 * (part & 1) + l];
    const int nibble = part < 2 ? (low & 0x0f) : (low >> 4);
    const int top = (b[128 + 32 * h + l] >> (2 * part)) & 3;
    return nibble | (top << 4);
}

static inline void decodeQ6_K(const uint8_t* b, const float* fp16, float* out)
{
    const float d = fp16[loadU16(b + 208)];
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
    for (int v = 0; v < kQK; ++v)
        out[v] = d * static_cast<float>(scales[v / 16]) * static_cast<float>(q6Value(b, v) - 32);
}

static inline void decodeQ8_G64(const uint8_t* b, float* out)
{
    const float s = fp32At(b);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 4);
    for (int i = 0; i < 64; ++i) out[i] = s * static_cast<float>(q[i]);
}

}  // namespace spillway::gpu::cpu
