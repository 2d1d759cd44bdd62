// out = (x - mean) / sqrt(var + eps) * weight + bias, as the CPU device's layernormOp: the sum
// and the squared deviations summed in double, one float scale. One block (as rmsnorm.cu).

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 1024;

// The block's sum of `v` (every thread gets it).
__device__ double blockSum(double v, double* partial)
{
    v = warpSum(v);
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = v;
    __syncthreads();
    double s = threadIdx.x < kThreads / kWarp ? partial[threadIdx.x] : 0.0;
    if (threadIdx.x < kWarp) s = warpSum(s);
    __shared__ double total;
    if (threadIdx.x == 0) total = s;
    __syncthreads();
    const double result = total;
    __syncthreads();  // partial and total may be reused by the next call
    return result;
}

__global__ void __launch_bounds__(kThreads) layernormKernel(const float* x, const float* __restrict__ weight,
                                                            const float* __restrict__ bias, float* out, int n,
                                                            float eps)
{
    __shared__ double partial[kThreads / kWarp];
    double sum = 0.0;
    for (int i = threadIdx.x; i < n; i += kThreads) sum += static_cast<double>(x[i]);
    const float mean = static_cast<float>(blockSum(sum, partial) / n);
    double squares = 0.0;
    for (int i = threadIdx.x; i < n; i += kThreads) {
        const double d = static_cast<double>(__fsub_rn(x[i], mean));
        squares += d * d;
    }
    const double var = blockSum(squares, partial) / n;
    const float scale = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    // out may alias x: every read of x is behind the barriers of the two sums.
    for (int i = threadIdx.x; i < n; i += kThreads)
        out[i] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x[i], mean), scale), weight[i]), bias[i]);
}

}  // namespace

cudaError_t launchLayernorm(const float* x, const float* weight, const float* bias, float* out, int n, float eps,
                            cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    layernormKernel<<<1, kThreads, 0, stream>>>(x, weight, bias, out, n, eps);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
