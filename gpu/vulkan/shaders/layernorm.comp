#version 460
// out = (x - mean) / sqrt(var + eps) * weight + bias, as the CPU device's layernormOp (which
// sums in double; here float partial sums and a tree in shared memory). One workgroup; out may
// alias x (every read of x is behind the barriers of the two sums).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint64_t x;
    uint64_t weight;
    uint64_t bias;
    uint64_t dst;
    uint n;
    float eps;
} pc;

shared float partial[256];

float workgroupSum(float v)
{
    const uint lane = gl_LocalInvocationID.x;
    partial[lane] = v;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (lane < s) partial[lane] += partial[lane + s];
        barrier();
    }
    const float total = partial[0];
    barrier();  // partial is reused by the next sum
    return total;
}

void main()
{
    const uint lane = gl_LocalInvocationID.x;
    Floats x = Floats(pc.x);
    float sum = 0.0;
    for (uint i = lane; i < pc.n; i += 256u) sum += x.v[i];
    precise const float mean = workgroupSum(sum) / float(pc.n);
    float squares = 0.0;
    for (uint i = lane; i < pc.n; i += 256u) {
        precise const float d = x.v[i] - mean;
        squares += d * d;
    }
    precise const float var = workgroupSum(squares) / float(pc.n);
    precise const float scale = 1.0 / sqrt(var + pc.eps);
    Floats w = Floats(pc.weight);
    Floats b = Floats(pc.bias);
    Floats out_ = Floats(pc.dst);
    for (uint i = lane; i < pc.n; i += 256u) {
        precise const float v = (x.v[i] - mean) * scale * w.v[i] + b.v[i];
        out_.v[i] = v;
    }
}
