// out = x / sqrt(mean(x^2) + eps) * weight, as the CPU device's rmsnormOp: float squares summed
// in double, then one float scale (IEEE sqrt and division: no --use_fast_math). One block.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads) rmsnormKernel(const float* x, const float* __restrict__ weight,
                                                          float* out, int n, float eps)
{
    __shared__ double partial[kThreads / kWarp];
    __shared__ float sharedScale;
    double sum = 0.0;
    for (int i = threadIdx.x; i < n; i += kThreads) {
        const float v = x[i];
        sum += static_cast<double>(__fmul_rn(v, v));
    }
    sum = warpSum(sum);
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = sum;
    __syncthreads();
    if (threadIdx.x < kWarp) {
        double s = threadIdx.x < kThreads / kWarp ? partial[threadIdx.x] : 0.0;
        s = warpSum(s);
        if (threadIdx.x == 0) {
            const float mean = static_cast<float>(s / n);
            sharedScale = 1.0f / sqrtf(mean + eps);
        }
    }
    __syncthreads();
    const float scale = sharedScale;
    // out may alias x: each thread reads x[i] before writing out[i], and all reads of the sum
    // pass are behind the barrier above.
    for (int i = threadIdx.x; i < n; i += kThreads) out[i] = __fmul_rn(__fmul_rn(x[i], scale), weight[i]);
}

}  // namespace

cudaError_t launchRmsnorm(const float* x, const float* weight, float* out, int n, float eps,
                          cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    rmsnormKernel<<<1, kThreads, 0, stream>>>(x, weight, out, n, eps);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
