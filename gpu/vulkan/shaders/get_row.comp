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
    uint type;      // gpu::DType 0..4
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
    } else {
        const uint64_t block = uint64_t(shift) + uint64_t(c / 32u) * 18u;
        const uint i = c % 32u;
        const uint byte_ = loadByte(base, block + 2u + (i % 16u));
        const int nibble = int(i < 16u ? (byte_ & 15u) : (byte_ >> 4));
        precise const float p = halfToFloat(loadU16(base, block)) * float(nibble - 8);
        v = p;
    }
    out_.v[c] = v;
}
