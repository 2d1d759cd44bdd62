#pragma once
// The CPU device's kernel table: one set of function pointers per instruction-set level, picked
// once when the device is made. The scalar set is baseline x86-64 (and the reference for the
// others); the AVX2 set needs AVX2+FMA+F16C; the AVX-512 set adds AVX-512 F/BW/VL/DQ/VNNI.
//
// Internal to gpu/cpu: the rest of the engine sees only Device.

#include <cstdint>

#include "gpu/cpu/cpu_device.h"
#include "gpu/device.h"
#include "gpu/matvec_runs.h"  // XForm, xFormFor

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

// x quantized to blocks of 256 for the K-quant weights (Q4_K, Q5_K, Q6_K), like llama.cpp's
// block_q8_K. Per block b: d[b] = max|x| / 127 (float, not rounded to fp16) and
// qs[256 b + i] = round_to_nearest_even(x[256 b + i] * (1 / d[b])) in [-127, 127] (0 where
// max|x| is 0); bsums[16 b + g] = sum of qs over values 16 g .. 16 g + 15 of block b (the min /
// offset terms of the K-quants only need these sums).
struct QuantizedXK {
    const int8_t* qs = nullptr;     // (cols), 64-byte aligned
    const float* d = nullptr;       // (cols / 256)
    const int16_t* bsums = nullptr;  // (cols / 16)
};

// x quantized as llama2.c export v2 / the thesis' runtime does for Q8_G64 weights: per group g
// of 64, s[g] = max|x| / 127 (float) and qs[64 g + i] = roundf(x[64 g + i] / s[g]) (half away
// from zero; 0 where max|x| is 0).
struct QuantizedXG64 {
    const int8_t* qs = nullptr;  // (cols), 64-byte aligned
    const float* s = nullptr;    // (cols / 64)
};

// What a matvec row kernel reads for x: the float vector (F32/F16/BF16 weights) or one of its
// quantizations; xFormFor says which one a weight type needs.
struct MatvecInput {
    const float* x = nullptr;
    QuantizedX q;      // Q8_0, Q4_0, Q4_1, Q5_0
    QuantizedXK k;     // Q4_K, Q5_K, Q6_K
    QuantizedXG64 g64;  // Q8_G64
};

// y[r] = W[r, :] . x for r in [r0, r1). The hot spot of decoding.
using MatvecRowsFn = void (*)(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                              int64_t r1);
// Rows [r0, r1) of w as floats, row i at out + (i - r0) * w.cols: the prompt path's weights for a
// float matrix product.
using DequantRowsFn = void (*)(const MatrixView& w, int64_t r0, int64_t r1, float* out);
// Quantizes n floats (n a multiple of 32) into the layout of QuantizedX.
using QuantizeQ8Fn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, float* sum8);

// The prompt path's own float matrix product (gemm_avx2.cpp, gemm_avx512.cpp),
// Y[j, r] = sum_k X[j, k] W[r, k]:
// X (n tokens x cols, rows lda floats apart) packed once per product into panels of
// kGemmPanelTokens tokens, k-major (panel p at packed + p * kGemmPanelTokens * cols, value (t, k)
// at [k * kGemmPanelTokens + t - p * kGemmPanelTokens], tokens past n as zeros), panels [p0, p1)
// per call so threads can share the packing; then each block of up to Kernels::gemmPanelRows
// weight rows (row-major floats, ldw apart) multiplied into Y (token j's values at y + j * ldc),
// the rows transposed into `panel` (cols * gemmPanelRows floats, 32-byte aligned) first.
constexpr int64_t kGemmPanelTokens = 6;
constexpr int64_t kGemmPanelRows = 16;        // the AVX2 tile's rows
constexpr int64_t kGemmPanelRowsAvx512 = 32;  // the AVX-512 tile's
constexpr int64_t kGemmDepth = 1024;  // values of k per pass of the register tile (measured best of 128..2048)
using PackGemmXFn = void (*)(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0,
                             int64_t p1, float* packed);
using GemmRowsFn = void (*)(const float* packedX, int64_t n, int64_t cols, const float* w,
                            int64_t ldw, int64_t rows, float* y, int64_t ldc, float* panel);
// The prompt path's integer product (gemm_int8_x86.h; one per instruction set:
// gemm_int8_avx512.cpp, gemm_int8_avxvnni.cpp, gemm_int8_avx2.cpp) for the types in `types` (one
// bit per DType: Q4_0, Q8_0 in either layout, the K-quants, the IQ types, Q5_1 and MXFP4 where the
// set can): X quantized once per product as decode quantizes one token (Q8 blocks of 32; Q8_K
// super-blocks for the 256-value types) and packed into panels of `tokens` tokens (`pack`: panels
// [p0, p1) at packed + p * (cols / 32) * gemmInt8XBlockBytes(tokens), w says the weights' type),
// then `rows`: rows [r0, r1) (at most rowsPerBlock) of w multiplied into Y (token j's row r at
// y + j * ldc + r), the rows repacked into `panel` ((cols / 32) * gemmInt8WBlockBytes(rowsPerBlock)
// bytes) first. Every one gives the same bits.
constexpr int64_t gemmInt8XBlockBytes(int64_t tokens) { return 8 * tokens * 4 + 3 * tokens * 4; }
constexpr int64_t gemmInt8WBlockBytes(int64_t rows) { return 8 * rows * 4 + 4 * rows * 4; }  // the largest
struct GemmInt8 {
    const char* name = nullptr;
    int64_t tokens = 0;
    int64_t rowsPerBlock = 0;
    uint32_t types = 0;  // bit i: DType i
    void (*pack)(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0, int64_t p1, const MatrixView& w,
                 uint8_t* packed) = nullptr;
    void (*rows)(const uint8_t* packedX, int64_t n, const MatrixView& w, int64_t r0, int64_t r1, float* y,
                 int64_t ldc, uint8_t* panel) = nullptr;
    bool takes(DType t) const { return pack && ((types >> static_cast<int>(t)) & 1u); }
    bool takes(const MatrixView& w) const
    {
        if (!takes(w.type) || w.cols % dtypeTraits(w.type).blockSize != 0) return false;
        return w.layout == RowLayout::Stored || (w.type == DType::Q8_0 && w.layout == RowLayout::Q8_0ScalesLast);
    }
};
using DotFn = float (*)(const float* a, const float* b, int n);
// y[i] += a * x[i]
using AxpyFn = void (*)(float a, const float* x, float* y, int n);
// Reads `bytes` (a multiple of 256) at 64-byte aligned `data` and returns a value depending on
// all of it, so the loads cannot be dropped.
using ReadAllFn = uint64_t (*)(const void* data, size_t bytes);
// x[i] = exp(x[i] - shift) for i < n, and the sum of the results in double (a softmax's
// exponentials, as ggml sums them; 0 where exp underflows).
using ExpSumFn = double (*)(float* x, int n, float shift);
// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
using SwigluFn = void (*)(const float* gate, const float* up, float* out, int n);

struct Kernels {
    CpuKernelSet set = CpuKernelSet::Scalar;
    MatvecRowsFn matvec[kDTypeCount] = {};  // indexed by DType, rows in the Stored layout
    // Q8_0 rows in the Q8_0ScalesLast layout (gpu/device.h). Every set has one (AVX2 uses the
    // scalar one); the AVX-512 and scalar ones give the same bits as their set's matvec[Q8_0]
    // on the stored rows. Only where it is faster than the stored rows' kernel (repacksQ8_0)
    // does the device reorder the rows it uploads.
    MatvecRowsFn matvecQ8_0ScalesLast = nullptr;
    bool repacksQ8_0 = false;
    QuantizeQ8Fn quantizeQ8 = nullptr;
    // Per DType (Stored layout) and for Q8_0ScalesLast: rows to floats, where this set has a fast
    // (vectorized) way; null elsewhere (the prompt path keeps the matvec kernels for those types).
    DequantRowsFn dequant[kDTypeCount] = {};
    DequantRowsFn dequantQ8_0ScalesLast = nullptr;
    // The prompt path's own matrix product; null where the set has none (OpenBLAS's SGEMM then).
    PackGemmXFn packGemmX = nullptr;
    GemmRowsFn gemmRows = nullptr;
    int64_t gemmPanelRows = kGemmPanelRows;  // the rows of a block gemmRows takes
    // The integer product for Q4_0, the K-quants (and Q8_0); none (pack null) where the set has
    // none: the float product then.
    GemmInt8 gemmInt8;
    DotFn dot = nullptr;
    AxpyFn axpy = nullptr;
    ReadAllFn readAll = nullptr;
    // Scalar: glibc's expf; AVX2 / AVX-512: exp_x86.h's (within 2 ulp of it).
    ExpSumFn expSum = nullptr;
    SwigluFn swiglu = nullptr;
};

// The widest set this CPU runs.
CpuKernelSet detectKernelSet();
// The table for `set`, lowered to what the CPU supports.
const Kernels& kernelsFor(CpuKernelSet set);

// The tables, each defined in its own file (compiled for its instruction set).
void fillScalarKernels(Kernels& k);
void fillAvx2Kernels(Kernels& k);
void fillAvx512Kernels(Kernels& k);

// The AVX2 + F16C row dequantizers (kernels_avx2.cpp), which the AVX-512 set uses too.
void fillAvx2Dequant(Kernels& k);

// The prompt path's matrix product of the AVX2 set (gemm_avx2.cpp).
void packGemmXAvx2(const float* x, int64_t lda, int64_t n, int64_t cols, int64_t p0, int64_t p1,
                   float* packed);
void gemmRowsAvx2(const float* packedX, int64_t n, int64_t cols, const float* w, int64_t ldw,
                  int64_t rows, float* y, int64_t ldc, float* panel);
// The integer products, per instruction set; and those this CPU runs (into out, at most 3; for
// tests and benchmarks), the best first.
GemmInt8 gemmInt8Avx512();
GemmInt8 gemmInt8AvxVnni();
GemmInt8 gemmInt8Avx2();
int gemmInt8Variants(GemmInt8* out);
// The AVX-512 set's (gemm_avx512.cpp): blocks of kGemmPanelRowsAvx512 rows, the AVX2 packing.
void gemmRowsAvx512(const float* packedX, int64_t n, int64_t cols, const float* w, int64_t ldw,
                    int64_t rows, float* y, int64_t ldc, float* panel);

// The quantized row kernels of the AVX-512 set (kernels_quant_avx512.cpp).
void matvecQ8_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                      int64_t r1);
void matvecQ8_0ScalesLastAvx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                                int64_t r1);
// Q8_0ScalesLast rows for the scalar and AVX2 sets (kernels_scalar.cpp).
void matvecQ8_0ScalesLastScalar(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                                int64_t r1);
// Reorders Q8_0 rows [r0, r1) from the stored layout (src) to Q8_0ScalesLast (dst); both views
// have the same shape and row stride.
void repackQ8_0ScalesLast(const MatrixView& src, uint8_t* dst, int64_t r0, int64_t r1);
void matvecQ4_0Avx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0,
                      int64_t r1);

// BitmapSparse rows (sparse_kernels.cpp), one entry per set, and the dispatch behind them
// (`set` must be one this CPU runs).
void matvecBitmapScalar(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void matvecBitmapAvx2(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void matvecBitmapAvx512(const MatrixView& w, const MatvecInput& in, float* y, int64_t r0, int64_t r1);
void gemvBitmapSparseSet(const BitmapSparseView& w, const float* x, float* y, int64_t r0, int64_t r1,
                         CpuKernelSet set);

// The x quantizations of the K-quants and of Q8_G64 (kernels_kquant_scalar.cpp). Every kernel
// set uses these same functions (x is small next to the weights), so all sets see the same bits.
// n is a multiple of 256 (Q8K) or 64 (G64).
void quantizeQ8K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
// quantizeG64: gpu/host.h.

// The rows of Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and Q8_G64 weights, per set
// (kernels_kquant_scalar.cpp, kernels_kquant_avx2.cpp, kernels_kquant_avx512.cpp); called by the
// fill functions above.
void fillScalarKQuantKernels(Kernels& k);
void fillAvx2KQuantKernels(Kernels& k);
void fillAvx512KQuantKernels(Kernels& k);

// The rows of Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S,
// IQ1_M and MXFP4 (iq_expand.h), per set (kernels_iq_scalar.cpp, kernels_iq_avx2.cpp,
// kernels_iq_avx512.cpp): matvec and dequant entries.
void fillScalarIqKernels(Kernels& k);
void fillAvx2IqKernels(Kernels& k);
void fillAvx512IqKernels(Kernels& k);
// n values (a multiple of the block size) of those types to floats, as ggml decodes them.
void decodeIqBlocks(DType type, const uint8_t* data, int64_t n, float* out);

// Values per block of Q8_0, Q4_0 and the Q8 quantization of x. Every set quantizes x with the
// same float operations (kernels_common.h), so all sets see bit-identical QuantizedX.
inline constexpr int kQ8Block = 32;

}  // namespace spillway::gpu::cpu
