#version 460
// Writes this step's K and V (nKvHeads vectors of headDim floats each) into the caches at
// position nPos - 1, converted to the cache type exactly as the CPU device's storeKvOp does, so
// both devices hold the same bits: F32 copied, F16 rounded to nearest even, Q8 with
// d = max|x| / 127 and q = round_half_away_from_zero(x / d) clamped to [-127, 127] (0 for NaN).
// One workgroup per vector: gl_WorkGroupID.x the kv head, gl_WorkGroupID.y 0 for K, 1 for V.
// Sub-word values are written with atomics, so caches of any alignment work.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t kNew;
    uint64_t vNew;
    uint64_t kCache;
    uint64_t vCache;
    uint64_t kScales;
    uint64_t vScales;
    uint nKvHeads;
    uint headDim;
    uint pos;
    uint kvType;  // 0 F32, 1 F16, 2 Q8 (gpu::KvType)
} pc;

shared float partial[64];

void main()
{
    const uint h = gl_WorkGroupID.x;
    const bool isV = gl_WorkGroupID.y == 1u;
    const uint lane = gl_LocalInvocationID.x;
    Floats x = Floats(isV ? pc.vNew : pc.kNew);
    const uint xFirst = h * pc.headDim;
    const uint vector = pc.pos * pc.nKvHeads + h;
    const uint64_t first = uint64_t(vector) * pc.headDim;  // in values
    const uint64_t cache = isV ? pc.vCache : pc.kCache;
    if (pc.kvType == 0u) {
        for (uint i = lane; i < pc.headDim; i += 64u) Floats(cache).v[uint(first) + i] = x.v[xFirst + i];
        return;
    }
    const uint64_t base = alignedBase(cache);
    const uint shift = baseShift(cache);
    if (pc.kvType == 1u) {
        for (uint i = lane; i < pc.headDim; i += 64u)
            storeU16(base, shift + (first + i) * 2u, floatToHalf(x.v[xFirst + i]));
        return;
    }
    float m = 0.0;
    for (uint i = lane; i < pc.headDim; i += 64u) m = max(m, abs(x.v[xFirst + i]));
    partial[lane] = m;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (lane < s) partial[lane] = max(partial[lane], partial[lane + s]);
        barrier();
    }
    precise const float d = divCorrect(partial[0], 127.0);
    for (uint i = lane; i < pc.headDim; i += 64u) {
        precise const float scaled = d != 0.0 ? divCorrect(x.v[xFirst + i], d) : 0.0;
        const float r = roundHalfAway(scaled);
        const int q = isnan(r) ? 0 : int(clamp(r, -127.0, 127.0));
        storeByte(base, shift + first + i, uint(q));
    }
    if (lane == 0u) Floats(isV ? pc.vScales : pc.kScales).v[vector] = d;
}
