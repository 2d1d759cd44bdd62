#version 460
// y[c] = sum over rows r with a[r] != 0 of a[r] * W[r, c] (gpu::RowSumArgs: W transposed times
// a, the neuron cache's down projection). One invocation per column, so a workgroup reads 64
// neighbouring values of each row; every column sums its rows in order, as the CPU device.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t w;       // row r at w + r * stride
    uint64_t a;       // (rows) floats
    uint64_t y;       // (cols) floats
    uint64_t scales;  // int8 rows: the scale table, row g at scales + g * cols floats; else 0
    uint64_t group;   // int8 rows: (rows) int32, the scale table's row of each row
    uint64_t stride;  // bytes
    uint rows;
    uint cols;
    uint type;        // 0 F32, 1 F16, 2 BF16 (gpu::DType); ignored for int8 rows
} pc;

void main()
{
    const uint c = flatInvocation(64u);
    if (c >= pc.cols) return;
    Floats a = Floats(pc.a);
    float acc = 0.0;
    for (uint r = 0u; r < pc.rows; ++r) {
        const float s = a.v[r];
        if (s == 0.0) continue;
        const uint64_t row = pc.w + uint64_t(r) * pc.stride;
        const uint64_t base = alignedBase(row);
        const uint shift = baseShift(row);
        float v;
        if (pc.scales != 0ul) {
            const int q = int(loadByte(base, uint64_t(shift + c)) << 24) >> 24;
            const uint g = Words(pc.group).v[r];
            v = float(q) * Floats(pc.scales + (uint64_t(g) * pc.cols + c) * 4ul).v[0];
        } else if (pc.type == 0u) {
            v = Floats(row).v[c];
        } else {
            const uint h = loadU16(base, uint64_t(shift + 2u * c));
            v = pc.type == 1u ? halfToFloat(h) : bf16ToFloat(h);
        }
        acc += s * v;
    }
    Floats(pc.y).v[c] = acc;
}
