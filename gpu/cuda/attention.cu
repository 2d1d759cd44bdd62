// Decode attention of one query token over positions [0, nPos) of one layer's KV cache, with
// grouped-query heads (head h reads KV head h / (nHeads / nKvHeads)). Three passes, as the CPU
// device's attentionOp:
//   1. scores[h, t] = (q_h . k_t) * scale               one warp per (h, t)
//   2. p[h, t] = exp(scores - max) / sum, the sum in double; one block per head
//   3. out[h, :] = sum_t p[h, t] v_t                     one block per (h, 32 dims), 8 warps
//                                                        splitting t, each lane one dim

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;

__global__ void __launch_bounds__(kThreads) scoresKernel(AttentionArgs a)
{
    const int h = blockIdx.y;
    const int t = blockIdx.x * kWarps + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (t >= a.nPos) return;
    const int kvHead = h / (a.nHeads / a.nKvHeads);
    const float* q = a.q + static_cast<size_t>(h) * a.headDim;
    const float* k = a.kCache + (static_cast<size_t>(t) * a.nKvHeads + kvHead) * a.headDim;
    float s = 0.0f;
    for (int d = lane; d < a.headDim; d += kWarp) s += q[d] * k[d];
    s = warpSum(s);
    if (lane == 0) a.scores[static_cast<size_t>(h) * a.nPos + t] = s * a.scale;
}

__global__ void __launch_bounds__(kThreads) softmaxKernel(AttentionArgs a)
{
    __shared__ float maxes[kWarps];
    __shared__ double sums[kWarps];
    float* scores = a.scores + static_cast<size_t>(blockIdx.x) * a.nPos;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;

    float m = -INFINITY;
    for (int t = threadIdx.x; t < a.nPos; t += kThreads) m = fmaxf(m, scores[t]);
    m = warpMax(m);
    if (lane == 0) maxes[warp] = m;
    __syncthreads();
    m = maxes[0];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, maxes[w]);

    double sum = 0.0;
    for (int t = threadIdx.x; t < a.nPos; t += kThreads) {
        const float e = expf(scores[t] - m);
        scores[t] = e;
        sum += e;
    }
    sum = warpSum(sum);
    if (lane == 0) sums[warp] = sum;
    __syncthreads();
    sum = 0.0;
    for (int w = 0; w < kWarps; ++w) sum += sums[w];
    const float inverse = static_cast<float>(1.0 / sum);
    for (int t = threadIdx.x; t < a.nPos; t += kThreads) scores[t] = scores[t] * inverse;
}

__global__ void __launch_bounds__(kThreads) weightedSumKernel(AttentionArgs a)
{
    __shared__ float partial[kWarps][kWarp];
    const int h = blockIdx.y;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int d = blockIdx.x * kWarp + lane;
    const int kvHead = h / (a.nHeads / a.nKvHeads);
    const float* p = a.scores + static_cast<size_t>(h) * a.nPos;
    const size_t kvStride = static_cast<size_t>(a.nKvHeads) * a.headDim;  // floats per position
    const float* v = a.vCache + static_cast<size_t>(kvHead) * a.headDim + d;
    float acc = 0.0f;
    if (d < a.headDim)
        for (int t = warp; t < a.nPos; t += kWarps) acc += p[t] * v[t * kvStride];
    partial[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && d < a.headDim) {
        float s = partial[0][lane];
        for (int w = 1; w < kWarps; ++w) s += partial[w][lane];
        a.out[static_cast<size_t>(h) * a.headDim + d] = s;
    }
}

}  // namespace

cudaError_t launchAttention(const AttentionArgs& a, cudaStream_t stream)
{
    scoresKernel<<<dim3(gridFor(a.nPos, kWarps), a.nHeads), kThreads, 0, stream>>>(a);
    softmaxKernel<<<a.nHeads, kThreads, 0, stream>>>(a);
    weightedSumKernel<<<dim3(gridFor(a.headDim, kWarp), a.nHeads), kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
