// Embedding lookup: out[c] = W[row, c] for any weight type, dequantized exactly as the CPU
// device's getRowOp (d * q is exact in float). One thread per value.

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/cuda/cuda_ops.h"

namespace spillway::gpu::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void getRowKernel(DType type, const uint8_t* __restrict__ row, int64_t cols,
                             float* __restrict__ out)
{
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (c >= cols) return;
    if (row == nullptr) {  // row outside the matrix: loud, as on the CPU device
        out[c] = __int_as_float(0x7fc00000);
        return;
    }
    const auto u16 = [](const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); };
    switch (type) {
    case DType::F32: out[c] = reinterpret_cast<const float*>(row)[c]; return;
    case DType::F16: out[c] = halfToFloat(u16(row + 2 * c)); return;
    case DType::BF16: out[c] = bf16ToFloat(u16(row + 2 * c)); return;
    case DType::Q8_0: {
        const uint8_t* block = row + (c / 32) * 34;
        out[c] = halfToFloat(u16(block)) * static_cast<float>(static_cast<int8_t>(block[2 + c % 32]));
        return;
    }
    case DType::Q4_0: {
        const uint8_t* block = row + (c / 32) * 18;
        const int i = static_cast<int>(c % 32);
        const int nibble = i < 16 ? (block[2 + i] & 0x0f) : (block[2 + i - 16] >> 4);
        out[c] = halfToFloat(u16(block)) * static_cast<float>(nibble - 8);
        return;
    }
    }
}

}  // namespace

cudaError_t launchGetRow(const MatrixView& w, int64_t row, float* out, cudaStream_t stream)
{
    if (w.cols <= 0) return cudaSuccess;
    if (w.type != DType::F32 && (reinterpret_cast<uintptr_t>(w.data) % 2 || w.rowStride % 2))
        return cudaErrorMisalignedAddress;
    const uint8_t* p = row >= 0 && row < w.rows
                           ? static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row) * w.rowStride
                           : nullptr;
    getRowKernel<<<gridFor(w.cols, kThreads), kThreads, 0, stream>>>(w.type, p, w.cols, out);
    return cudaGetLastError();
}

}  // namespace spillway::gpu::cuda
