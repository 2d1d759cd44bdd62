// y = W x for the rest of GGUF's block types, read in their GGUF layout in place: the 256-value
// Q2_K, Q3_K, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M (x in Q8_K form) and
// the blocks of 32 Q5_1, IQ4_NL, MXFP4 (x in Q8 blocks of 32), as the CPU device computes them
// (gpu/cpu/iq_expand.h): each block expanded to int8 values with integer scales (iq_decode.cuh),
// each (sub-)block's dot product an exact int32 (__dp4a), the block scales the only floats. A
// super-block's integer sum is the CPU's (the lanes' shares are added as integers), so only the
// float summation over blocks differs from it.
//
// One warp per row, as matvec_kquant.cu. Super-blocks: 8 lanes per super-block (lane ib takes
// the 32-value sub-block ib), 4 super-blocks per step. Blocks of 32: a lane per block.

#include "gpu/cuda/cuda_ops.h"
#include "gpu/cuda/iq_decode.cuh"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int kQK = 256;

template <DType T>
constexpr int kSuperBytes = T == DType::Q2_K      ? 84
                            : T == DType::Q3_K    ? 110
                            : T == DType::IQ4_XS  ? 136
                            : T == DType::IQ3_XXS ? 98
                            : T == DType::IQ3_S   ? 110
                            : T == DType::IQ2_XXS ? 66
                            : T == DType::IQ2_XS  ? 74
                            : T == DType::IQ2_S   ? 82
                            : T == DType::IQ1_S   ? 50
                                                  : 56;  // IQ1_M

// The sum over the 8 lanes of a super-block (lanes 8s .. 8s + 7), exact in int.
__device__ __forceinline__ int groupSum8(int v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}

// Per super-block: d_x (D sum_g scale_g (v . x)_g - Dmin sum_g min_g bsum_g), as the CPU's
// matvecExpanded256 (Dmin: Q2_K only).
template <DType T>
__global__ void __launch_bounds__(kThreads) matvecIq256Kernel(const uint8_t* __restrict__ w, size_t stride,
    int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs, const float* __restrict__ xd,
    const int16_t* __restrict__ bsums, float* __restrict__ y)
{
    constexpr int kBytes = kSuperBytes<T>;
    const int lane = threadIdx.x % kWarp;
    const int ib = lane % 8;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    float acc = 0.0f;
    // Every lane runs the same number of steps (the shuffles need the whole warp).
    for (int64_t b0 = 0; b0 < blocks; b0 += kWarp / 8) {
        const int64_t b = b0 + lane / 8;
        int sumq = 0, summ = 0;
        if (b < blocks) {
            const uint8_t* block = rowBytes + b * kBytes;
            IqSub e;
            expandIqSub<T>(block, ib, e);
            const int4* xb = reinterpret_cast<const int4*>(xqs + b * kQK + 32 * ib);
            const int4 x0 = __ldg(xb), x1 = __ldg(xb + 1);
            int dot0 = 0, dot1 = 0;
            dot0 = __dp4a(static_cast<int>(e.v[0]), x0.x, dot0);
            dot0 = __dp4a(static_cast<int>(e.v[1]), x0.y, dot0);
            dot0 = __dp4a(static_cast<int>(e.v[2]), x0.z, dot0);
            dot0 = __dp4a(static_cast<int>(e.v[3]), x0.w, dot0);
            dot1 = __dp4a(static_cast<int>(e.v[4]), x1.x, dot1);
            dot1 = __dp4a(static_cast<int>(e.v[5]), x1.y, dot1);
            dot1 = __dp4a(static_cast<int>(e.v[6]), x1.z, dot1);
            dot1 = __dp4a(static_cast<int>(e.v[7]), x1.w, dot1);
            sumq = e.scale0 * dot0 + e.scale1 * dot1;
            if constexpr (T == DType::Q2_K) {
                const int16_t* bs = bsums + b * (kQK / 16) + 2 * ib;
                summ = e.min0 * int{__ldg(bs)} + e.min1 * int{__ldg(bs + 1)};
            }
        }
        sumq = groupSum8(sumq);
        if constexpr (T == DType::Q2_K) summ = groupSum8(summ);
        if (ib == 0 && b < blocks) {
            const float dx = __ldg(xd + b);
            float dmin = 0.0f;
            const float d = iqSuperScale<T>(rowBytes + b * kBytes, &dmin);
            float term = (d * dx) * static_cast<float>(sumq);
            if constexpr (T == DType::Q2_K) term -= (dmin * dx) * static_cast<float>(summ);
            acc += term;
        }
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

// Blocks of 32, as the CPU's matvecExpanded32: y += (D d_x) (v . x) + M (d_x sum x) (M: Q5_1).
template <DType T>
__global__ void __launch_bounds__(kThreads) matvecIq32Kernel(const uint8_t* __restrict__ w, size_t stride,
    int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs, const float* __restrict__ xd,
    const float* __restrict__ xsum8, float* __restrict__ y)
{
    constexpr int kBytes = T == DType::Q5_1 ? 24 : T == DType::IQ4_NL ? 18 : 17;
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    float acc = 0.0f;
    for (int64_t b = lane; b < blocks; b += kWarp) {
        const uint8_t* block = rowBytes + b * kBytes;
        const int4 xlo = __ldg(reinterpret_cast<const int4*>(xqs + b * 32));       // values 0..15
        const int4 xhi = __ldg(reinterpret_cast<const int4*>(xqs + b * 32 + 16));  // values 16..31
        const int xl[4] = {xlo.x, xlo.y, xlo.z, xlo.w}, xh[4] = {xhi.x, xhi.y, xhi.z, xhi.w};
        uint32_t qh = 0;
        if constexpr (T == DType::Q5_1) qh = iqU32(block + 4);
        int dot = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            // byte t of n: values 4k + t (low nibble) and 16 + 4k + t (high nibble)
            uint32_t n, lo, hi;
            if constexpr (T == DType::Q5_1) {
                n = iqU32(block + 8 + 4 * k);
                lo = n & 0x0f0f0f0fu, hi = (n >> 4) & 0x0f0f0f0fu;
                // bit i of qh is bit 4 of value i: 4 bits to the 4 bytes' bit 4.
                const uint32_t l4 = (qh >> (4 * k)) & 0xfu, h4 = (qh >> (16 + 4 * k)) & 0xfu;
                lo |= ((l4 * 0x00204081u) & 0x01010101u) << 4;
                hi |= ((h4 * 0x00204081u) & 0x01010101u) << 4;
            } else if constexpr (T == DType::IQ4_NL) {
                n = iqU32(block + 2 + 4 * k);
                lo = levels4<false>(n & 0x0f0f0f0fu), hi = levels4<false>((n >> 4) & 0x0f0f0f0fu);
            } else {
                n = iqBytes4(block + 1 + 4 * k);
                lo = levels4<true>(n & 0x0f0f0f0fu), hi = levels4<true>((n >> 4) & 0x0f0f0f0fu);
            }
            dot = __dp4a(static_cast<int>(lo), xl[k], dot);
            dot = __dp4a(static_cast<int>(hi), xh[k], dot);
        }
        const float dx = __ldg(xd + b);
        const float d = T == DType::MXFP4 ? e8m0HalfDev(block[0]) : iqFp16(block);
        float term = static_cast<float>(dot) * (d * dx);
        // sum8 / 8 = d_x sum(q_x) exactly (a power-of-two scaling).
        if constexpr (T == DType::Q5_1) term += iqFp16(block + 2) * (__ldg(xsum8 + b) * 0.125f);
        acc += term;
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

template <DType T>
void launch256(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream)
{
    matvecIq256Kernel<T><<<gridFor(w.rows, kRowsPerBlock), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(w.data), w.rowStride, w.rows, w.cols / kQK, x.qs, x.d, x.bsums, y);
}

template <DType T>
void launch32(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream)
{
    matvecIq32Kernel<T><<<gridFor(w.rows, kRowsPerBlock), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(w.data), w.rowStride, w.rows, w.cols / 32, x.qs, x.d, x.sum8, y);
}

}  // namespace

cudaError_t launchMatvecIq(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream)
{
    // MXFP4's 17-byte blocks are read byte by byte; every other block is an even number of bytes.
    if (w.type != DType::MXFP4 && (reinterpret_cast<uintptr_t>(w.data) % 2 != 0 || w.rowStride % 2 != 0))
        return cudaErrorMisalignedAddress;
    if (reinterpret_cast<uintptr_t>(x.qs) % 16 != 0) return cudaErrorMisalignedAddress;
    switch (w.type) {
    case DType::Q2_K: launch256<DType::Q2_K>(w, x, y, stream); break;
    case DType::Q3_K: launch256<DType::Q3_K>(w, x, y, stream); break;
    case DType::IQ4_XS: launch256<DType::IQ4_XS>(w, x, y, stream); break;
    case DType::IQ3_XXS: launch256<DType::IQ3_XXS>(w, x, y, stream); break;
    case DType::IQ3_S: launch256<DType::IQ3_S>(w, x, y, stream); break;
    case DType::IQ2_XXS: launch256<DType::IQ2_XXS>(w, x, y, stream); break;
    case DType::IQ2_XS: launch256<DType::IQ2_XS>(w, x, y, stream); break;
    case DType::IQ2_S: launch256<DType::IQ2_S>(w, x, y, stream); break;
    case DType::IQ1_S: launch256<DType::IQ1_S>(w, x, y, stream); break;
    case DType::IQ1_M: launch256<DType::IQ1_M>(w, x, y, stream); break;
    case DType::Q5_1: launch32<DType::Q5_1>(w, x, y, stream); break;
    case DType::IQ4_NL: launch32<DType::IQ4_NL>(w, x, y, stream); break;
    case DType::MXFP4: launch32<DType::MXFP4>(w, x, y, stream); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
