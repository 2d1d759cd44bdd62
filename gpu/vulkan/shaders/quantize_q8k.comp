#version 460
// x -> Q8_K super-blocks of 256 (the K-quants' x), bit-identical to the CPU device's quantizeQ8K
// (gpu/cpu/kernels_kquant_scalar.cpp): d = max|x| / 127 kept in float, q =
// round_to_nearest_even(x * (1 / d)), the sum of q per 16 values. One invocation per super-block.
// Output layout (this backend's own): qs packed 4 per word (block b at words 64b..64b+63), d one
// float per block, the sums one int per 16 values (block b at 16b..16b+15).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;      // (blocks * 256) floats
    uint64_t qs;     // (blocks * 64) words
    uint64_t d;      // (blocks) floats
    uint64_t bsums;  // (blocks * 16) ints
    uint blocks;
} pc;

void main()
{
    const uint b = flatInvocation(64u);
    if (b >= pc.blocks) return;
    Floats x = Floats(pc.x);
    float amax = 0.0;
    for (uint i = 0u; i < 256u; ++i) amax = max(amax, abs(x.v[b * 256u + i]));
    precise const float scale = divCorrect(amax, 127.0);
    precise const float inverse = scale != 0.0 ? divCorrect(1.0, scale) : 0.0;
    for (uint g = 0u; g < 16u; ++g) {
        int sum = 0;
        for (uint w = 0u; w < 4u; ++w) {
            uint packed = 0u;
            for (uint k = 0u; k < 4u; ++k) {
                precise const float scaled = x.v[b * 256u + g * 16u + w * 4u + k] * inverse;
                const int q = int(roundEven(scaled));
                sum += q;
                packed |= (uint(q) & 0xffu) << (8u * k);
            }
            Words(pc.qs).v[b * 64u + g * 4u + w] = packed;
        }
        Words(pc.bsums).v[b * 16u + g] = uint(sum);
    }
    Floats(pc.d).v[b] = scale;
}
