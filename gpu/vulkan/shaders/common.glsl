// Shared by every compute shader of the Vulkan backend. Device "pointers" are buffer device
// addresses (uint64_t) passed in push constants; the host does the pointer arithmetic the
// engine expects, so a shader sees the same addresses the engine holds.
//
// Memory is read as 32-bit words from a 4-byte aligned base, so that 2-byte aligned rows
// (Q8_0 blocks are 34 bytes, Q4_0 18) and byte-sized cache values need neither 8- nor 16-bit
// storage features. Rounding that decides bits (fp16 conversion, round half away from zero)
// is done in integer arithmetic, so it does not depend on the driver's built-ins.

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
// Written and read back by other invocations of the same workgroup (behind a barrier).
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer SharedFloats { float v[]; };

// The workgroup's index in a grid that may be two-dimensional (group counts are limited to
// 65535 per dimension): x fastest. flatInvocation takes the workgroup size, since this file is
// included before the shader declares it (gl_WorkGroupSize is not known here yet).
uint flatWorkGroup() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint flatInvocation(uint groupSize) { return flatWorkGroup() * groupSize + gl_LocalInvocationID.x; }

// 4-byte aligned address at or below `addr`, and the byte offset of `addr` from it.
uint64_t alignedBase(uint64_t addr) { return addr & ~uint64_t(3); }
uint baseShift(uint64_t addr) { return uint(addr & uint64_t(3)); }

// Byte `offset` (from a 4-byte aligned `base`).
uint loadByte(uint64_t base, uint64_t offset)
{
    return (Words(base).v[uint(offset >> 2)] >> (uint(offset & 3) * 8u)) & 0xffu;
}

// The 16-bit value at an even byte `offset` from a 4-byte aligned `base`.
uint loadU16(uint64_t base, uint64_t offset)
{
    return (Words(base).v[uint(offset >> 2)] >> (uint(offset & 2) * 8u)) & 0xffffu;
}

// The 32 bits at any byte `offset` from a 4-byte aligned `base` (little-endian).
uint loadU32(uint64_t base, uint64_t offset)
{
    const uint i = uint(offset >> 2);
    const uint s = uint(offset & 3) * 8u;
    const uint lo = Words(base).v[i];
    if (s == 0u) return lo;
    return (lo >> s) | (Words(base).v[i + 1u] << (32u - s));
}

// Byte `offset` of `base` set to `value`, without disturbing its word's other bytes (other
// invocations may write them at the same time).
void storeByte(uint64_t base, uint64_t offset, uint value)
{
    const uint i = uint(offset >> 2);
    const uint s = uint(offset & 3) * 8u;
    atomicAnd(Words(base).v[i], ~(0xffu << s));
    atomicOr(Words(base).v[i], (value & 0xffu) << s);
}

void storeU16(uint64_t base, uint64_t offset, uint value)
{
    const uint i = uint(offset >> 2);
    const uint s = uint(offset & 2) * 8u;
    atomicAnd(Words(base).v[i], ~(0xffffu << s));
    atomicOr(Words(base).v[i], (value & 0xffffu) << s);
}

// IEEE half -> float, exact for every value (subnormals included), as gpu/dtype.cpp.
float halfToFloat(uint h)
{
    const uint sign = (h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1fu;
    const uint m = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m != 0u ? 0x00400000u : 0u) | (m << 13));
    if (e == 0u) {
        // m * 2^-24: exact (a float normal), whatever the driver does with float subnormals.
        const float v = float(m) * 5.9604644775390625e-8;
        return (sign != 0u) ? -v : v;
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

float bf16ToFloat(uint h) { return uintBitsToFloat(h << 16); }

// float -> IEEE half, round to nearest even, bit for bit as gpu/dtype.cpp's fp32ToFp16.
uint floatToHalf(float f)
{
    uint u = floatBitsToUint(f);
    const uint sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00u | ((u >> 13) & 0x3ffu);
    if (u >= 0x477ff000u) return sign | 0x7c00u;
    if (u < 0x38800000u) {
        if (u <= 0x33000000u) return sign;
        const uint e = u >> 23;
        const uint m = (u & 0x7fffffu) | 0x800000u;
        const uint shift = 126u - e;
        uint h = m >> shift;
        const uint rest = m & ((1u << shift) - 1u);
        const uint halfway = 1u << (shift - 1u);
        if (rest > halfway || (rest == halfway && (h & 1u) != 0u)) ++h;
        return sign | h;
    }
    const uint rounded = u + 0xfffu + ((u >> 13) & 1u);
    return sign | ((rounded - 0x38000000u) >> 13);
}

// C's round(): half away from zero (GLSL's round() may round halves either way). The
// fractional part v - trunc(v) of a float is exact.
float roundHalfAway(float v)
{
    const float t = trunc(v);
    return abs(v - t) >= 0.5 ? t + sign(v) : t;
}

// a / b correctly rounded (round to nearest even), whatever the driver's division: Vulkan lets
// OpFDiv be off by 2.5 ulp (NVIDIA's is), which changes bits the CPU device decides by a
// division (Q8 scales, the codes they give, rope's frequency factors). Long division of the
// 24-bit significands in 64-bit integers; zeros, infinities, NaNs and results outside the normal
// range (where no caller decides bits) take the driver's division.
float divCorrect(float a, float b)
{
    const uint ua = floatBitsToUint(a) & 0x7fffffffu, ub = floatBitsToUint(b) & 0x7fffffffu;
    if (ua == 0u || ua >= 0x7f800000u || ub == 0u || ub >= 0x7f800000u) return a / b;
    // |a| = ma * 2^ea, |b| = mb * 2^eb, ma and mb in [2^23, 2^24).
    int ea = int(ua >> 23), eb = int(ub >> 23);
    uint ma = ua & 0x7fffffu, mb = ub & 0x7fffffu;
    if (ea == 0) { const int z = findMSB(ma); ma <<= uint(23 - z); ea = 1 - (23 - z); } else { ma |= 0x800000u; }
    if (eb == 0) { const int z = findMSB(mb); mb <<= uint(23 - z); eb = 1 - (23 - z); } else { mb |= 0x800000u; }
    const uint64_t num = uint64_t(ma) << 39;
    const uint64_t q = num / uint64_t(mb);
    const bool sticky = q * uint64_t(mb) != num;
    // q holds 39 or 40 bits: keep 24, round on the rest.
    const uint shift = (q >> 39) != 0ul ? 16u : 15u;
    uint mant = uint(q >> shift);
    const uint64_t rest = q & ((uint64_t(1) << shift) - 1ul);
    const uint64_t half_ = uint64_t(1) << (shift - 1u);
    if (rest > half_ || (rest == half_ && (sticky || (mant & 1u) != 0u))) ++mant;
    int e = int(shift) + (ea - eb) - 39 + 23;  // exponent of mant's leading bit, unbiased
    if (mant == 0x1000000u) { mant >>= 1; ++e; }
    const int biased = e + 127;
    if (biased <= 0 || biased >= 255) return a / b;
    const uint sign = (floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u;
    return uintBitsToFloat(sign | (uint(biased) << 23) | (mant & 0x7fffffu));
}

// Signed byte k (0..3) of a word.
int sbyte(uint w, int k) { return bitfieldExtract(int(w), 8 * k, 8); }
