// The elementwise ops of PointwiseArgs (gpu/device.h), as the CPU device's pointwiseOp.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void pointwiseKernel(PointwiseOp op, const float* x, const float* y, float* out, int n, float shift,
                                float step, float lo, float hi, float factor)
{
    const int i = blockIdx.x * kThreads + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    switch (op) {
    case PointwiseOp::ShiftedRelu: out[i] = fmaxf(0.0f, __fsub_rn(v, shift)); break;
    case PointwiseOp::ShiftedReluGlu: out[i] = __fmul_rn(fmaxf(0.0f, __fsub_rn(v, shift)), y[i]); break;
    case PointwiseOp::SnapToGrid: {
        const float r = roundf(__fdiv_rn(v, step));  // half away from zero
        out[i] = __fmul_rn(r == r ? fminf(fmaxf(r, lo), hi) : 0.0f, step);
        break;
    }
    case PointwiseOp::Scale: out[i] = __fmul_rn(v, factor); break;
    case PointwiseOp::ScaledAdd: out[i] = __fadd_rn(__fmul_rn(v, factor), y[i]); break;
    case PointwiseOp::ClampedSwiglu: {
        const float g = fminf(v, hi);
        const float u = fminf(fmaxf(y[i], -hi), hi);
        out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(__fmul_rn(-factor, g)))), __fadd_rn(u, 1.0f));
        break;
    }
    case PointwiseOp::SigmoidMul:
        out[i] = __fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-y[i]))));
        break;
    }
}

}  // namespace

cudaError_t launchPointwise(const PointwiseArgs& a, cudaStream_t stream)
{
    if (a.n <= 0) return cudaSuccess;
    pointwiseKernel<<<gridFor(a.n, kThreads), kThreads, 0, stream>>>(a.op, a.x, a.y, a.out, a.n, a.shift, a.step,
                                                                     a.lo, a.hi, a.factor);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
