#version 460
// The elementwise ops of gpu::PointwiseArgs, as the CPU device's pointwiseOp:
//   0 ShiftedRelu     out = max(0, x - shift)
//   1 ShiftedReluGlu  out = max(0, x - shift) * y
//   2 SnapToGrid      out = clamp(round(x / step), lo, hi) * step (round half away from zero;
//                     NaN becomes 0)
//   3 Scale           out = x * factor
//   4 ScaledAdd       out = (x * factor) + y (the product rounded first)
//   5 ClampedSwiglu   g = min(x, hi), u = clamp(y, -hi, hi): out = g / (1 + exp(-factor g)) * (u + 1)
// out may alias x or y.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;
    uint64_t y;
    uint64_t dst;
    uint n;
    uint op;
    float shift;
    float step;
    float lo;
    float hi;
    float factor;
} pc;

void main()
{
    const uint i = flatInvocation(64u);
    if (i >= pc.n) return;
    const float v = Floats(pc.x).v[i];
    float result;
    if (pc.op == 0u) {
        precise const float s = v - pc.shift;
        result = max(0.0, s);
    } else if (pc.op == 1u) {
        precise const float s = max(0.0, v - pc.shift) * Floats(pc.y).v[i];
        result = s;
    } else if (pc.op == 3u) {
        precise const float s = v * pc.factor;
        result = s;
    } else if (pc.op == 4u) {
        precise const float product = v * pc.factor;
        precise const float s = product + Floats(pc.y).v[i];
        result = s;
    } else if (pc.op == 5u) {
        const float g = min(v, pc.hi);
        const float u = clamp(Floats(pc.y).v[i], -pc.hi, pc.hi);
        result = g / (1.0 + exp(-pc.factor * g)) * (u + 1.0);
    } else {
        precise const float scaled = divCorrect(v, pc.step);
        const float r = roundHalfAway(scaled);
        precise const float s = (isnan(r) ? 0.0 : clamp(r, pc.lo, pc.hi)) * pc.step;
        result = s;
    }
    Floats(pc.dst).v[i] = result;
}
