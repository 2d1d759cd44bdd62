#pragma once
// Where each quantized block type of gpu/dtype.h keeps its scales: random bytes make a valid
// block of any type once these fields hold a small finite scale. For tests and the compute probe,
// which fill weights with random codes (every grid index, sign and nibble pattern) and then need
// finite values of a sane size.

#include <cstdint>
#include <cstring>

#include "gpu/dtype.h"

namespace spillway::gpu {

// Writes scale (a small positive float) into the block's scale fields: the fp16 d (and the fp16 m
// / dmin where the layout has one), Q8_G64's fp32 scale, MXFP4's E8M0 exponent (rounded down to
// a power of two), IQ1_M's fp16 spread over the top nibbles of its scale words. Other bytes stay.
inline void setBlockScale(DType type, uint8_t* block, float scale)
{
    const uint16_t h = fp32ToFp16(scale);
    auto put = [&](int at) { std::memcpy(block + at, &h, 2); };
    switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::BitmapSparse: return;
    case DType::Q8_G64: std::memcpy(block, &scale, 4); return;
    case DType::Q6_K: put(208); return;
    case DType::Q2_K: put(80), put(82); return;
    case DType::Q3_K: put(108); return;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: put(0), put(2); return;
    case DType::IQ1_M:
        for (int k = 0; k < 4; ++k) {
            uint16_t w;
            std::memcpy(&w, block + 48 + 2 * k, 2);
            w = static_cast<uint16_t>((w & 0x0fff) | (((h >> (4 * k)) & 0xf) << 12));
            std::memcpy(block + 48 + 2 * k, &w, 2);
        }
        return;
    case DType::MXFP4: {
        uint32_t bits;
        std::memcpy(&bits, &scale, 4);
        // 2^(e - 127) / 2 <= scale: the block's values (up to 6 x 2 x that) stay near 12 x scale.
        block[0] = static_cast<uint8_t>(((bits >> 23) & 0xff) + 1);
        return;
    }
    default: put(0); return;  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS and the IQ2 / IQ3 / IQ1_S types: d at 0
    }
}

}  // namespace spillway::gpu
