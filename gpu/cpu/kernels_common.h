#pragma once
// Helpers shared by the kernel files of every instruction set.
//
// Everything here has internal linkage (static): the *_avx2.cpp / *_avx512.cpp files are compiled
// with wider instruction sets, and an inline function with external linkage instantiated there
// could be the copy the linker keeps for the baseline code too (and crash a CPU without AVX2).
// For the same reason, kernel files use no std containers or other out-of-line std templates.

#include <cstdint>
#include <cstring>

#include "gpu/device.h"

namespace spillway::gpu::cpu {

// A 64 Ki-entry fp16 -> fp32 table (256 KiB) for the scalar kernels; built on first use.
const float* fp16Table();

static inline const uint8_t* rowPointer(const MatrixView& w, int64_t r)
{
    return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.rowStride;
}

static inline uint16_t loadU16(const void* p)
{
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// v, unchanged, but materialized as a float: a product passed through here is rounded before
// it is added, so FMA contraction (GCC contracts by default in C++, and the *_avx2 / *_avx512
// files are compiled with FMA) cannot change the bits of sums that must be reproducible.
static inline float rounded(float v)
{
    __asm__("" : "+x"(v));
    return v;
}

// The block-term order of the super-block row kernels (iq_expand.h, kernels_iq_fused_x86.h),
// the same in every kernel set: the terms of the first blocks - blocks % 8 blocks summed in 8
// lanes (block b into lane b % 8, in order), the lanes added as a tree, then the remaining
// blocks in order. The vector kernels keep the lanes in one register across the row (no serial
// chain of 8 scalar adds per 8 blocks), and the scalar kernels reproduce their bits.
static inline float laneTree8(const float* lane)
{
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The Q8 scale of one block of x (see QuantizedX): d = max|x| / 127; values are multiplied by
// 1 / d and rounded to nearest even; d is kept rounded through fp16, as llama.cpp's block_q8_0
// stores it. Every kernel set computes these exact float operations, so all agree bit for bit.
static inline float q8Inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// 8 * d * sum(q), the Q4_0 offset term of one block.
static inline float q8Sum8(float stored, int sum) { return stored * static_cast<float>(8 * sum); }

}  // namespace spillway::gpu::cpu
