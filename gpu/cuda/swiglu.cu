// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up, as the CPU device's swigluOp.
// out may alias gate or up (each thread reads its element before writing it).

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void swigluKernel(const float* gate, const float* up, float* out, int n)
{
    const int i = blockIdx.x * kThreads + threadIdx.x;
    if (i >= n) return;
    const float g = gate[i];
    const float u = up[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

}  // namespace

cudaError_t launchSwiglu(const float* gate, const float* up, float* out, int n, cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    swigluKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(gate, up, out, n);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
