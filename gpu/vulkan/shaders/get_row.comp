#version 460
// Embedding lookup: out[c] = W[row, c] for any supported weight type, dequantized exactly as
// the CPU device's getRowOp (d * q is exact in float). One invocation per value. A row outside
// the matrix (row address 0) fills out with NaN, as on the CPU device.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t row;   // address of the row, 0 when outside the matrix
    uint64_t dst;   // (cols) floats
    uint cols;
    uint type;      // gpu::DType 0..4, 6..10
} pc;

void main()
{
    const uint c = flatInvocation(64u);
    if (c >= pc.cols) return;
    Floats out_ = Floats(pc.dst);
    if (pc.row == 0ul) {
        out_.v[c] = uintBitsToFloat(0x7fc00000u);
        return;
    }
    const uint64_t base = alignedBase(pc.row);
    const uint shift = baseShift(pc.row);
    float v;
    if (pc.type == 0u) {
        v = Floats(pc.row).v[c];
    } else if (pc.type == 1u) {
        v = halfToFloat(loadU16(base, shift + 2u * c));
    } else if (pc.type == 2u) {
        v = bf16ToFloat(loadU16(base, shift + 2u * c));
    } else if (pc.type == 3u) {
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 34u;
        const int q = bitfieldExtract(int(loadByte(base, block + 2u + c % 32u)), 0, 8);
        precise const float p = halfToFloat(loadU16(base, block)) * float(q);
        v = p;
    } else if (pc.type == 4u) {
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 18u;
        const uint i = c % 32u;
        const uint byte_ = loadByte(base, block + 2u + (i % 16u));
        const int nibble = int(i < 16u ? (byte_ & 15u) : (byte_ >> 4));
        precise const float p = halfToFloat(loadU16(base, block)) * float(nibble - 8);
        v = p;
    // The GGUF types below as gpu/cpu/kquant_blocks.h decodes them (ggml's float operations,
    // each rounded on its own: `precise`, no fused multiply-add).
    } else if (pc.type == 6u) {  // Q4_1: d * q + m
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 20u;
        const uint i = c % 32u;
        const uint byte_ = loadByte(base, block + 4u + (i % 16u));
        const uint nibble = i < 16u ? (byte_ & 15u) : (byte_ >> 4);
        precise const float p = float(nibble) * halfToFloat(loadU16(base, block));
        precise const float q = p + halfToFloat(loadU16(base, block + 2u));
        v = q;
    } else if (pc.type == 7u) {  // Q5_0: d * (q - 16), bit 4 of q from the 32 high bits
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 22u;
        const uint i = c % 32u;
        const uint qh = loadU16(base, block + 2u) | (loadU16(base, block + 4u) << 16);
        const uint byte_ = loadByte(base, block + 6u + (i % 16u));
        const int q = int((i < 16u ? (byte_ & 15u) : (byte_ >> 4)) | (((qh >> i) & 1u) << 4));
        precise const float p = float(q - 16) * halfToFloat(loadU16(base, block));
        v = p;
    } else if (pc.type == 8u || pc.type == 9u) {  // Q4_K / Q5_K: (d sc) q - (dmin m)
        const bool q5 = pc.type == 9u;
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
    out_.v[c] = v;
}
