// safetensors reader and writer. The header is JSON parsed with nlohmann; no exception leaves
// this file: parse and type errors become ModelFileInvalid naming the file.

#include "core/formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "core/formats/gguf.h"  // gguf::detail::quoted
#include "storage/atomic_file.h"
#include "storage/mapped_file.h"

static_assert(std::endian::native == std::endian::little,
              "the safetensors reader assumes little-endian");

namespace spillway::safetensors {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
// 'text' for messages (control and non-ASCII bytes escaped, long text cut).
inline std::string quote(std::string_view s) { return gguf::detail::quoted(s); }

namespace {

constexpr uint64_t kLengthBytes = 8;  // the header-length prefix
constexpr size_t kMaxDims = 64;       // more is no tensor, it is a corrupt file

// Every dtype the format defines (safetensors 0.5), so files holding any of them open.
const DTypeInfo kDTypes[] = {
    {"F32", 32, gpu::DType::F32}, {"F16", 16, gpu::DType::F16}, {"BF16", 16, gpu::DType::BF16},
    {"F64", 64, std::nullopt},    {"I64", 64, std::nullopt},    {"U64", 64, std::nullopt},
    {"I32", 32, std::nullopt},    {"U32", 32, std::nullopt},    {"I16", 16, std::nullopt},
    {"U16", 16, std::nullopt},    {"I8", 8, std::nullopt},      {"U8", 8, std::nullopt},
    {"BOOL", 8, std::nullopt},    {"F8_E4M3", 8, std::nullopt}, {"F8_E5M2", 8, std::nullopt},
    {"F8_E8M0", 8, std::nullopt}, {"F6_E2M3", 6, std::nullopt}, {"F6_E3M2", 6, std::nullopt},
    {"F4", 4, std::nullopt},
};

// Bytes of `elements` values of `bits` each; nullopt on overflow or a partial byte.
std::optional<uint64_t> byteSize(uint64_t elements, int bits)
{
    uint64_t totalBits = 0;
    if (__builtin_mul_overflow(elements, uint64_t(bits), &totalBits)) return std::nullopt;
    if (totalBits % 8 != 0) return std::nullopt;
    return totalBits / 8;
}

// The product of `shape`, or nullopt when a dim is negative or the product overflows int64.
std::optional<int64_t> elementCount(const std::vector<int64_t>& shape)
{
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
    }
    return n;
}

// Records duplicate keys, which nlohmann would otherwise resolve silently (last one wins): a
// tensor named twice is ambiguous, so the file is refused.
struct DuplicateKeyCheck {
    std::vector<std::set<std::string>> open;
    std::string duplicate;

    bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed)
    {
        switch (event) {
        case Json::parse_event_t::object_start: open.emplace_back(); break;
        case Json::parse_event_t::object_end:
            if (!open.empty()) open.pop_back();
            break;
        case Json::parse_event_t::key:
            if (!open.empty() && parsed.is_string() &&
                !open.back().insert(parsed.get_ref<const std::string&>()).second &&
                duplicate.empty())
                duplicate = parsed.get<std::string>();
            break;
        default: break;
        }
        return true;
    }
};

std::string jsonType(const Json& j) { return j.type_name(); }

}  // namespace

const DTypeInfo* dtypeInfo(std::string_view name)
{
    for (const DTypeInfo& info : kDTypes)
        if (name == info.name) return &info;
    return nullptr;
}

const char* dtypeName(gpu::DType type)
{
    switch (type) {
    case gpu::DType::F32: return "F32";
    case gpu::DType::F16: return "F16";
    case gpu::DType::BF16: return "BF16";
    default: return nullptr;
    }
}

int64_t Tensor::elements() const { return elementCount(shape).value_or(0); }

Result<gpu::DType> requireSupported(const Tensor& tensor, const std::string& path)
{
    if (tensor.dtype) return *tensor.dtype;
    return makeError(ErrorCode::UnsupportedModel,
                     path + ": tensor " + quote(tensor.name) + " has dtype " +
                         quote(tensor.dtypeName) +
                         ", which Spillway cannot run (supported: F32, F16, BF16)");
}

// ---- reader -------------------------------------------------------------------------------

class HeaderParser {
public:
    HeaderParser(File& file, const uint8_t* data) : m_file(file), m_data(data) {}

    Status parse()
    {
        const uint64_t size = m_file.m_size;
        if (size < kLengthBytes)
            return invalid("truncated: " + std::to_string(size) +
                           " bytes, too short for the 8-byte header length");
        uint64_t headerBytes = 0;
        std::memcpy(&headerBytes, m_data, sizeof headerBytes);
        if (headerBytes > kMaxHeaderBytes)
            return invalid("header length " + std::to_string(headerBytes) +
                           " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                           " bytes (not a safetensors file?)");
        if (headerBytes > size - kLengthBytes)
            return invalid("truncated: the header needs " + std::to_string(headerBytes) +
                           " bytes after the length but the file has " +
                           std::to_string(size - kLengthBytes));
        if (headerBytes < 2) return invalid("header of " + std::to_string(headerBytes) +
                                            " bytes cannot be a JSON object");
        m_file.m_dataOffset = kLengthBytes + headerBytes;
        const char* text = reinterpret_cast<const char*>(m_data + kLengthBytes);

        DuplicateKeyCheck duplicates;
        Json header = Json::parse(text, text + headerBytes, std::ref(duplicates),
                                  /*allow_exceptions=*/false);
        if (header.is_discarded()) return invalid("header is not valid JSON");
        if (!header.is_object())
            return invalid("header is a JSON " + jsonType(header) + ", not an object");
        if (!duplicates.duplicate.empty())
            return invalid("header names " + quote(duplicates.duplicate) + " twice");

        for (const auto& [key, value] : header.items()) {
            if (key == "__metadata__") {
                SPILLWAY_TRY(parseMetadata(value));
                continue;
            }
            SPILLWAY_TRY(parseTensor(key, value));
        }
        return checkOverlaps();
    }

private:
    Error invalid(const std::string& problem) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_file.m_path + ": " + problem);
    }

    Status parseMetadata(const Json& value)
    {
        if (!value.is_object())
            return invalid("__metadata__ is a JSON " + jsonType(value) + ", not an object");
        for (const auto& [key, item] : value.items()) {
            if (!item.is_string())
                return invalid("__metadata__ entry " + quote(key) + " is a JSON " +
                               jsonType(item) + ", not a string");
            m_file.m_metadata.emplace(key, item.get<std::string>());
        }
        return {};
    }

    // A non-negative integer of JSON, or nullopt (floats, negatives and strings are not).
    static std::optional<uint64_t> unsignedValue(const Json& j)
    {
        if (j.is_number_unsigned()) return j.get<uint64_t>();
        if (j.is_number_integer() && j.get<int64_t>() >= 0) return uint64_t(j.get<int64_t>());
        return std::nullopt;
    }

    Status parseTensor(const std::string& name, const Json& value)
    {
        const std::string what = "tensor " + quote(name);
        if (name.empty()) return invalid("a tensor has an empty name");
        if (!value.is_object())
            return invalid(what + " is a JSON " + jsonType(value) + ", not an object");
        Tensor t;
        t.name = name;

        const auto dtype = value.find("dtype");
        if (dtype == value.end() || !dtype->is_string())
            return invalid(what + " has no dtype string");
        t.dtypeName = dtype->get<std::string>();
        const DTypeInfo* info = dtypeInfo(t.dtypeName);
        if (!info) return invalid(what + " has unknown dtype " + quote(t.dtypeName));
        t.dtype = info->dtype;

        const auto shape = value.find("shape");
        if (shape == value.end() || !shape->is_array())
            return invalid(what + " has no shape array");
        if (shape->size() > kMaxDims)
            return invalid(what + " has " + std::to_string(shape->size()) +
                           " dimensions (at most " + std::to_string(kMaxDims) + ")");
        for (size_t i = 0; i < shape->size(); ++i) {
            const auto dim = unsignedValue((*shape)[i]);
            if (!dim || *dim > uint64_t(INT64_MAX))
                return invalid(what + " shape entry " + std::to_string(i) + " (" +
                               (*shape)[i].dump() + ") is not a dimension (an integer >= 0)");
            t.shape.push_back(int64_t(*dim));
        }
        const auto elements = elementCount(t.shape);
        if (!elements)
            return invalid(what + " has too many elements (the product of its shape " +
                           shape->dump() + " overflows 64 bits)");
        const auto bytes = byteSize(uint64_t(*elements), info->bits);
        if (!bytes)
            return invalid(what + " (" + t.dtypeName + ", shape " + shape->dump() +
                           ") has a size that overflows or is not a whole number of bytes");

        const auto offsets = value.find("data_offsets");
        if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2)
            return invalid(what + " has no data_offsets pair [begin, end]");
        const auto begin = unsignedValue((*offsets)[0]);
        const auto end = unsignedValue((*offsets)[1]);
        if (!begin || !end)
            return invalid(what + " data_offsets " + offsets->dump() +
                           " are not integers >= 0");
        const uint64_t dataBytes = m_file.m_size - m_file.m_dataOffset;
        if (*end < *begin)
            return invalid(what + " data_offsets " + offsets->dump() + " end before they begin");
        if (*end > dataBytes)
            return invalid("truncated: " + what + " data_offsets " + offsets->dump() +
                           " reach past the data section of " + std::to_string(dataBytes) +
                           " bytes");
        if (*end - *begin != *bytes)
            return invalid(what + " data_offsets " + offsets->dump() + " span " +
                           std::to_string(*end - *begin) + " bytes but " + t.dtypeName +
                           " shape " + shape->dump() + " needs " + std::to_string(*bytes));
        t.bytes = *bytes;
        t.fileOffset = m_file.m_dataOffset + *begin;
        t.data = m_data + t.fileOffset;
        m_file.m_tensors.push_back(std::move(t));
        return {};
    }

    Status checkOverlaps()
    {
        auto& tensors = m_file.m_tensors;
        std::stable_sort(tensors.begin(), tensors.end(), [](const Tensor& a, const Tensor& b) {
            return a.fileOffset < b.fileOffset ||
                   (a.fileOffset == b.fileOffset && a.bytes < b.bytes);
        });
        const Tensor* previous = nullptr;  // the last non-empty tensor
        for (const Tensor& t : tensors) {
            if (t.bytes == 0) continue;  // empty tensors take no bytes, so overlap nothing
            if (previous && t.fileOffset < previous->fileOffset + previous->bytes)
                return invalid("tensors " + quote(previous->name) + " and " + quote(t.name) +
                               " overlap (bytes " + std::to_string(previous->fileOffset) + "+" +
                               std::to_string(previous->bytes) + " and " +
                               std::to_string(t.fileOffset) + "+" + std::to_string(t.bytes) +
                               ")");
            previous = &t;
        }
        for (size_t i = 0; i < tensors.size(); ++i) m_file.m_index.emplace(tensors[i].name, i);
        return {};
    }

    File& m_file;
    const uint8_t* m_data;
};

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

Result<File> File::open(const std::string& path)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    try {
        File file;
        file.m_path = path;
        file.m_mapping = std::move(mapping.value());
        file.m_size = file.m_mapping->size();
        HeaderParser parser(file, file.m_mapping->data());
        SPILLWAY_TRY(parser.parse());
        return file;
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory reading the header");
    } catch (const std::exception& e) {  // nlohmann type errors: none expected, all checked
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": invalid safetensors header: " + e.what());
    }
}

const Tensor* File::tensor(std::string_view name) const
{
    const auto it = m_index.find(name);
    return it == m_index.end() ? nullptr : &m_tensors[it->second];
}

// ---- tensor tables --------------------------------------------------------------------------

const Tensor* TensorTable::find(std::string_view name) const
{
    const auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

namespace {

// Adds one opened shard's tensors; a name held by an earlier shard is refused.
Status addShard(TensorTable& table, File file, const std::string& what)
{
    const auto shard = static_cast<uint32_t>(table.files.size());
    auto shared = std::make_shared<const File>(std::move(file));
    for (const Tensor& t : shared->tensors()) {
        const auto [it, inserted] = table.index.emplace(t.name, table.tensors.size());
        if (!inserted)
            return makeError(ErrorCode::ModelFileInvalid,
                             what + ": tensor " + quote(t.name) + " is in both " +
                                 table.paths[table.tensors[it->second].shard] + " and " +
                                 shared->path());
        Tensor copy = t;
        copy.shard = shard;
        table.tensors.push_back(std::move(copy));
    }
    table.paths.push_back(shared->path());
    table.files.push_back(std::move(shared));
    return {};
}

Result<std::string> readSmallFile(const std::string& path, uint64_t limit)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    if (mapping.value()->size() > limit)
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": " + std::to_string(mapping.value()->size()) +
                             " bytes, more than the " + std::to_string(limit) + " expected");
    const auto* data = reinterpret_cast<const char*>(mapping.value()->data());
    return std::string(data, data ? mapping.value()->size() : 0);
}

}  // namespace

Result<TensorTable> openSingle(const std::string& path)
{
    auto file = File::open(path);
    if (!file) return file.error();
    try {
        TensorTable table;
        table.metadata = file->metadata();
        SPILLWAY_TRY(addShard(table, std::move(file.value()), path));
        return table;
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory");
    }
}

Result<TensorTable> openIndexed(const std::string& indexPath)
{
    const auto invalid = [&](const std::string& problem) {
        return makeError(ErrorCode::ModelFileInvalid, indexPath + ": " + problem);
    };
    auto text = readSmallFile(indexPath, kMaxHeaderBytes);
    if (!text) return text.error();
    try {
        const Json index = Json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
        if (index.is_discarded()) return invalid("not valid JSON");
        if (!index.is_object()) return invalid("not a JSON object");
        const auto map = index.find("weight_map");
        if (map == index.end() || !map->is_object())
            return invalid("has no \"weight_map\" object");

        TensorTable table;
        if (const auto meta = index.find("metadata"); meta != index.end() && !meta->is_null()) {
            if (!meta->is_object()) return invalid("\"metadata\" is not an object");
            for (const auto& [key, value] : meta->items())
                table.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
        }

        // Shard file names in name order ("model-00001-of-00003.safetensors" ...).
        std::set<std::string> names;
        for (const auto& [tensor, file] : map->items()) {
            if (!file.is_string())
                return invalid("weight_map entry " + quote(tensor) + " is not a file name");
            const std::string name = file.get<std::string>();
            if (name.empty() || name.find('/') != std::string::npos || name == "." ||
                name == ".." || name.find('\0') != std::string::npos)
                return invalid("weight_map entry " + quote(tensor) + " names " + quote(name) +
                               ", not a file beside the index");
            names.insert(name);
        }
        const std::vector<std::string> shardNames(names.begin(), names.end());
        std::map<std::string, uint32_t> shardOf;  // file name -> shard index
        for (const std::string& name : shardNames) shardOf.emplace(name, uint32_t(shardOf.size()));
        const std::filesystem::path folder = std::filesystem::path(indexPath).parent_path();
        std::vector<std::string> shardPaths;
        std::string missing;
        for (const std::string& name : shardNames) {
            shardPaths.push_back((folder / name).string());
            std::error_code ec;
            if (!std::filesystem::is_regular_file(shardPaths.back(), ec))
                missing += (missing.empty() ? "" : ", ") + name;
        }
        if (!missing.empty()) return invalid("shard files missing: " + missing);

        for (size_t i = 0; i < shardPaths.size(); ++i) {
            auto file = File::open(shardPaths[i]);
            if (!file) return file.error();
            SPILLWAY_TRY(addShard(table, std::move(file.value()), indexPath));
        }
        for (const auto& [tensor, file] : map->items()) {
            const Tensor* t = table.find(tensor);
            const uint32_t shard = shardOf.at(file.get<std::string>());
            if (!t || t->shard != shard)
                return invalid("weight_map puts tensor " + quote(tensor) + " in " +
                               quote(file.get<std::string>()) + ", which does not hold it");
        }
        return table;
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, indexPath + ": out of memory");
    } catch (const std::exception& e) {
        return invalid(std::string("invalid index: ") + e.what());
    }
}

// ---- writer ---------------------------------------------------------------------------------

void Writer::setMetadata(std::string key, std::string value)
{
    for (auto& [k, v] : m_metadata) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    m_metadata.emplace_back(std::move(key), std::move(value));
}

void Writer::addTensor(std::string name, std::string dtypeName, std::vector<int64_t> shape,
                       FillFn fill)
{
    m_tensors.push_back(PendingTensor{std::move(name), std::move(dtypeName), std::move(shape),
                                      std::move(fill), {}});
}

void Writer::addTensor(std::string name, gpu::DType type, std::vector<int64_t> shape, FillFn fill)
{
    const char* dtype = safetensors::dtypeName(type);
    // A type safetensors cannot hold gets a name that write() refuses, naming the type.
    addTensor(std::move(name), dtype ? dtype : std::string(gpu::dtypeName(type)) + " (ours)",
              std::move(shape), std::move(fill));
}

void Writer::addTensor(std::string name, gpu::DType type, std::vector<int64_t> shape,
                       std::span<const uint8_t> bytes)
{
    auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
    addTensor(std::move(name), type, std::move(shape), [copy](std::span<uint8_t> out) {
        if (!copy->empty())  // memcpy's pointers must not be null, even for 0 bytes
            std::memcpy(out.data(), copy->data(), std::min(out.size(), copy->size()));
    });
    m_tensors.back().givenBytes = bytes.size();
}

Result<std::string> Writer::header(std::vector<uint64_t>& sizes) const
{
    const auto invalidArg = [](const std::string& problem) {
        return makeError(ErrorCode::InvalidArgument, "safetensors writer: " + problem);
    };
    OrderedJson header = OrderedJson::object();
    if (!m_metadata.empty()) {
        OrderedJson meta = OrderedJson::object();
        for (const auto& [key, value] : m_metadata) meta[key] = value;
        header["__metadata__"] = std::move(meta);
    }
    std::set<std::string_view> names;
    uint64_t offset = 0;
    sizes.clear();
    for (const PendingTensor& t : m_tensors) {
        const std::string what = "tensor " + quote(t.name);
        if (t.name.empty()) return invalidArg("a tensor has an empty name");
        if (t.name == "__metadata__") return invalidArg("a tensor is named __metadata__");
        if (!names.insert(t.name).second) return invalidArg("duplicate " + what);
        if (!t.fill) return invalidArg(what + " has no fill function");
        const DTypeInfo* info = dtypeInfo(t.dtypeName);
        if (!info) return invalidArg(what + " has dtype " + quote(t.dtypeName) +
                                     ", which safetensors cannot hold");
        const auto elements = elementCount(t.shape);
        if (!elements) return invalidArg(what + " has a negative or too large shape");
        const auto bytes = byteSize(uint64_t(*elements), info->bits);
        uint64_t end = 0;
        if (!bytes || __builtin_add_overflow(offset, *bytes, &end))
            return invalidArg(what + " is too large or not a whole number of bytes");
        if (t.givenBytes && *t.givenBytes != *bytes)
            return invalidArg(what + " has " + std::to_string(*t.givenBytes) +
                              " bytes of data but its dtype and shape need " +
                              std::to_string(*bytes));
        header[t.name] = OrderedJson{{"dtype", t.dtypeName},
                                     {"shape", t.shape},
                                     {"data_offsets", {offset, end}}};
        sizes.push_back(*bytes);
        offset = end;
    }
    std::string text = header.dump();  // compact, UTF-8; names are kept as given
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
}

uint64_t Writer::fileBytes() const
{
    std::vector<uint64_t> sizes;
    auto text = header(sizes);
    if (!text) return 0;
    uint64_t total = kLengthBytes + text->size();
    for (uint64_t s : sizes) total += s;
    return total;
}

Status Writer::write(const std::string& path) const
{
    try {
        std::vector<uint64_t> sizes;
        auto text = header(sizes);
        if (!text) return makeError(text.error().code, path + ": " + text.error().message);
        auto created = storage::AtomicFile::create(path);
        if (!created) return created.error();
        storage::AtomicFile out = std::move(created).value();
        const uint64_t length = text->size();
        SPILLWAY_TRY(out.write(&length, sizeof length));
        SPILLWAY_TRY(out.write(text->data(), text->size()));

        std::vector<uint8_t> buffer;  // one tensor at a time
        for (size_t i = 0; i < m_tensors.size(); ++i) {
            if (sizes[i] > buffer.max_size())
                return makeError(ErrorCode::OutOfMemory, path + ": tensor too large to buffer");
            buffer.assign(size_t(sizes[i]), uint8_t{0});
            try {
                m_tensors[i].fill(std::span<uint8_t>(buffer.data(), buffer.size()));
            } catch (const std::exception& e) {
                return makeError(ErrorCode::Internal, path + ": producing tensor " +
                                                          quote(m_tensors[i].name) +
                                                          " failed: " + quote(e.what()));
            } catch (...) {
                return makeError(ErrorCode::Internal, path + ": producing tensor " +
                                                          quote(m_tensors[i].name) +
                                                          " failed with an unknown exception");
            }
            SPILLWAY_TRY(out.write(buffer.data(), buffer.size()));
        }
        return out.commit();
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory writing safetensors");
    } catch (const std::exception& e) {  // nlohmann: invalid UTF-8 in a name or metadata
        return makeError(ErrorCode::InvalidArgument, path + ": " + e.what());
    }
}

Status writeIndex(const std::string& path, const std::map<std::string, std::string>& weightMap,
                  uint64_t totalBytes, const std::map<std::string, std::string>& extraMetadata)
{
    try {
        OrderedJson meta = OrderedJson::object();
        meta["total_size"] = totalBytes;
        for (const auto& [key, value] : extraMetadata)
            if (key != "total_size") meta[key] = value;
        OrderedJson map = OrderedJson::object();
        for (const auto& [tensor, file] : weightMap) map[tensor] = file;  // std::map: sorted
        const OrderedJson index{{"metadata", std::move(meta)}, {"weight_map", std::move(map)}};
        const std::string text = index.dump(2) + "\n";
        auto created = storage::AtomicFile::create(path);
        if (!created) return created.error();
        storage::AtomicFile out = std::move(created).value();
        SPILLWAY_TRY(out.write(text.data(), text.size()));
        return out.commit();
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, path + ": out of memory");
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidArgument, path + ": " + e.what());
    }
}

}  // namespace spillway::safetensors
