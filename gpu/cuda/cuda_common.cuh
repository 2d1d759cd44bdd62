#pragma once
// Device helpers shared by the kernels of the CUDA backend.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spillway::gpu::cuda {

inline constexpr int kWarp = 32;

__device__ __forceinline__ float halfToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16ToFloat(uint16_t h) { return __uint_as_float(uint32_t{h} << 16); }

__device__ __forceinline__ float warpSum(float v)
{
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ double warpSum(double v)
{
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warpMax(float v)
{
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Two 2-byte aligned halves of a 4-byte value (Q8_0 / Q4_0 blocks are 34 / 18 bytes, so their
// quants are only 2-byte aligned).
__device__ __forceinline__ int loadInt2Aligned(const uint8_t* p)
{
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<int>(uint32_t{h[0]} | (uint32_t{h[1]} << 16));
}

inline unsigned gridFor(int64_t n, int threads)
{
    return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace spillway::gpu::cuda
