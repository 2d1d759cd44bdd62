#pragma once
// The body of linalg.h's elementwise kernels, compiled once per instruction set: linalg.cpp
// (baseline x86-64), linalg_avx2.cpp and linalg_avx512.cpp include it, each with its own flags
// and lane count (SPILLWAY_LINALG_LANES), and defines that set's entry points
// (SPILLWAY_LINALG_SUFFIX: detail::matvecAvx2, ...). Written with GCC's vector extensions (the compiler's own loop vectorizer leaves
// the clamps below as branches for AVX2 and SSE2). Everything here has internal linkage, so the
// copies built for different sets never stand in for each other at link time.

#include <cstring>
#include <cstddef>
#include <cstdint>

#include "core/compress/linalg.h"

namespace {

// SPILLWAY_LINALG_LANES, defined by the including file: the set's lanes of floats (4, 8, 16).
constexpr int L = SPILLWAY_LINALG_LANES;
typedef float F __attribute__((vector_size(L * 4)));
typedef int32_t I __attribute__((vector_size(L * 4)));
typedef uint8_t B __attribute__((vector_size(L)));

inline F splat(float v) { return F{} + v; }

inline F loadLanes(const float* p)
{
    F v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// 1 / (1 + exp(-z)) on L values. exp(x) = 2^k exp(s), k = round(x / ln 2),
// s = x - k ln 2 (ln 2 in two parts, so s keeps its low bits) in [-ln2/2, ln2/2], where the
// Taylor series to s^7 is within 1e-8 of exp(s); 2^k is built in the exponent bits. x is clamped
// to [-87, 88], where 2^k is a normal float: the sigmoid is 0 or 1 to float precision there anyway.
inline F fastSigmoid(F z)
{
    const F lo = splat(-87.0f), hi = splat(88.0f);
    F x = -z;
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const F round = splat(12582912.0f);            // 1.5 * 2^23: adding it rounds to an integer,
    const F t = x * 1.44269504088896341f + round;  // which then sits in t's low mantissa bits
    const F k = t - round;
    const F s = (x - k * 0.693145751953125f) - k * 1.42860682030941723e-6f;
    F p = splat(1.0f / 5040.0f);
    p = p * s + 1.0f / 720.0f;
    p = p * s + 1.0f / 120.0f;
    p = p * s + 1.0f / 24.0f;
    p = p * s + 1.0f / 6.0f;
    p = p * s + 0.5f;
    p = p * s + 1.0f;
    p = p * s + 1.0f;
    I ti;
    std::memcpy(&ti, &t, sizeof ti);
    const I bits = ((ti - 0x4B400000) + 127) << 23;  // 2^k
    F scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return 1.0f / (p * scale + 1.0f);
}

inline void logisticResidualBody(float* z, const uint8_t* y, size_t count, float wPos)
{
    // Label 1 or 0, weight wPos or 1: residual = weight * (sigmoid - label).
    auto residual = [wPos](F v, F label) { return (label * (wPos - 1.0f) + 1.0f) * (fastSigmoid(v) - label); };
    size_t i = 0;
    for (; i + L <= count; i += L) {
        B yb;
        std::memcpy(&yb, y + i, sizeof yb);
        const I positive = __builtin_convertvector(yb, I) != 0;  // -1 where positive
        const F v = residual(loadLanes(z + i), -__builtin_convertvector(positive, F));
        std::memcpy(z + i, &v, sizeof v);
    }
    for (; i < count; ++i)  // the tail, a lane at a time
        z[i] = residual(splat(z[i]), splat(y[i] != 0 ? 1.0f : 0.0f))[0];
}

// y[i] = dot(row i of m, v) (+ bias[i]): four lane-wide accumulators per row, then the lanes.
inline void matvecBody(const float* m, int64_t rows, int64_t cols, const float* v, const float* bias, float* y)
{
    for (int64_t i = 0; i < rows; ++i) {
        const float* r = m + i * cols;
        F a0{}, a1{}, a2{}, a3{};
        int64_t k = 0;
        for (; k + 4 * L <= cols; k += 4 * L) {
            a0 += loadLanes(r + k) * loadLanes(v + k);
            a1 += loadLanes(r + k + L) * loadLanes(v + k + L);
            a2 += loadLanes(r + k + 2 * L) * loadLanes(v + k + 2 * L);
            a3 += loadLanes(r + k + 3 * L) * loadLanes(v + k + 3 * L);
        }
        for (; k + L <= cols; k += L) a0 += loadLanes(r + k) * loadLanes(v + k);
        const F lanes = (a0 + a1) + (a2 + a3);
        float sum = 0.0f;
        for (int l = 0; l < L; ++l) sum += lanes[l];
        for (; k < cols; ++k) sum += r[k] * v[k];
        y[i] = bias ? bias[i] + sum : sum;
    }
}

}  // namespace

// The set's entry points, declared in linalg.h.
#define SPILLWAY_LINALG_NAME2(name, suffix) name##suffix
#define SPILLWAY_LINALG_NAME(name, suffix) SPILLWAY_LINALG_NAME2(name, suffix)
namespace spillway::compress::linalg::detail {

void SPILLWAY_LINALG_NAME(logisticResidual, SPILLWAY_LINALG_SUFFIX)(float* z, const uint8_t* y, size_t count,
                                                                    float wPos)
{
    logisticResidualBody(z, y, count, wPos);
}

void SPILLWAY_LINALG_NAME(matvec, SPILLWAY_LINALG_SUFFIX)(const float* m, int64_t rows, int64_t cols, const float* v,
                                                          const float* bias, float* y)
{
    matvecBody(m, rows, cols, v, bias, y);
}

}  // namespace spillway::compress::linalg::detail
