#version 460
// Embedding lookup: out[c] = W[row, c] for any supported weight type, dequantized exactly as
// the CPU device's getRowOp (decode.glsl). One invocation per value. A row outside
// the matrix (row address 0) fills out with NaN, as on the CPU device.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "decode.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t row;   // address of the row, 0 when outside the matrix
    uint64_t dst;   // (cols) floats
    uint64_t tables;  // the IQ grids and levels (iq_tables.glsl)
    uint cols;
    uint type;      // gpu::DType 0..4, 6..10, 12..24
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
    out_.v[c] = decodeValue(pc.type, alignedBase(pc.row), baseShift(pc.row), c, pc.tables);
}
