#pragma once
// The ENDOR bitmap sparse weight blob (ENDOR §4.1, Alg. 1-2), the form of DType::BitmapSparse:
// per row, a bitmap of `cols` bits (1 = non-zero) and that row's non-zero values packed in
// column order; per-row offsets let any row range be decoded or multiplied on its own.
//
// Values are fp32, fp16, bf16, or group-quantized int8/int4 (ENDOR §4.2's joint pruning and
// quantization): the groups of a quantized row run over its packed non-zeros, `group` non-zeros
// per fp16 scale, each group [fp16 scale][codes] (int8: a byte per code; int4: two's-complement
// nibbles, low nibble first, an odd count leaving the last high nibble 0).
//
// Blob (little-endian; every section starts at a multiple of 64 bytes, padding zero):
//   header, 64 bytes:
//     0  char[8] magic "SPWBSM1\0"     8  u32 version = 1      12 u8 format, u8[3] zero
//     16 u32 group (0 for float formats)                        20 u32 zero
//     24 u64 rows    32 u64 cols    40 u64 valuesBytes    48 u64 totalBytes    56 u64 zero
//   row offsets: (rows + 1) x u64, rowOffsets[0] = 0, non-decreasing, last = valuesBytes
//   bitmap:      rows x bitmapRowBytes (= ceil(cols / 64) * 8); bits past cols are 0
//   values:      valuesBytes; row r's bytes are [rowOffsets[r], rowOffsets[r+1]) and their size
//                must equal packedValueBytes(format, group, popcount(bitmap row r))
//   totalBytes = values section start + valuesBytes rounded up to 64 = the blob's size.
//
// A blob comes from a model file: checkBitmapBlob() must accept it before a view is made of it
// (the kernels trust the view). core/compress encodes and decodes; the backends compute on it.

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway::gpu {

// Values stored on disk: never reuse a number.
enum class SparseValues : uint8_t {
    F32 = 0,
    F16 = 1,
    BF16 = 2,
    Int8 = 3,  // group-quantized over the packed non-zeros
    Int4 = 4,
};

const char* sparseValuesName(SparseValues f);  // "f32", "f16", "bf16", "int8", "int4"
inline bool isQuantized(SparseValues f) { return f == SparseValues::Int8 || f == SparseValues::Int4; }
inline int quantBits(SparseValues f) { return f == SparseValues::Int8 ? 8 : 4; }

// Bytes of `n` values group-quantized with (bits, group): ceil(n / group) groups, each an fp16
// scale and its codes.
size_t groupQuantizedBytes(int bits, int group, int64_t n);
// Bytes of one row's `nnz` packed values.
size_t packedValueBytes(SparseValues f, int group, int64_t nnz);

// A checked blob's sections, as pointers into it.
struct BitmapSparseView {
    SparseValues format = SparseValues::F16;
    int group = 0;
    int64_t rows = 0;
    int64_t cols = 0;
    const uint64_t* rowOffsets = nullptr;  // rows + 1
    const uint8_t* bitmap = nullptr;       // (rows, bitmapRowBytes())
    const uint8_t* values = nullptr;
    uint64_t valuesBytes = 0;

    int64_t bitmapRowBytes() const { return (cols + 63) / 64 * 8; }
};

inline constexpr size_t kBitmapBlobHeaderBytes = 64;

struct BitmapBlobSections {
    size_t offsets = 0, bitmap = 0, values = 0, total = 0;  // byte offsets; total = blob size
};
// Inline, so that the GPU modules (which do not link spillway_gpu) place the sections alike.
inline BitmapBlobSections bitmapBlobSections(uint64_t rows, uint64_t cols, uint64_t valuesBytes)
{
    const auto alignUp = [](uint64_t n) { return static_cast<size_t>((n + 63) / 64 * 64); };
    BitmapBlobSections s;
    s.offsets = kBitmapBlobHeaderBytes;
    s.bitmap = s.offsets + alignUp((rows + 1) * 8);
    s.values = s.bitmap + alignUp(rows * ((cols + 63) / 64 * 8));
    s.total = s.values + alignUp(valuesBytes);
    return s;
}

// Writes the 64-byte header (the sections are the caller's).
void writeBitmapBlobHeader(uint8_t* out, SparseValues format, int group, uint64_t rows, uint64_t cols,
                           uint64_t valuesBytes);

// Every field, size, offset and count of the blob at p (size bytes) checked: "" when it is
// valid, else the problem in a few words. Reads the header, offsets, bitmap and (for quantized
// values) the scales; O(size).
std::string checkBitmapBlob(const uint8_t* p, size_t size);

// The view of a blob checkBitmapBlob() accepted (no checks here).
BitmapSparseView viewBitmapBlob(const void* blob);
// Writes row `row` as cols floats (zeros included; quantized values as scale * code).
void decodeBitmapSparseRow(const BitmapSparseView& w, int64_t row, float* out);
// The blob's size from its header (no checks here).
uint64_t bitmapBlobBytes(const void* blob);

}  // namespace spillway::gpu
