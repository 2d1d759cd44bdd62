#version 460
// Decode attention of one query token over positions [0, nPos) of one layer's KV cache, with
// grouped-query heads (head h reads KV head h / (nHeads / nKvHeads)), as the CPU device's
// attentionOp; or a prompt batch's `queries` queries at once (Device::attentionBatch), query i
// (rows rowStride floats apart) over positions [0, nPos - queries + 1 + i), each exactly as one
// query alone. One workgroup per head (x) and query (y), three phases behind barriers:
//   1. scores[t] = (q . k_t) * scale (Q8: the dot times k_t's scale)   invocation per t
//   2. p[t] = exp(scores[t] - max), their sum; weights p[t] * (1 / sum)  tree reductions
//   3. out[d] = sum_t weight[t] v_t[d] (Q8: weight times v_t's scale)    invocation per d
// The scores live in device memory (scores + (i * nHeads + h) * nPos); caches of any KvType,
// read as words.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t q;        // per query (nHeads, headDim) floats, rowStride apart
    uint64_t kCache;   // (ctx, nKvHeads, headDim) kvType values
    uint64_t vCache;
    uint64_t dst;      // as q
    uint64_t scores;   // (queries, nHeads, nPos) floats
    uint64_t kScales;  // Q8: (ctx, nKvHeads) floats
    uint64_t vScales;
    uint nHeads;
    uint nKvHeads;
    uint headDim;
    uint nPos;
    float scale;
    uint kvType;       // 0 F32, 1 F16, 2 Q8 (gpu::KvType)
    uint queries;      // 1: decode
    uint rowStride;    // floats between queries' q (and out) rows
} pc;

shared float partial[64];

// Value i of a cache (Q8: the integer, without its vector's scale).
float cacheValue(uint64_t cache, uint64_t i)
{
    if (pc.kvType == 0u) return Floats(cache).v[uint(i)];
    const uint64_t base = alignedBase(cache);
    const uint shift = baseShift(cache);
    if (pc.kvType == 1u) return halfToFloat(loadU16(base, shift + 2u * i));
    return float(bitfieldExtract(int(loadByte(base, shift + i)), 0, 8));
}

void main()
{
    const uint h = gl_WorkGroupID.x;
    const uint query = gl_WorkGroupID.y;
    const uint lane = gl_LocalInvocationID.x;
    const uint kvHead = h / (pc.nHeads / pc.nKvHeads);
    const uint kvStride = pc.nKvHeads * pc.headDim;  // values per position
    const uint nPos = pc.nPos - pc.queries + 1u + query;  // causal: this query's positions
    Floats q = Floats(pc.q);
    SharedFloats scores = SharedFloats(pc.scores + (uint64_t(query) * pc.nHeads + h) * pc.nPos * 4u);
    const uint qFirst = query * pc.rowStride + h * pc.headDim;

    float m = uintBitsToFloat(0xff800000u);  // -inf
    for (uint t = lane; t < nPos; t += 64u) {
        const uint64_t first = uint64_t(t) * kvStride + uint64_t(kvHead) * pc.headDim;
        float dot = 0.0;
        for (uint d = 0u; d < pc.headDim; ++d) dot += q.v[qFirst + d] * cacheValue(pc.kCache, first + d);
        if (pc.kvType == 2u) dot *= Floats(pc.kScales).v[t * pc.nKvHeads + kvHead];
        precise const float s = dot * pc.scale;
        scores.v[t] = s;
        m = max(m, s);
    }
    partial[lane] = m;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (lane < s) partial[lane] = max(partial[lane], partial[lane + s]);
        barrier();
    }
    const float maxScore = partial[0];
    barrier();

    float sum = 0.0;
    for (uint t = lane; t < nPos; t += 64u) {
        const float e = exp(scores.v[t] - maxScore);
        scores.v[t] = e;
        sum += e;
    }
    partial[lane] = sum;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (lane < s) partial[lane] += partial[lane + s];
        barrier();
    }
    precise const float inverse = 1.0 / partial[0];
    memoryBarrierBuffer();
    barrier();  // every p[t] written before any invocation reads them all

    Floats out_ = Floats(pc.dst);
    for (uint d = lane; d < pc.headDim; d += 64u) {
        float acc = 0.0;
        for (uint t = 0u; t < nPos; ++t) {
            precise float w = scores.v[t] * inverse;
            if (pc.kvType == 2u) w = w * Floats(pc.vScales).v[t * pc.nKvHeads + kvHead];
            acc += w * cacheValue(pc.vCache, uint64_t(t) * kvStride + uint64_t(kvHead) * pc.headDim + d);
        }
        out_.v[qFirst + d] = acc;
    }
}
