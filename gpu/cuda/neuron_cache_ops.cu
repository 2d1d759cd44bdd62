// The neuron cache's ops: scatterRows (bundles from one upload to their slots) and rowSum (the
// down projection over the cached columns, W transposed times a).

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

// One block per row, its threads striding over the row's 4-byte words.
__global__ void scatterRowsKernel(uint8_t* dst, size_t dstStride, const uint8_t* src, size_t srcStride,
                                  uint32_t words, const int32_t* index)
{
    const uint32_t row = blockIdx.x;
    const auto* from = reinterpret_cast<const uint32_t*>(src + size_t(row) * srcStride);
    auto* to = reinterpret_cast<uint32_t*>(dst + size_t(index[row]) * dstStride);
    for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) to[w] = from[w];
}

// A block takes kColsPerBlock columns: lane l of each warp the columns l, l + 32, ... (so a warp
// reads 32 neighbouring values of a row), warp s the rows s, s + kStripes, .... The stripes'
// partial sums are added in stripe order through shared memory, so the result does not depend on
// scheduling.
constexpr int kStripes = 8;
constexpr int kPerLane = 4;
constexpr int kColsPerBlock = kWarp * kPerLane;

template <int Kind>  // 0 F32, 1 F16, 2 BF16, 3 int8 with a scale table
__global__ void rowSumKernel(const uint8_t* w, size_t stride, const float* a, float* y, const float* scales,
                             const int32_t* group, int64_t rows, int64_t cols)
{
    __shared__ float partial[kStripes][kColsPerBlock];
    const int lane = threadIdx.x, stripe = threadIdx.y;
    const int64_t first = int64_t(blockIdx.x) * kColsPerBlock;
    float acc[kPerLane] = {};
    for (int64_t r = stripe; r < rows; r += kStripes) {
        const float s = a[r];
        if (s == 0.0f) continue;
        const uint8_t* row = w + size_t(r) * stride;
        const float* scale = Kind == 3 ? scales + size_t(group[r]) * size_t(cols) : nullptr;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
            const int64_t c = first + lane + k * kWarp;
            if (c >= cols) break;
            float v;
            if constexpr (Kind == 0) v = reinterpret_cast<const float*>(row)[c];
            else if constexpr (Kind == 1) v = halfToFloat(reinterpret_cast<const uint16_t*>(row)[c]);
            else if constexpr (Kind == 2) v = bf16ToFloat(reinterpret_cast<const uint16_t*>(row)[c]);
            else v = float(reinterpret_cast<const int8_t*>(row)[c]) * scale[c];
            acc[k] += s * v;
        }
    }
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) partial[stripe][lane + k * kWarp] = acc[k];
    __syncthreads();
    if (stripe != 0) return;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
        const int64_t c = first + lane + k * kWarp;
        if (c >= cols) break;
        float sum = partial[0][lane + k * kWarp];
        for (int s = 1; s < kStripes; ++s) sum += partial[s][lane + k * kWarp];
        y[c] = sum;
    }
}

}  // namespace

cudaError_t launchScatterRows(const ScatterRowsArgs& a, cudaStream_t stream)
{
    if (a.count <= 0 || a.rowBytes == 0) return cudaSuccess;
    scatterRowsKernel<<<unsigned(a.count), 128, 0, stream>>>(
        static_cast<uint8_t*>(a.dst), a.dstStride, static_cast<const uint8_t*>(a.src), a.srcStride,
        uint32_t(a.rowBytes / 4), a.index);
    return cudaGetLastError();
}

cudaError_t launchRowSum(const RowSumArgs& a, cudaStream_t stream)
{
    if (a.w.cols <= 0) return cudaSuccess;
    const dim3 block(kWarp, kStripes);
    const unsigned grid = gridFor(a.w.cols, kColsPerBlock);
    const auto* w = static_cast<const uint8_t*>(a.w.data);
    if (a.scales)
        rowSumKernel<3><<<grid, block, 0, stream>>>(w, a.w.rowStride, a.a, a.y, a.scales, a.group, a.w.rows, a.w.cols);
    else if (a.w.type == DType::F32)
        rowSumKernel<0><<<grid, block, 0, stream>>>(w, a.w.rowStride, a.a, a.y, nullptr, nullptr, a.w.rows, a.w.cols);
    else if (a.w.type == DType::F16)
        rowSumKernel<1><<<grid, block, 0, stream>>>(w, a.w.rowStride, a.a, a.y, nullptr, nullptr, a.w.rows, a.w.cols);
    else
        rowSumKernel<2><<<grid, block, 0, stream>>>(w, a.w.rowStride, a.a, a.y, nullptr, nullptr, a.w.rows, a.w.cols);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
