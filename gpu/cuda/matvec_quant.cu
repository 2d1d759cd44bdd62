// y = W x for Q8_0 and Q4_0 weights, with x already quantized to Q8 blocks (quantize_q8.cu), as
// the CPU device and llama.cpp do: per block an exact integer dot product (__dp4a), scaled by
// d_w * d_x in float. One warp per row.
//
// Two kernels. The staged one (below) takes rows that start 16-byte aligned with a multiple of 8
// blocks (cols a multiple of 256): coalesced 16-byte loads through shared memory. The general
// one takes any 2-byte aligned rows: Q8_0 blocks are 34 bytes and Q4_0 blocks 18, so quants are
// only 2-byte aligned; each lane reads 8 bytes of a block as four 2-byte loads (4 lanes per Q8_0
// block, 2 per Q4_0 block; a warp covers 8 or 16 consecutive blocks per step) and kUnroll steps
// are loaded before the first is used (the L1 then serves many wavefronts per byte).
// Measured on an H100 (bench-cuda, kernel alone, share of the d2d copy bandwidth) at 4096x4096,
// 11008x4096, 4096x11008, 5120x13824: staged Q8_0 59 / 78 / 78 / 68 %, Q4_0 44 / 62 / 64 / 54 %;
// general Q8_0 54 / 69 / 64 / 73 %, Q4_0 34 / 51 / 39 / 49 %. Both stay well under the F16
// kernel (77-93 %): the place to put a faster quantized GEMV.

#include <cstdlib>
#include <cstring>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr int kUnroll = 4;

__global__ void __launch_bounds__(kThreads) matvecQ8_0Kernel(const uint8_t* __restrict__ w,
    size_t stride, int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs,
    const float* __restrict__ xd, float* __restrict__ y)
{
    constexpr int kLanesPerBlock = 4;  // 8 bytes each
    constexpr int kBlocksPerStep = kWarp / kLanesPerBlock;
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    const int part = lane % kLanesPerBlock;

    float acc = 0.0f;
    for (int64_t b0 = lane / kLanesPerBlock; b0 < blocks; b0 += kBlocksPerStep * kUnroll) {
        int w0[kUnroll], w1[kUnroll];
        uint16_t dw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t b = b0 + u * kBlocksPerStep;
            if (b < blocks) {
                const uint8_t* block = rowBytes + b * 34;
                dw[u] = __ldcs(reinterpret_cast<const unsigned short*>(block));
                const uint8_t* q = block + 2 + part * 8;
                const unsigned short* h = reinterpret_cast<const unsigned short*>(q);
                w0[u] = static_cast<int>(uint32_t{__ldcs(h)} | (uint32_t{__ldcs(h + 1)} << 16));
                w1[u] = static_cast<int>(uint32_t{__ldcs(h + 2)} | (uint32_t{__ldcs(h + 3)} << 16));
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t b = b0 + u * kBlocksPerStep;
            if (b < blocks) {
                const int2 xv = __ldg(reinterpret_cast<const int2*>(xqs + b * 32 + part * 8));
                const int sum = __dp4a(w1[u], xv.y, __dp4a(w0[u], xv.x, 0));
                acc += static_cast<float>(sum) * (halfToFloat(dw[u]) * __ldg(xd + b));
            }
        }
    }
    acc = warpSum(acc);
    if (lane == 0) y[row] = acc;
}

// Byte i of a Q4_0 block's 16 holds value i (low nibble) and value i + 16 (high nibble), each
// meaning d * (nibble - 8). The "- 8" is folded out as the CPU does: y = sum d_w d_x sum(n q_x)
// - sum d_w * sum8_x.
__global__ void __launch_bounds__(kThreads) matvecQ4_0Kernel(const uint8_t* __restrict__ w,
    size_t stride, int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs,
    const float* __restrict__ xd, const float* __restrict__ xsum8, float* __restrict__ y)
{
    constexpr int kLanesPerBlock = 2;  // 8 bytes (16 values) each
    constexpr int kBlocksPerStep = kWarp / kLanesPerBlock;
    const int lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint8_t* rowBytes = w + static_cast<size_t>(row) * stride;
    const int part = lane % kLanesPerBlock;

    float acc = 0.0f;
    float correction = 0.0f;
    for (int64_t b0 = lane / kLanesPerBlock; b0 < blocks; b0 += kBlocksPerStep * kUnroll) {
        uint32_t w0[kUnroll], w1[kUnroll];
        uint16_t dw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t b = b0 + u * kBlocksPerStep;
            if (b < blocks) {
                const uint8_t* block = rowBytes + b * 18;
                dw[u] = __ldcs(reinterpret_cast<const unsigned short*>(block));
                const unsigned short* h = reinterpret_cast<const unsigned short*>(block + 2 + part * 8);
                w0[u] = uint32_t{__ldcs(h)} | (uint32_t{__ldcs(h + 1)} << 16);
                w1[u] = uint32_t{__ldcs(h + 2)} | (uint32_t{__ldcs(h + 3)} << 16);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t b = b0 + u * kBlocksPerStep;
            if (b < blocks) {
                const int8_t* xb = xqs + b * 32 + part * 8;
                const int2 lo = __ldg(reinterpret_cast<const int2*>(xb));       // values part*8..
                const int2 hi = __ldg(reinterpret_cast<const int2*>(xb + 16));  // values 16+part*8..
                int sum = __dp4a(static_cast<int>(w0[u] & 0x0f0f0f0fu), lo.x, 0);
                sum = __dp4a(static_cast<int>(w1[u] & 0x0f0f0f0fu), lo.y, sum);
                sum = __dp4a(static_cast<int>((w0[u] >> 4) & 0x0f0f0f0fu), hi.x, sum);
                sum = __dp4a(static_cast<int>((w1[u] >> 4) & 0x0f0f0f0fu), hi.y, sum);
                const float d = halfToFloat(dw[u]);
                acc += static_cast<float>(sum) * (d * __ldg(xd + b));
                if (part == 0) correction += d * __ldg(xsum8 + b);
            }
        }
    }
    acc = warpSum(acc);
    correction = warpSum(correction);
    if (lane == 0) y[row] = acc - correction;
}

// The fast path, for rows that start 16-byte aligned and hold a multiple of 8 blocks (cols a
// multiple of 256: every Llama-family matrix): the 2-byte loads above cost the L1 many
// wavefronts per byte, so here each warp copies 64 blocks of its row at a time into shared
// memory with coalesced 16-byte loads (8 blocks are 272 or 144 bytes, a whole number of 16-byte
// chunks), then each lane takes whole blocks out of shared memory as 4-byte words, realigned with
// funnel shifts (a block starts at a byte offset of 0 or 2 modulo 4).
template <DType T>
__global__ void __launch_bounds__(kThreads) matvecQuantStagedKernel(const uint8_t* __restrict__ w,
    size_t stride, int64_t rows, int64_t blocks, const int8_t* __restrict__ xqs,
    const float* __restrict__ xd, const float* __restrict__ xsum8, float* __restrict__ y)
{
    constexpr int kBlockBytes = T == DType::Q8_0 ? 34 : 18;
    constexpr int kStepBlocks = 64;
    constexpr int kChunks = kStepBlocks * kBlockBytes / 16;  // 136 or 72
    constexpr int kPerLane = (kChunks + kWarp - 1) / kWarp;
    __shared__ uint4 stage[kRowsPerBlock][kChunks + 1];  // + 1: the last block's extra word

    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
    if (row >= rows) return;  // the whole warp
    const uint4* src = reinterpret_cast<const uint4*>(w + static_cast<size_t>(row) * stride);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(stage[warp]);

    float acc = 0.0f;
    float correction = 0.0f;
    for (int64_t b0 = 0; b0 < blocks; b0 += kStepBlocks) {
        const int n = static_cast<int>(blocks - b0 < kStepBlocks ? blocks - b0 : kStepBlocks);
        const int chunks = n * kBlockBytes / 16;
        const uint4* s = src + b0 * kBlockBytes / 16;
        uint4 t[kPerLane];
#pragma unroll
        for (int u = 0; u < kPerLane; ++u)
            if (lane + kWarp * u < chunks) t[u] = __ldcs(s + lane + kWarp * u);
        __syncwarp();  // the previous step's reads of stage are done
#pragma unroll
        for (int u = 0; u < kPerLane; ++u)
            if (lane + kWarp * u < chunks) stage[warp][lane + kWarp * u] = t[u];
        __syncwarp();
        for (int j = lane; j < n; j += kWarp) {
            const int offset = j * kBlockBytes;
            const uint32_t* W = words + offset / 4;
            const int shift = (offset % 4) * 8;  // 0 or 16
            const int64_t b = b0 + j;
            const float d = halfToFloat(static_cast<uint16_t>(__funnelshift_rc(W[0], W[1], shift)));
            const int4 xlo = __ldg(reinterpret_cast<const int4*>(xqs + b * 32));
            const int4 xhi = __ldg(reinterpret_cast<const int4*>(xqs + b * 32 + 16));
            int sum;
            if constexpr (T == DType::Q8_0) {
                // quant int i (bytes 2 + 4i .. 5 + 4i of the block)
                auto q = [&](int i) { return static_cast<int>(__funnelshift_rc(W[i], W[i + 1], shift + 16)); };
                sum = __dp4a(q(0), xlo.x, 0);
                sum = __dp4a(q(1), xlo.y, sum);
                sum = __dp4a(q(2), xlo.z, sum);
                sum = __dp4a(q(3), xlo.w, sum);
                sum = __dp4a(q(4), xhi.x, sum);
                sum = __dp4a(q(5), xhi.y, sum);
                sum = __dp4a(q(6), xhi.z, sum);
                sum = __dp4a(q(7), xhi.w, sum);
            } else {
                auto q = [&](int i) { return __funnelshift_rc(W[i], W[i + 1], shift + 16); };
                auto lo = [](uint32_t v) { return static_cast<int>(v & 0x0f0f0f0fu); };
                auto hi = [](uint32_t v) { return static_cast<int>((v >> 4) & 0x0f0f0f0fu); };
                const uint32_t q0 = q(0), q1 = q(1), q2 = q(2), q3 = q(3);
                sum = __dp4a(lo(q0), xlo.x, 0);
                sum = __dp4a(lo(q1), xlo.y, sum);
                sum = __dp4a(lo(q2), xlo.z, sum);
                sum = __dp4a(lo(q3), xlo.w, sum);
                sum = __dp4a(hi(q0), xhi.x, sum);
                sum = __dp4a(hi(q1), xhi.y, sum);
                sum = __dp4a(hi(q2), xhi.z, sum);
                sum = __dp4a(hi(q3), xhi.w, sum);
                correction += d * __ldg(xsum8 + b);
            }
            acc += static_cast<float>(sum) * (d * __ldg(xd + b));
        }
    }
    acc = warpSum(acc);
    if constexpr (T == DType::Q4_0) acc -= warpSum(correction);
    if (lane == 0) y[row] = acc;
}

}  // namespace

cudaError_t launchMatvecQuant(const MatrixView& w, const QuantizedXDevice& x, float* y,
                              cudaStream_t stream)
{
    if (reinterpret_cast<uintptr_t>(w.data) % 2 != 0 || w.rowStride % 2 != 0)
        return cudaErrorMisalignedAddress;
    const unsigned grid = gridFor(w.rows, kRowsPerBlock);
    const auto* bytes = static_cast<const uint8_t*>(w.data);
    const int64_t blocks = w.cols / 32;
    // SPILLWAY_CUDA_QUANT_KERNEL=general forces the general kernel (for comparisons).
    static const bool generalOnly = [] {
        const char* v = std::getenv("SPILLWAY_CUDA_QUANT_KERNEL");
        return v && std::strcmp(v, "general") == 0;
    }();
    const bool staged = !generalOnly && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.rowStride % 16 == 0 &&
                        blocks % 8 == 0 && reinterpret_cast<uintptr_t>(x.qs) % 16 == 0;
    if (staged && w.type == DType::Q8_0)
        matvecQuantStagedKernel<DType::Q8_0><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, blocks,
                                                                            x.qs, x.d, x.sum8, y);
    else if (staged && w.type == DType::Q4_0)
        matvecQuantStagedKernel<DType::Q4_0><<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, blocks,
                                                                            x.qs, x.d, x.sum8, y);
    else if (w.type == DType::Q8_0)
        matvecQ8_0Kernel<<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, blocks, x.qs, x.d, y);
    else if (w.type == DType::Q4_0)
        matvecQ4_0Kernel<<<grid, kThreads, 0, stream>>>(bytes, w.rowStride, w.rows, blocks, x.qs, x.d,
                                                        x.sum8, y);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
