#pragma once
// Row encoders and decoders for every dense weight type of gpu/dtype.h, in the stored byte
// layouts (ggml's blocks for Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K and Q6_K, byte for byte as in
// GGUF files; llama2.c export v2 groups for Q8_G64). Used by make-synthetic, the pruner's
// decoding and the tests.
//
// The quantizers are straightforward, not llama.cpp's: per (sub-)block the scale (and min) come
// from the block's max and min, and values are rounded to nearest. For the K-quants the 6-bit
// (Q4_K, Q5_K) or 8-bit (Q6_K) sub-block scales are themselves rounded against the super-block
// scale, and each value is then rounded against the scale actually stored. llama.cpp's searches
// for better scales are not done, so its files of the same type are somewhat more accurate.
//
// The decoders use ggml's float arithmetic (dequantize_row_* in ggml-quants.c): e.g. a Q4_K
// value is (d * scale) * q - dmin * min, a Q6_K value (d * scale) * (q - 32).

#include <cstdint>

#include "gpu/dtype.h"

namespace spillway::gguf {

// True for every dense type (not BitmapSparse): dequantizeRow decodes it.
bool hasRowCodec(gpu::DType type);
// True for F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and Q8_G64: quantizeRow
// writes them. ggml's other block types (Q2_K, Q3_K, Q5_1, the IQ types, MXFP4) are read, not
// written: their files come from llama.cpp's quantizer (the IQ types need its grid searches).
bool hasRowEncoder(gpu::DType type);

// Encodes n finite values (n a multiple of the type's block size) into gpu::rowBytes(type, n)
// bytes at out. Does nothing for a type without an encoder.
void quantizeRow(gpu::DType type, const float* x, int64_t n, uint8_t* out);

// Decodes n values (n a multiple of the type's block size) of a row stored at `in` (ggml's other
// block types through gpu::decodeRow, the CPU backend's decoders).
void dequantizeRow(gpu::DType type, const uint8_t* in, int64_t n, float* out);

}  // namespace spillway::gguf
