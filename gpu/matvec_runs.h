#pragma once
// What every backend's matvec needs to know about a call's jobs, beyond the weights themselves:
// the quantized form x takes for a weight type (the CPU, CUDA and Vulkan quantize x the same
// way for each), and the runs of jobs that are one prompt batch (one weight matrix, each token's
// x and y one even step further: LayerStep lays a batch out so), which a backend multiplies as
// one matrix product from some number of jobs on. Header-only: the GPU modules use it without
// linking the CPU backend.

#include <cstddef>
#include <span>

#include "gpu/device.h"

namespace spillway::gpu {

// x for float weights stays float; blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4)
// take x in Q8 blocks of 32, the K-quants and IQ types of 256 values in Q8_K super-blocks of 256, the llama2.c groups (Q8_G64) in groups of 64.
enum class XForm { Float, Q8, Q8K, Q8G64 };

inline XForm xFormFor(DType t)
{
    switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4: return XForm::Q8;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ1_S:
    case DType::IQ1_M: return XForm::Q8K;
    case DType::Q8_G64: return XForm::Q8G64;
    default: return XForm::Float;
    }
}

// The number of jobs from `first` on that multiply one weight matrix (same data, type, shape and
// row stride) with vectors x and into vectors y that each advance by the same step from job to
// job (steps at least a vector long, so none overlap): 1 where the next job does not continue it.
inline size_t evenJobRun(std::span<const MatvecJob> jobs, size_t first)
{
    const MatvecJob& a = jobs[first];
    if (first + 1 >= jobs.size() || a.w.rows <= 0 || a.w.cols <= 0) return 1;
    const std::ptrdiff_t sx = jobs[first + 1].x - a.x, sy = jobs[first + 1].y - a.y;
    if (sx < a.w.cols || sy < a.w.rows) return 1;
    size_t n = 1;
    while (first + n < jobs.size()) {
        const MatvecJob& b = jobs[first + n];
        if (b.w.data != a.w.data || b.w.type != a.w.type || b.w.rows != a.w.rows || b.w.cols != a.w.cols ||
            b.w.rowStride != a.w.rowStride || b.x != a.x + sx * std::ptrdiff_t(n) ||
            b.y != a.y + sy * std::ptrdiff_t(n))
            break;
        ++n;
    }
    return n;
}

}  // namespace spillway::gpu
