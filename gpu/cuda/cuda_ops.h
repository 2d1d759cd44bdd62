#pragma once
// Launchers of the CUDA backend's kernels, one op per .cu file. Each enqueues its kernel(s) on
// `stream` and returns the launch's status (cudaGetLastError), never waiting for the device.
// Every pointer is device memory. Sizes have been checked by the caller (cuda_device.cpp).
//
// The kernels follow the CPU reference (gpu/cpu/cpu_ops.cpp, kernels_scalar.cpp) float
// operation for float operation where that decides the rounding: x is quantized to Q8 blocks
// before Q8_0/Q4_0 dot products exactly as the CPU does (bit-identical int8 values and scales),
// rmsnorm sums float squares in double, softmax sums exponentials in double, rope's angles come
// from the same iterated float product. What differs is only the order of float additions.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpu/device.h"

namespace spillway::gpu::cuda {

// x quantized for the integer dot products: Q8 blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// MXFP4; layout as gpu/cpu/cpu_kernels.h's QuantizedX) or Q8_K super-blocks of 256 (the K-quants
// and the IQ types of 256 values): gpu/matvec_runs.h xFormFor.
struct QuantizedXDevice {
    const int8_t* qs = nullptr;        // (cols)
    const float* d = nullptr;          // (cols / 32), or (cols / 256) for Q8_K
    const float* sum8 = nullptr;       // (cols / 32); Q8 blocks of 32 only
    const int16_t* bsums = nullptr;    // (cols / 16); Q8_K only
};

// quantize_q8.cu: n a multiple of 32. qs 16-byte aligned.
cudaError_t launchQuantizeQ8(const float* x, int64_t n, int8_t* qs, float* d, float* sum8,
                             cudaStream_t stream);

// matvec_float.cu: F32, F16, BF16 weights. 16-byte loads when the rows and x are 16-byte
// aligned; element loads otherwise. cudaErrorMisalignedAddress when a row is not even aligned
// to its element size.
cudaError_t launchMatvecFloat(const MatrixView& w, const float* x, float* y, cudaStream_t stream);

// matvec_kquant.cu: x (n a multiple of 256) as Q8_K, bit-identical to the CPU's quantizeQ8K.
cudaError_t launchQuantizeQ8K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums,
                              cudaStream_t stream);
// matvec_kquant.cu: Q4_1, Q5_0 (times Q8 blocks of 32) and Q4_K, Q5_K, Q6_K (times Q8_K)
// weights in their GGUF layout, rows 2-byte aligned.
cudaError_t launchMatvecKQuant(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream);

// matvec_iq.cu: the rest of GGUF's block types (isIqBlockType) in their GGUF layout: Q5_1,
// IQ4_NL, MXFP4 times Q8 blocks of 32, the 256-value Q2_K, Q3_K, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ1_S, IQ1_M times Q8_K; rows 2-byte aligned (MXFP4: any), x.qs 16-byte aligned.
cudaError_t launchMatvecIq(const MatrixView& w, const QuantizedXDevice& x, float* y, cudaStream_t stream);
inline constexpr bool isIqBlockType(DType t)
{
    const int i = static_cast<int>(t);
    return i >= static_cast<int>(DType::Q2_K) && i <= static_cast<int>(DType::MXFP4);
}

// matvec_quant.cu: Q8_0, Q4_0 weights (rows 2-byte aligned) times quantized x.
cudaError_t launchMatvecQuant(const MatrixView& w, const QuantizedXDevice& x, float* y,
                              cudaStream_t stream);

// matvec_bitmap.cu: a BitmapSparse blob (16-byte aligned; checked by checkBitmapBlob on the host
// when it was loaded) of w.rows x w.cols, any value format, times float x.
cudaError_t launchMatvecBitmap(const MatrixView& w, const float* x, float* y, cudaStream_t stream);

// bitmap_decompress.cu: rows [first, first + count) of a BitmapSparse blob as floats (exact:
// quantized values as scale * code), row i at out + i * outStride. A single row outside the
// matrix (count 1) fills cols floats with NaN, as getRow.
cudaError_t launchBitmapRowsToFloat(const MatrixView& w, int64_t first, int64_t count, float* out,
                                    int64_t outStride, cudaStream_t stream);
// bitmap_decompress.cu: the whole blob as a dense (rows, cols) fp16 matrix, round to nearest.
cudaError_t launchBitmapToF16(const MatrixView& w, uint16_t* out, cudaStream_t stream);

// get_row.cu: rows [first, first + rows) of w (any type but BitmapSparse) as dense fp16
// (rows, cols), round to nearest.
cudaError_t launchDequantizeF16(const MatrixView& w, int64_t first, int64_t rows, void* out, cudaStream_t stream);
// get_row.cu: n vectors of cols floats (vector i at x + i * stride) as dense fp16 or bf16.
cudaError_t launchConvertX(const float* x, int64_t stride, int64_t n, int64_t cols, bool bf16, void* out,
                           cudaStream_t stream);

// get_row.cu: out[c] = W[row, c], dequantized; a row outside [0, rows) fills out with NaN.
cudaError_t launchGetRow(const MatrixView& w, int64_t row, float* out, cudaStream_t stream);

// rmsnorm.cu
cudaError_t launchRmsnorm(const float* x, const float* weight, float* out, int n, float eps,
                          cudaStream_t stream);

// rope.cu: dims rotating dims per head (even, > 0); thetaScale = base^(-2 / dims) computed on
// the host with std::pow, as the CPU device does.
cudaError_t launchRope(float* x, int nHeads, int headDim, int pos, int dims, float thetaScale,
                       float freqScale, bool neox, const float* freqFactors, cudaStream_t stream);

// attention.cu: a.scores must hold nHeads * nPos floats (row h at scores + h * nPos); caches of
// any KvType (Q8 with a.kScales / a.vScales); a.kNew / a.vNew, when set, are stored first.
cudaError_t launchAttention(const AttentionArgs& a, cudaStream_t stream);

// swiglu.cu, add.cu
cudaError_t launchSwiglu(const float* gate, const float* up, float* out, int n, cudaStream_t stream);
cudaError_t launchAdd(float* y, const float* x, int n, cudaStream_t stream);
// Whether this build has code the current GPU runs (cudaErrorNoKernelImageForDevice when not).
cudaError_t kernelImageStatus();

// layernorm.cu: one block; mean and variance summed in double, as the CPU device.
cudaError_t launchLayernorm(const float* x, const float* weight, const float* bias, float* out, int n, float eps,
                            cudaStream_t stream);

// pointwise.cu
cudaError_t launchPointwise(const PointwiseArgs& a, cudaStream_t stream);

// delta_net.cu: Device::deltaNet, a.stateDim at most kMaxDeltaNetStateDim and a.kernel in
// [1, kMaxDeltaNetTaps] (checked by the caller); `prepared` holds deltaNetScratchBytes(a).
inline constexpr int kMaxDeltaNetStateDim = 256;
inline constexpr int kMaxDeltaNetTaps = 8;
size_t deltaNetScratchBytes(const DeltaNetArgs& a);
cudaError_t launchDeltaNet(const DeltaNetArgs& a, float* prepared, cudaStream_t stream);

// neuron_cache_ops.cu: Device::scatterRows (4-byte aligned rows) and rowSum (F32/F16/BF16 rows
// aligned to their element, or int8 rows with a scale table); both checked by the caller.
cudaError_t launchScatterRows(const ScatterRowsArgs& a, cudaStream_t stream);
cudaError_t launchRowSum(const RowSumArgs& a, cudaStream_t stream);

}  // namespace spillway::gpu::cuda
