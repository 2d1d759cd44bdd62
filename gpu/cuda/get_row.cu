// Embedding lookup: out[c] = W[row, c] for any weight type the device computes, dequantized
// exactly as the CPU device's getRowOp. One thread per value. The same decoding turns a weight
// matrix into fp16, and x into fp16 / bf16, for the matrix products of prompt batches.

#include <cuda_bf16.h>

#include <type_traits>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"
#include "gpu/cuda/iq_decode.cuh"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

// Types exempt from the 2-byte row alignment check: F32 (read as whole floats) and MXFP4
// (17-byte blocks, read byte by byte); every other type reads 2-byte halves.
bool byteAddressed(DType t) { return t == DType::F32 || t == DType::MXFP4; }

// Value c of a row in the stored layout, as the CPU device's getRowOp gives it.
__device__ float decodeValue(DType type, const uint8_t* __restrict__ row, int64_t c)
{
    const auto u16 = [](const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); };
    switch (type) {
    case DType::F32: return reinterpret_cast<const float*>(row)[c];
    case DType::F16: return halfToFloat(u16(row + 2 * c));
    case DType::BF16: return bf16ToFloat(u16(row + 2 * c));
    case DType::Q8_0: {
        const uint8_t* block = row + (c / 32) * 34;
        return halfToFloat(u16(block)) * static_cast<float>(static_cast<int8_t>(block[2 + c % 32]));
    }
    case DType::Q4_0: {
        const uint8_t* block = row + (c / 32) * 18;
        const int i = static_cast<int>(c % 32);
        const int nibble = i < 16 ? (block[2 + i] & 0x0f) : (block[2 + i - 16] >> 4);
        return halfToFloat(u16(block)) * static_cast<float>(nibble - 8);
    }
    // The GGUF types below as gpu/cpu/kquant_blocks.h decodes them (ggml's float operations,
    // each rounded on its own: no fused multiply-add).
    case DType::Q4_1: {
        const uint8_t* block = row + (c / 32) * 20;
        const int i = static_cast<int>(c % 32);
        const int nibble = i < 16 ? (block[4 + i] & 0x0f) : (block[4 + i - 16] >> 4);
        return __fadd_rn(__fmul_rn(static_cast<float>(nibble), halfToFloat(u16(block))), halfToFloat(u16(block + 2)));
    }
    case DType::Q5_0: {
        const uint8_t* block = row + (c / 32) * 22;
        const int i = static_cast<int>(c % 32);
        const uint32_t qh = uint32_t{u16(block + 2)} | (uint32_t{u16(block + 4)} << 16);
        const int nibble = i < 16 ? (block[6 + i] & 0x0f) : (block[6 + i - 16] >> 4);
        const int q = nibble | static_cast<int>(((qh >> i) & 1) << 4);  // signed: q - 16 may be negative
        return static_cast<float>(q - 16) * halfToFloat(u16(block));
    }
    case DType::Q4_K:
    case DType::Q5_K: {
        const bool q5 = type == DType::Q5_K;
        const uint8_t* block = row + (c / 256) * (q5 ? 176 : 144);
        const int v = static_cast<int>(c % 256), chunk = v / 64, high = (v % 64) / 32, l = v % 32;
        const int j = 2 * chunk + high;
        const uint8_t* s = block + 4;
        const int scale = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        const int min = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        const uint8_t byte = block[(q5 ? 48 : 16) + 32 * chunk + l];
        int q = high ? byte >> 4 : byte & 0x0f;
        if (q5) q |= ((block[16 + l] >> j) & 1) << 4;
        const float d = __fmul_rn(halfToFloat(u16(block)), static_cast<float>(scale));
        const float m = __fmul_rn(halfToFloat(u16(block + 2)), static_cast<float>(min));
        return __fsub_rn(__fmul_rn(d, static_cast<float>(q)), m);
    }
    case DType::Q6_K: {
        const uint8_t* block = row + (c / 256) * 210;
        const int v = static_cast<int>(c % 256), h = v / 128, part = (v % 128) / 32, l = v % 32;
        const uint8_t low = block[64 * h + 32 * (part & 1) + l];
        const int q = (part < 2 ? low & 0x0f : low >> 4) | (((block[128 + 32 * h + l] >> (2 * part)) & 3) << 4);
        const float scale = static_cast<float>(reinterpret_cast<const int8_t*>(block + 192)[v / 16]);
        return __fmul_rn(__fmul_rn(halfToFloat(u16(block + 208)), scale), static_cast<float>(q - 32));
    }
    // Q2_K, Q3_K, Q5_1, the IQ types and MXFP4 as gpu/cpu/iq_blocks.h decodes them (NaN for
    // any other type).
    default: return decodeIqRowValue(type, row, c);
    }
}

__global__ void getRowKernel(DType type, const uint8_t* __restrict__ row, int64_t cols,
                             float* __restrict__ out)
{
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c >= cols) return;
    if (row == nullptr) {  // row outside the matrix: loud, as on the CPU device
        out[c] = __int_as_float(0x7fc00000);
        return;
    }
    out[c] = decodeValue(type, row, c);
}

// Rows [0, rows) of w (from `first`) as a dense (rows, cols) fp16 matrix, round to nearest: the
// weights of a prompt batch's matrix product (cuda_device.cpp).
__global__ void dequantizeF16Kernel(DType type, const uint8_t* __restrict__ w, size_t stride, int64_t rows,
                                    int64_t cols, __half* __restrict__ out)
{
    const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= rows * cols) return;
    const int64_t r = i / cols, c = i % cols;
    out[i] = __float2half_rn(decodeValue(type, w + static_cast<size_t>(r) * stride, c));
}

// x (n vectors of cols floats, vector i at x + i * stride) as dense fp16 or bf16.
template <class T>
__global__ void convertKernel(const float* __restrict__ x, int64_t stride, int64_t n, int64_t cols, T* __restrict__ out)
{
    const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (i >= n * cols) return;
    const float v = x[(i / cols) * stride + i % cols];
    if constexpr (std::is_same_v<T, __half>) out[i] = __float2half_rn(v);
    else out[i] = __float2bfloat16_rn(v);
}

}  // namespace

cudaError_t launchDequantizeF16(const MatrixView& w, int64_t first, int64_t rows, void* out, cudaStream_t stream)
{
    if (rows <= 0 || w.cols <= 0) return cudaSuccess;
    if (!byteAddressed(w.type) && (reinterpret_cast<uintptr_t>(w.data) % 2 || w.rowStride % 2))
        return cudaErrorMisalignedAddress;
    const auto* base = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(first) * w.rowStride;
    dequantizeF16Kernel<<<gridFor(rows * w.cols, kThreads), kThreads, 0, stream>>>(
        w.type, base, w.rowStride, rows, w.cols, static_cast<__half*>(out));
    return cudaGetLastError();
}

cudaError_t launchConvertX(const float* x, int64_t stride, int64_t n, int64_t cols, bool bf16, void* out,
                           cudaStream_t stream)
{
    if (n <= 0 || cols <= 0) return cudaSuccess;
    if (bf16)
        convertKernel<__nv_bfloat16><<<gridFor(n * cols, kThreads), kThreads, 0, stream>>>(
            x, stride, n, cols, static_cast<__nv_bfloat16*>(out));
    else
        convertKernel<__half><<<gridFor(n * cols, kThreads), kThreads, 0, stream>>>(x, stride, n, cols,
                                                                                    static_cast<__half*>(out));
    return cudaGetLastError();
}

cudaError_t launchGetRow(const MatrixView& w, int64_t row, float* out, cudaStream_t stream)
{
    if (w.cols <= 0) return cudaSuccess;
    if (!byteAddressed(w.type) && (reinterpret_cast<uintptr_t>(w.data) % 2 || w.rowStride % 2))
        return cudaErrorMisalignedAddress;
    const uint8_t* p = row >= 0 && row < w.rows
                           ? static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row) * w.rowStride
                           : nullptr;
    getRowKernel<<<gridFor(w.cols, kThreads), kThreads, 0, stream>>>(w.type, p, w.cols, out);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
