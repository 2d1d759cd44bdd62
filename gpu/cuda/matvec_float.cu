// y = W x for F32, F16 and BF16 weights: one warp per row, fp32 accumulation.
//
// A bandwidth-bound GEMV: every weight byte is read once, so the kernel's job is to keep enough
// 16-byte loads in flight. Each lane loads kUnroll 16-byte chunks of its row before using any
// (8 rows per 256-thread block; a 4096-row matrix gives 4096 warps, about 31 per SM of an
// H100). Weights are read with streaming loads (__ldcs: evict first), so they do not push x out
// of L2. F32 goes through this kernel too, not cublasSgemv: measured by bench-cuda on an H100
// (share of the device-to-device copy bandwidth) at 4096x4096, 11008x4096, 4096x11008,
// 5120x13824: this kernel 89.5 / 98.2 / 95.1 / 94.1 %, cublasSgemv 75.6 / 87.7 / 86.2 / 95.8 %.
// CudaDevice::setF32Gemv(true) switches to cuBLAS for such comparisons.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int kUnroll = 4;

template <DType T> struct Float16Bytes;  // how one 16-byte chunk of weights becomes floats
template <> struct Float16Bytes<DType::F32> {
    static constexpr int kValues = 4;
    __device__ static float dot(uint4 w, const float* x)
    {
        const float4 a = __ldg(reinterpret_cast<const float4*>(x));
        float s = __uint_as_float(w.x) * a.x;
        s += __uint_as_float(w.y) * a.y;
        s += __uint_as_float(w.z) * a.z;
        s += __uint_as_float(w.w) * a.w;
        return s;
    }
    __device__ static float one(const uint8_t* row, int64_t c)
    {
        return reinterpret_cast<const float*>(row)[c];
    }
};
template <DType T> struct Half16Bytes {
    static constexpr int kValues = 8;
    __device__ static float conv(uint32_t bits)
    {
        return T == DType::F16 ? halfToFloat(static_cast<uint16_t>(bits))
                               : bf16ToFloat(static_cast<uint16_t>(bits));
    }
    __device__ static float dot(uint4 w, const float* x)
    {
        const float4 a = __ldg(reinterpret_cast<const float4*>(x));
        const float4 b = __ldg(reinterpret_cast<const float4*>(x + 4));
        float s = conv(w.x & 0xffff) * a.x;
        s += conv(w.x >> 16) * a.y;
        s += conv(w.y & 0xffff) * a.z;
        s += conv(w.y >> 16) * a.w;
        s += conv(w.z & 0xffff) * b.x;
        s += conv(w.z >> 16) * b.y;
        s += conv(w.w & 0xffff) * b.z;
        s += conv(w.w >> 16) * b.w;
        return s;
    }
    __device__ static float one(const uint8_t* row, int64_t c)
    {
        return conv(reinterpret_cast<const uint16_t*>(row)[c]);
    }
};
template <> struct Float16Bytes<DType::F16> : Half16Bytes<DType::F16> {};
template <> struct Float16Bytes<DType::BF16> : Half16Bytes<DType::BF16> {};

// Rows and x 16-byte aligned.
template <DType T>
__global__ void __launch_bounds__(kThreads) matvecVectorKernel(const uint8_t* __restrict__ w,
    size_t stride, int64_t rows, int64_t cols, const float* __restrict__ x, float* __restrict__ y)
{
    using Chunk = Float16Bytes<T>;
    constexpr int V = Chunk::kValues;
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    const uint4* chunks = reinterpret_cast<const uint4*>(rowBytes);
    const int64_t fullChunks = cols / V;

    float acc = 0.0f;
    int64_t c = lane;
    for (; c + kWarp * (kUnroll - 1) < fullChunks; c += kWarp * kUnroll) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(chunks + c + kWarp * u);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc += Chunk::dot(v[u], x + (c + kWarp * u) * V);
    }
    for (; c < fullChunks; c += kWarp) acc += Chunk::dot(__ldcs(chunks + c), x + c * V);
    for (int64_t t = fullChunks * V + lane; t < cols; t += kWarp) acc += Chunk::one(rowBytes, t) * x[t];
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

// Any alignment of the element size: one element per lane and step.
template <DType T>
__global__ void __launch_bounds__(kThreads) matvecElementKernel(const uint8_t* __restrict__ w,
    size_t stride, int64_t rows, int64_t cols, const float* __restrict__ x, float* __restrict__ y)
{
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    float acc = 0.0f;
    for (int64_t c = lane; c < cols; c += kWarp) acc += Float16Bytes<T>::one(rowBytes, c) * x[c];
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

template <DType T>
cudaError_t launchFor(const MatrixView& w, const float* x, float* y, cudaStream_t stream)
{
    const auto data = reinterpret_cast<uintptr_t>(w.data);
    const size_t elem = T == DType::F32 ? 4 : 2;
    if (data % elem != 0 || w.rowStride % elem != 0) return cudaErrorMisalignedAddress;
    const bool vector = data % 16 == 0 && w.rowStride % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(x) % 16 == 0;
    const unsigned blocks = gridFor(w.rows, kRowsPerBlock);
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    if (vector)
        matvecVectorKernel<T><<<blocks, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols, x, y);
    else
        matvecElementKernel<T><<<blocks, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols, x, y);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launchMatvecFloat(const MatrixView& w, const float* x, float* y, cudaStream_t stream)
{
    switch (w.type) {
    case DType::F32: return launchFor<DType::F32>(w, x, y, stream);
    case DType::F16: return launchFor<DType::F16>(w, x, y, stream);
    case DType::BF16: return launchFor<DType::BF16>(w, x, y, stream);
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace spillway::gpu::cuda
