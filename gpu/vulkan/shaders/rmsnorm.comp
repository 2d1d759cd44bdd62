#version 460
// out = x / sqrt(mean(x^2) + eps) * weight, as the CPU device's rmsnormOp: float squares
// summed (here in float: strided per invocation, then a tree in shared memory), then one float
// scale. One workgroup. out may alias x: every read of x is behind the sum's barriers.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint64_t x;
    uint64_t weight;
    uint64_t dst;
    uint n;
    float eps;
} pc;

shared float partial[256];

void main()
{
    const uint lane = gl_LocalInvocationID.x;
    Floats x = Floats(pc.x);
    float sum = 0.0;
    for (uint i = lane; i < pc.n; i += 256u) {
        precise const float sq = x.v[i] * x.v[i];
        sum += sq;
    }
    partial[lane] = sum;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (lane < s) partial[lane] += partial[lane + s];
        barrier();
    }
    precise const float mean = partial[0] / float(pc.n);
    precise const float scale = 1.0 / sqrt(mean + pc.eps);
    Floats w = Floats(pc.weight);
    Floats out_ = Floats(pc.dst);
    for (uint i = lane; i < pc.n; i += 256u) {
        precise const float v = (x.v[i] * scale) * w.v[i];
        out_.v[i] = v;
    }
}
