// Decode attention of one query token over positions [0, nPos) of one layer's KV cache, with
// grouped-query heads (head h reads KV head h / (nHeads / nKvHeads)). Three passes, as the CPU
// device's attentionOp:
//   1. scores[h, t] = (q_h . k_t) * scale               one warp per (h, t)
//   2. p[h, t] = exp(scores - max) / sum, the sum in double; one block per head
//   3. out[h, :] = sum_t p[h, t] v_t                     one block per (h, 32 dims), 8 warps
//                                                        splitting t, each lane one dim
// Passes 1 and 3 are templated on the cache's element type (KvType: f32, f16, or int8 with a
// float scale per (position, kv head) vector). With a.kNew / a.vNew set, a store kernel first
// writes this step's K and V into the caches at position nPos - 1, converted exactly as the CPU
// device's storeKvOp does (so both hold the same bits).
// gpt-oss's parts, as the CPU device's attentionHead: a sliding window (a.window) limits the
// positions to the last `window` ones, [start, nPos); a ring cache (a.ring) keeps position t at
// row t % ring; a sink logit per head (a.sinks) joins each softmax's maximum and sum.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;

// Value i of a cache of type T (Q8: the integer, without its vector's scale).
template <KvType T>
__device__ __forceinline__ float cacheValue(const void* cache, size_t i)
{
    if constexpr (T == KvType::F32)
        return static_cast<const float*>(cache)[i];
    else if constexpr (T == KvType::F16)
        return halfToFloat(static_cast<const uint16_t*>(cache)[i]);
    else
        return static_cast<float>(static_cast<const int8_t*>(cache)[i]);
}

// One warp per vector: blockIdx.x the kv head, blockIdx.y 0 for K, 1 for V.
// The cache row of position t (AttentionArgs::ring), and the first position a query at nPos - 1
// sees (AttentionArgs::window).
__device__ __forceinline__ int kvRow(const AttentionArgs& a, int t) { return a.ring > 0 ? t % a.ring : t; }
__host__ __device__ __forceinline__ int firstVisible(const AttentionArgs& a)
{
    return a.window > 0 && a.nPos > a.window ? a.nPos - a.window : 0;
}

template <KvType T>
__global__ void __launch_bounds__(kWarp) storeKernel(AttentionArgs a)
{
    const int h = blockIdx.x, lane = threadIdx.x;
    const bool isV = blockIdx.y == 1;
    const float* x = (isV ? a.vNew : a.kNew) + static_cast<size_t>(h) * a.headDim;
    const size_t vector = static_cast<size_t>(kvRow(a, a.nPos - 1)) * a.nKvHeads + h;
    const size_t first = vector * a.headDim;
    void* cache = const_cast<void*>(isV ? a.vCache : a.kCache);  // writable: kNew / vNew are set
    if constexpr (T == KvType::F32) {
        for (int i = lane; i < a.headDim; i += kWarp) static_cast<float*>(cache)[first + i] = x[i];
    } else if constexpr (T == KvType::F16) {
        for (int i = lane; i < a.headDim; i += kWarp)
            static_cast<uint16_t*>(cache)[first + i] = __half_as_ushort(__float2half_rn(x[i]));
    } else {
        float m = 0.0f;
        for (int i = lane; i < a.headDim; i += kWarp) m = fmaxf(m, fabsf(x[i]));
        m = warpMax(m);
        const float d = m / 127.0f;  // IEEE division (no fast math), as on the CPU
        int8_t* q = static_cast<int8_t*>(cache) + first;
        for (int i = lane; i < a.headDim; i += kWarp) {
            const float r = d != 0.0f ? roundf(x[i] / d) : 0.0f;  // half away from zero
            q[i] = r == r ? static_cast<int8_t>(fminf(fmaxf(r, -127.0f), 127.0f)) : 0;
        }
        if (lane == 0) const_cast<float*>(isV ? a.vScales : a.kScales)[vector] = d;
    }
}

template <KvType T>
__global__ void __launch_bounds__(kThreads) scoresKernel(AttentionArgs a)
{
    const int h = blockIdx.y;
    const int t = firstVisible(a) + blockIdx.x * kWarps + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (t >= a.nPos) return;
    const int kvHead = h / (a.nHeads / a.nKvHeads);
    const float* q = a.q + static_cast<size_t>(h) * a.headDim;
    const size_t vector = static_cast<size_t>(kvRow(a, t)) * a.nKvHeads + kvHead;
    const size_t first = vector * a.headDim;
    float s = 0.0f;
    for (int d = lane; d < a.headDim; d += kWarp) s += q[d] * cacheValue<T>(a.kCache, first + d);
    s = warpSum(s);
    if constexpr (T == KvType::Q8) s *= a.kScales[vector];
    if (lane == 0) a.scores[static_cast<size_t>(h) * a.nPos + t] = s * a.scale;
}

__global__ void __launch_bounds__(kThreads) softmaxKernel(AttentionArgs a)
{
    __shared__ float maxes[kWarps];
    __shared__ double sums[kWarps];
    float* scores = a.scores + static_cast<size_t>(blockIdx.x) * a.nPos;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int start = firstVisible(a);

    float m = -INFINITY;
    for (int t = start + threadIdx.x; t < a.nPos; t += kThreads) m = fmaxf(m, scores[t]);
    m = warpMax(m);
    if (lane == 0) maxes[warp] = m;
    __syncthreads();
    m = maxes[0];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, maxes[w]);
    const float sink = a.sinks ? a.sinks[blockIdx.x] : -INFINITY;
    if (a.sinks) m = fmaxf(m, sink);

    double sum = 0.0;
    for (int t = start + threadIdx.x; t < a.nPos; t += kThreads) {
        const float e = expf(scores[t] - m);
        scores[t] = e;
        sum += e;
    }
    sum = warpSum(sum);
    if (lane == 0) sums[warp] = sum;
    __syncthreads();
    sum = 0.0;
    for (int w = 0; w < kWarps; ++w) sum += sums[w];
    if (a.sinks) sum += static_cast<double>(expf(sink - m));  // a logit with no value
    const float inverse = static_cast<float>(1.0 / sum);
    for (int t = start + threadIdx.x; t < a.nPos; t += kThreads) scores[t] = scores[t] * inverse;
}

template <KvType T>
__global__ void __launch_bounds__(kThreads) weightedSumKernel(AttentionArgs a)
{
    __shared__ float partial[kWarps][kWarp];
    const int h = blockIdx.y;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int d = blockIdx.x * kWarp + lane;
    const int kvHead = h / (a.nHeads / a.nKvHeads);
    const float* p = a.scores + static_cast<size_t>(h) * a.nPos;
    const size_t kvStride = static_cast<size_t>(a.nKvHeads) * a.headDim;  // values per position
    const size_t first = static_cast<size_t>(kvHead) * a.headDim + d;
    float acc = 0.0f;
    if (d < a.headDim)
        for (int t = firstVisible(a) + warp; t < a.nPos; t += kWarps) {
            const size_t row = static_cast<size_t>(kvRow(a, t));
            float w = p[t];
            if constexpr (T == KvType::Q8) w *= a.vScales[row * a.nKvHeads + kvHead];
            acc += w * cacheValue<T>(a.vCache, first + row * kvStride);
        }
    partial[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && d < a.headDim) {
        float s = partial[0][lane];
        for (int w = 1; w < kWarps; ++w) s += partial[w][lane];
        a.out[static_cast<size_t>(h) * a.headDim + d] = s;
    }
}

template <KvType T>
cudaError_t launchTyped(const AttentionArgs& a, cudaStream_t stream)
{
    if (a.kNew && a.vNew) storeKernel<T><<<dim3(a.nKvHeads, 2), kWarp, 0, stream>>>(a);
    scoresKernel<T><<<dim3(gridFor(a.nPos - firstVisible(a), kWarps), a.nHeads), kThreads, 0, stream>>>(a);
    softmaxKernel<<<a.nHeads, kThreads, 0, stream>>>(a);
    weightedSumKernel<T><<<dim3(gridFor(a.headDim, kWarp), a.nHeads), kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launchAttention(const AttentionArgs& a, cudaStream_t stream)
{
    switch (a.kvType) {
    case KvType::F16: return launchTyped<KvType::F16>(a, stream);
    case KvType::Q8: return launchTyped<KvType::Q8>(a, stream);
    case KvType::F32: break;
    }
    return launchTyped<KvType::F32>(a, stream);
}

}  // namespace spillway::gpu::cuda
