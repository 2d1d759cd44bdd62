#pragma once
// Symmetric group quantization (thesis §"group quantization"): each run of `group` consecutive
// values of a row shares one fp16 scale s = max|w| / qmax (qmax = 127 for int8, 7 for int4);
// a value is stored as q = round(w / s) in [-qmax, qmax] and read back as s * q.
//
// Layout of `n` quantized values (one matrix row, or the packed non-zeros of a sparse row):
// ceil(n / group) groups, each [fp16 scale, 2 bytes LE][codes], no padding. int8 codes are one
// byte each; int4 codes are two's-complement nibbles, two per byte, low nibble first (an odd
// count leaves the last high nibble 0). The last group holds n % group values when that is not 0.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"

namespace spillway::compress {

// bits: 8 or 4; group: 32, 64 or 128.
bool validQuantParams(int bits, int group);

// Bytes of `n` values quantized with (bits, group) in the layout above.
size_t quantizedBytes(int bits, int group, int64_t n);

// Quantizes `n` finite values into `out` (quantizedBytes(bits, group, n) bytes).
void quantizeValues(const float* v, int64_t n, int bits, int group, uint8_t* out);

// Quantizes one group of len <= 128 values: writes its fp16 scale and its codes (one per value).
void quantizeGroup(const float* v, int len, int bits, uint16_t* scale, int8_t* codes);

// Inverse of quantizeValues: out[i] = scale * q for i in [0, n).
void dequantizeValues(const uint8_t* packed, int64_t n, int bits, int group, float* out);

// A dense group-quantized matrix, rows stored one after the other.
struct QuantizedMatrix {
    int bits = 8;
    int group = 64;
    int64_t rows = 0;
    int64_t cols = 0;
    std::vector<uint8_t> data;  // rows * rowBytes(): per row, groups of [fp16 scale][codes]

    size_t rowBytes() const { return quantizedBytes(bits, group, cols); }
    const uint8_t* row(int64_t r) const { return data.data() + static_cast<size_t>(r) * rowBytes(); }
    size_t bytes() const { return data.size(); }
};

// w: (rows, cols) row-major, finite. InvalidArgument for bad bits/group/shape or non-finite w.
Result<QuantizedMatrix> quantize(const float* w, int64_t rows, int64_t cols, int bits, int group);

// out: cols floats.
void dequantizeRow(const QuantizedMatrix& m, int64_t row, float* out);

}  // namespace spillway::compress
