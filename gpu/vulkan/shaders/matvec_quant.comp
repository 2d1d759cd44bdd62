#version 460
// y = W x for the blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) times x quantized to Q8 blocks
// (quantize_q8.comp), as the CPU device: per block an exact integer dot product, scaled by
// d_w * d_x in float; Q4_0's "- 8" folded out as y = sum d_w d_x sum(n q_x) - sum d_w * sum8_x,
// Q4_1's and Q5_1's m as + m_w (d_x sum q_x) = m_w sum8_x / 8, Q5_0's "- 16" inside the integer
// sum; IQ4_NL's and MXFP4's nibbles index 16 int8 levels (the table buffer: iq_tables.glsl), MXFP4's
// scale is its E8M0 exponent (gpu/cpu/iq_expand.h's expansions). Built twice, as
// matvec_float.comp: one subgroup per row (SPILLWAY_SUBGROUPS), or one workgroup per row with a
// tree sum; each invocation takes a strided share of the row's blocks.
#extension GL_GOOGLE_include_directive : require
#ifdef SPILLWAY_SUBGROUPS
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "iq_tables.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t w;        // row r at w + r * stride; rows 2-byte aligned
    uint64_t qs;       // x's Q8 values, 4 per word, block b at words 8b..
    uint64_t d;        // (blocks) floats
    uint64_t sum8;     // (blocks) floats
    uint64_t y;        // (rows) floats
    uint64_t stride;   // bytes
    uint64_t tables;   // the IQ4_NL and MXFP4 levels (iq_tables.glsl)
    uint rows;
    uint blocks;       // cols / 32
    uint type;         // 3 Q8_0, 4 Q4_0, 6 Q4_1, 7 Q5_0, 14 Q5_1, 15 IQ4_NL, 24 MXFP4 (gpu::DType)
    uint rowsPerGroup; // SPILLWAY_SUBGROUPS only
} pc;

// This invocation's share (blocks lane, lane + lanes, ...) of the row's scaled dot products (x)
// and, for Q4_0, of its correction (y).
vec2 rowDot(uint row, uint lane, uint lanes)
{
    const uint64_t rowAddr = pc.w + uint64_t(row) * pc.stride;
    const uint64_t base = alignedBase(rowAddr);
    const uint shift = baseShift(rowAddr);
    Words xq = Words(pc.qs);
    Floats xd = Floats(pc.d);
    float acc = 0.0;
    float correction = 0.0;
    if (pc.type == 3u) {
        for (uint b = lane; b < pc.blocks; b += lanes) {
            const uint64_t block = uint64_t(shift) + uint64_t(b) * 34u;
            const float dw = halfToFloat(loadU16(base, block));
            int sum = 0;
            for (uint i = 0u; i < 8u; ++i) {
                const uint wq = loadU32(base, block + 2u + 4u * i);
                const uint xw = xq.v[b * 8u + i];
                for (int k = 0; k < 4; ++k) sum += sbyte(wq, k) * sbyte(xw, k);
            }
            precise const float scale = dw * xd.v[b];
            acc += float(sum) * scale;
        }
    } else if (pc.type == 6u || pc.type == 7u) {
        // Q4_1 (20 bytes: d, m, nibbles) and Q5_0 (22 bytes: d, 32 high bits, nibbles).
        Floats xs = Floats(pc.sum8);
        const bool q5 = pc.type == 7u;
        const uint bytes = q5 ? 22u : 20u, nibblesAt = q5 ? 6u : 4u;
        for (uint b = lane; b < pc.blocks; b += lanes) {
            const uint64_t block = uint64_t(shift) + uint64_t(b) * bytes;
            const float dw = halfToFloat(loadU16(base, block));
            const uint qh = q5 ? loadU16(base, block + 2u) | (loadU16(base, block + 4u) << 16) : 0u;
            int sum = 0;
            for (uint i = 0u; i < 4u; ++i) {
                const uint nibbles = loadU32(base, block + nibblesAt + 4u * i);  // values 4i.. and 16+4i..
                const uint lo = xq.v[b * 8u + i];
                const uint hi = xq.v[b * 8u + 4u + i];
                for (int k = 0; k < 4; ++k) {
                    const int n = int((nibbles >> (8 * k)) & 0xffu);
                    int ql = n & 15, qhi = n >> 4;
                    if (q5) {
                        ql += int((qh >> (4u * i + uint(k))) & 1u) * 16 - 16;
                        qhi += int((qh >> (16u + 4u * i + uint(k))) & 1u) * 16 - 16;
                    }
                    sum += ql * sbyte(lo, k) + qhi * sbyte(hi, k);
                }
            }
            precise const float scale = dw * xd.v[b];
            acc += float(sum) * scale;
            if (!q5) acc += halfToFloat(loadU16(base, block + 2u)) * (xs.v[b] * 0.125);
        }
    } else if (pc.type == 14u || pc.type == 15u || pc.type == 24u) {
        // Q5_1 (24 bytes: d, m, 32 high bits, nibbles), IQ4_NL (18: d, nibbles into its levels),
        // MXFP4 (17: E8M0 exponent, nibbles into the doubled E2M1 values; rows byte aligned).
        Floats xs = Floats(pc.sum8);
        const bool q51 = pc.type == 14u, mx = pc.type == 24u;
        const uint bytes = q51 ? 24u : mx ? 17u : 18u, nibblesAt = q51 ? 8u : mx ? 1u : 2u;
        const uint table = mx ? IQ_TABLE_MXFP4 : IQ_TABLE_IQ4NL;
        int levels[16];
        for (uint n = 0u; n < 16u && !q51; ++n) levels[n] = levelValue(pc.tables, table, n);
        for (uint b = lane; b < pc.blocks; b += lanes) {
            const uint64_t block = uint64_t(shift) + uint64_t(b) * bytes;
            const uint qh = q51 ? loadU32(base, block + 4u) : 0u;
            int sum = 0;
            for (uint i = 0u; i < 4u; ++i) {
                const uint nibbles = loadU32(base, block + nibblesAt + 4u * i);  // values 4i.. and 16+4i..
                const uint lo = xq.v[b * 8u + i];
                const uint hi = xq.v[b * 8u + 4u + i];
                for (int k = 0; k < 4; ++k) {
                    const uint n = (nibbles >> (8 * k)) & 0xffu;
                    int ql, qhi;
                    if (q51) {
                        ql = int((n & 15u) | (((qh >> (4u * i + uint(k))) & 1u) << 4));
                        qhi = int((n >> 4) | (((qh >> (16u + 4u * i + uint(k))) & 1u) << 4));
                    } else {
                        ql = levels[n & 15u];
                        qhi = levels[n >> 4];
                    }
                    sum += ql * sbyte(lo, k) + qhi * sbyte(hi, k);
                }
            }
            const float dw = mx ? e8m0Half(loadByte(base, block)) : halfToFloat(loadU16(base, block));
            precise const float scale = dw * xd.v[b];
            acc += float(sum) * scale;
            // Q5_1's m term with d_x sum(q_x) rounded to fp16, as llama.cpp's block_q8_1 keeps it
            // (and the CPU device: iq_expand.h).
            if (q51) acc += halfToFloat(loadU16(base, block + 2u)) * halfToFloat(floatToHalf(xs.v[b] * 0.125));
        }
    } else {
        Floats xs = Floats(pc.sum8);
        for (uint b = lane; b < pc.blocks; b += lanes) {
            const uint64_t block = uint64_t(shift) + uint64_t(b) * 18u;
            const float dw = halfToFloat(loadU16(base, block));
            int sum = 0;
            for (uint i = 0u; i < 4u; ++i) {
                const uint nibbles = loadU32(base, block + 2u + 4u * i);  // values 4i.. and 16+4i..
                const uint lo = xq.v[b * 8u + i];
                const uint hi = xq.v[b * 8u + 4u + i];
                for (int k = 0; k < 4; ++k) {
                    const int n = int((nibbles >> (8 * k)) & 0xffu);
                    sum += (n & 15) * sbyte(lo, k) + (n >> 4) * sbyte(hi, k);
                }
            }
            precise const float scale = dw * xd.v[b];
            acc += float(sum) * scale;
            correction += dw * xs.v[b];
        }
    }
    return vec2(acc, correction);
}

#ifdef SPILLWAY_SUBGROUPS
void main()
{
    const uint first = flatWorkGroup() * pc.rowsPerGroup;
    const uint end = min(pc.rows, first + pc.rowsPerGroup);
    for (uint row = first + gl_SubgroupID; row < end; row += gl_NumSubgroups) {
        const vec2 total = subgroupAdd(rowDot(row, gl_SubgroupInvocationID, gl_SubgroupSize));
        if (subgroupElect()) Floats(pc.y).v[row] = total.x - total.y;
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
    const vec2 total = workgroupSum(rowDot(row, lane, 32u));
    if (lane == 0u) Floats(pc.y).v[row] = total.x - total.y;
}
#endif
