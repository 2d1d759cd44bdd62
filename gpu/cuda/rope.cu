// Rotary position embedding, in place, as the CPU device's ropeOp: theta starts at the position
// and is multiplied by thetaScale = base^(-2 / dims) once per pair, in float (so each thread
// repeats the same product sequence); the angle is freqScale * theta; cos and sin are taken in
// double and rounded to float (within one float ulp of glibc's cosf / sinf). Pairs are
// (2k, 2k+1), or (k, k + dims/2) for NeoX-style models. One thread per (head, pair).

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void ropeKernel(float* x, int nHeads, int headDim, int pos, int dims, float thetaScale,
                           float freqScale, bool neox, const float* freqFactors)
{
    const int half = dims / 2;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= static_cast<int64_t>(nHeads) * half) return;
    const int h = static_cast<int>(i / half);
    const int k = static_cast<int>(i % half);
    float theta = static_cast<float>(pos);
    for (int j = 0; j < k; ++j) theta = __fmul_rn(theta, thetaScale);
    float scaled = __fmul_rn(freqScale, theta);
    if (freqFactors) scaled = __fdiv_rn(scaled, freqFactors[k]);
    const double angle = static_cast<double>(scaled);
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(sin(angle));
    float* v = x + static_cast<size_t>(h) * headDim;
    float* a = neox ? v + k : v + 2 * k;
    float* b = neox ? v + k + half : v + 2 * k + 1;
    const float x0 = *a;
    const float x1 = *b;
    *a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    *b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

}  // namespace

cudaError_t launchRope(float* x, int nHeads, int headDim, int pos, int dims, float thetaScale,
                       float freqScale, bool neox, const float* freqFactors, cudaStream_t stream)
{
    const int64_t n = static_cast<int64_t>(nHeads) * (dims / 2);
    if (n <= 0) return cudaSuccess;
    ropeKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(x, nHeads, headDim, pos, dims, thetaScale,
                                                              freqScale, neox, freqFactors);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
