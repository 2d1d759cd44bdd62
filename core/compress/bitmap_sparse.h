#pragma once
// ENDOR bitmap sparse format (ENDOR §4.1, Alg. 1-2): per row, a bitmap of `cols` bits
// (1 = non-zero) and that row's non-zero values packed in column order. Per-row offsets let any
// row range be decoded or multiplied on its own, so the runtime can split rows across threads.
//
// Values are fp32, fp16, bf16, or group-quantized int8/int4 (the joint pruning + quantization of
// ENDOR §4.2): the groups of a quantized row run over its packed non-zeros, `group` non-zeros per
// fp16 scale, in the layout of group_quant.h. A quantized non-zero whose code rounds to 0 is a
// zero of the quantized matrix, so it is stored as a zero (bit 0) and the row re-quantized without
// it: every stored code is non-zero. Float formats keep every non-zero of `dense` (an fp16
// rounding that underflows to ±0 keeps its bit).
//
// Serialized blob: the layout of gpu/sparse_format.h (DType::BitmapSparse), repeated here:
// (little-endian; every section starts at a multiple of 64 bytes, padding zero):
//   header, 64 bytes:
//     0  char[8] magic "SPWBSM1\0"     8  u32 version = 1      12 u8 format, u8[3] zero
//     16 u32 group (0 for float formats)                        20 u32 zero
//     24 u64 rows    32 u64 cols    40 u64 valuesBytes    48 u64 totalBytes    56 u64 zero
//   row offsets: (rows + 1) x u64, rowOffsets[0] = 0, non-decreasing, last = valuesBytes
//   bitmap:      rows x bitmapRowBytes (= ceil(cols / 64) * 8); bits past cols are 0
//   values:      valuesBytes; row r's bytes are [rowOffsets[r], rowOffsets[r+1]) and their size
//                must equal packedValueBytes(format, group, popcount(bitmap row r))
//   totalBytes = values section start + valuesBytes rounded up to 64 = the blob's size.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/sparse_format.h"

namespace spillway::compress {

// The value formats of gpu/sparse_format.h (numbers stored on disk).
using ValueFormat = gpu::SparseValues;
inline const char* valueFormatName(ValueFormat f) { return gpu::sparseValuesName(f); }
using gpu::isQuantized;
using gpu::packedValueBytes;
using gpu::quantBits;

struct BitmapSparseMatrix {
    ValueFormat format = ValueFormat::F16;
    int group = 0;                     // non-zeros per scale (32/64/128) when quantized, else 0
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<uint64_t> rowOffsets;  // rows + 1; row r's values: values[rowOffsets[r], [r+1])
    std::vector<uint8_t> bitmap;       // (rows, bitmapRowBytes()); column c of a row is bit c % 8
                                       // of byte c / 8 (1 = non-zero)
    std::vector<uint8_t> values;       // per row, its non-zeros in column order, encoded per format

    int64_t bitmapRowBytes() const { return (cols + 63) / 64 * 8; }
    const uint8_t* bitmapRow(int64_t r) const { return bitmap.data() + r * bitmapRowBytes(); }
    const uint8_t* rowValues(int64_t r) const { return values.data() + rowOffsets[r]; }
    int64_t rowNonZeros(int64_t r) const;
    int64_t nonZeros() const;
    // In-memory size: offsets + bitmap + values (the serialized blob adds 64-byte header/padding).
    size_t bytes() const { return rowOffsets.size() * 8 + bitmap.size() + values.size(); }
};

// dense: (rows, cols) row-major, finite; its zeros define the sparsity. group: 32, 64 or 128
// for Int8/Int4, ignored (stored as 0) otherwise. InvalidArgument on bad arguments.
Result<BitmapSparseMatrix> encode(const float* dense, int64_t rows, int64_t cols,
                                  ValueFormat format, int group = 64);

// The matrix as the backends see a blob (pointers into m; valid while m lives unchanged).
gpu::BitmapSparseView viewOf(const BitmapSparseMatrix& m);

// Writes row `row` as cols floats (zeros included). Rows decode independently.
void decodeRow(const BitmapSparseMatrix& m, int64_t row, float* out);
// The whole matrix, (rows, cols) row-major.
std::vector<float> decode(const BitmapSparseMatrix& m);

size_t serializedBytes(const BitmapSparseMatrix& m);
std::vector<uint8_t> serialize(const BitmapSparseMatrix& m);
// Checks every size, offset and count before use: ModelFileInvalid on a truncated or corrupt
// blob. `what` names the blob (file and tensor) in the error message.
Result<BitmapSparseMatrix> deserialize(const uint8_t* data, size_t size,
                                       const std::string& what = "bitmap sparse tensor");

}  // namespace spillway::compress
