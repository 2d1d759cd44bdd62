#version 460
// y = W x for the K-quants Q4_K, Q5_K and Q6_K (super-blocks of 256 in their GGUF layout, read in
// place: gpu/cpu/kquant_blocks.h draws it) times x in Q8_K form (quantize_q8k.comp). As on the
// CPU device and in llama.cpp the weights never become floats: each 32-value sub-block's dot
// product is an exact integer times its integer scale, only d and dmin are float (the CPU sums a
// super-block's sub-blocks as integers first, this shader each sub-block in float: float
// summation order differs, as it does between the CPU's own kernel sets).
//   Q4_K / Q5_K: (d d_x) sum_j sc_j sum(q x) - (dmin d_x) sum_j m_j sum x (6-bit scales and mins)
//   Q6_K:        (d d_x) sum_g scale_g (sum(q x) - 32 sum x)              (int8 scales per 16)
// Built twice, as matvec_quant.comp: one subgroup per row (SPILLWAY_SUBGROUPS), or one workgroup
// per row with a tree sum; each invocation takes 32-value sub-blocks (lane, lane + lanes, ...).
// Rows need only be 2-byte aligned (Q6_K blocks are 210 bytes).
#extension GL_GOOGLE_include_directive : require
#ifdef SPILLWAY_SUBGROUPS
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t w;        // row r at w + r * stride
    uint64_t qs;       // x's Q8_K values, 4 per word, block b at words 64b..
    uint64_t d;        // (blocks) floats
    uint64_t bsums;    // (blocks * 16) ints
    uint64_t y;        // (rows) floats
    uint64_t stride;   // bytes
    uint64_t tables;   // unused here (matvec_iq.comp's types read it): the push layout is shared
    uint rows;
    uint blocks;       // cols / 256
    uint type;         // 8 Q4_K, 9 Q5_K, 10 Q6_K (gpu::DType)
    uint rowsPerGroup; // SPILLWAY_SUBGROUPS only
} pc;

// The 4 bytes at `offset` as unsigned bytes (k = 0..3) of one word.
uint ubyte(uint w, uint k) { return (w >> (8u * k)) & 0xffu; }

// Q4_K / Q5_K: sub-block j's 6-bit scale and min (ggml's get_scale_min_k4) from the 12 bytes at s.
ivec2 scaleMin(uint64_t base, uint64_t s, uint j)
{
    if (j < 4u) return ivec2(int(loadByte(base, s + j) & 63u), int(loadByte(base, s + j + 4u) & 63u));
    const uint m = loadByte(base, s + j + 4u);
    return ivec2(int((m & 15u) | ((loadByte(base, s + j - 4u) >> 6) << 4)),
                 int((m >> 4) | ((loadByte(base, s + j) >> 6) << 4)));
}

// Sub-block j (32 values) of super-block b: (d d_x) sc_j sum(q x) - (dmin d_x) m_j sum x.
float subBlockQ45(uint64_t base, uint64_t block, uint b, uint j, bool high)
{
    Words xq = Words(pc.qs);
    Words bs = Words(pc.bsums);
    const uint nibbles = high ? 48u : 16u;
    const ivec2 sm = scaleMin(base, block + 4u, j);
    const uint c = j / 2u, h = j % 2u;
    int dot = 0;
    for (uint k = 0u; k < 8u; ++k) {
        uint q = (loadU32(base, block + nibbles + 32u * c + 4u * k) >> (4u * h)) & 0x0f0f0f0fu;
        if (high) q |= ((loadU32(base, block + 16u + 4u * k) >> j) & 0x01010101u) << 4;
        const uint xw = xq.v[b * 64u + 16u * c + 8u * h + k];
        for (int t = 0; t < 4; ++t) dot += int(ubyte(q, uint(t))) * sbyte(xw, t);
    }
    const int sumx = int(bs.v[b * 16u + 2u * j]) + int(bs.v[b * 16u + 2u * j + 1u]);
    const float dx = Floats(pc.d).v[b];
    const float d = halfToFloat(loadU16(base, block)), dmin = halfToFloat(loadU16(base, block + 2u));
    return (d * dx) * float(sm.x * dot) - (dmin * dx) * float(sm.y * sumx);
}

// Values 128 hf + 32 p + l of super-block b (j = 4 hf + p): the low (p < 2) or high nibble of
// ql[64 hf + 32 (p & 1) + l], bits 2p, 2p + 1 of qh[32 hf + l]; groups of 16 g = 8 hf + 2 p and
// g + 1: (d d_x) sum_g scale_g (sum(q x) - 32 sum x).
float subBlockQ6(uint64_t base, uint64_t block, uint b, uint j)
{
    Words xq = Words(pc.qs);
    Words bs = Words(pc.bsums);
    const uint hf = j / 4u, p = j % 4u;
    const uint low = 64u * hf + 32u * (p & 1u), top = 128u + 32u * hf;
    const uint lowShift = p < 2u ? 0u : 4u, topShift = 2u * p;
    int dot0 = 0, dot1 = 0;
    for (uint k = 0u; k < 8u; ++k) {
        const uint q = ((loadU32(base, block + low + 4u * k) >> lowShift) & 0x0f0f0f0fu) |
                       (((loadU32(base, block + top + 4u * k) >> topShift) & 0x03030303u) << 4);
        const uint xw = xq.v[b * 64u + 32u * hf + 8u * p + k];
        int dot = 0;
        for (int t = 0; t < 4; ++t) dot += int(ubyte(q, uint(t))) * sbyte(xw, t);
        if (k < 4u) dot0 += dot; else dot1 += dot;
    }
    const uint g = 8u * hf + 2u * p;
    const int s0 = bitfieldExtract(int(loadByte(base, block + 192u + g)), 0, 8);
    const int s1 = bitfieldExtract(int(loadByte(base, block + 193u + g)), 0, 8);
    const int sum = s0 * (dot0 - 32 * int(bs.v[b * 16u + g])) + s1 * (dot1 - 32 * int(bs.v[b * 16u + g + 1u]));
    return (halfToFloat(loadU16(base, block + 208u)) * Floats(pc.d).v[b]) * float(sum);
}

// This invocation's share of the row's dot product: sub-blocks (8 per super-block) lane,
// lane + lanes, ..., so that a row of few super-blocks still keeps every lane busy.
float rowDot(uint row, uint lane, uint lanes)
{
    const uint64_t rowAddr = pc.w + uint64_t(row) * pc.stride;
    const uint64_t base = alignedBase(rowAddr);
    const uint shift = baseShift(rowAddr);
    const uint bytes = pc.type == 8u ? 144u : pc.type == 9u ? 176u : 210u;
    float acc = 0.0;
    for (uint u = lane; u < pc.blocks * 8u; u += lanes) {
        const uint b = u / 8u, j = u % 8u;
        const uint64_t block = uint64_t(shift) + uint64_t(b) * bytes;
        acc += pc.type == 10u ? subBlockQ6(base, block, b, j) : subBlockQ45(base, block, b, j, pc.type == 9u);
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
#define REDUCE_SIZE 32u
#include "reduce.glsl"

void main()
{
    const uint row = flatWorkGroup();
    if (row >= pc.rows) return;  // the whole workgroup
    const uint lane = gl_LocalInvocationID.x;
    const float total = workgroupSum(vec2(rowDot(row, lane, 32u), 0.0)).x;
    if (lane == 0u) Floats(pc.y).v[row] = total;
}
#endif
