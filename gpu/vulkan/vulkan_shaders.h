#pragma once
// The SPIR-V of the backend's compute shaders (shaders/*.comp), compiled by glslc at build time
// and embedded here. One entry per op; Rope has two builds (see RopeF64).

#include <cstdint>
#include <span>

namespace spillway::gpu::vulkan {

enum class Shader : int {
    QuantizeQ8,
    MatvecFloat,
    MatvecQuant,
    MatvecFloatSubgroups,  // the same, summing with subgroup arithmetic where the device has it
    MatvecQuantSubgroups,
    GetRow,
    Rmsnorm,
    Layernorm,
    Rope,     // cos / sin in float (devices without 64-bit floats)
    RopeF64,  // cos / sin in double, within a float ulp of the CPU device's
    StoreKv,
    Attention,
    Swiglu,
    Add,
    Pointwise,
    MatvecBitmap,  // BitmapSparse blobs: matvec, and getRow's row decode
    ScatterRows,   // the neuron cache's ops
    RowSum,
    QuantizeQ8K,            // the K-quants' x (super-blocks of 256)
    MatvecKQuant,           // Q4_K, Q5_K, Q6_K
    MatvecKQuantSubgroups,
    Matmul,                 // prompt batches: one weight matrix times a tile of tokens
    MatvecIq,               // Q2_K, Q3_K, IQ4_XS and the IQ3 / IQ2 / IQ1 types (x in Q8_K)
    MatvecIqSubgroups,
    Count
};
inline constexpr int kShaderCount = static_cast<int>(Shader::Count);

// The shader's SPIR-V words and its name (for error messages).
std::span<const uint32_t> shaderCode(Shader s);
const char* shaderName(Shader s);

}  // namespace spillway::gpu::vulkan
