#pragma once
// The CPU device's kernel table: one set of function pointers per instruction-set level, picked
// once when the device is made. The scalar set is baseline x86-64 (and the reference for the
// others); the AVX2 set needs AVX2+FMA+F16C; the AVX-512 set adds AVX-512 F/BW/VL/DQ/VNNI.
//
// Internal to gpu/cpu: the rest of the engine sees only Device.

#include <cstdint>

#include "gpu/cpu/cpu_device.h"
#include "gpu/device.h"

namespace spillway::gpu::cpu {

// x quantized to Q8 blocks of 32, as llama.cpp does before an integer dot product with Q8_0 or
// Q4_0 weights. Per block b: scale d[b] = fp16(max|x| / 127) as a float, and
// qs[32 b + i] = round_to_nearest_even(x[32 b + i] * 127 / max|x|) in [-127, 127];
// sum8[b] = 8 * d[b] * sum_i qs[32 b + i] (folds the "- 8" of Q4_0 nibbles out of the dot loop).
struct QuantizedX {
    const int8_t* qs = nullptr;   // (cols), 64-byte aligned
    const float* d = nullptr;     // (cols / 32)
    const float* sum8 = nullptr;  // (cols / 32)
};

// What a matvec row kernel reads for x: the float vector (F32/F16/BF16 weights) or its Q8
// quantization (Q8_0/Q4_0 weights).
struct MatvecInput {
    const float* x = nullptr;
    QuantizedX q;
};

// y[r] = W[r, :] . x for r in [r0, r1). The hot spot of decoding.
using MatvecRowsFn = void (*)(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                              int64_t r1);
// Quantizes n floats (n a multiple of 32) into the layout of QuantizedX.
using QuantizeQ8Fn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, float* sum8);
using DotFn = float (*)(const float* a, const float* b, int n);
// y[i] += a * x[i]
using AxpyFn = void (*)(float a, const float* x, float* y, int n);
// Reads `bytes` (a multiple of 256) at 64-byte aligned `data` and returns a value depending on
// all of it, so the loads cannot be dropped.
using ReadAllFn = uint64_t (*)(const void* data, size_t bytes);

struct Kernels {
    CpuKernelSet set = CpuKernelSet::Scalar;
    MatvecRowsFn matvec[kDTypeCount] = {};  // indexed by DType
    QuantizeQ8Fn quantizeQ8 = nullptr;
    DotFn dot = nullptr;
    AxpyFn axpy = nullptr;
    ReadAllFn readAll = nullptr;
};

// The widest set this CPU runs.
CpuKernelSet detectKernelSet();
// The table for `set`, lowered to what the CPU supports.
const Kernels& kernelsFor(CpuKernelSet set);

// The tables, each defined in its own file (compiled for its instruction set).
void fillScalarKernels(Kernels& k);
void fillAvx2Kernels(Kernels& k);
void fillAvx512Kernels(Kernels& k);

// The quantized row kernels of the AVX-512 set (kernels_quant_avx512.cpp).
void matvecQ8_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                      int64_t r1);
void matvecQ4_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                      int64_t r1);

// BitmapSparse rows (sparse_kernels.cpp), one entry per set, and the dispatch behind them
// (`set` must be one this CPU runs).
void matvecBitmapScalar(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void matvecBitmapAvx2(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void matvecBitmapAvx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void gemvBitmapSparseSet(const BitmapSparseView& w, const float* x, float* y, int64_t r0, int64_t r1,
                         CpuKernelSet set);

// Values per block of Q8_0, Q4_0 and the Q8 quantization of x. Every set quantizes x with the
// same float operations (kernels_common.h), so all sets see bit-identical QuantizedX.
inline constexpr int kQ8Block = 32;

}  // namespace spillway::gpu::cpu
