// Decompression of an ENDOR bitmap sparse blob (DType::BitmapSparse) into dense rows: the
// embedding lookup of a bitmap matrix (getRow, float rows, exact), and the dense fp16 form for a
// consumer that wants one (a GEMM over many tokens). One warp per row, the walk of
// bitmap_sparse.cuh: each round of the warp writes 64 consecutive outputs.

#include <cuda_fp16.h>

#include "gpu/cuda/bitmap_sparse.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;

template <class Out>
__device__ __forceinline__ Out fromFloat(float v)
{
    if constexpr (sizeof(Out) == 2) return __float2half_rn(v);
    else return v;
}

// Rows [first, first + count) of b into out (row r - first at out + (r - first) * outStride).
template <class Out>
__global__ void __launch_bounds__(kThreads) decompressBitmapKernel(BitmapBlobDevice b, int64_t first, int64_t count,
                                                                  Out* __restrict__ out, int64_t outStride)
{
    const int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (i >= count) return;  // the whole warp
    Out* dst = out + i * outStride;
    const bool paired = reinterpret_cast<uintptr_t>(dst) % 4 == 0;
    __shared__ uint4 stage[kRowsPerBlock][kBitmapStageBytes / 16];
    const int groupShift = bitmapGroupShift(b.header);
    dispatchBitmapFormat(b.header, [&]<SparseValues F>() {
        walkBitmapRow<F>(b, first + i, groupShift, stage[threadIdx.x / kWarp], [&](int c, int, float v0, float v1) {
            if constexpr (sizeof(Out) == 2) {
                if (paired && c + 1 < b.cols) {  // one 4-byte store: 128 contiguous bytes a warp
                    *reinterpret_cast<__half2*>(dst + c) = __floats2half2_rn(v0, v1);
                    return;
                }
            }
            dst[c] = fromFloat<Out>(v0);
            if (c + 1 < b.cols) dst[c + 1] = fromFloat<Out>(v1);
        });
    });
}

// A row outside the matrix: NaN, as the CPU device's getRow.
__global__ void fillNanKernel(float* out, int64_t n)
{
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c < n) out[c] = __int_as_float(0x7fc00000);
}

}  // namespace

cudaError_t launchBitmapRowsToFloat(const MatrixView& w, int64_t first, int64_t count, float* out,
                                    int64_t outStride, cudaStream_t stream)
{
    if (count <= 0 || w.cols <= 0) return cudaSuccess;
    if (first < 0 || first + count > w.rows) {
        if (count == 1) {
            fillNanKernel<<<gridFor(w.cols, kThreads), kThreads, 0, stream>>>(out, w.cols);
            return cudaGetLastError();
        }
        return cudaErrorInvalidValue;
    }
    if (reinterpret_cast<uintptr_t>(w.data) % 16) return cudaErrorMisalignedAddress;
    decompressBitmapKernel<float><<<gridFor(count, kRowsPerBlock), kThreads, 0, stream>>>(bitmapBlobDevice(w), first,
                                                                                          count, out, outStride);
    return cudaGetLastError();
}

cudaError_t launchBitmapToF16(const MatrixView& w, uint16_t* out, cudaStream_t stream)
{
    if (w.rows <= 0 || w.cols <= 0) return cudaSuccess;
    if (reinterpret_cast<uintptr_t>(w.data) % 16) return cudaErrorMisalignedAddress;
    decompressBitmapKernel<__half><<<gridFor(w.rows, kRowsPerBlock), kThreads, 0, stream>>>(
        bitmapBlobDevice(w), 0, w.rows, reinterpret_cast<__half*>(out), w.cols);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
