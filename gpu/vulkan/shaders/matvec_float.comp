#version 460
// y = W x for F32, F16 and BF16 weights. Rows need only their element's alignment (read as
// words from a 4-byte aligned base). Built twice:
//   SPILLWAY_SUBGROUPS: one subgroup per row (as CUDA's warp per row), summed with subgroupAdd;
//     a workgroup takes rowsPerGroup rows (64 / the subgroup size, from the host), its
//     subgroups striding over them, so any actual subgroup count covers them all.
//   otherwise: one workgroup per row, summed by a tree in shared memory (reduce.glsl).
#extension GL_GOOGLE_include_directive : require
#ifdef SPILLWAY_SUBGROUPS
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t w;        // row r at w + r * stride
    uint64_t x;        // (cols) floats
    uint64_t y;        // (rows) floats
    uint64_t stride;   // bytes
    uint rows;
    uint cols;
    uint type;         // 0 F32, 1 F16, 2 BF16 (gpu::DType)
    uint rowsPerGroup; // SPILLWAY_SUBGROUPS only
} pc;

// This invocation's share (columns lane, lane + lanes, ...) of row . x.
float rowDot(uint row, uint lane, uint lanes)
{
    const uint64_t rowAddr = pc.w + uint64_t(row) * pc.stride;
    const uint64_t base = alignedBase(rowAddr);
    const uint shift = baseShift(rowAddr);
    Floats x = Floats(pc.x);
    float acc = 0.0;
    if (pc.type == 0u) {
        Floats r = Floats(rowAddr);  // F32 rows are 4-byte aligned
        for (uint c = lane; c < pc.cols; c += lanes) acc += r.v[c] * x.v[c];
    } else if (shift == 0u) {
        // A 4-byte aligned row: two values per word (GLSL's half conversion here: only exact
        // conversion matters for getRow; a driver that flushes fp16 subnormals changes a dot
        // product by less than 6e-5 of an x value).
        Words r = Words(rowAddr);
        const uint pairs = pc.cols / 2u;
        for (uint p = lane; p < pairs; p += lanes) {
            const uint w = r.v[p];
            const vec2 v = pc.type == 1u ? unpackHalf2x16(w)
                                         : vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
            acc += v.x * x.v[2u * p] + v.y * x.v[2u * p + 1u];
        }
        if ((pc.cols & 1u) != 0u && lane == 0u) {
            const uint h = loadU16(base, 2u * (pc.cols - 1u));
            acc += (pc.type == 1u ? halfToFloat(h) : bf16ToFloat(h)) * x.v[pc.cols - 1u];
        }
    } else if (pc.type == 1u) {
        for (uint c = lane; c < pc.cols; c += lanes) acc += halfToFloat(loadU16(base, shift + 2u * c)) * x.v[c];
    } else {
        for (uint c = lane; c < pc.cols; c += lanes) acc += bf16ToFloat(loadU16(base, shift + 2u * c)) * x.v[c];
    }
    return acc;
}

#ifdef SPILLWAY_SUBGROUPS
void main()
{
    const uint first = flatWorkGroup() * pc.rowsPerGroup;
    const uint end = min(pc.rows, first + pc.rowsPerGroup);
    for (uint row = first + gl_SubgroupID; row < end; row += gl_NumSubgroups) {
        const float total = subgroupAdd(rowDot(row, gl_SubgroupInvocationID, gl_SubgroupSize));
        if (subgroupElect()) Floats(pc.y).v[row] = total;
    }
}
#else
#define REDUCE_SIZE 64u
#include "reduce.glsl"

void main()
{
    const uint row = flatWorkGroup();
    if (row >= pc.rows) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const float total = workgroupSum(vec2(rowDot(row, lane, 64u), 0.0)).x;
    if (lane == 0u) Floats(pc.y).v[row] = total;
}
#endif
