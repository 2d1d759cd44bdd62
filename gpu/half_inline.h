#pragma once
// Inline fp16 / bf16 -> fp32 for the kernels' inner loops. gpu/dtype.h's converters are out of
// line (a call per value); these are branch-free so the compiler can vectorize the loops that use
// them. test_compress_formats checks halfToFloat against gpu::fp16ToFp32 for all 65,536 inputs.

#include <cstdint>
#include <cstring>

namespace spillway::gpu::detail {

inline float bitsToFloat(uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint32_t floatToBits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// IEEE half -> float, exact for every input (normals, subnormals, inf, NaN). Branch-free
// selects so loops vectorize, and no step ever produces an fp32 denormal (which would cost a
// microcode assist per value: a zero weight would be 50x slower than a non-zero one).
inline float halfToFloat(uint16_t h)
{
    constexpr uint32_t kExpMask = 0x7C00u << 13;            // half exponent, moved to fp32 place
    const uint32_t shifted = static_cast<uint32_t>(h & 0x7FFF) << 13;
    const uint32_t exp = shifted & kExpMask;
    const uint32_t normal = shifted + (112u << 23);         // rebias 15 -> 127
    const uint32_t infNan = normal + (112u << 23);          // exponent 31 -> 255
    // Zero and subnormals: renormalize through a float subtraction of 2^-14 (all normal values).
    const uint32_t subnormal = floatToBits(bitsToFloat(normal + (1u << 23)) - 0x1.0p-14f);
    // Masks instead of ?: so the compiler keeps it branch-free (random zeros would mispredict).
    const uint32_t isInfNan = 0u - static_cast<uint32_t>(exp == kExpMask);
    const uint32_t isSub = 0u - static_cast<uint32_t>(exp == 0);
    const uint32_t bits = (infNan & isInfNan) | (subnormal & isSub) | (normal & ~(isInfNan | isSub));
    return bitsToFloat(bits | (static_cast<uint32_t>(h & 0x8000) << 16));
}

inline float bf16ToFloat(uint16_t h) { return bitsToFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t load16(const uint8_t* p)
{
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

inline uint64_t load64(const uint8_t* p)
{
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Sign-extends the two int4 values of one byte (low nibble first).
inline int lowNibble(uint8_t b) { return static_cast<int8_t>(static_cast<uint8_t>(b << 4)) >> 4; }
inline int highNibble(uint8_t b) { return static_cast<int8_t>(b) >> 4; }
// Value i of a packed int4 run (low nibble first), without a branch on i's parity.
inline int nibbleAt(const uint8_t* p, int64_t i)
{
    const int shift = static_cast<int>((~i & 1) * 4);
    return static_cast<int8_t>(static_cast<uint8_t>(p[i >> 1] << shift)) >> 4;
}

}  // namespace spillway::gpu::detail
