#pragma once
// The CPU device's small ops (everything but matvec). They follow ggml's CPU code operation for
// operation where that decides the float rounding (rmsnorm, rope, softmax), so results match
// llama.cpp's reference outputs closely.

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/scratch.h"
#include "gpu/cpu/thread_pool.h"
#include "gpu/device.h"

namespace spillway::gpu::cpu {

void rmsnormOp(const float* x, const float* weight, float* out, int n, float eps);

// cosSin: scratch of rotaryDims floats (cos, sin per rotating pair).
void ropeOp(float* x, int nHeads, int headDim, int pos, const RopeParams& p, float* cosSin);

// Heads are split across the pool. a.scores must hold nHeads * nPos floats. With a.kNew /
// a.vNew set, stores them first (storeKvOp).
void attentionOp(const AttentionArgs& a, ThreadPool& pool, const Kernels& k);

// Device::attentionBatch as matrix products: per head and chunk of kBatchQueryChunk queries,
// S = scale * Q K^T against the cached positions the chunk's last query sees, a causal softmax per
// row (the kernel set's expSum), then O = P V, through OpenBLAS on the pool's threads (one head at
// a time each). F16 and Q8 caches are unpacked to floats per head first. perThread: one scratch
// per pool thread. Not bit for bit attentionOp's sums (tests/common/prompt_tolerance.h holds the
// difference).
inline constexpr int kBatchQueryChunk = 64;
void attentionBatchOp(const AttentionArgs& a, int queries, size_t rowStride, ThreadPool& pool, Scratch* perThread,
                      const Kernels& kernels);

// Writes a.kNew / a.vNew, converted to a.kvType, at position nPos - 1 of the caches (and, for
// Q8, their scales). The reference the CUDA store kernel matches bit for bit.
void storeKvOp(const AttentionArgs& a);

// The kernel set's swiglu, the values split across the pool.
void swigluOp(const float* gate, const float* up, float* out, int n, ThreadPool& pool, const Kernels& k);

void addOp(float* y, const float* x, int n);
void pointwiseOp(const PointwiseArgs& a);
// Device::scatterRows and rowSum (the neuron cache's ops). rowSum splits the columns across the
// pool; each column sums its rows in order.
void scatterRowsOp(const ScatterRowsArgs& a);
void rowSumOp(const RowSumArgs& a, ThreadPool& pool);
// Mean and variance summed in double (as rmsnorm's squares), then one float scale.
void layernormOp(const float* x, const float* weight, const float* bias, float* out, int n, float eps);

// out[c] = W[row, c], dequantized (exact for every type: d * q fits a float's mantissa).
void getRowOp(const MatrixView& w, int64_t row, float* out);

}  // namespace spillway::gpu::cpu
