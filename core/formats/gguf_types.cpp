// GGUF vocabulary: ggml type ids and their block layouts, metadata value helpers.

#include "core/formats/gguf.h"

#include <cstdio>
#include <limits>

namespace spillway::gguf {

namespace {

// Indexed by ggml type id (values stored on disk by ggml: never renumbered). Ids that ggml
// retired (4, 5, 31..33, 36..38) have no entry. Block sizes in values, block bytes in bytes.
constexpr uint32_t kGgmlTypeCount = 40;
constexpr GgmlTypeInfo kGgmlTypes[kGgmlTypeCount] = {
    {"F32", 1, 4},        // 0
    {"F16", 1, 2},        // 1
    {"Q4_0", 32, 18},     // 2
    {"Q4_1", 32, 20},     // 3
    {nullptr, 0, 0},      // 4  (Q4_2, removed)
    {nullptr, 0, 0},      // 5  (Q4_3, removed)
    {"Q5_0", 32, 22},     // 6
    {"Q5_1", 32, 24},     // 7
    {"Q8_0", 32, 34},     // 8
    {"Q8_1", 32, 36},     // 9
    {"Q2_K", 256, 84},    // 10
    {"Q3_K", 256, 110},   // 11
    {"Q4_K", 256, 144},   // 12
    {"Q5_K", 256, 176},   // 13
    {"Q6_K", 256, 210},   // 14
    {"Q8_K", 256, 292},   // 15
    {"IQ2_XXS", 256, 66}, // 16
    {"IQ2_XS", 256, 74},  // 17
    {"IQ3_XXS", 256, 98}, // 18
    {"IQ1_S", 256, 50},   // 19
    {"IQ4_NL", 32, 18},   // 20
    {"IQ3_S", 256, 110},  // 21
    {"IQ2_S", 256, 82},   // 22
    {"IQ4_XS", 256, 136}, // 23
    {"I8", 1, 1},         // 24
    {"I16", 1, 2},        // 25
    {"I32", 1, 4},        // 26
    {"I64", 1, 8},        // 27
    {"F64", 1, 8},        // 28
    {"IQ1_M", 256, 56},   // 29
    {"BF16", 1, 2},       // 30
    {nullptr, 0, 0},      // 31 (Q4_0_4_4, removed from GGUF files)
    {nullptr, 0, 0},      // 32 (Q4_0_4_8, removed)
    {nullptr, 0, 0},      // 33 (Q4_0_8_8, removed)
    {"TQ1_0", 256, 54},   // 34
    {"TQ2_0", 256, 66},   // 35
    {nullptr, 0, 0},      // 36 (IQ4_NL_4_4, removed)
    {nullptr, 0, 0},      // 37 (IQ4_NL_4_8, removed)
    {nullptr, 0, 0},      // 38 (IQ4_NL_8_8, removed)
    {"MXFP4", 32, 17},    // 39
};

// ggml's type ids and the DType that reads each (gpu/dtype.h); a type with none is refused by
// name (Q8_1 and Q8_K are only x's forms inside ggml, TQ1_0 / TQ2_0 ternary, I8 .. F64 not weights).
struct GgmlDtype {
    uint32_t ggml;
    gpu::DType dtype;
};
constexpr GgmlDtype kGgmlDtypes[] = {
    {0, gpu::DType::F32},      {1, gpu::DType::F16},      {30, gpu::DType::BF16},    {8, gpu::DType::Q8_0},
    {2, gpu::DType::Q4_0},     {3, gpu::DType::Q4_1},     {6, gpu::DType::Q5_0},     {7, gpu::DType::Q5_1},
    {10, gpu::DType::Q2_K},    {11, gpu::DType::Q3_K},    {12, gpu::DType::Q4_K},    {13, gpu::DType::Q5_K},
    {14, gpu::DType::Q6_K},    {16, gpu::DType::IQ2_XXS}, {17, gpu::DType::IQ2_XS},  {18, gpu::DType::IQ3_XXS},
    {19, gpu::DType::IQ1_S},   {20, gpu::DType::IQ4_NL},  {21, gpu::DType::IQ3_S},   {22, gpu::DType::IQ2_S},
    {23, gpu::DType::IQ4_XS},  {29, gpu::DType::IQ1_M},   {39, gpu::DType::MXFP4},
};
constexpr uint32_t kGgmlF32 = 0;

}  // namespace

const GgmlTypeInfo* ggmlTypeInfo(uint32_t ggmlType)
{
    if (ggmlType >= kGgmlTypeCount || !kGgmlTypes[ggmlType].name) return nullptr;
    return &kGgmlTypes[ggmlType];
}

const char* ggmlTypeName(uint32_t ggmlType)
{
    const GgmlTypeInfo* info = ggmlTypeInfo(ggmlType);
    return info ? info->name : nullptr;
}

std::optional<gpu::DType> dtypeFromGgml(uint32_t ggmlType)
{
    for (const GgmlDtype& t : kGgmlDtypes)
        if (t.ggml == ggmlType) return t.dtype;
    return std::nullopt;
}

std::string supportedGgmlTypeNames()
{
    std::string names;
    for (const GgmlDtype& t : kGgmlDtypes) {
        if (!names.empty()) names += ", ";
        names += kGgmlTypes[t.ggml].name;
    }
    return names;
}

uint32_t ggmlFromDtype(gpu::DType t)
{
    // BitmapSparse and Q8_G64 (llama2.c's format) have no GGML type: the writer refuses them.
    for (const GgmlDtype& g : kGgmlDtypes)
        if (g.dtype == t) return g.ggml;
    return kGgmlF32;
}

const char* valueTypeName(ValueType t)
{
    switch (t) {
    case ValueType::UInt8: return "uint8";
    case ValueType::Int8: return "int8";
    case ValueType::UInt16: return "uint16";
    case ValueType::Int16: return "int16";
    case ValueType::UInt32: return "uint32";
    case ValueType::Int32: return "int32";
    case ValueType::Float32: return "float32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::UInt64: return "uint64";
    case ValueType::Int64: return "int64";
    case ValueType::Float64: return "float64";
    }
    return "unknown";
}

// ---- Value -----------------------------------------------------------------------------------

std::optional<int64_t> Value::asInt() const
{
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
    if (const auto* u = std::get_if<uint64_t>(&v)) {
        if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(*u);
    }
    if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
    return std::nullopt;
}

std::optional<double> Value::asFloat() const
{
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
    return std::nullopt;
}

const std::string* Value::asString() const { return std::get_if<std::string>(&v); }

const Array* Value::asArray() const
{
    const auto* a = std::get_if<std::shared_ptr<Array>>(&v);
    return a ? a->get() : nullptr;
}

Value Value::ofArray(ValueType elementType, std::vector<Value> values)
{
    auto array = std::make_shared<Array>();
    array->elementType = elementType;
    array->values = std::move(values);
    return Value{ValueType::Array, std::move(array)};
}

bool operator==(const Value& a, const Value& b)
{
    if (a.type != b.type || a.v.index() != b.v.index()) return false;
    const Array* x = a.asArray();
    if (!x) return a.v == b.v;
    const Array* y = b.asArray();
    if (!y) return x == y;
    return x->elementType == y->elementType && x->values == y->values;
}

// ---- TensorInfo ------------------------------------------------------------------------------

int64_t TensorInfo::elements() const
{
    int64_t n = 1;
    for (int64_t d : dims) n *= d;  // the reader has checked that this cannot overflow
    return n;
}

int64_t TensorInfo::rows() const
{
    int64_t n = 1;
    for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
    return n;
}

namespace detail {

std::string quoted(std::string_view s)
{
    constexpr size_t kMaxShown = 80;
    std::string out = "'";
    for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    if (s.size() > kMaxShown) out += "...";
    out += "'";
    return out;
}

}  // namespace detail

}  // namespace spillway::gguf
