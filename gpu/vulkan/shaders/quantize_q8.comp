#version 460
// x -> Q8 blocks of 32, bit-identical to the CPU device's quantizeQ8Scalar: d = max|x| / 127,
// q = round_to_nearest_even(x * (1 / d)), d stored rounded through fp16, sum8 = d * (8 * sum q).
// One invocation per block. Output layout (this backend's own): qs packed 4 per word (block b
// at words 8b..8b+7), d and sum8 one float per block.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;      // (blocks * 32) floats
    uint64_t qs;     // (blocks * 8) words
    uint64_t d;      // (blocks) floats
    uint64_t sum8;   // (blocks) floats
    uint blocks;
} pc;

void main()
{
    const uint b = flatInvocation(64u);
    if (b >= pc.blocks) return;
    Floats x = Floats(pc.x);
    float amax = 0.0;
    for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(x.v[b * 32u + i]));
    precise const float scale = divCorrect(amax, 127.0);
    precise const float inverse = scale != 0.0 ? divCorrect(1.0, scale) : 0.0;
    const float stored = halfToFloat(floatToHalf(scale));
    int sum = 0;
    for (uint w = 0u; w < 8u; ++w) {
        uint packed = 0u;
        for (uint k = 0u; k < 4u; ++k) {
            precise const float scaled = x.v[b * 32u + w * 4u + k] * inverse;
            const int q = int(roundEven(scaled));
            sum += q;
            packed |= (uint(q) & 0xffu) << (8u * k);
        }
        Words(pc.qs).v[b * 8u + w] = packed;
    }
    Floats(pc.d).v[b] = stored;
    precise const float s8 = stored * float(8 * sum);
    Floats(pc.sum8).v[b] = s8;
}
