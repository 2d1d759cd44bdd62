#version 460
// y = W x for the 256-value types of gpu/cpu/iq_blocks.h (Q2_K, Q3_K, IQ4_XS, IQ3_XXS, IQ3_S,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M; super-blocks read in place) times x in Q8_K form
// (quantize_q8k.comp), as the CPU device computes them (gpu/cpu/iq_expand.h): each 32-value
// sub-block expanded to int8 values v and two small integer scales (one per 16 values), so that
//   sub-block . x = (D d_x) (s_0 (v . xq)_0 + s_1 (v . xq)_1) - (Dmin d_x) (m_0 bsum_0 + m_1 bsum_1)
// is exact integers and two float products (the min term is Q2_K's alone). The expansions are
// iq_expand.h's: IQ1's delta folded in as v = 8 g +- 1, IQ2 / IQ3_XXS's half-step scales as
// 2 s + 1, with D the block scale times 1/8 or 1/4 (exact). As matvec_kquant.comp, the CPU sums a
// super-block's sub-blocks as integers, this shader each sub-block in float (summation order
// differs only). The grids and levels come from the table buffer (iq_tables.glsl).
// Built twice: one subgroup per row (SPILLWAY_SUBGROUPS), or one workgroup per row with a tree sum;
// each invocation takes 32-value sub-blocks (lane, lane + lanes, ...).
#extension GL_GOOGLE_include_directive : require
#ifdef SPILLWAY_SUBGROUPS
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "iq_tables.glsl"

layout(local_size_x = 32) in;

layout(push_constant) uniform Push {
    uint64_t w;        // row r at w + r * stride; rows 2-byte aligned
    uint64_t qs;       // x's Q8_K values, 4 per word, block b at words 64b..
    uint64_t d;        // (blocks) floats
    uint64_t bsums;    // (blocks * 16) ints
    uint64_t y;        // (rows) floats
    uint64_t stride;   // bytes
    uint64_t tables;   // the IQ grids and levels (iq_tables.glsl)
    uint rows;
    uint blocks;       // cols / 256
    uint type;         // gpu::DType 12, 13, 16..23
    uint rowsPerGroup; // SPILLWAY_SUBGROUPS only
} pc;

#define B8(at) loadByte(base, block + uint64_t(at))
#define B16(at) loadU16(base, block + uint64_t(at))
#define B32(at) loadU32(base, block + uint64_t(at))

// One sub-block expanded: its 32 int8 values, 4 per word (word k: values 4k..4k+3), the scales of
// its two halves (and Q2_K's mins), and the block's D and Dmin.
struct SubBlock {
    uint v[8];
    ivec2 scale;
    ivec2 mins;
    float D, Dmin;
};

// Four values 8 g +- 1 from four IQ1 grid bytes g (int8 -1, 0, 1).
uint iq1Word(uint g, bool negativeDelta)
{
    uint w = 0u;
    for (int t = 0; t < 4; ++t) {
        const int v = 8 * bitfieldExtract(int(g), 8 * t, 8) + (negativeDelta ? -1 : 1);
        w |= (uint(v) & 0xffu) << (8u * uint(t));
    }
    return w;
}

// Four IQ4_NL levels from the low (or high) nibbles of a word of 4 bytes.
uint levelWord(uint nibbles, uint shift)
{
    uint w = 0u;
    for (uint t = 0u; t < 4u; ++t)
        w |= (uint(levelValue(pc.tables, IQ_TABLE_IQ4NL, (nibbles >> (8u * t + shift)) & 15u)) & 0xffu) << (8u * t);
    return w;
}

SubBlock expand(uint64_t base, uint64_t block, uint ib)
{
    SubBlock e;
    e.mins = ivec2(0);
    e.Dmin = 0.0;
    const uint type = pc.type;
    if (type == 12u) {  // Q2_K: 2-bit values, 4-bit scale | min per 16
        const uint h = ib / 4u, j = ib % 4u;
        for (uint k = 0u; k < 8u; ++k) e.v[k] = (B32(16u + 32u * h + 4u * k) >> (2u * j)) & 0x03030303u;
        const uint s0 = B8(2u * ib), s1 = B8(2u * ib + 1u);
        e.scale = ivec2(int(s0 & 15u), int(s1 & 15u));
        e.mins = ivec2(int(s0 >> 4), int(s1 >> 4));
        e.D = halfToFloat(B16(80));
        e.Dmin = halfToFloat(B16(82));
    } else if (type == 13u) {  // Q3_K: 2 bits, minus 4 where the hmask bit is clear; 6-bit scales - 32
        const uint h = ib / 4u, j = ib % 4u;
        for (uint k = 0u; k < 8u; ++k) {
            const uint q = (B32(32u + 32u * h + 4u * k) >> (2u * j)) & 0x03030303u;
            const uint hm = (B32(4u * k) >> (4u * h + j)) & 0x01010101u;
            // q + 4 hm - 4 per byte: (q | hm << 2) + 124 stays below 256, and xor 0x80 takes 128 off.
            e.v[k] = ((q | (hm << 2)) + 0x7c7c7c7cu) ^ 0x80808080u;
        }
        int sc[2];
        for (uint half_ = 0u; half_ < 2u; ++half_) {
            const uint g = 2u * ib + half_;
            const uint low = g < 8u ? B8(96u + g) & 15u : B8(96u + g - 8u) >> 4;
            const uint high = (B8(104u + g % 4u) >> (2u * (g / 4u))) & 3u;
            sc[half_] = int(low | (high << 4)) - 32;
        }
        e.scale = ivec2(sc[0], sc[1]);
        e.D = halfToFloat(B16(108));
    } else if (type == 16u) {  // IQ4_XS: IQ4_NL's levels, a 6-bit scale - 32 per 32
        for (uint k = 0u; k < 4u; ++k) {
            const uint nibbles = B32(8u + 16u * ib + 4u * k);
            e.v[k] = levelWord(nibbles, 0u);
            e.v[k + 4u] = levelWord(nibbles, 4u);
        }
        const int s = int(((B8(4u + ib / 2u) >> (4u * (ib % 2u))) & 15u) | (((B16(2) >> (2u * ib)) & 3u) << 4)) - 32;
        e.scale = ivec2(s);
        e.D = halfToFloat(B16(0));
    } else if (type == 19u || type == 17u) {  // IQ2_XXS / IQ3_XXS: signs 4 x 7 bits and a scale in a u32
        const bool iq2 = type == 19u;
        const uint aux = iq2 ? B32(2u + 8u * ib + 4u) : B32(66u + 4u * ib);
        for (uint l = 0u; l < 4u; ++l) {
            const uint signs = iqSigns(aux >> (7u * l));
            uvec2 g;
            if (iq2) g = gridEntry(pc.tables, IQ_TABLE_IQ2XXS, B8(2u + 8u * ib + l));
            else g = uvec2(tableWord(pc.tables, IQ_TABLE_IQ3XXS + B8(2u + 8u * ib + 2u * l)),
                           tableWord(pc.tables, IQ_TABLE_IQ3XXS + B8(3u + 8u * ib + 2u * l)));
            e.v[2u * l] = signedBytes(g.x, signs & 15u);
            e.v[2u * l + 1u] = signedBytes(g.y, signs >> 4);
        }
        e.scale = ivec2(2 * int(aux >> 28) + 1);
        e.D = halfToFloat(B16(0)) * (iq2 ? 0.125 : 0.25);
    } else if (type == 20u || type == 21u) {  // IQ2_XS / IQ2_S: a 4-bit scale per 16
        const bool xs = type == 20u;
        for (uint l = 0u; l < 4u; ++l) {
            uint index, signs;
            if (xs) {
                const uint q = B16(2u + 2u * (4u * ib + l));
                index = q & 511u;
                signs = iqSigns(q >> 9);
            } else {
                index = B8(2u + 4u * ib + l) | ((B8(66u + ib) << (8u - 2u * l)) & 0x300u);
                signs = B8(34u + 4u * ib + l);
            }
            const uvec2 g = gridEntry(pc.tables, xs ? IQ_TABLE_IQ2XS : IQ_TABLE_IQ2S, index);
            e.v[2u * l] = signedBytes(g.x, signs & 15u);
            e.v[2u * l + 1u] = signedBytes(g.y, signs >> 4);
        }
        const uint sc = B8((xs ? 66u : 74u) + ib);
        e.scale = ivec2(2 * int(sc & 15u) + 1, 2 * int(sc >> 4) + 1);
        e.D = halfToFloat(B16(0)) * 0.125;
    } else if (type == 18u) {  // IQ3_S: 9-bit indices, 8 sign bits per 8, odd scales 1 + 2 s per 32
        const uint qh = B8(66u + ib);
        for (uint l = 0u; l < 4u; ++l) {
            const uint signs = B8(74u + 4u * ib + l);
            const uint i0 = B8(2u + 8u * ib + 2u * l) | ((qh << (8u - 2u * l)) & 256u);
            const uint i1 = B8(3u + 8u * ib + 2u * l) | ((qh << (7u - 2u * l)) & 256u);
            e.v[2u * l] = signedBytes(tableWord(pc.tables, IQ_TABLE_IQ3S + i0), signs & 15u);
            e.v[2u * l + 1u] = signedBytes(tableWord(pc.tables, IQ_TABLE_IQ3S + i1), signs >> 4);
        }
        const uint sc = B8(106u + ib / 2u);
        e.scale = ivec2(1 + 2 * int((ib % 2u) != 0u ? sc >> 4 : sc & 15u));
        e.D = halfToFloat(B16(0));
    } else if (type == 22u) {  // IQ1_S: 11-bit indices, a 3-bit scale and the delta's sign per 32
        const uint qh = B16(34u + 2u * ib);
        const bool negative = (qh & 0x8000u) != 0u;
        for (uint l = 0u; l < 4u; ++l) {
            const uvec2 g = gridEntry(pc.tables, IQ_TABLE_IQ1S, B8(2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8));
            e.v[2u * l] = iq1Word(g.x, negative);
            e.v[2u * l + 1u] = iq1Word(g.y, negative);
        }
        e.scale = ivec2(2 * int((qh >> 12) & 7u) + 1);
        e.D = halfToFloat(B16(0)) * 0.125;
    } else {  // IQ1_M: the delta's sign per 8, a 3-bit scale per 16, fp16 d in the scales' top nibbles
        for (uint l = 0u; l < 4u; ++l) {
            const uint qh = B8(32u + 2u * ib + l / 2u);
            const bool odd = (l % 2u) != 0u;
            const uint index = B8(4u * ib + l) | ((qh << (odd ? 4u : 8u)) & 0x700u);
            const bool negative = (qh & (odd ? 0x80u : 0x08u)) != 0u;
            const uvec2 g = gridEntry(pc.tables, IQ_TABLE_IQ1S, index);
            e.v[2u * l] = iq1Word(g.x, negative);
            e.v[2u * l + 1u] = iq1Word(g.y, negative);
        }
        const uint sc = B16(48u + 2u * (ib / 2u)), shift = 6u * (ib % 2u);
        e.scale = ivec2(2 * int((sc >> shift) & 7u) + 1, 2 * int((sc >> (shift + 3u)) & 7u) + 1);
        const uint scaleBits = (B16(48) >> 12) | ((B16(50) >> 8) & 0x00f0u) | ((B16(52) >> 4) & 0x0f00u) |
                               (B16(54) & 0xf000u);
        e.D = halfToFloat(scaleBits) * 0.125;
    }
    return e;
}

// Sub-block ib (32 values) of super-block b times x.
float subBlock(uint64_t base, uint64_t block, uint b, uint ib)
{
    const SubBlock e = expand(base, block, ib);
    Words xq = Words(pc.qs);
    Words bs = Words(pc.bsums);
    int dot0 = 0, dot1 = 0;
    for (uint k = 0u; k < 8u; ++k) {
        const uint xw = xq.v[b * 64u + 8u * ib + k];
        int dot = 0;
        for (int t = 0; t < 4; ++t) dot += sbyte(e.v[k], t) * sbyte(xw, t);
        if (k < 4u) dot0 += dot; else dot1 += dot;
    }
    const float dx = Floats(pc.d).v[b];
    float term = (e.D * dx) * float(e.scale.x * dot0 + e.scale.y * dot1);
    if (pc.type == 12u) {
        const int msum = e.mins.x * int(bs.v[b * 16u + 2u * ib]) + e.mins.y * int(bs.v[b * 16u + 2u * ib + 1u]);
        term -= (e.Dmin * dx) * float(msum);
    }
    return term;
}

#undef B8
#undef B16
#undef B32

// This invocation's share of the row's dot product: sub-blocks (8 per super-block) lane,
// lane + lanes, ..., so that a row of few super-blocks still keeps every lane busy.
float rowDot(uint row, uint lane, uint lanes)
{
    const uint64_t rowAddr = pc.w + uint64_t(row) * pc.stride;
    const uint64_t base = alignedBase(rowAddr);
    const uint shift = baseShift(rowAddr);
    const uint bytes[12] = uint[](84u, 110u, 0u, 0u, 136u, 98u, 110u, 66u, 74u, 82u, 50u, 56u);
    const uint blockBytes = bytes[pc.type - 12u];
    float acc = 0.0;
    for (uint u = lane; u < pc.blocks * 8u; u += lanes) {
        const uint b = u / 8u, ib = u % 8u;
        acc += subBlock(base, uint64_t(shift) + uint64_t(b) * blockBytes, b, ib);
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
