// y = W x for the GGUF types people download beyond Q8_0 / Q4_0: Q4_1, Q5_0 (blocks of 32, x in
// Q8 blocks of 32 as for Q8_0) and the K-quants Q4_K, Q5_K, Q6_K (super-blocks of 256, x in
// Q8_K form: int8 values, one float scale per 256 and int16 sums per 16), read in their GGUF
// layout in place (gpu/cpu/kquant_blocks.h draws it). As on the CPU device and in llama.cpp, the
// weights are never turned into floats: each (sub-)block's dot product is an exact int32
// (__dp4a), only the block scales are float. A super-block's integer sums are those of the CPU
// device (the lanes' shares are added as integers), so only the float summation over blocks
// differs from it.
//
// One warp per row. Blocks of 32: a lane per block, 32 blocks per step. Super-blocks: 8 lanes per
// super-block (a 32-value sub-block each), 4 super-blocks per step. Rows need only be 2-byte
// aligned (Q5_0 blocks are 22 bytes, Q6_K 210): 4-byte words are read as two halves.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int kQK = 256;

__device__ __forceinline__ uint32_t word(const uint8_t* p) { return static_cast<uint32_t>(loadInt2Aligned(p)); }
__device__ __forceinline__ float fp16At(const uint8_t* p)
{
    return halfToFloat(*reinterpret_cast<const uint16_t*>(p));
}

// ---- x in Q8_K form -------------------------------------------------------------------------
// Bit-identical to the CPU's quantizeQ8K (gpu/cpu/kernels_kquant_scalar.cpp): d = max|x| / 127,
// q = round_to_nearest_even(x * (1 / d)), d kept in float, bsums per 16 values. One warp per
// super-block, 8 values a lane (lanes 2g and 2g + 1 hold group g).
__global__ void __launch_bounds__(kThreads) quantizeQ8KKernel(const float* __restrict__ x, int64_t blocks,
    int8_t* __restrict__ qs, float* __restrict__ d, int16_t* __restrict__ bsums)
{
    const int lane = threadIdx.x % kWarp;
    const int64_t b = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (b >= blocks) return;
    const float* xb = x + b * kQK + lane * 8;
    float v[8];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        v[i] = xb[i];
        amax = fmaxf(amax, fabsf(v[i]));
    }
    amax = warpMax(amax);
    const float scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    int sum = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int q = __float2int_rn(__fmul_rn(v[i], inverse));
        qs[b * kQK + lane * 8 + i] = static_cast<int8_t>(q);
        sum += q;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (lane % 2 == 0) bsums[b * (kQK / 16) + lane / 2] = static_cast<int16_t>(sum);
    if (lane == 0) d[b] = scale;
}

// ---- blocks of 32 ---------------------------------------------------------------------------

// Q4_1: y += (d_w d_x) sum(q x) + m_w (d_x sum x); Q5_0: y += (d_w d_x) sum((q - 16) x).
template <DType T>
__global__ void __launch_bounds__(kThreads) matvec32Kernel(const uint8_t* __restrict__ w, size_t stride,
    int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs, const float* __restrict__ xd,
    const float* __restrict__ xsum8, float* __restrict__ y)
{
    constexpr int kBytes = T == DType::Q4_1 ? 20 : 22;
    constexpr int kNibbles = T == DType::Q4_1 ? 4 : 6;
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
        if constexpr (T == DType::Q5_0) qh = word(block + 2);
        int sum = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const uint32_t n = word(block + kNibbles + 4 * k);  // values 4k..4k+3 (low), +16 (high)
            uint32_t lo = n & 0x0f0f0f0fu, hi = (n >> 4) & 0x0f0f0f0fu;
            if constexpr (T == DType::Q5_0) {
                // bit i of qh is bit 4 of value i: spread 4 bits to the 4 bytes' bit 4.
                const uint32_t l4 = (qh >> (4 * k)) & 0xfu, h4 = (qh >> (16 + 4 * k)) & 0xfu;
                lo |= ((l4 & 1u) | ((l4 & 2u) << 7) | ((l4 & 4u) << 14) | ((l4 & 8u) << 21)) << 4;
                hi |= ((h4 & 1u) | ((h4 & 2u) << 7) | ((h4 & 4u) << 14) | ((h4 & 8u) << 21)) << 4;
            }
            sum = __dp4a(static_cast<int>(lo), xl[k], sum);
            sum = __dp4a(static_cast<int>(hi), xh[k], sum);
            if constexpr (T == DType::Q5_0) {  // - 16 sum(x), as the CPU: one exact int per block
                sum = __dp4a(static_cast<int>(0xf0f0f0f0u), xl[k], sum);
                sum = __dp4a(static_cast<int>(0xf0f0f0f0u), xh[k], sum);
            }
        }
        const float dw = fp16At(block), dx = __ldg(xd + b);
        acc += static_cast<float>(sum) * (dw * dx);
        // sum8 / 8 = d_x sum(q_x) exactly (a power-of-two scaling).
        if constexpr (T == DType::Q4_1) acc += fp16At(block + 2) * (__ldg(xsum8 + b) * 0.125f);
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

// ---- super-blocks of 256 --------------------------------------------------------------------

// The sum over the 8 lanes of a super-block (lanes 8s .. 8s + 7), exact in int.
__device__ __forceinline__ int groupSum8(int v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}

// Byte k (0..15) of a 16-byte value.
__device__ __forceinline__ uint32_t byteOf(const uint4& v, int k)
{
    const uint32_t w = k < 4 ? v.x : k < 8 ? v.y : k < 12 ? v.z : v.w;
    return (w >> (8 * (k % 4))) & 0xffu;
}

__device__ __forceinline__ uint32_t wordOf(const uint4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

// Q4_K / Q5_K: lane j of a super-block takes sub-block j: values 64c + 32h + l (c = j / 2,
// h = j % 2, l < 32), the low (h = 0) or high nibbles of bytes [32c, 32c + 32); Q5_K's bit 4 is
// bit j of qh[l]. Per super-block (d d_x) sum_j sc_j sum(q x) - (dmin d_x) sum_j m_j sum x.
// kVec: rows 16-byte aligned (Q4_K / Q5_K blocks are 144 / 176 bytes, both multiples of 16, so
// every block is): the header (d, dmin, scales), the lane's nibbles and qh come as 16-byte loads;
// otherwise as pairs of 2-byte loads.
template <bool kHigh, bool kVec>
__global__ void __launch_bounds__(kThreads) matvecQ4_5KKernel(const uint8_t* __restrict__ w, size_t stride,
    int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs, const float* __restrict__ xd,
    const int16_t* __restrict__ bsums, float* __restrict__ y)
{
    constexpr int kBytes = kHigh ? 176 : 144;
    constexpr int kNibbles = kHigh ? 48 : 16;
    const int lane = threadIdx.x % kWarp;
    const int j = lane % 8, c = j / 2, h = j % 2;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    float acc = 0.0f;
    // Every lane runs the same number of steps (the shuffles need the whole warp).
    for (int64_t b0 = 0; b0 < blocks; b0 += kWarp / 8) {
        const int64_t b = b0 + lane / 8;
        int sumq = 0, summ = 0;
        uint32_t dd = 0;  // kVec: the block's d (low half) and dmin (high half)
        if (b < blocks) {
            const uint8_t* block = rowBytes + b * kBytes;
            const int8_t* xb = xqs + b * kQK + 64 * c + 32 * h;
            int scale, min;
            uint32_t q[8], x[8];
            if constexpr (kVec) {
                const uint4 head = __ldg(reinterpret_cast<const uint4*>(block));
                dd = head.x;
                // scale bytes s[i] = header byte 4 + i
                if (j < 4) {
                    scale = static_cast<int>(byteOf(head, 4 + j) & 63);
                    min = static_cast<int>(byteOf(head, 8 + j) & 63);
                } else {
                    const uint32_t m = byteOf(head, 8 + j);
                    scale = static_cast<int>((m & 0x0f) | ((byteOf(head, j) >> 6) << 4));
                    min = static_cast<int>((m >> 4) | ((byteOf(head, 4 + j) >> 6) << 4));
                }
                const uint4* nib = reinterpret_cast<const uint4*>(block + kNibbles + 32 * c);
                const uint4 n0 = __ldg(nib), n1 = __ldg(nib + 1);
                const int4 x0 = __ldg(reinterpret_cast<const int4*>(xb)), x1 = __ldg(reinterpret_cast<const int4*>(xb + 16));
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    q[k] = wordOf(n0, k);
                    q[k + 4] = wordOf(n1, k);
                }
                x[0] = x0.x, x[1] = x0.y, x[2] = x0.z, x[3] = x0.w, x[4] = x1.x, x[5] = x1.y, x[6] = x1.z, x[7] = x1.w;
                if constexpr (kHigh) {
                    const uint4 h0 = __ldg(reinterpret_cast<const uint4*>(block + 16));
                    const uint4 h1 = __ldg(reinterpret_cast<const uint4*>(block + 32));
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        q[k] = ((q[k] >> (4 * h)) & 0x0f0f0f0fu) | (((wordOf(h0, k) >> j) & 0x01010101u) << 4);
                        q[k + 4] = ((q[k + 4] >> (4 * h)) & 0x0f0f0f0fu) | (((wordOf(h1, k) >> j) & 0x01010101u) << 4);
                    }
                } else {
#pragma unroll
                    for (int k = 0; k < 8; ++k) q[k] = (q[k] >> (4 * h)) & 0x0f0f0f0fu;
                }
            } else {
                const uint8_t* s = block + 4;
                if (j < 4) {
                    scale = s[j] & 63;
                    min = s[j + 4] & 63;
                } else {
                    scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
                    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
                }
                const uint8_t* nibbles = block + kNibbles + 32 * c;
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    q[k] = (word(nibbles + 4 * k) >> (4 * h)) & 0x0f0f0f0fu;
                    if constexpr (kHigh) q[k] |= ((word(block + 16 + 4 * k) >> j) & 0x01010101u) << 4;
                    x[k] = static_cast<uint32_t>(__ldg(reinterpret_cast<const int*>(xb + 4 * k)));
                }
            }
            int dot = 0;
#pragma unroll
            for (int k = 0; k < 8; ++k) dot = __dp4a(static_cast<int>(q[k]), static_cast<int>(x[k]), dot);
            const int16_t* bs = bsums + b * (kQK / 16) + 2 * j;
            sumq = scale * dot;
            summ = min * (int{__ldg(bs)} + int{__ldg(bs + 1)});
        }
        sumq = groupSum8(sumq);
        summ = groupSum8(summ);
        if (j == 0 && b < blocks) {
            const float dx = __ldg(xd + b);
            float d, dmin;
            if constexpr (kVec) {
                d = halfToFloat(static_cast<uint16_t>(dd & 0xffffu));
                dmin = halfToFloat(static_cast<uint16_t>(dd >> 16));
            } else {
                const uint8_t* block = rowBytes + b * kBytes;
                d = fp16At(block);
                dmin = fp16At(block + 2);
            }
            acc += (d * dx) * static_cast<float>(sumq) - (dmin * dx) * static_cast<float>(summ);
        }
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

// Q6_K: lane j takes values 128 hf + 32 p + l (hf = j / 4, p = j % 4, l < 32): the low (p < 2) or
// high nibble of ql[64 hf + 32 (p & 1) + l] and bits 2p, 2p + 1 of qh[32 hf + l]; its groups of
// 16 are g = 8 hf + 2 p and g + 1. Per super-block (d d_x) sum_g scale_g (sum(q x) - 32 sum x).
__global__ void __launch_bounds__(kThreads) matvecQ6_KKernel(const uint8_t* __restrict__ w, size_t stride,
    int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs, const float* __restrict__ xd,
    const int16_t* __restrict__ bsums, float* __restrict__ y)
{
    constexpr int kBytes = 210;
    const int lane = threadIdx.x % kWarp;
    const int j = lane % 8, hf = j / 4, p = j % 4;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    float acc = 0.0f;
    for (int64_t b0 = 0; b0 < blocks; b0 += kWarp / 8) {
        const int64_t b = b0 + lane / 8;
        int sum = 0;
        if (b < blocks) {
            const uint8_t* block = rowBytes + b * kBytes;
            const uint8_t* low = block + 64 * hf + 32 * (p & 1);
            const uint8_t* top = block + 128 + 32 * hf;
            const int lowShift = p < 2 ? 0 : 4, topShift = 2 * p;
            const int8_t* xb = xqs + b * kQK + 128 * hf + 32 * p;
            int dot0 = 0, dot1 = 0;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const uint32_t q = ((word(low + 4 * k) >> lowShift) & 0x0f0f0f0fu) |
                                   (((word(top + 4 * k) >> topShift) & 0x03030303u) << 4);
                const int xv = __ldg(reinterpret_cast<const int*>(xb + 4 * k));
                if (k < 4) dot0 = __dp4a(static_cast<int>(q), xv, dot0);
                else dot1 = __dp4a(static_cast<int>(q), xv, dot1);
            }
            const int g = 8 * hf + 2 * p;
            const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
            const int16_t* bs = bsums + b * (kQK / 16) + g;
            sum = int{scales[g]} * (dot0 - 32 * int{__ldg(bs)}) + int{scales[g + 1]} * (dot1 - 32 * int{__ldg(bs + 1)});
        }
        sum = groupSum8(sum);
        if (j == 0 && b < blocks) acc += (fp16At(rowBytes + b * kBytes + 208) * __ldg(xd + b)) * static_cast<float>(sum);
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

}  // namespace

cudaError_t launchQuantizeQ8K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums, cudaStream_t stream)
{
    const int64_t blocks = n / kQK;
    if (blocks <= 0) return cudaSuccess;
    quantizeQ8KKernel<<<gridFor(blocks, kRowsPerBlock), kThreads, 0, stream>>>(x, blocks, qs, d, bsums);
    return cudaGetLastError();
}

cudaError_t launchMatvecKQuant(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream)
{
    if (reinterpret_cast<uintptr_t>(w.data) % 2 != 0 || w.rowStride % 2 != 0) return cudaErrorMisalignedAddress;
    const unsigned grid = gridFor(w.rows, kRowsPerBlock);
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    const bool aligned = reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.rowStride % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(x.qs) % 16 == 0;
    switch (w.type) {
    case DType::Q4_1:
        matvec32Kernel<DType::Q4_1><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / 32, x.qs,
                                                                   x.d, x.sum8, y);
        break;
    case DType::Q5_0:
        matvec32Kernel<DType::Q5_0><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / 32, x.qs,
                                                                   x.d, x.sum8, y);
        break;
    case DType::Q4_K:
        if (aligned)
            matvecQ4_5KKernel<false, true><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / kQK,
                                                                          x.qs, x.d, x.bsums, y);
        else
            matvecQ4_5KKernel<false, false><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / kQK,
                                                                           x.qs, x.d, x.bsums, y);
        break;
    case DType::Q5_K:
        if (aligned)
            matvecQ4_5KKernel<true, true><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / kQK,
                                                                         x.qs, x.d, x.bsums, y);
        else
            matvecQ4_5KKernel<true, false><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / kQK,
                                                                          x.qs, x.d, x.bsums, y);
        break;
    case DType::Q6_K:
        matvecQ6_KKernel<<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, w.cols / kQK, x.qs, x.d,
                                                        x.bsums, y);
        break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
