#pragma once
// How close two runs' outputs are (relative L2), and how close a CPU prompt batch must come to one
// token at a time. No dependencies beyond the standard library: every test layer includes it.

#include <cmath>
#include <cstddef>
#include <span>

namespace spillway::testing_support {

// ||got - want|| / ||want||; 1 when the sizes differ (a run that stopped short fails any bound).
inline double relativeL2(std::span<const float> got, std::span<const float> want)
{
    if (got.size() != want.size()) return 1.0;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += double(want[i]) * want[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// How far a prompt batch's logits may be from one token at a time on the CPU (relative L2). A
// batch of 8 or more tokens on one matrix goes through a float matrix product (gpu/cpu/cpu_device.cpp:
// gemm), which sums in another order than the matvec kernels: for float weights that is rounding
// (measured ~1e-6); for integer weights the products also skip quantizing x to Q8 (more exact,
// ~1e-3 from the one-token path's Q8 arithmetic). Decode (one token) stays bit for bit.
inline constexpr double kPromptFloatTolerance = 1e-5;
inline constexpr double kPromptQuantTolerance = 2e-2;
// The integer products (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; gpu/cpu/gemm_int8_x86.h) quantize x as the
// one-token path does (Q8 blocks, Q8_K super-blocks), so each block's integer sum is the same;
// only the float sums are in another order.
inline constexpr double kPromptIntegerTolerance = 1e-5;
// With an fp16 or int8 KV cache, the rounding differences can move a stored key or value across
// a rounding boundary: about ten times the float tolerance (measured 1.5e-4 with fp16).
inline constexpr double kPromptRoundedKvTolerance = 1e-3;

}  // namespace spillway::testing_support
