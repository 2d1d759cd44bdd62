// Value c of a stored row (its first byte `shift` bytes past the 4-byte aligned `base`) for any
// weight type the backend computes (gpu::DType 0..4, 6..10, 12..24), exactly as the CPU device's
// getRowOp gives it (d * q is exact in float; the GGUF types' float operations each rounded on
// its own, as gpu/cpu/kquant_blocks.h and iq_blocks.h: `precise`, no fused multiply-add). The
// types 12..24 (decode_iq.glsl) read the IQ grids and levels from the table buffer at `tables`
// (iq_tables.glsl). Shared by get_row.comp and the prompt batches' matmul.comp. Include after
// common.glsl.

#include "iq_tables.glsl"
#include "decode_iq.glsl"

// Values and bytes per block of the types 12..24 (gpu/dtype.h's dtypeTraits).
uvec2 iqBlockShape(uint type)
{
    const uint bytes[13] = uint[](84u, 110u, 24u, 18u, 136u, 98u, 110u, 66u, 74u, 82u, 50u, 56u, 17u);
    const bool of32 = type == 14u || type == 15u || type == 24u;
    return uvec2(of32 ? 32u : 256u, bytes[type - 12u]);
}

float decodeValue(uint type, uint64_t base, uint shift, uint c, uint64_t tables)
{
    float v;
    if (type >= 12u) {
        const uvec2 shape = iqBlockShape(type);
        v = decodeIqValue(type, base, uint64_t(shift) + uint64_t(c / shape.x) * shape.y, c % shape.x, tables);
    } else if (type == 0u) {
        v = uintBitsToFloat(loadU32(base, uint64_t(shift) + 4u * uint64_t(c)));
    } else if (type == 1u) {
        v = halfToFloat(loadU16(base, shift + 2u * c));
    } else if (type == 2u) {
        v = bf16ToFloat(loadU16(base, shift + 2u * c));
    } else if (type == 3u) {
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 34u;
        const int q = bitfieldExtract(int(loadByte(base, block + 2u + c % 32u)), 0, 8);
        precise const float p = halfToFloat(loadU16(base, block)) * float(q);
        v = p;
    } else if (type == 4u) {
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 18u;
        const uint i = c % 32u;
        const uint byte_ = loadByte(base, block + 2u + (i % 16u));
        const int nibble = int(i < 16u ? (byte_ & 15u) : (byte_ >> 4));
        precise const float p = halfToFloat(loadU16(base, block)) * float(nibble - 8);
        v = p;
    // The GGUF types below as gpu/cpu/kquant_blocks.h decodes them (ggml's float operations,
    // each rounded on its own: `precise`, no fused multiply-add).
    } else if (type == 6u) {  // Q4_1: d * q + m
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 20u;
        const uint i = c % 32u;
        const uint byte_ = loadByte(base, block + 4u + (i % 16u));
        const uint nibble = i < 16u ? (byte_ & 15u) : (byte_ >> 4);
        precise const float p = float(nibble) * halfToFloat(loadU16(base, block));
        precise const float q = p + halfToFloat(loadU16(base, block + 2u));
        v = q;
    } else if (type == 7u) {  // Q5_0: d * (q - 16), bit 4 of q from the 32 high bits
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 22u;
        const uint i = c % 32u;
        const uint qh = loadU16(base, block + 2u) | (loadU16(base, block + 4u) << 16);
        const uint byte_ = loadByte(base, block + 6u + (i % 16u));
        const int q = int((i < 16u ? (byte_ & 15u) : (byte_ >> 4)) | (((qh >> i) & 1u) << 4));
        precise const float p = float(q - 16) * halfToFloat(loadU16(base, block));
        v = p;
    } else if (type == 8u || type == 9u) {  // Q4_K / Q5_K: (d sc) q - (dmin m)
        const bool q5 = type == 9u;
        const uint64_t block = uint64_t(shift) + uint64_t(c / 256u) * (q5 ? 176u : 144u);
        const uint t = c % 256u, chunk = t / 64u, high = (t % 64u) / 32u, l = t % 32u;
        const uint j = 2u * chunk + high;
        const uint64_t s = block + 4u;
        const uint scale = j < 4u ? loadByte(base, s + j) & 63u
                                  : (loadByte(base, s + j + 4u) & 15u) | ((loadByte(base, s + j - 4u) >> 6) << 4);
        const uint mn = j < 4u ? loadByte(base, s + j + 4u) & 63u
                               : (loadByte(base, s + j + 4u) >> 4) | ((loadByte(base, s + j) >> 6) << 4);
        const uint byte_ = loadByte(base, block + (q5 ? 48u : 16u) + 32u * chunk + l);
        uint q = high != 0u ? byte_ >> 4 : byte_ & 15u;
        if (q5) q |= ((loadByte(base, block + 16u + l) >> j) & 1u) << 4;
        precise const float d = halfToFloat(loadU16(base, block)) * float(scale);
        precise const float m = halfToFloat(loadU16(base, block + 2u)) * float(mn);
        precise const float p = d * float(q);
        precise const float r = p - m;
        v = r;
    } else {  // Q6_K: (d scale) (q - 32)
        const uint64_t block = uint64_t(shift) + uint64_t(c / 256u) * 210u;
        const uint t = c % 256u, h = t / 128u, part = (t % 128u) / 32u, l = t % 32u;
        const uint low = loadByte(base, block + 64u * h + 32u * (part & 1u) + l);
        const int q = int((part < 2u ? low & 15u : low >> 4) | (((loadByte(base, block + 128u + 32u * h + l) >> (2u * part)) & 3u) << 4));
        const int scale = bitfieldExtract(int(loadByte(base, block + 192u + t / 16u)), 0, 8);
        precise const float ds = halfToFloat(loadU16(base, block + 208u)) * float(scale);
        precise const float p = ds * float(q - 32);
        v = p;
    }
    return v;
}
