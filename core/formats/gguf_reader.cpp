// GGUF reader. Every count, length and offset in the file is checked against the bytes that are
// really there before it is used: nothing is allocated from a count that the file cannot back,
// all arithmetic on file values is overflow-checked, and every problem becomes one Error line
// "<path>: <problem>".

#include "core/formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <stdexcept>

#include "storage/mapped_file.h"

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes little-endian");

namespace spillway::gguf {

namespace {

constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, kv count
constexpr int kMaxArrayDepth = 8;                 // nested arrays deeper than this are refused
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxArrayReserve = 1 << 16;  // entries reserved up front per list
// Smallest possible encodings, to bound counts by the bytes left before allocating anything.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;               // key length, value type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, off

// Bytes of the smallest value of type t, or 0 for an unknown type.
uint64_t minValueBytes(uint32_t t)
{
    switch (static_cast<ValueType>(t)) {
    case ValueType::UInt8: case ValueType::Int8: case ValueType::Bool: return 1;
    case ValueType::UInt16: case ValueType::Int16: return 2;
    case ValueType::UInt32: case ValueType::Int32: case ValueType::Float32: return 4;
    case ValueType::UInt64: case ValueType::Int64: case ValueType::Float64: return 8;
    case ValueType::String: return 8;      // length, then the bytes
    case ValueType::Array: return 4 + 8;   // element type, count
    }
    return 0;
}

std::string magicText(const uint8_t* p)
{
    return detail::quoted(std::string_view(reinterpret_cast<const char*>(p), 4));
}

}  // namespace

// Reads one mapped file into a File. Declared a friend of File.
class Parser {
public:
    Parser(File& file, const uint8_t* data, uint64_t size)
        : m_file(file), m_path(file.m_path), m_data(data), m_size(size) {}

    Status parse()
    {
        SPILLWAY_TRY(parseHeader());
        SPILLWAY_TRY(parseMetadata());
        SPILLWAY_TRY(readAlignment());
        SPILLWAY_TRY(parseTensorInfos());
        SPILLWAY_TRY(validateTensors());
        return {};
    }

private:
    Error fail(ErrorCode code, const std::string& problem) const
    {
        return makeError(code, m_path + ": " + problem);
    }
    Error invalid(const std::string& problem) const
    {
        return fail(ErrorCode::ModelFileInvalid, problem);
    }

    // "metadata key 3 ('general.name') element 7 <field>": where we are, for messages.
    std::string where(const char* field) const
    {
        std::string s = m_where;
        for (int i = 0; i < m_depth; ++i) s += " element " + std::to_string(m_elementPath[i]);
        if (field && *field) s += std::string(s.empty() ? "" : " ") + field;
        return s;
    }

    uint64_t remaining() const { return m_size - m_pos; }

    Status need(uint64_t bytes, const char* field) const
    {
        if (bytes <= remaining()) return {};
        return invalid("truncated: " + where(field) + " needs " + std::to_string(bytes) +
                       " bytes at offset " + std::to_string(m_pos) + " but the file ends at " +
                       std::to_string(m_size));
    }

    template <class T>
    T take()  // only after need(sizeof(T))
    {
        T v;
        std::memcpy(&v, m_data + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return v;
    }

    template <class T>
    Result<T> read(const char* field)
    {
        SPILLWAY_TRY(need(sizeof(T), field));
        return take<T>();
    }

    Result<std::string> readString(const char* field)
    {
        auto length = read<uint64_t>(field);
        if (!length) return length.error();
        if (*length > remaining()) {
            return invalid("truncated: " + where(field) + " is a string of " +
                           std::to_string(*length) + " bytes at offset " + std::to_string(m_pos) +
                           " but the file ends at " + std::to_string(m_size));
        }
        std::string s(reinterpret_cast<const char*>(m_data + m_pos), *length);
        m_pos += *length;
        return s;
    }

    Status parseHeader()
    {
        if (m_size == 0) return invalid("empty file (0 bytes), not a GGUF model");
        if (m_size < 4) {
            return invalid("not a GGUF file (only " + std::to_string(m_size) + " bytes)");
        }
        if (std::memcmp(m_data, "GGUF", 4) != 0) {
            return invalid("not a GGUF file (magic " + magicText(m_data) + ")");
        }
        m_pos = 4;
        m_where = "header";
        SPILLWAY_TRY(need(4, "version"));
        const uint32_t version = take<uint32_t>();
        if (version == 1) {
            return fail(ErrorCode::UnsupportedModel,
                        "GGUF version 1 (the obsolete format with 32-bit counts) is not "
                        "supported; convert the model again with a current llama.cpp");
        }
        if (version == 0x02000000 || version == 0x03000000) {
            return fail(ErrorCode::UnsupportedModel, "big-endian GGUF files are not supported");
        }
        if (version == 0) return invalid("invalid GGUF version 0");
        if (version > 3) {
            return fail(ErrorCode::UnsupportedModel,
                        "GGUF version " + std::to_string(version) +
                            " is not supported (Spillway reads versions 2 and 3)");
        }
        m_file.m_version = version;
        SPILLWAY_TRY(need(kHeaderBytes - 8, "tensor and metadata counts"));
        m_tensorCount = take<uint64_t>();
        m_kvCount = take<uint64_t>();
        // Each entry needs a minimum number of bytes: counts the file cannot hold are refused
        // here, before anything is allocated from them.
        if (m_kvCount > remaining() / kMinKvBytes) {
            return invalid("metadata count " + std::to_string(m_kvCount) +
                           " cannot fit in the " + std::to_string(remaining()) +
                           " bytes after the header");
        }
        if (m_tensorCount > remaining() / kMinTensorInfoBytes) {
            return invalid("tensor count " + std::to_string(m_tensorCount) +
                           " cannot fit in the " + std::to_string(remaining()) +
                           " bytes after the header");
        }
        return {};
    }

    Status parseMetadata()
    {
        m_file.m_meta = Metadata(m_file.m_path);
        m_file.m_meta.reserve(std::min<uint64_t>(m_kvCount, kMaxArrayReserve));
        for (uint64_t i = 0; i < m_kvCount; ++i) {
            m_where = "metadata key " + std::to_string(i);
            auto key = readString("name");
            if (!key) return key.error();
            m_where += " (" + detail::quoted(*key) + ")";
            auto type = read<uint32_t>("value type");
            if (!type) return type.error();
            auto value = readValue(*type, 0);
            if (!value) return value.error();
            const size_t first = m_file.m_meta.indexOf(*key);
            if (first != SIZE_MAX) {
                return invalid("duplicate metadata key " + detail::quoted(*key) + " (keys " +
                               std::to_string(first) + " and " + std::to_string(i) + ")");
            }
            m_file.m_meta.add(KeyValue{std::move(*key), std::move(*value)});
        }
        return {};
    }

    Result<Value> readValue(uint32_t typeId, int depth)
    {
        if (minValueBytes(typeId) == 0) {
            return invalid(where("") + " has unknown value type " + std::to_string(typeId));
        }
        const auto type = static_cast<ValueType>(typeId);
        switch (type) {
        case ValueType::UInt8: return number<uint8_t, uint64_t>(type);
        case ValueType::Int8: return number<int8_t, int64_t>(type);
        case ValueType::UInt16: return number<uint16_t, uint64_t>(type);
        case ValueType::Int16: return number<int16_t, int64_t>(type);
        case ValueType::UInt32: return number<uint32_t, uint64_t>(type);
        case ValueType::Int32: return number<int32_t, int64_t>(type);
        case ValueType::UInt64: return number<uint64_t, uint64_t>(type);
        case ValueType::Int64: return number<int64_t, int64_t>(type);
        case ValueType::Float32: return number<float, double>(type);
        case ValueType::Float64: return number<double, double>(type);
        case ValueType::Bool: {
            SPILLWAY_TRY(need(1, "bool"));
            const uint8_t b = take<uint8_t>();
            if (b > 1) {
                return invalid(where("") + " is a bool of value " + std::to_string(b) +
                               " (must be 0 or 1)");
            }
            return Value::ofBool(b == 1);
        }
        case ValueType::String: {
            auto s = readString("string");
            if (!s) return s.error();
            return Value::ofString(std::move(*s));
        }
        case ValueType::Array: return readArray(depth);
        }
        return invalid(where("") + " has unknown value type " + std::to_string(typeId));
    }

    template <class Stored, class Held>
    Result<Value> number(ValueType type)
    {
        SPILLWAY_TRY(need(sizeof(Stored), valueTypeName(type)));
        return Value{type, static_cast<Held>(take<Stored>())};
    }

    Result<Value> readArray(int depth)
    {
        if (depth >= kMaxArrayDepth) {
            return invalid(where("") + " nests arrays deeper than " +
                           std::to_string(kMaxArrayDepth) + " levels");
        }
        auto elementType = read<uint32_t>("array element type");
        if (!elementType) return elementType.error();
        auto count = read<uint64_t>("array length");
        if (!count) return count.error();
        const uint64_t minBytes = minValueBytes(*elementType);
        if (minBytes == 0) {
            return invalid(where("") + " is an array of unknown value type " +
                           std::to_string(*elementType));
        }
        if (*count > remaining() / minBytes) {
            return invalid("truncated: " + where("") + " is an array of " +
                           std::to_string(*count) + " " +
                           valueTypeName(static_cast<ValueType>(*elementType)) +
                           " values at offset " + std::to_string(m_pos) +
                           " but the file ends at " + std::to_string(m_size));
        }
        std::vector<Value> values;
        // The count is bounded by the bytes left, but nested arrays could each reserve that much
        // before reading anything: reserve a little, then grow only with what is really read.
        values.reserve(std::min<uint64_t>(*count, kMaxArrayReserve));
        m_elementPath[depth] = 0;
        m_depth = depth + 1;
        for (uint64_t i = 0; i < *count; ++i) {
            m_elementPath[depth] = i;
            auto v = readValue(*elementType, depth + 1);
            if (!v) return v.error();
            values.push_back(std::move(*v));
        }
        m_depth = depth;
        return Value::ofArray(static_cast<ValueType>(*elementType), std::move(values));
    }

    Status readAlignment()
    {
        m_where.clear();
        const Value* v = m_file.find("general.alignment");
        if (!v) return {};
        const auto a = v->asInt();
        if (!a || v->type == ValueType::Bool) {
            return invalid(std::string("general.alignment has type ") + valueTypeName(v->type) +
                           ", expected uint32");
        }
        if (*a <= 0 || *a > INT64_C(0x80000000) || (*a & (*a - 1)) != 0) {
            return invalid("general.alignment is " + std::to_string(*a) +
                           " (must be a power of two from 1 to 2^31)");
        }
        m_file.m_alignment = static_cast<uint64_t>(*a);
        return {};
    }

    Status parseTensorInfos()
    {
        if (m_tensorCount > remaining() / kMinTensorInfoBytes) {
            return invalid("tensor count " + std::to_string(m_tensorCount) +
                           " cannot fit in the " + std::to_string(remaining()) +
                           " bytes left at offset " +
                           std::to_string(m_pos));
        }
        m_file.m_tensors.reserve(std::min<uint64_t>(m_tensorCount, kMaxArrayReserve));
        for (uint64_t i = 0; i < m_tensorCount; ++i) {
            m_where = "tensor info " + std::to_string(i);
            TensorInfo t;
            auto name = readString("name");
            if (!name) return name.error();
            t.name = std::move(*name);
            m_where += " (" + detail::quoted(t.name) + ")";
            auto nDims = read<uint32_t>("dimension count");
            if (!nDims) return nDims.error();
            if (*nDims < 1 || *nDims > kMaxDims) {
                return invalid(m_where + " has " + std::to_string(*nDims) +
                               " dimensions (must be 1 to " + std::to_string(kMaxDims) + ")");
            }
            SPILLWAY_TRY(need(8 * uint64_t{*nDims}, "dimensions"));
            int64_t elements = 1;
            for (uint32_t d = 0; d < *nDims; ++d) {
                const uint64_t dim = take<uint64_t>();
                if (dim == 0 || dim > static_cast<uint64_t>(INT64_MAX)) {
                    return invalid(m_where + " has dimension " + std::to_string(d) + " of " +
                                   std::to_string(dim));
                }
                t.dims.push_back(static_cast<int64_t>(dim));
                if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
                    return invalid(m_where + " has too many elements (the product of its "
                                   "dimensions overflows 64 bits)");
                }
            }
            auto type = read<uint32_t>("type");
            if (!type) return type.error();
            t.ggmlType = *type;
            auto offset = read<uint64_t>("data offset");
            if (!offset) return offset.error();
            t.offset = *offset;
            auto [it, inserted] = m_file.m_tensorIndex.emplace(t.name, m_file.m_tensors.size());
            if (!inserted) {
                return invalid("duplicate tensor name " + detail::quoted(t.name) +
                               " (tensor infos " + std::to_string(it->second) + " and " +
                               std::to_string(i) + ")");
            }
            m_file.m_tensors.push_back(std::move(t));
        }
        m_where.clear();
        // The data section starts at the end of the tensor infos, rounded up to the alignment.
        const uint64_t a = m_file.m_alignment;
        uint64_t end = 0;
        if (__builtin_add_overflow(m_pos, a - 1, &end)) return invalid("data offset overflows");
        m_file.m_dataOffset = end & ~(a - 1);
        return {};
    }

    Status validateTensors()
    {
        const uint64_t dataStart = m_file.m_dataOffset;
        for (TensorInfo& t : m_file.m_tensors) {
            const std::string name = "tensor " + detail::quoted(t.name);
            const GgmlTypeInfo* info = ggmlTypeInfo(t.ggmlType);
            if (!info) {
                return invalid(name + " has unknown tensor type id " + std::to_string(t.ggmlType));
            }
            const auto blockSize = static_cast<uint64_t>(info->blockSize);
            const auto cols = static_cast<uint64_t>(t.dims[0]);
            if (cols % blockSize != 0) {
                return invalid(name + " (" + info->name + ") has " + std::to_string(cols) +
                               " columns, not a multiple of its block size " +
                               std::to_string(blockSize));
            }
            uint64_t bytes = 0;
            if (__builtin_mul_overflow(cols / blockSize, uint64_t(info->blockBytes), &bytes) ||
                __builtin_mul_overflow(bytes, static_cast<uint64_t>(t.rows()), &bytes)) {
                return invalid(name + " is too large (its size overflows 64 bits)");
            }
            t.bytes = bytes;
            if (t.offset % m_file.m_alignment != 0) {
                return invalid(name + " data offset " + std::to_string(t.offset) +
                               " is not a multiple of the alignment " +
                               std::to_string(m_file.m_alignment));
            }
            uint64_t begin = 0, end = 0;
            if (__builtin_add_overflow(dataStart, t.offset, &begin) || begin > m_size) {
                return invalid(name + " data offset " + std::to_string(t.offset) +
                               " lies past the end of the file (data section at " +
                               std::to_string(dataStart) + ", file size " +
                               std::to_string(m_size) + ")");
            }
            if (__builtin_add_overflow(begin, bytes, &end) || end > m_size) {
                return invalid("truncated: " + name + " needs " + std::to_string(bytes) +
                               " bytes at offset " + std::to_string(begin) +
                               " but the file ends at " + std::to_string(m_size));
            }
        }
        // The file is structurally sound; now say whether we can run its types.
        for (TensorInfo& t : m_file.m_tensors) {
            const auto dtype = dtypeFromGgml(t.ggmlType);
            if (!dtype) {
                return fail(ErrorCode::UnsupportedModel,
                            "tensor " + detail::quoted(t.name) + " has type " +
                                ggmlTypeName(t.ggmlType) + ", which Spillway cannot run yet (supported: " +
                                supportedGgmlTypeNames() + ")");
            }
            t.type = *dtype;
            t.data = m_data + dataStart + t.offset;
        }
        return {};
    }

    File& m_file;
    const std::string& m_path;
    const uint8_t* m_data;
    uint64_t m_size;
    uint64_t m_pos = 0;
    uint64_t m_tensorCount = 0;
    uint64_t m_kvCount = 0;
    std::string m_where;                        // the entry being read, for messages
    uint64_t m_elementPath[kMaxArrayDepth] = {};  // array element indices, outermost first
    int m_depth = 0;                            // entries of m_elementPath in use
};

Result<std::unique_ptr<File>> File::open(const std::string& path)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    try {
        auto file = std::unique_ptr<File>(new File());
        file->m_path = path;
        file->m_mapping = std::move(*mapping);
        file->m_map = file->m_mapping->data();
        file->m_size = file->m_mapping->size();
        Parser parser(*file, file->m_map, file->m_size);
        SPILLWAY_TRY(parser.parse());
        return file;
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory reading the GGUF header");
    } catch (const std::length_error&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory reading the GGUF header");
    }
}

File::~File() = default;

bool Metadata::add(KeyValue kv)
{
    const auto [it, inserted] = m_index.emplace(kv.key, m_kv.size());
    if (!inserted) return false;
    m_kv.push_back(std::move(kv));
    return true;
}

size_t Metadata::indexOf(std::string_view key) const
{
    const auto it = m_index.find(key);
    return it == m_index.end() ? SIZE_MAX : it->second;
}

const Value* Metadata::find(std::string_view key) const
{
    const auto it = m_index.find(key);
    return it == m_index.end() ? nullptr : &m_kv[it->second].value;
}

std::optional<int64_t> Metadata::getInt(std::string_view key) const
{
    const Value* v = find(key);
    if (!v) return std::nullopt;
    return v->asInt();
}

std::optional<double> Metadata::getFloat(std::string_view key) const
{
    const Value* v = find(key);
    if (!v) return std::nullopt;
    return v->asFloat();
}

std::optional<std::string> Metadata::getString(std::string_view key) const
{
    const Value* v = find(key);
    if (!v || !v->asString()) return std::nullopt;
    return *v->asString();
}

std::optional<bool> Metadata::getBool(std::string_view key) const
{
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (const auto* b = std::get_if<bool>(&v->v)) return *b;
    return std::nullopt;
}

const TensorInfo* File::tensor(std::string_view name) const
{
    const auto it = m_tensorIndex.find(name);
    return it == m_tensorIndex.end() ? nullptr : &m_tensors[it->second];
}

}  // namespace spillway::gguf
