#pragma once
// Helpers shared by test_kquant_matvec.cpp and test_kquant_formats.cpp: this header's own decoder
// of ggml's Q4_1, Q5_0, Q4_K, Q5_K, Q6_K blocks and of Q8_G64, written from the ggml layouts
// (ggml-common.h block_q4_1, block_q5_0, block_q4_K + get_scale_min_k4, block_q5_K,
// block_q6_K; dequantize_row_* in ggml-quants.c), not from the engine's code; random test
// matrices in those layouts; and x vectors that every x quantization of the engine represents
// exactly.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_test_util.h"

namespace spillway::kquant_test {

using namespace spillway::gpu;
using namespace spillway::cpu_test;

inline constexpr DType kNewTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q4_K,
                                      DType::Q5_K, DType::Q6_K, DType::Q8_G64};

// One decoded value: exactly (double), as ggml's float code computes it (the order of float
// operations of dequantize_row_*), and the size of the terms it is made of (|d sc q| + |dmin m|
// for the K-quants with mins), which bounds the float rounding of the kernels' sums.
struct RefValue {
    double exact = 0;
    float ggml = 0;
    double magnitude = 0;
};

inline float halfAt(const uint8_t* p)
{
    uint16_t h;
    std::memcpy(&h, p, 2);
    return static_cast<float>(refHalf(h));
}

// Bit `bit` of the little-endian bit string starting at p.
inline int bitAt(const uint8_t* p, int bit) { return (p[bit / 8] >> (bit % 8)) & 1; }

// The 6-bit scale (what = 0) or min (what = 1) of sub-block j of a Q4_K / Q5_K super-block:
// sub-blocks 0..3 keep theirs in the low 6 bits of byte j (scales) / j + 4 (mins); 4..7 in a
// nibble of byte j + 4 (low: scale, high: min) plus the top 2 bits of byte j - 4 (scale) / j
// (min) as bits 4..5.
inline int kScale6(const uint8_t* s, int j, int what)
{
    if (j < 4) return s[j + 4 * what] & 0x3f;
    const int low = what == 0 ? (s[j + 4] & 0x0f) : (s[j + 4] >> 4);
    const int top = (what == 0 ? s[j - 4] : s[j]) >> 6;
    return low + 16 * top;
}

// Value e of the block at `b` (e < the type's block size).
inline RefValue refValue(DType type, const uint8_t* b, int e)
{
    RefValue v;
    switch (type) {
    case DType::Q4_1: {  // d, m, 16 bytes: value e < 16 in the low nibble of byte e, else high
        const float d = halfAt(b), m = halfAt(b + 2);
        const int q = e < 16 ? (b[4 + e] & 15) : (b[4 + e - 16] >> 4);
        v.exact = double(d) * q + m;
        v.ggml = float(q) * d + m;
        v.magnitude = std::fabs(double(d) * q) + std::fabs(m);
        return v;
    }
    case DType::Q5_0: {  // d, 32 high bits (bit e), 16 bytes of nibbles
        const float d = halfAt(b);
        const int low = e < 16 ? (b[6 + e] & 15) : (b[6 + e - 16] >> 4);
        const int q = low + 16 * bitAt(b + 2, e) - 16;
        v.exact = double(d) * q;
        v.ggml = float(q) * d;
        v.magnitude = std::fabs(v.exact);
        return v;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
        const bool five = type == DType::Q5_K;
        const float d = halfAt(b), dmin = halfAt(b + 2);
        const int j = e / 32;  // sub-block; its nibbles: byte 32 (j / 2) + e % 32, half j % 2
        const uint8_t byte = b[(five ? 48 : 16) + 32 * (j / 2) + e % 32];
        int q = j % 2 ? byte >> 4 : byte & 15;
        if (five) q += 16 * bitAt(b + 16 + e % 32, j);  // qh[e % 32], bit j
        const int sc = kScale6(b + 4, j, 0), m = kScale6(b + 4, j, 1);
        v.exact = double(d) * sc * q - double(dmin) * m;
        v.ggml = (d * float(sc)) * float(q) - dmin * float(m);
        v.magnitude = std::fabs(double(d) * sc * q) + std::fabs(double(dmin) * m);
        return v;
    }
    case DType::Q6_K: {  // ql[128], qh[64], int8 scales[16], d
        const float d = halfAt(b + 208);
        const int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const uint8_t lowByte = b[64 * half + (quarter % 2) * 32 + l];
        const int low = quarter < 2 ? (lowByte & 15) : (lowByte >> 4);
        const int high = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
        const int q = low + 16 * high - 32;
        const int sc = int8_t(b[192 + e / 16]);
        v.exact = double(d) * sc * q;
        v.ggml = d * float(sc) * float(q);
        v.magnitude = std::fabs(v.exact);
        return v;
    }
    case DType::Q8_G64: {  // fp32 s, 64 x int8
        float s;
        std::memcpy(&s, b, 4);
        const int q = int8_t(b[4 + e]);
        v.exact = double(s) * q;
        v.ggml = s * float(q);
        v.magnitude = std::fabs(v.exact);
        return v;
    }
    default: return v;
    }
}

// Decodes a whole row of `cols` values.
inline std::vector<RefValue> refRow(DType type, const uint8_t* row, int64_t cols)
{
    const auto& tr = dtypeTraits(type);
    std::vector<RefValue> out(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c)
        out[c] = refValue(type, row + (c / tr.blockSize) * tr.blockBytes, int(c % tr.blockSize));
    return out;
}

// A random matrix: every code byte random (all nibble and bit patterns occur), block scales
// small and of either sign where the format allows it; rows followed by `padding` bytes.
struct KMatrix {
    DType type;
    int64_t rows, cols;
    size_t stride;
    std::vector<uint8_t> bytes;
    std::vector<RefValue> values;  // (rows, cols)
    MatrixView view() const { return {type, bytes.data(), rows, cols, stride}; }
    const uint8_t* row(int64_t r) const { return bytes.data() + r * stride; }
};

inline KMatrix makeKMatrix(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng,
                           size_t padding = 0)
{
    KMatrix m{type, rows, cols, rowBytes(type, cols) + padding, {}, {}};
    m.bytes.resize(m.stride * rows);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (uint8_t& b : m.bytes) b = uint8_t(byte(rng));
    const auto& tr = dtypeTraits(type);
    auto putHalf = [](uint8_t* p, float f) {
        const uint16_t h = fp32ToFp16(f);
        std::memcpy(p, &h, 2);
    };
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t blk = 0; blk < cols / tr.blockSize; ++blk) {
            uint8_t* b = m.bytes.data() + r * m.stride + blk * tr.blockBytes;
            const float sign = byte(rng) & 1 ? -1.0f : 1.0f;
            switch (type) {
            case DType::Q4_1:  // d > 0 (ggml's quantizer), m either sign
                putHalf(b, scale(rng));
                putHalf(b + 2, sign * 8 * scale(rng));
                break;
            case DType::Q5_0: putHalf(b, sign * scale(rng)); break;
            case DType::Q4_K:
            case DType::Q5_K:  // sub-block scales up to 63: keep d, dmin small
                putHalf(b, scale(rng) / 16);
                putHalf(b + 2, scale(rng) / 16);
                break;
            case DType::Q6_K: putHalf(b + 208, sign * scale(rng) / 32); break;
            case DType::Q8_G64: {
                const float s = scale(rng);
                std::memcpy(b, &s, 4);
                break;
            }
            default: break;
            }
        }
    m.values.reserve(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
        const auto row = refRow(type, m.row(r), cols);
        m.values.insert(m.values.end(), row.begin(), row.end());
    }
    return m;
}

// x that each of the engine's x quantizations holds exactly: integers k / 16 with |k| <= 127
// and, in every block of 32, one value of +-127/16 (so every block / group scale is 1/16).
inline std::vector<float> exactX(int64_t n, std::mt19937_64& rng)
{
    std::uniform_int_distribution<int> k(-127, 127);
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = k(rng) / 16.0f;
    for (int64_t b = 0; b < n / 32; ++b) v[b * 32 + (b * 7) % 32] = (b & 1 ? -127 : 127) / 16.0f;
    return v;
}

// Values per block of the quantization of x the engine uses for `type`.
inline int xBlock(DType type)
{
    switch (type) {
    case DType::Q4_1:
    case DType::Q5_0: return 32;
    case DType::Q8_G64: return 64;
    default: return 256;
    }
}

}  // namespace spillway::kquant_test
