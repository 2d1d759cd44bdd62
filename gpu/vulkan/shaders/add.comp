#version 460
// y[i] += x[i] (the residual connection).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t y;
    uint64_t x;
    uint n;
} pc;

void main()
{
    const uint i = flatInvocation(64u);
    if (i >= pc.n) return;
    precise const float v = Floats(pc.y).v[i] + Floats(pc.x).v[i];
    Floats(pc.y).v[i] = v;
}
