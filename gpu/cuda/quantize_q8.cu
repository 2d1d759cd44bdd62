// x -> Q8 blocks of 32, bit-identical to the CPU device's quantizeQ8Scalar
// (gpu/cpu/kernels_scalar.cpp): d = max|x| / 127, q = round_to_nearest_even(x * (1 / d)),
// d stored rounded through fp16, sum8 = d * (8 * sum q). One warp per block of 32 values.
// IEEE division and rounding: this file must not be built with --use_fast_math.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) quantizeQ8Kernel(const float* __restrict__ x,
    int64_t blocks, int8_t* __restrict__ qs, float* __restrict__ d, float* __restrict__ sum8)
{
    const int lane = threadIdx.x % kWarp;
    const int64_t b = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) + threadIdx.x / kWarp;
    if (b >= blocks) return;
    const float v = x[b * 32 + lane];
    const float amax = warpMax(fabsf(v));
    const float scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    const float stored = __half2float(__float2half_rn(scale));
    const int q = __float2int_rn(__fmul_rn(v, inverse));
    qs[b * 32 + lane] = static_cast<int8_t>(q);
    int sum = q;
    for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) {
        d[b] = stored;
        sum8[b] = stored * static_cast<float>(8 * sum);
    }
}

}  // namespace

cudaError_t launchQuantizeQ8(const float* x, int64_t n, int8_t* qs, float* d, float* sum8,
                             cudaStream_t stream)
{
    const int64_t blocks = n / 32;
    if (blocks <= 0) return cudaSuccess;
    quantizeQ8Kernel<<<gridFor(blocks, kThreads / kWarp), kThreads, 0, stream>>>(x, blocks, qs, d, sum8);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
