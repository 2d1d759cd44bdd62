// The embedded SPIR-V: each .spv.inc is glslc's "-mfmt=c" output (a braced list of words),
// generated in the build tree by gpu/vulkan/CMakeLists.txt.

#include "gpu/vulkan/vulkan_shaders.h"

namespace spillway::gpu::vulkan {

namespace {

const uint32_t kQuantizeQ8[] =
#include "quantize_q8.spv.inc"
    ;
const uint32_t kMatvecFloat[] =
#include "matvec_float.spv.inc"
    ;
const uint32_t kMatvecQuant[] =
#include "matvec_quant.spv.inc"
    ;
const uint32_t kMatvecFloatSubgroups[] =
#include "matvec_float_sg.spv.inc"
    ;
const uint32_t kMatvecQuantSubgroups[] =
#include "matvec_quant_sg.spv.inc"
    ;
const uint32_t kGetRow[] =
#include "get_row.spv.inc"
    ;
const uint32_t kRmsnorm[] =
#include "rmsnorm.spv.inc"
    ;
const uint32_t kLayernorm[] =
#include "layernorm.spv.inc"
    ;
const uint32_t kRope[] =
#include "rope.spv.inc"
    ;
const uint32_t kRopeF64[] =
#include "rope_f64.spv.inc"
    ;
const uint32_t kStoreKv[] =
#include "store_kv.spv.inc"
    ;
const uint32_t kAttention[] =
#include "attention.spv.inc"
    ;
const uint32_t kSwiglu[] =
#include "swiglu.spv.inc"
    ;
const uint32_t kAdd[] =
#include "add.spv.inc"
    ;
const uint32_t kPointwise[] =
#include "pointwise.spv.inc"
    ;
const uint32_t kMatvecBitmap[] =
#include "matvec_bitmap.spv.inc"
    ;
const uint32_t kScatterRows[] =
#include "scatter_rows.spv.inc"
    ;
const uint32_t kRowSum[] =
#include "row_sum.spv.inc"
    ;
const uint32_t kQuantizeQ8K[] =
#include "quantize_q8k.spv.inc"
    ;
const uint32_t kMatvecKQuant[] =
#include "matvec_kquant.spv.inc"
    ;
const uint32_t kMatvecKQuantSubgroups[] =
#include "matvec_kquant_sg.spv.inc"
    ;
const uint32_t kMatmul[] =
#include "matmul.spv.inc"
    ;
const uint32_t kMatvecIq[] =
#include "matvec_iq.spv.inc"
    ;
const uint32_t kMatvecIqSubgroups[] =
#include "matvec_iq_sg.spv.inc"
    ;

struct Entry {
    const char* name;
    std::span<const uint32_t> code;
};

const Entry kShaders[kShaderCount] = {
    {"quantize_q8", kQuantizeQ8}, {"matvec_float", kMatvecFloat}, {"matvec_quant", kMatvecQuant},
    {"matvec_float_sg", kMatvecFloatSubgroups}, {"matvec_quant_sg", kMatvecQuantSubgroups},
    {"get_row", kGetRow},         {"rmsnorm", kRmsnorm},          {"layernorm", kLayernorm},
    {"rope", kRope},              {"rope_f64", kRopeF64},         {"store_kv", kStoreKv},
    {"attention", kAttention},    {"swiglu", kSwiglu},            {"add", kAdd},
    {"pointwise", kPointwise},    {"matvec_bitmap", kMatvecBitmap}, {"scatter_rows", kScatterRows},
    {"row_sum", kRowSum},         {"quantize_q8k", kQuantizeQ8K}, {"matvec_kquant", kMatvecKQuant},
    {"matvec_kquant_sg", kMatvecKQuantSubgroups}, {"matmul", kMatmul},
    {"matvec_iq", kMatvecIq},     {"matvec_iq_sg", kMatvecIqSubgroups},
};

}  // namespace

std::span<const uint32_t> shaderCode(Shader s) { return kShaders[static_cast<int>(s)].code; }

const char* shaderName(Shader s) { return kShaders[static_cast<int>(s)].name; }

}  // namespace spillway::gpu::vulkan
