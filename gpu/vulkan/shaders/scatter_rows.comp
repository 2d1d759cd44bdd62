#version 460
// Row i of src to dst + index[i] * dstStride (gpu::ScatterRowsArgs): one workgroup per row, its
// invocations striding over the row's words. Addresses, strides and row bytes are multiples of 4.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t dst;
    uint64_t src;
    uint64_t index;      // count int32
    uint64_t dstStride;  // bytes
    uint64_t srcStride;  // bytes
    uint words;          // row bytes / 4
    uint count;
} pc;

void main()
{
    const uint row = flatWorkGroup();
    if (row >= pc.count) return;  // the whole workgroup
    const uint slot = Words(pc.index).v[row];
    Words from = Words(pc.src + uint64_t(row) * pc.srcStride);
    Words to = Words(pc.dst + uint64_t(slot) * pc.dstStride);
    for (uint w = gl_LocalInvocationID.x; w < pc.words; w += 64u) to.v[w] = from.v[w];
}
