// y = W x with W an ENDOR bitmap sparse blob (DType::BitmapSparse), multiplied straight from the
// compressed form: the bitmap is decoded in registers next to the multiply-adds (ENDOR §5.1),
// one warp per row (the walk of bitmap_sparse.cuh). Only the blob's bytes cross the memory bus:
// at 50% sparsity an fp16 blob is 56% of the dense matrix, an int8 g64 one 32%.

#include "gpu/cuda/bitmap_sparse.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void __launch_bounds__(kThreads) matvecBitmapKernel(BitmapBlobDevice b, const float* __restrict__ x,
                                                              float* __restrict__ y)
{
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= b.rows) return;  // the whole warp
    __shared__ uint4 stage[kRowsPerBlock][kBitmapStageBytes / 16];
    const int groupShift = bitmapGroupShift(b.header);
    float acc = 0.0f;
    dispatchBitmapFormat(b.header, [&]<SparseValues F>() {
        walkBitmapRow<F>(b, row, groupShift, stage[threadIdx.x / kWarp], [&](int c, int set, float v0, float v1) {
            const float x0 = (set & 1) ? __ldg(x + c) : 0.0f;
            const float x1 = (set & 2) ? __ldg(x + c + 1) : 0.0f;
            acc = fmaf(v1, x1, fmaf(v0, x0, acc));
        });
    });
    acc = warpSum(acc);
    if (threadIdx.x % kWarp == 0) y[row] = acc;
}

}  // namespace

cudaError_t launchMatvecBitmap(const MatrixView& w, const float* x, float* y, cudaStream_t stream)
{
    if (w.rows <= 0 || w.cols <= 0) return cudaSuccess;
    if (reinterpret_cast<uintptr_t>(w.data) % 16) return cudaErrorMisalignedAddress;
    matvecBitmapKernel<<<gridFor(w.rows, kRowsPerBlock), kThreads, 0, stream>>>(bitmapBlobDevice(w), x, y);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
