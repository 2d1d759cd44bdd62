#pragma once
// Weight storage types the backends compute on. Activations are always float32.

#include <cstddef>
#include <cstdint>

namespace spillway::gpu {

// Values stored on disk (model packages, caches): never reuse a number.
enum class DType : uint8_t {
    F32 = 0,
    F16 = 1,
    BF16 = 2,
    Q8_0 = 3,  // blocks of 32: fp16 scale d, 32 x int8 q; value = d * q            (34 bytes)
    Q4_0 = 4,  // blocks of 32: fp16 scale d, 16 bytes; low nibbles are values 0..15,
               // high nibbles values 16..31; value = d * (nibble - 8)               (18 bytes)
    BitmapSparse = 5,  // a whole matrix as one ENDOR bitmap sparse blob (gpu/sparse_format.h):
                       // no fixed row size (rowBytes() is 0, rowStride unused); its header
                       // names the value format (fp16/bf16/fp32, or group-quantized int8/int4)
    // ggml's legacy and K-quant blocks, byte for byte as in GGUF files (ggml-common.h):
    Q4_1 = 6,   // blocks of 32: fp16 d, fp16 m, 16 bytes of nibbles (as Q4_0); value = d*q + m (20 bytes)
    Q5_0 = 7,   // blocks of 32: fp16 d, 4 bytes of high bits, 16 bytes of nibbles; d*(q - 16) (22 bytes)
    Q4_K = 8,   // super-blocks of 256: fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes
                // of nibbles                                                        (144 bytes)
    Q5_K = 9,   // as Q4_K plus 32 bytes of high bits                                (176 bytes)
    Q6_K = 10,  // super-blocks of 256: 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8
                // scales, fp16 d                                                     (210 bytes)
    // llama2.c export version 2 (the thesis' ReLU models): groups of 64 int8 values with one
    // fp32 scale, value = s * q; x is quantized the same way (groups of 64, scale max|x| / 127,
    // round half away from zero) and each group's dot product is an int32. Block layout here:
    // fp32 scale, then 64 x int8                                                   (68 bytes)
    Q8_G64 = 11,
    // The rest of GGUF's block types, byte for byte as ggml stores them (ggml-common.h of
    // llama.cpp; MXFP4 as in ik_llama.cpp / llama.cpp since 2025-08). K and IQ super-blocks are
    // 256 values; the IQ lattices (grids) are data: gpu/iq_grids.h.
    Q2_K = 12,     // 16 B 4-bit scale|min pairs, 64 B 2-bit quants, fp16 d, fp16 dmin          (84 bytes)
    Q3_K = 13,     // 32 B high bits, 64 B 2-bit quants, 12 B 6-bit scales, fp16 d            (110 bytes)
    Q5_1 = 14,     // blocks of 32: fp16 d, fp16 m, u32 high bits, 16 B nibbles; d*q + m        (24 bytes)
    IQ4_NL = 15,   // blocks of 32: fp16 d, 16 B nibbles indexing a 16-value non-linear table  (18 bytes)
    IQ4_XS = 16,   // fp16 d, u16 scales_h, 4 B scales_l, 128 B nibbles (IQ4_NL's table)     (136 bytes)
    IQ3_XXS = 17,  // fp16 d, 64 B grid indices (256 x 4 values), 32 B scales and signs       (98 bytes)
    IQ3_S = 18,    // fp16 d, 64 B grid indices (512 x 4), 8 B index high bits, 32 B signs, 4 B scales (110 bytes)
    IQ2_XXS = 19,  // fp16 d, 32 x u16: grid indices (256 x 8 values), signs and scales       (66 bytes)
    IQ2_XS = 20,   // fp16 d, 32 x u16 (9-bit index into 512 x 8, 7-bit signs), 8 B scales    (74 bytes)
    IQ2_S = 21,    // fp16 d, 32 B indices, 32 B signs, 8 B index high bits, 8 B scales (1024 x 8) (82 bytes)
    IQ1_S = 22,    // fp16 d, 32 B indices, 8 x u16 (index high bits, scale, delta sign) (2048 x 8) (50 bytes)
    IQ1_M = 23,    // 32 B indices, 16 B index high bits + delta signs, 8 B scales with fp16 d spread in (56 bytes)
    MXFP4 = 24,    // blocks of 32: E8M0 exponent, 16 B of FP4 (E2M1) nibbles as Q4_0's order  (17 bytes)
};
inline constexpr int kDTypeCount = 25;

struct DTypeTraits {
    const char* name;
    int blockSize;   // values per block
    int blockBytes;  // bytes per block
};

inline const DTypeTraits& dtypeTraits(DType t)
{
    static constexpr DTypeTraits table[] = {
        {"F32", 1, 4}, {"F16", 1, 2}, {"BF16", 1, 2}, {"Q8_0", 32, 34}, {"Q4_0", 32, 18},
        {"BITMAP", 1, 0},  {"Q4_1", 32, 20},  {"Q5_0", 32, 22}, {"Q4_K", 256, 144}, {"Q5_K", 256, 176},
        {"Q6_K", 256, 210}, {"Q8_G64", 64, 68},
        {"Q2_K", 256, 84}, {"Q3_K", 256, 110}, {"Q5_1", 32, 24}, {"IQ4_NL", 32, 18}, {"IQ4_XS", 256, 136},
        {"IQ3_XXS", 256, 98}, {"IQ3_S", 256, 110}, {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},
        {"IQ2_S", 256, 82}, {"IQ1_S", 256, 50}, {"IQ1_M", 256, 56}, {"MXFP4", 32, 17},
    };
    static_assert(sizeof(table) / sizeof(table[0]) == kDTypeCount);
    return table[static_cast<int>(t)];
}

inline const char* dtypeName(DType t) { return dtypeTraits(t).name; }

// Bytes of one row of `cols` values; cols must be a multiple of the block size (0 for
// BitmapSparse, whose rows differ in size).
inline size_t rowBytes(DType t, int64_t cols)
{
    const auto& tr = dtypeTraits(t);
    return static_cast<size_t>(cols / tr.blockSize) * static_cast<size_t>(tr.blockBytes);
}

// fp16 / bf16 <-> fp32 conversions (portable; the kernels use F16C where present).
float fp16ToFp32(uint16_t h);
uint16_t fp32ToFp16(float f);  // round to nearest even
inline float bf16ToFp32(uint16_t h)
{
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
uint16_t fp32ToBf16(float f);  // round to nearest even, NaN stays NaN

}  // namespace spillway::gpu
