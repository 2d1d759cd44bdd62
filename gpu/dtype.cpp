#include "gpu/dtype.h"

#include <cstring>

// Portable conversions, bit-exact with the x86 F16C instructions (vcvtph2ps / vcvtps2ph with
// round-to-nearest-even), so the scalar and the vector kernels decode weights identically.

namespace spillway::gpu {

namespace {

uint32_t floatBits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

float bitsFloat(uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace

float fp16ToFp32(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) {
        // Inf stays inf; a NaN keeps its payload and becomes quiet (as vcvtph2ps does).
        const uint32_t quiet = mantissa ? 0x00400000u : 0u;
        return bitsFloat(sign | 0x7f800000u | quiet | (mantissa << 13));
    }
    if (exponent == 0) {
        if (mantissa == 0) return bitsFloat(sign);
        // Subnormal: value = mantissa * 2^-24; normalize into an fp32 normal.
        int e = -1;
        do {
            ++e;
            mantissa <<= 1;
        } while ((mantissa & 0x400u) == 0);
        mantissa &= 0x3ffu;
        const uint32_t biased = static_cast<uint32_t>(127 - 15 - e);
        return bitsFloat(sign | (biased << 23) | (mantissa << 13));
    }
    return bitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t fp32ToFp16(float f)
{
    uint32_t u = floatBits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u)  // NaN: quiet, top payload bits kept (as vcvtps2ph does)
        return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    if (u >= 0x477ff000u)  // >= 65520 (halfway from 65504 to 2^16, ties to even go up): inf
        return static_cast<uint16_t>(sign | 0x7c00u);
    if (u < 0x38800000u) {  // below 2^-14: an fp16 subnormal or zero
        if (u <= 0x33000000u) return sign;  // <= 2^-25: half the smallest subnormal, ties to 0
        const uint32_t exponent = u >> 23;
        const uint32_t mantissa = (u & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - exponent;  // value / 2^-24 = mantissa >> shift
        uint32_t h = mantissa >> shift;
        const uint32_t rest = mantissa & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    // Normal: rebias the exponent and round the 13 dropped bits to nearest even; a carry out of
    // the mantissa correctly bumps the exponent (the overflow case was handled above).
    const uint32_t rounded = u + 0xfffu + ((u >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

uint16_t fp32ToBf16(float f)
{
    const uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and top payload, force quiet
        return static_cast<uint16_t>((u >> 16) | 0x40u);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace spillway::gpu
