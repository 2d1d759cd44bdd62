#pragma once
// The instruction-set kernels behind gemvBitmapSparse (sparse_kernels.cpp picks one at run time).
//
// sparse_kernels_avx2.cpp and sparse_kernels_avx512.cpp are compiled with wider instruction sets, so
// they see the matrix only through this plain struct: an inline function with external linkage
// (a std::vector operator[], BitmapSparseMatrix::rowValues) instantiated there could be the copy
// the linker keeps for the baseline code too, and crash a CPU without AVX2. Same rule as
// gpu/cpu/kernels_common.h: no std containers, no out-of-line std templates in those files.

#include <cstdint>

namespace spillway::gpu::cpu {

// A BitmapSparseMatrix with F16 or BF16 values, as raw pointers (layout of bitmap_sparse.h).
struct SparseRows16 {
    const uint64_t* rowOffsets = nullptr;  // rows + 1, bytes into values
    const uint8_t* bitmap = nullptr;       // (rows, bitmapRowBytes)
    const uint8_t* values = nullptr;       // valuesBytes = rowOffsets[rows]
    uint64_t valuesBytes = 0;              // reads never go past values + valuesBytes
    int64_t cols = 0;
    int64_t bitmapRowBytes = 0;            // multiple of 8
    bool bf16 = false;                     // false: IEEE fp16
};

// A BitmapSparseMatrix with Int8 values: per row, groups of `group` packed non-zeros, each an
// fp16 scale then its int8 codes (the last group of a row may be shorter).
struct SparseRowsInt8 {
    const uint64_t* rowOffsets = nullptr;  // rows + 1, bytes into values
    const uint8_t* bitmap = nullptr;       // (rows, bitmapRowBytes)
    const uint8_t* values = nullptr;       // valuesBytes = rowOffsets[rows]
    uint64_t valuesBytes = 0;              // reads never go past values + valuesBytes
    int64_t cols = 0;
    int64_t bitmapRowBytes = 0;            // multiple of 8
    int group = 0;                         // 32, 64 or 128
};

// y[r] = row r . x for r in [rowBegin, rowEnd); x holds cols floats.
void gemvSparse16Avx2(const SparseRows16& m, const float* x, float* y, int64_t rowBegin,
                      int64_t rowEnd);
// Needs AVX-512 F/BW/VL.
void gemvSparse16Avx512(const SparseRows16& m, const float* x, float* y, int64_t rowBegin,
                        int64_t rowEnd);
void gemvSparseInt8Avx512(const SparseRowsInt8& m, const float* x, float* y, int64_t rowBegin,
                          int64_t rowEnd);

}  // namespace spillway::gpu::cpu
