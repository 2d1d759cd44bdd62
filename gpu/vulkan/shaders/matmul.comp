#version 460
// A prompt batch's product with one weight matrix: Y = W X for `tokens` vectors x (token t at
// x + t * sx floats; its result at y + t * sy), W (rows, cols) of any type the backend computes,
// read once per tile of tokens instead of once per token. Each weight is decoded to float exactly
// as getRow does (decode.glsl) and multiplied with the tokens' float x (not quantized to Q8 as
// the one-token matvec does), fp32 sums in column order: a batch's logits follow the one-token
// path to a tolerance, not bit for bit (as CUDA's cuBLAS products; tests/gpu/test_gpu_generate.cpp).
//
// A workgroup of 64 invocations computes a tile of 64 rows x 16 tokens: each invocation one row
// for the 16 tokens (16 accumulators); per step of 32 columns, the 16 tokens' 32 values are
// staged in shared memory by the whole workgroup, then each invocation decodes its row's 32
// weights and adds their products. Workgroup (x, y) is rows 64x.., tokens 16y...
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "decode.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t w;       // row r at w + r * stride
    uint64_t x;       // token t's vector at x + t * sx floats
    uint64_t y;       // token t's result at y + t * sy floats
    uint64_t stride;  // bytes
    uint64_t tables;  // the IQ grids and levels (iq_tables.glsl)
    uint sx, sy;      // floats
    uint rows, cols, tokens;
    uint type;        // gpu::DType 0..4, 6..10, 12..24
} pc;

const uint kRows = 64u, kTokens = 16u, kStep = 32u;
shared float xTile[kTokens][kStep];

void main()
{
    const uint lane = gl_LocalInvocationID.x;
    const uint row = gl_WorkGroupID.x * kRows + lane;
    const uint token0 = gl_WorkGroupID.y * kTokens;
    const uint n = min(kTokens, pc.tokens - token0);
    const uint64_t rowAddr = pc.w + uint64_t(min(row, pc.rows - 1u)) * pc.stride;
    const uint64_t base = alignedBase(rowAddr);
    const uint shift = baseShift(rowAddr);
    Floats x = Floats(pc.x);
    float acc[kTokens];
    for (uint t = 0u; t < kTokens; ++t) acc[t] = 0.0;
    for (uint c0 = 0u; c0 < pc.cols; c0 += kStep) {
        const uint width = min(kStep, pc.cols - c0);
        // 16 x 32 values, 8 per invocation.
        for (uint i = lane; i < kTokens * kStep; i += kRows) {
            const uint t = i / kStep, c = i % kStep;
            xTile[t][c] = t < n && c < width ? x.v[(token0 + t) * pc.sx + c0 + c] : 0.0;
        }
        barrier();
        if (row < pc.rows)
            for (uint c = 0u; c < width; ++c) {
                const float wv = decodeValue(pc.type, base, shift, c0 + c, pc.tables);
                for (uint t = 0u; t < kTokens; ++t) acc[t] += wv * xTile[t][c];
            }
        barrier();
    }
    if (row >= pc.rows) return;
    Floats y = Floats(pc.y);
    for (uint t = 0u; t < n; ++t) y.v[(token0 + t) * pc.sy + row] = acc[t];
}
