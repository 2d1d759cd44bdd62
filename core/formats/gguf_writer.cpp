// GGUF v3 writer: header and tensor table built in memory, tensor data streamed from the fill
// callbacks one tensor at a time, all through an AtomicFile (temp file + rename).

#include "core/formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <set>

#include "storage/atomic_file.h"

namespace spillway::gguf {

namespace {

constexpr int kMaxArrayDepth = 8;  // the reader refuses deeper nesting
constexpr size_t kMaxDims = 4;

class HeaderBuffer {
public:
    template <class T>
    void put(T v)
    {
        const size_t at = m_bytes.size();
        m_bytes.resize(at + sizeof(T));
        std::memcpy(m_bytes.data() + at, &v, sizeof(T));
    }
    void putString(const std::string& s)
    {
        put<uint64_t>(s.size());
        m_bytes.insert(m_bytes.end(), s.begin(), s.end());
    }
    const std::vector<uint8_t>& bytes() const { return m_bytes; }

private:
    std::vector<uint8_t> m_bytes;
};

// Checks that `v` holds the alternative its type calls for, in range. Returns a problem or "".
std::string checkValue(const Value& v, int depth)
{
    const auto uintFits = [&](uint64_t max) -> std::string {
        const auto* u = std::get_if<uint64_t>(&v.v);
        if (!u) return std::string("a ") + valueTypeName(v.type) + " must hold uint64_t";
        if (*u > max) return std::to_string(*u) + " does not fit in " + valueTypeName(v.type);
        return {};
    };
    const auto intFits = [&](int64_t min, int64_t max) -> std::string {
        const auto* i = std::get_if<int64_t>(&v.v);
        if (!i) return std::string("a ") + valueTypeName(v.type) + " must hold int64_t";
        if (*i < min || *i > max) {
            return std::to_string(*i) + " does not fit in " + valueTypeName(v.type);
        }
        return {};
    };
    switch (v.type) {
    case ValueType::UInt8: return uintFits(UINT8_MAX);
    case ValueType::UInt16: return uintFits(UINT16_MAX);
    case ValueType::UInt32: return uintFits(UINT32_MAX);
    case ValueType::UInt64: return uintFits(UINT64_MAX);
    case ValueType::Int8: return intFits(INT8_MIN, INT8_MAX);
    case ValueType::Int16: return intFits(INT16_MIN, INT16_MAX);
    case ValueType::Int32: return intFits(INT32_MIN, INT32_MAX);
    case ValueType::Int64: return intFits(INT64_MIN, INT64_MAX);
    case ValueType::Float32:
    case ValueType::Float64:
        return std::holds_alternative<double>(v.v) ? "" : "a float must hold double";
    case ValueType::Bool: return std::holds_alternative<bool>(v.v) ? "" : "a bool must hold bool";
    case ValueType::String:
        return std::holds_alternative<std::string>(v.v) ? "" : "a string must hold std::string";
    case ValueType::Array: {
        const Array* a = v.asArray();
        if (!a) return "an array must hold a non-null shared_ptr<Array>";
        if (depth >= kMaxArrayDepth) {
            return "arrays nest deeper than " + std::to_string(kMaxArrayDepth) + " levels";
        }
        for (size_t i = 0; i < a->values.size(); ++i) {
            const Value& e = a->values[i];
            if (e.type != a->elementType) {
                return "array element " + std::to_string(i) + " has type " +
                       valueTypeName(e.type) + " in an array of " +
                       valueTypeName(a->elementType);
            }
            std::string problem = checkValue(e, depth + 1);
            if (!problem.empty()) return "array element " + std::to_string(i) + ": " + problem;
        }
        return {};
    }
    }
    return "unknown value type " + std::to_string(static_cast<uint32_t>(v.type));
}

void putValue(HeaderBuffer& out, const Value& v)  // v has passed checkValue
{
    switch (v.type) {
    case ValueType::UInt8: out.put(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UInt16: out.put(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UInt32: out.put(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UInt64: out.put(std::get<uint64_t>(v.v)); break;
    case ValueType::Int8: out.put(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
    case ValueType::Int16: out.put(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
    case ValueType::Int32: out.put(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case ValueType::Int64: out.put(std::get<int64_t>(v.v)); break;
    case ValueType::Float32: out.put(static_cast<float>(std::get<double>(v.v))); break;
    case ValueType::Float64: out.put(std::get<double>(v.v)); break;
    case ValueType::Bool: out.put(static_cast<uint8_t>(std::get<bool>(v.v) ? 1 : 0)); break;
    case ValueType::String: out.putString(std::get<std::string>(v.v)); break;
    case ValueType::Array: {
        const Array* a = v.asArray();
        out.put(static_cast<uint32_t>(a->elementType));
        out.put(static_cast<uint64_t>(a->values.size()));
        for (const Value& e : a->values) putValue(out, e);
        break;
    }
    }
}

uint64_t padTo(uint64_t n, uint64_t alignment) { return (alignment - n % alignment) % alignment; }

struct Layout {
    std::vector<uint64_t> offsets;  // relative to the data section
    std::vector<uint64_t> bytes;
};

}  // namespace

Writer::Writer(uint64_t alignment) : m_alignment(alignment) {}

void Writer::setValue(std::string key, Value v)
{
    for (KeyValue& kv : m_kv) {
        if (kv.key == key) {
            kv.value = std::move(v);
            return;
        }
    }
    m_kv.push_back(KeyValue{std::move(key), std::move(v)});
}

void Writer::setUInt8(std::string key, uint8_t v)
{
    setValue(std::move(key), Value::ofUInt(ValueType::UInt8, v));
}
void Writer::setInt8(std::string key, int8_t v)
{
    setValue(std::move(key), Value::ofInt(ValueType::Int8, v));
}
void Writer::setUInt16(std::string key, uint16_t v)
{
    setValue(std::move(key), Value::ofUInt(ValueType::UInt16, v));
}
void Writer::setInt16(std::string key, int16_t v)
{
    setValue(std::move(key), Value::ofInt(ValueType::Int16, v));
}
void Writer::setUInt32(std::string key, uint32_t v)
{
    setValue(std::move(key), Value::ofUInt(ValueType::UInt32, v));
}
void Writer::setInt32(std::string key, int32_t v)
{
    setValue(std::move(key), Value::ofInt(ValueType::Int32, v));
}
void Writer::setUInt64(std::string key, uint64_t v)
{
    setValue(std::move(key), Value::ofUInt(ValueType::UInt64, v));
}
void Writer::setInt64(std::string key, int64_t v)
{
    setValue(std::move(key), Value::ofInt(ValueType::Int64, v));
}
void Writer::setFloat32(std::string key, float v)
{
    setValue(std::move(key), Value::ofFloat(ValueType::Float32, v));
}
void Writer::setFloat64(std::string key, double v)
{
    setValue(std::move(key), Value::ofFloat(ValueType::Float64, v));
}
void Writer::setBool(std::string key, bool v) { setValue(std::move(key), Value::ofBool(v)); }
void Writer::setString(std::string key, std::string v)
{
    setValue(std::move(key), Value::ofString(std::move(v)));
}

void Writer::setStringArray(std::string key, std::vector<std::string> v)
{
    std::vector<Value> values;
    values.reserve(v.size());
    for (std::string& s : v) values.push_back(Value::ofString(std::move(s)));
    setValue(std::move(key), Value::ofArray(ValueType::String, std::move(values)));
}

void Writer::setFloat32Array(std::string key, std::vector<float> v)
{
    std::vector<Value> values;
    values.reserve(v.size());
    for (float f : v) values.push_back(Value::ofFloat(ValueType::Float32, f));
    setValue(std::move(key), Value::ofArray(ValueType::Float32, std::move(values)));
}

void Writer::setInt32Array(std::string key, std::vector<int32_t> v)
{
    std::vector<Value> values;
    values.reserve(v.size());
    for (int32_t i : v) values.push_back(Value::ofInt(ValueType::Int32, i));
    setValue(std::move(key), Value::ofArray(ValueType::Int32, std::move(values)));
}

void Writer::addTensor(std::string name, gpu::DType type, std::vector<int64_t> dims, FillFn fill)
{
    m_tensors.push_back(PendingTensor{std::move(name), type, std::move(dims), std::move(fill)});
}

Status Writer::write(const std::string& path) const
{
    const auto invalidArg = [&](const std::string& problem) {
        return makeError(ErrorCode::InvalidArgument, path + ": " + problem);
    };
    const uint64_t a = m_alignment;
    if (a == 0 || a > (uint64_t{1} << 31) || (a & (a - 1)) != 0) {
        return invalidArg("alignment " + std::to_string(a) +
                          " is not a power of two from 1 to 2^31");
    }
    try {
        // Metadata, with general.alignment describing the layout this writer produces.
        std::vector<const KeyValue*> kvs;
        const KeyValue alignmentKv{"general.alignment",
                                   Value::ofUInt(ValueType::UInt32, m_alignment)};
        bool alignmentSet = false;
        for (const KeyValue& kv : m_kv) {
            const bool isAlignment = kv.key == alignmentKv.key;
            alignmentSet = alignmentSet || isAlignment;
            kvs.push_back(isAlignment ? &alignmentKv : &kv);
            const std::string problem = checkValue(kv.value, 0);
            if (!problem.empty()) {
                return invalidArg("metadata " + detail::quoted(kv.key) + ": " + problem);
            }
        }
        if (!alignmentSet) kvs.insert(kvs.begin(), &alignmentKv);

        // Tensors: names, shapes, sizes and offsets.
        Layout layout;
        std::set<std::string_view> names;
        uint64_t dataBytes = 0;
        for (const PendingTensor& t : m_tensors) {
            const std::string name = "tensor " + detail::quoted(t.name);
            if (t.name.empty()) return invalidArg("a tensor has an empty name");
            if (!names.insert(t.name).second) return invalidArg("duplicate " + name);
            if (t.dims.empty() || t.dims.size() > kMaxDims) {
                return invalidArg(name + " has " + std::to_string(t.dims.size()) +
                                  " dimensions (must be 1 to 4)");
            }
            if (!t.fill) return invalidArg(name + " has no fill function");
            if (t.type == gpu::DType::BitmapSparse)
                return invalidArg(name + " is bitmap sparse, which GGUF cannot hold (write a model package)");
            if (t.type == gpu::DType::Q8_G64)
                return invalidArg(name + " is llama2.c's int8 groups of 64, which GGUF cannot hold");
            const auto& traits = gpu::dtypeTraits(t.type);
            int64_t elements = 1;
            for (int64_t d : t.dims) {
                if (d < 1) return invalidArg(name + " has a dimension of " + std::to_string(d));
                if (__builtin_mul_overflow(elements, d, &elements)) {
                    return invalidArg(name + " has too many elements");
                }
            }
            if (t.dims[0] % traits.blockSize != 0) {
                return invalidArg(name + " (" + traits.name + ") has " +
                                  std::to_string(t.dims[0]) +
                                  " columns, not a multiple of its block size " +
                                  std::to_string(traits.blockSize));
            }
            uint64_t bytes = 0;
            const auto blocks = static_cast<uint64_t>(elements / traits.blockSize);
            if (__builtin_mul_overflow(blocks, uint64_t(traits.blockBytes), &bytes) ||
                bytes > std::numeric_limits<size_t>::max() ||
                __builtin_add_overflow(dataBytes, padTo(dataBytes, a), &dataBytes)) {
                return invalidArg(name + " is too large");
            }
            layout.offsets.push_back(dataBytes);
            layout.bytes.push_back(bytes);
            if (__builtin_add_overflow(dataBytes, bytes, &dataBytes)) {
                return invalidArg(name + " is too large");
            }
        }

        // Header: magic, version, counts, metadata, tensor infos.
        HeaderBuffer header;
        header.put<uint32_t>(0x46554747);  // "GGUF" little-endian
        header.put<uint32_t>(3);
        header.put<uint64_t>(m_tensors.size());
        header.put<uint64_t>(kvs.size());
        for (const KeyValue* kv : kvs) {
            header.putString(kv->key);
            header.put(static_cast<uint32_t>(kv->value.type));
            putValue(header, kv->value);
        }
        for (size_t i = 0; i < m_tensors.size(); ++i) {
            const PendingTensor& t = m_tensors[i];
            header.putString(t.name);
            header.put(static_cast<uint32_t>(t.dims.size()));
            for (int64_t d : t.dims) header.put(static_cast<uint64_t>(d));
            header.put(ggmlFromDtype(t.type));
            header.put(layout.offsets[i]);
        }

        auto created = storage::AtomicFile::create(path);
        if (!created) return created.error();
        storage::AtomicFile out = std::move(created).value();
        SPILLWAY_TRY(out.write(header.bytes().data(), header.bytes().size()));
        SPILLWAY_TRY(out.writeZeros(padTo(out.written(), a)));
        const uint64_t dataStart = out.written();

        // Data: one tensor at a time through one reused buffer, each padded to the alignment.
        std::vector<uint8_t> buffer;
        for (size_t i = 0; i < m_tensors.size(); ++i) {
            const size_t bytes = layout.bytes[i];
            buffer.resize(bytes);
            std::fill(buffer.begin(), buffer.end(), uint8_t{0});
            try {
                m_tensors[i].fill(std::span<uint8_t>(buffer.data(), bytes));
            } catch (const std::exception& e) {
                return makeError(ErrorCode::Internal,
                                 path + ": producing tensor " + detail::quoted(m_tensors[i].name) +
                                     " failed: " + detail::quoted(e.what()));
            } catch (...) {
                return makeError(ErrorCode::Internal, path + ": producing tensor " +
                                                          detail::quoted(m_tensors[i].name) +
                                                          " failed with an unknown exception");
            }
            if (out.written() - dataStart != layout.offsets[i]) {
                return makeError(ErrorCode::Internal, path + ": tensor layout mismatch");
            }
            SPILLWAY_TRY(out.write(buffer.data(), bytes));
            SPILLWAY_TRY(out.writeZeros(padTo(out.written(), a)));
        }
        return out.commit();
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory writing the GGUF file");
    }
}

}  // namespace spillway::gguf
