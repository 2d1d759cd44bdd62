#pragma once
// Device side of the ENDOR bitmap sparse blob (gpu/sparse_format.h), shared by the fused GEMV
// (matvec_bitmap.cu) and the decompression (bitmap_decompress.cu).
//
// How a warp walks one row (ENDOR §5.1: the bitmap decoded next to the compute, in registers):
// 32 bitmap words (2048 columns) per step, lane l loading word l, so the bitmap is read with one
// coalesced 256-byte load; a warp scan of the words' popcounts gives each word's first value.
// Then, word after word, lane l takes columns 2l and 2l + 1 of the word (broadcast by shuffle):
// its values' index is the word's first plus the popcount of the bits below its own. In each
// such round the warp's value reads fall in one contiguous run (the word's non-zeros) and its
// reads of x and writes of dense output in 256 contiguous bytes: every access is coalesced,
// whatever the sparsity pattern.

#include <cstdint>

#include "gpu/cuda/cuda_common.cuh"
#include "gpu/device.h"
#include "gpu/sparse_format.h"

namespace spillway::gpu::cuda {

// The sections of a blob at `blob` (device memory) of the view's rows and cols.
struct BitmapBlobDevice {
    const uint8_t* header = nullptr;      // format at byte 12, group at byte 16
    const uint64_t* rowOffsets = nullptr;
    const uint64_t* bitmap = nullptr;
    const uint8_t* values = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t words = 0;                    // bitmap words per row
};

// The blob of w (host-side arithmetic only: the header stays on the device). The blob must be
// 16-byte aligned (its sections are 64-byte aligned within it, and the values are staged in
// aligned 16-byte chunks that then never leave it).
inline BitmapBlobDevice bitmapBlobDevice(const MatrixView& w)
{
    const auto* p = static_cast<const uint8_t*>(w.data);
    const BitmapBlobSections s = bitmapBlobSections(uint64_t(w.rows), uint64_t(w.cols), 0);
    BitmapBlobDevice b;
    b.header = p;
    b.rowOffsets = reinterpret_cast<const uint64_t*>(p + s.offsets);
    b.bitmap = reinterpret_cast<const uint64_t*>(p + s.bitmap);
    b.values = p + s.values;
    b.rows = w.rows;
    b.cols = w.cols;
    b.words = (w.cols + 63) / 64;
    return b;
}

__device__ __forceinline__ uint16_t loadU16Bytes(const uint8_t* p)
{
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Value k of a row whose packed values start at v (gpu/sparse_format.h's encodings; quantized
// values are scale * code in float, as the CPU's decodeBitmapSparseRow computes them). Groups
// hold 2^groupShift non-zeros (32, 64 or 128: checkBitmapBlob admits no other).
template <SparseValues F>
__device__ __forceinline__ float bitmapValue(const uint8_t* __restrict__ v, uint32_t k, int groupShift)
{
    if constexpr (F == SparseValues::F32) {
        return reinterpret_cast<const float*>(v)[k];
    } else if constexpr (F == SparseValues::F16) {
        return halfToFloat(reinterpret_cast<const uint16_t*>(v)[k]);
    } else if constexpr (F == SparseValues::BF16) {
        return bf16ToFloat(reinterpret_cast<const uint16_t*>(v)[k]);
    } else if constexpr (F == SparseValues::Int8) {
        const uint32_t g = k >> groupShift;
        const uint32_t j = k & ((1u << groupShift) - 1);
        const uint8_t* p = v + g * (2u + (1u << groupShift));  // every group before the row's last is full
        return halfToFloat(loadU16Bytes(p)) * static_cast<float>(static_cast<int8_t>(p[2 + j]));
    } else {
        const uint32_t g = k >> groupShift;
        const uint32_t j = k & ((1u << groupShift) - 1);
        const uint8_t* p = v + g * (2u + (1u << (groupShift - 1)));
        const int byte = p[2 + j / 2];
        const int nibble = (j & 1) ? byte >> 4 : byte & 0x0f;
        return halfToFloat(loadU16Bytes(p)) * static_cast<float>((nibble ^ 8) - 8);
    }
}

// Bytes [begin, end) of a row's packed values that hold values [k0, k1) (k1 > k0).
template <SparseValues F>
__device__ __forceinline__ void bitmapValueBytes(uint32_t k0, uint32_t k1, int groupShift, uint32_t& begin,
                                                 uint32_t& end)
{
    if constexpr (F == SparseValues::F32) {
        begin = 4 * k0, end = 4 * k1;
    } else if constexpr (F == SparseValues::F16 || F == SparseValues::BF16) {
        begin = 2 * k0, end = 2 * k1;
    } else {
        const uint32_t groupBytes = 2u + (F == SparseValues::Int8 ? 1u << groupShift : 1u << (groupShift - 1));
        const uint32_t last = k1 - 1;
        const uint32_t j = last & ((1u << groupShift) - 1);
        begin = (k0 >> groupShift) * groupBytes;
        end = (last >> groupShift) * groupBytes + 2 + (F == SparseValues::Int8 ? j + 1 : j / 2 + 1);
    }
}

// Shared memory a warp stages one step's values in: every format's values of 2048 columns but
// f32 above 50% density (such a step reads its values from global memory instead).
inline constexpr int kBitmapStageBytes = 4096 + 32;

// Walks row `row` of b with the whole warp, calling pair(c, set, v0, v1) for each of the lane's
// column pairs (c = 2l and 2l + 1 of every bitmap word) that starts below cols: bit 0 of `set`
// when column c is a non-zero (value v0, else v0 = 0), bit 1 for column c + 1 (v1). Every lane
// of the warp must call it; `stage` is the warp's kBitmapStageBytes of shared memory.
//
// Global memory is read only in bulk: each step's bitmap words (one per lane, loaded a step
// ahead) and its values, copied into the stage with coalesced 16-byte loads all issued at
// once. The per-word rounds then read shared memory and x alone: a round that waited for its
// own values in global memory ran at a fifth of the bandwidth on an H100.
template <SparseValues F, class Pair>
__device__ __forceinline__ void walkBitmapRow(const BitmapBlobDevice& b, int64_t row, int groupShift, uint4* stage,
                                              Pair pair)
{
    const int lane = threadIdx.x % kWarp;
    const uint64_t* bits = b.bitmap + row * b.words;
    const uint8_t* rowValues = b.values + b.rowOffsets[row];
    const uint64_t below = lane == 0 ? 0 : (~uint64_t{0} >> (64 - 2 * lane));  // bits under 2l
    const int cols = static_cast<int>(b.cols);
    const int words = static_cast<int>(b.words);
    uint32_t base = 0;  // non-zeros of the row before this step (a row holds < 2^31)
    uint64_t next = lane < words ? __ldcs(bits + lane) : 0;
    for (int w0 = 0; w0 < words; w0 += kWarp) {
        const uint64_t mine = next;
        next = w0 + kWarp + lane < words ? __ldcs(bits + w0 + kWarp + lane) : 0;
        const int count = __popcll(mine);
        int scan = count;  // inclusive
#pragma unroll
        for (int offset = 1; offset < kWarp; offset *= 2) {
            const int n = __shfl_up_sync(0xffffffffu, scan, offset);
            if (lane >= offset) scan += n;
        }
        const uint32_t first = base + static_cast<uint32_t>(scan - count);
        const uint32_t total = static_cast<uint32_t>(__shfl_sync(0xffffffffu, scan, kWarp - 1));
        // The step's values into the stage, or (too many for it) read where they are.
        const uint8_t* values = rowValues;  // row-relative byte b of the values at values + b
        if (total > 0) {
            uint32_t begin, end;
            bitmapValueBytes<F>(base, base + total, groupShift, begin, end);
            const uintptr_t from = reinterpret_cast<uintptr_t>(rowValues + begin) & ~uintptr_t{15};
            const uintptr_t to = (reinterpret_cast<uintptr_t>(rowValues + end) + 15) & ~uintptr_t{15};
            const int chunks = static_cast<int>((to - from) / 16);
            if (chunks * 16 <= kBitmapStageBytes) {
                __syncwarp();  // the last step's rounds are done with the stage
                const uint4* src = reinterpret_cast<const uint4*>(from);
                for (int q = lane; q < chunks; q += kWarp) stage[q] = __ldcs(src + q);
                __syncwarp();
                values = reinterpret_cast<const uint8_t*>(stage) - (from - reinterpret_cast<uintptr_t>(rowValues));
            }
        }
        base += total;
        const int n = words - w0 < kWarp ? words - w0 : kWarp;
#pragma unroll 4
        for (int j = 0; j < n; ++j) {
            const uint64_t word = __shfl_sync(0xffffffffu, mine, j);
            const uint32_t k = __shfl_sync(0xffffffffu, first, j) + __popcll(word & below);
            const int set = static_cast<int>(word >> (2 * lane)) & 3;
            const int c = (w0 + j) * 64 + 2 * lane;
            if (c >= cols) continue;
            const float v0 = (set & 1) ? bitmapValue<F>(values, k, groupShift) : 0.0f;
            const float v1 = (set & 2) ? bitmapValue<F>(values, k + (set & 1), groupShift) : 0.0f;
            pair(c, set, v0, v1);
        }
    }
}

// Calls body.template operator()<F>() with the blob's value format (read from its header on
// the device): a kernel's one branch on the format, uniform over the grid.
template <class Body>
__device__ __forceinline__ void dispatchBitmapFormat(const uint8_t* header, Body body)
{
    switch (static_cast<SparseValues>(header[12])) {
    case SparseValues::F32: body.template operator()<SparseValues::F32>(); break;
    case SparseValues::F16: body.template operator()<SparseValues::F16>(); break;
    case SparseValues::BF16: body.template operator()<SparseValues::BF16>(); break;
    case SparseValues::Int8: body.template operator()<SparseValues::Int8>(); break;
    case SparseValues::Int4: body.template operator()<SparseValues::Int4>(); break;
    }
}

// log2 of the blob's group (0 for float values).
__device__ __forceinline__ int bitmapGroupShift(const uint8_t* header)
{
    const uint32_t group = *reinterpret_cast<const uint32_t*>(header + 16);
    return group ? 31 - __clz(static_cast<int>(group)) : 0;
}

}  // namespace spillway::gpu::cuda
