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
};
inline constexpr int kDTypeCount = 12;

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
    };
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
