#version 460
// Rotary position embedding, in place, as the CPU device's ropeOp: theta starts at the
// position and is multiplied by thetaScale = base^(-2 / dims) once per pair, in float (each
// invocation repeats the same product sequence); the angle is freqScale * theta (divided by
// freqFactors[k] when given). Pairs are (2k, 2k+1), or (k, k + dims/2) for NeoX-style models.
// One invocation per (head, pair).
//
// cos and sin: built with SPILLWAY_FP64 (devices with shaderFloat64), the angle is reduced
// modulo pi/2 in double (fdlibm's two-part pi/2) and both come from Taylor series in double,
// rounded once to float: within one float ulp of glibc's cosf / sinf at any position. Without
// it, a float reduction and polynomials (below; less accurate at large positions).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint64_t x;            // (nHeads, headDim) floats
    uint64_t freqFactors;  // (dims / 2) floats, or 0
    uint nHeads;
    uint headDim;
    uint pos;
    uint dims;             // rotating dims per head, even, > 0
    float thetaScale;      // base^(-2 / dims), computed on the host as the CPU device does
    float freqScale;
    uint neox;
} pc;

#ifdef SPILLWAY_FP64
// sin and cos of r in [-pi/4, pi/4]: the series' next term is below 1e-20.
void sinCosReduced(double r, out double s, out double c)
{
    const double r2 = r * r;
    double ps = 1.0lf / 6227020800.0lf;  // 1/13!
    ps = 1.0lf / 39916800.0lf - r2 * ps;
    ps = 1.0lf / 362880.0lf - r2 * ps;
    ps = 1.0lf / 5040.0lf - r2 * ps;
    ps = 1.0lf / 120.0lf - r2 * ps;
    ps = 1.0lf / 6.0lf - r2 * ps;
    s = r - r * r2 * ps;
    double pc_ = 1.0lf / 87178291200.0lf;  // 1/14!
    pc_ = 1.0lf / 479001600.0lf - r2 * pc_;
    pc_ = 1.0lf / 3628800.0lf - r2 * pc_;
    pc_ = 1.0lf / 40320.0lf - r2 * pc_;
    pc_ = 1.0lf / 720.0lf - r2 * pc_;
    pc_ = 1.0lf / 24.0lf - r2 * pc_;
    pc_ = 0.5lf - r2 * pc_;
    c = 1.0lf - r2 * pc_;
}

void sinCos(float angle, out float s, out float c)
{
    const double a = double(angle);
    const double k = roundEven(a * 0.63661977236758134308lf);  // 2 / pi
    // a - k * pi/2 with pi/2 = pio2_1 + pio2_1t (pio2_1 has 33 bits: k * pio2_1 is exact for
    // |k| < 2^20, angles below about 1.6e6).
    precise const double r = (a - k * 1.57079632673412561417e+00lf) - k * 6.07710050650619224932e-11lf;
    double sr, cr;
    sinCosReduced(r, sr, cr);
    const int q = int(mod(k, 4.0lf));
    if (q == 0) { s = float(sr); c = float(cr); }
    else if (q == 1) { s = float(cr); c = float(-sr); }
    else if (q == 2) { s = float(-sr); c = float(-cr); }
    else { s = float(-cr); c = float(sr); }
}
#else
// In float: the angle reduced modulo pi/2 with pi/2 split in three (Cody-Waite: cephes' sinf
// constants doubled; k * C1 exact for k < 2^16), then cephes' minimax polynomials on
// [-pi/4, pi/4]. Within 1e-7 of the exact values for angles below about 4100 (positions,
// before scaling), 5e-7 at 30000: not the driver's cos / sin, whose accuracy is its own.
void sinCos(float angle, out float s, out float c)
{
    const float k = roundEven(angle * 0.636619772);  // 2 / pi
    precise const float r =
        ((angle - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
    precise const float z = r * r;
    precise const float sr = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
    precise const float cr = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z -
                             0.5 * z + 1.0;
    const int q = int(mod(k, 4.0));
    if (q == 0) { s = sr; c = cr; }
    else if (q == 1) { s = cr; c = -sr; }
    else if (q == 2) { s = -sr; c = -cr; }
    else { s = -cr; c = sr; }
}
#endif

void main()
{
    const uint half_ = pc.dims / 2u;
    const uint i = flatInvocation(64u);
    if (i >= pc.nHeads * half_) return;
    const uint h = i / half_;
    const uint k = i % half_;
    precise float theta = float(pc.pos);
    for (uint j = 0u; j < k; ++j) theta = theta * pc.thetaScale;
    precise float angle = pc.freqScale * theta;
    if (pc.freqFactors != 0ul) angle = divCorrect(angle, Floats(pc.freqFactors).v[k]);
    float s, c;
    sinCos(angle, s, c);
    Floats x = Floats(pc.x);
    const uint first = h * pc.headDim;
    const uint a = pc.neox != 0u ? first + k : first + 2u * k;
    const uint b = pc.neox != 0u ? first + k + half_ : first + 2u * k + 1u;
    const float x0 = x.v[a];
    const float x1 = x.v[b];
    precise const float r0 = x0 * c - x1 * s;
    precise const float r1 = x0 * s + x1 * c;
    x.v[a] = r0;
    x.v[b] = r1;
}
