#pragma once
// Loading x for the AVX-512 bitmap-sparse kernels (fp16/bf16 and int8 values). Include only from
// files compiled with the AVX-512 flags (*_avx512.cpp); the functions have internal linkage so
// no copy compiled with these flags can stand in for code built for other instruction sets.

#include <immintrin.h>

#include <cstdint>

namespace spillway::gpu::cpu {
namespace {

// x[c, c + 16) as a masked load: lanes at or past cols are zero and never read.
inline __m512 loadX(const float* x, int64_t c, int64_t cols)
{
    const int64_t n = cols - c;
    const __mmask16 m = n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
    return _mm512_maskz_loadu_ps(m, x + c);
}

// The 64 x values of bitmap word `c / 64` (masked in the last, partial word).
inline void loadXWord(const float* x, int64_t c, int64_t cols, __m512 xs[4])
{
    if (c + 64 <= cols) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) xs[q] = _mm512_loadu_ps(x + c + 16 * q);
    } else {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) xs[q] = loadX(x, c + 16 * q, cols);
    }
}

}  // namespace
}  // namespace spillway::gpu::cpu
