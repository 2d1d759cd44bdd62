#pragma once
// CPU kernels on the compressed weight forms: y = W x straight from the bitmap sparse form (no
// dense intermediate), fused dequantize-GEMV on the group-quantized form, and decompression to
// dense. Every call covers the row range [rowBegin, rowEnd) and touches only those rows' outputs,
// so a caller can split rows across threads; no call allocates or starts threads.
//
// Indexing is global: y[r] for r in [rowBegin, rowEnd); a dense output holds the whole matrix,
// row r at out + r * cols. x holds cols floats. Sums are fp32 (several partial sums per row).

#include <cstdint>

#include "core/compress/bitmap_sparse.h"
#include "core/compress/group_quant.h"
#include "gpu/host.h"  // CpuKernelSet, gemvBitmapSparse

namespace spillway::compress {

// The hot spots. gemvBitmapSparse on F16 / BF16 values has AVX2 (+F16C, FMA) and AVX-512
// kernels, on Int8 values an AVX-512 kernel, chosen at run time (y equals the scalar kernel's
// within fp32 rounding for finite x); the other formats (and Int8 under AVX2) run the scalar
// kernel. The first form runs activeSparseKernelSet(); the second exactly `set`,
// or the widest set below it this CPU runs (tests compare the sets against each other).
void gemvBitmapSparse(const BitmapSparseMatrix& w, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd);
void gemvBitmapSparse(const BitmapSparseMatrix& w, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd, gpu::CpuKernelSet set);
// The widest set the sparse kernels run here: gpu::bestCpuKernelSet() (the same CPU checks).
gpu::CpuKernelSet bestSparseKernelSet();
// bestSparseKernelSet(), or a lower one named by SPILLWAY_CPU_KERNELS=scalar|avx2|avx512 (the
// variable the CPU backend reads); read once.
gpu::CpuKernelSet activeSparseKernelSet();
void gemvQuantized(const QuantizedMatrix& w, const float* x, float* y, int64_t rowBegin, int64_t rowEnd);

// Baseline: a dense fp16 matrix (rows, cols), row-major.
void gemvDenseF16(const uint16_t* w, int64_t cols, const float* x, float* y, int64_t rowBegin,
                  int64_t rowEnd);

// Decompression to dense fp32 (any format): out holds (rows, cols) floats.
void decompressRows(const BitmapSparseMatrix& w, int64_t rowBegin, int64_t rowEnd, float* out);
// Decompression of an F16 or BF16 matrix to its dense 16-bit form (what a GPU GEMM reads):
// out holds (rows, cols) uint16 values; zeros are written as +0.
void decompressRows16(const BitmapSparseMatrix& w, int64_t rowBegin, int64_t rowEnd, uint16_t* out);

}  // namespace spillway::compress
