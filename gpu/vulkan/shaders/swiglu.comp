#version 460
// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up, as the CPU device's swigluOp.
// out may alias gate or up (each invocation reads its element before writing it).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t gate;
    uint64_t up;
    uint64_t dst;
    uint n;
} pc;

void main()
{
    const uint i = flatInvocation(64u);
    if (i >= pc.n) return;
    const float g = Floats(pc.gate).v[i];
    const float u = Floats(pc.up).v[i];
    precise const float v = g / (1.0 + exp(-g)) * u;
    Floats(pc.dst).v[i] = v;
}
