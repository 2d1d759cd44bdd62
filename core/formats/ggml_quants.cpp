#include "core/formats/ggml_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/host.h"

namespace spillway::gguf {

namespace {

using gpu::DType;

constexpr int kQK = 256;  // values per K-quant super-block

// Stores fp16(f) at p and returns the value stored, as a float.
float putHalf(uint8_t* p, float f)
{
    const uint16_t h = gpu::fp32ToFp16(f);
    std::memcpy(p, &h, 2);
    return gpu::fp16ToFp32(h);
}

float getHalf(const uint8_t* p)
{
    uint16_t h;
    std::memcpy(&h, p, 2);
    return gpu::fp16ToFp32(h);
}

// Round half away from zero, clamped to [lo, hi]; 0 for a zero or non-finite step.
int quantizeValue(float x, float step, int lo, int hi)
{
    if (!(step != 0.0f) || !std::isfinite(x / step)) return std::clamp(0, lo, hi);
    return std::clamp(static_cast<int>(std::lround(x / step)), lo, hi);
}

// The value of largest magnitude (its sign kept), the first one on ties.
float signedMax(const float* x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) {
            amax = std::fabs(x[i]);
            max = x[i];
        }
    return max;
}

// ---- blocks of 32 ------------------------------------------------------------------------------

void encodeQ8_0(const float* x, uint8_t* b)  // [fp16 d][32 x int8]
{
    const float d = putHalf(b, std::fabs(signedMax(x, 32)) / 127.0f);
    for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(quantizeValue(x[i], d, -127, 127));
}

// As ggml: d = (the value of largest magnitude) / -8, so that value is exactly q = 0.
void encodeQ4_0(const float* x, uint8_t* b)  // [fp16 d][16 bytes of nibbles]
{
    const float d = putHalf(b, signedMax(x, 32) / -8.0f);
    for (int i = 0; i < 16; ++i) {
        const int lo = quantizeValue(x[i], d, -8, 7) + 8;
        const int hi = quantizeValue(x[i + 16], d, -8, 7) + 8;
        b[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
    }
}

void encodeQ4_1(const float* x, uint8_t* b)  // [fp16 d][fp16 m][16 bytes of nibbles]
{
    const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
    const float d = putHalf(b, (hi - lo) / 15.0f);
    const float m = putHalf(b + 2, lo);
    for (int i = 0; i < 16; ++i) {
        const int q0 = quantizeValue(x[i] - m, d, 0, 15);
        const int q1 = quantizeValue(x[i + 16] - m, d, 0, 15);
        b[4 + i] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
}

void encodeQ5_0(const float* x, uint8_t* b)  // [fp16 d][u32 qh][16 bytes of nibbles]
{
    const float d = putHalf(b, signedMax(x, 32) / -16.0f);
    uint32_t qh = 0;
    for (int i = 0; i < 16; ++i) {
        const int q0 = quantizeValue(x[i], d, -16, 15) + 16;
        const int q1 = quantizeValue(x[i + 16], d, -16, 15) + 16;
        b[6 + i] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
        qh |= static_cast<uint32_t>(q0 >> 4) << i;
        qh |= static_cast<uint32_t>(q1 >> 4) << (i + 16);
    }
    std::memcpy(b + 2, &qh, 4);
}

void encodeQ8_G64(const float* x, uint8_t* b)  // [fp32 s][64 x int8]
{
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax / 127.0f;
    std::memcpy(b, &s, 4);
    for (int i = 0; i < 64; ++i) b[4 + i] = static_cast<uint8_t>(quantizeValue(x[i], s, -127, 127));
}

// ---- K-quant super-blocks of 256 --------------------------------------------------------------

// Q4_K (levels 15) and Q5_K (levels 31): 8 sub-blocks of 32, value = d sc q - dmin m with
// 6-bit sc, m. A sub-block spans [min(0, lowest), highest] (the stored min is never negative).
void encodeQ4_5K(const float* x, uint8_t* b, int levels)
{
    float scale[8], offset[8];  // per sub-block: step, and -(its low end) >= 0
    for (int j = 0; j < 8; ++j) {
        const float* v = x + 32 * j;
        const float lo = std::min(0.0f, *std::min_element(v, v + 32));
        const float hi = *std::max_element(v, v + 32);
        scale[j] = (hi - lo) / static_cast<float>(levels);
        offset[j] = -lo;
    }
    const float d = putHalf(b, *std::max_element(scale, scale + 8) / 63.0f);
    const float dmin = putHalf(b + 2, *std::max_element(offset, offset + 8) / 63.0f);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = quantizeValue(scale[j], d, 0, 63);
        m[j] = quantizeValue(offset[j], dmin, 0, 63);
    }
    uint8_t* s = b + 4;  // the 12 bytes of 6-bit scales and mins (see gpu/cpu/kquant_blocks.h)
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    const bool five = levels == 31;
    uint8_t* high = b + 16;  // Q5_K only
    uint8_t* nibbles = b + (five ? 48 : 16);
    if (five) std::memset(high, 0, 32);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            int q[2];
            for (int half = 0; half < 2; ++half) {
                const int j = 2 * c + half;
                const float step = d * static_cast<float>(sc[j]);
                const float base = dmin * static_cast<float>(m[j]);
                q[half] = quantizeValue(x[64 * c + 32 * half + l] + base, step, 0, levels);
                if (five) high[l] |= static_cast<uint8_t>((q[half] >> 4) << (2 * c + half));
            }
            nibbles[32 * c + l] = static_cast<uint8_t>((q[0] & 15) | ((q[1] & 15) << 4));
        }
}

// Q6_K: 16 groups of 16, value = d sc (q - 32), int8 sc, q in 0..63.
void encodeQ6_K(const float* x, uint8_t* b)
{
    float scale[16];
    for (int g = 0; g < 16; ++g) scale[g] = signedMax(x + 16 * g, 16) / -32.0f;
    const float d = putHalf(b + 208, signedMax(scale, 16) / -128.0f);
    int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
    for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(quantizeValue(scale[g], d, -128, 127));
    std::memset(b, 0, 192);
    for (int v = 0; v < kQK; ++v) {
        const int q = quantizeValue(x[v], d * static_cast<float>(sc[v / 16]), -32, 31) + 32;
        const int h = v / 128, part = (v % 128) / 32, l = v % 32;
        uint8_t& low = b[64 * h + 32 * (part & 1) + l];
        low |= static_cast<uint8_t>(part < 2 ? (q & 15) : (q & 15) << 4);
        b[128 + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * part));
    }
}

// ---- decoders (ggml's float arithmetic) --------------------------------------------------------

void decodeBlock(DType type, const uint8_t* b, float* out)
{
    switch (type) {
    case DType::Q8_0: {
        const float d = getHalf(b);
        for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
        return;
    }
    case DType::Q4_0: {
        const float d = getHalf(b);
        for (int i = 0; i < 16; ++i) {
            out[i] = static_cast<float>((b[2 + i] & 15) - 8) * d;
            out[i + 16] = static_cast<float>((b[2 + i] >> 4) - 8) * d;
        }
        return;
    }
    case DType::Q4_1: {
        const float d = getHalf(b), m = getHalf(b + 2);
        for (int i = 0; i < 16; ++i) {
            out[i] = static_cast<float>(b[4 + i] & 15) * d + m;
            out[i + 16] = static_cast<float>(b[4 + i] >> 4) * d + m;
        }
        return;
    }
    case DType::Q5_0: {
        const float d = getHalf(b);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        for (int i = 0; i < 16; ++i) {
            const int q0 = (b[6 + i] & 15) | static_cast<int>(((qh >> i) & 1) << 4);
            const int q1 = (b[6 + i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
            out[i] = static_cast<float>(q0 - 16) * d;
            out[i + 16] = static_cast<float>(q1 - 16) * d;
        }
        return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
        const bool five = type == DType::Q5_K;
        const float d = getHalf(b), dmin = getHalf(b + 2);
        const uint8_t* s = b + 4;
        const uint8_t* nibbles = b + (five ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
            const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
            const int m = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
            const float step = d * static_cast<float>(sc), base = dmin * static_cast<float>(m);
            const int c = j / 2, shift = 4 * (j % 2);
            for (int l = 0; l < 32; ++l) {
                int q = (nibbles[32 * c + l] >> shift) & 15;
                if (five) q |= ((b[16 + l] >> j) & 1) << 4;
                out[32 * j + l] = step * static_cast<float>(q) - base;
            }
        }
        return;
    }
    case DType::Q6_K: {
        const float d = getHalf(b + 208);
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int v = 0; v < kQK; ++v) {
            const int h = v / 128, part = (v % 128) / 32, l = v % 32;
            const uint8_t low = b[64 * h + 32 * (part & 1) + l];
            const int q = (part < 2 ? (low & 15) : (low >> 4)) |
                          (((b[128 + 32 * h + l] >> (2 * part)) & 3) << 4);
            out[v] = d * static_cast<float>(sc[v / 16]) * static_cast<float>(q - 32);
        }
        return;
    }
    case DType::Q8_G64: {
        float s;
        std::memcpy(&s, b, 4);
        for (int i = 0; i < 64; ++i) out[i] = s * static_cast<float>(static_cast<int8_t>(b[4 + i]));
        return;
    }
    default: return;
    }
}

}  // namespace

bool hasRowCodec(DType type)
{
    return static_cast<int>(type) < gpu::kDTypeCount && type != DType::BitmapSparse;
}

bool hasRowEncoder(DType type)
{
    switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_G64: return true;
    default: return false;
    }
}

void quantizeRow(DType type, const float* x, int64_t n, uint8_t* out)
{
    if (!hasRowEncoder(type)) return;
    const auto& traits = gpu::dtypeTraits(type);
    const int64_t blocks = n / traits.blockSize;
    for (int64_t i = 0; i < blocks; ++i) {
        const float* v = x + i * traits.blockSize;
        uint8_t* b = out + i * traits.blockBytes;
        switch (type) {
        case DType::F32: std::memcpy(b, v, 4); break;
        case DType::F16: {
            const uint16_t h = gpu::fp32ToFp16(*v);
            std::memcpy(b, &h, 2);
            break;
        }
        case DType::BF16: {
            const uint16_t h = gpu::fp32ToBf16(*v);
            std::memcpy(b, &h, 2);
            break;
        }
        case DType::Q8_0: encodeQ8_0(v, b); break;
        case DType::Q4_0: encodeQ4_0(v, b); break;
        case DType::Q4_1: encodeQ4_1(v, b); break;
        case DType::Q5_0: encodeQ5_0(v, b); break;
        case DType::Q4_K: encodeQ4_5K(v, b, 15); break;
        case DType::Q5_K: encodeQ4_5K(v, b, 31); break;
        case DType::Q6_K: encodeQ6_K(v, b); break;
        case DType::Q8_G64: encodeQ8_G64(v, b); break;
        default: break;  // no encoder (hasRowEncoder)
        }
    }
}

void dequantizeRow(DType type, const uint8_t* in, int64_t n, float* out)
{
    if (!hasRowCodec(type)) return;
    if (!hasRowEncoder(type)) {  // ggml's other block types: the CPU backend's decoders
        gpu::decodeRow(type, in, n, out);
        return;
    }
    const auto& traits = gpu::dtypeTraits(type);
    for (int64_t i = 0; i < n / traits.blockSize; ++i) {
        const uint8_t* b = in + i * traits.blockBytes;
        float* o = out + i * traits.blockSize;
        switch (type) {
        case DType::F32: std::memcpy(o, b, 4); break;
        case DType::F16: *o = getHalf(b); break;
        case DType::BF16: {
            uint16_t h;
            std::memcpy(&h, b, 2);
            *o = gpu::bf16ToFp32(h);
            break;
        }
        default: decodeBlock(type, b, o); break;
        }
    }
}

}  // namespace spillway::gguf
