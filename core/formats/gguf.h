#pragma once
// GGUF (v2 and v3) reader and writer. The reader memory-maps the file and validates every count,
// size and offset before use: model files are untrusted input, and a bad one gives an Error whose
// message names the file and the problem, never a crash.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "gpu/dtype.h"

namespace spillway::storage {
class MappedFile;
}

namespace spillway::gguf {

// Metadata value types, as numbered in the GGUF spec.
enum class ValueType : uint32_t {
    UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
    String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};
const char* valueTypeName(ValueType t);

struct Value;
struct Array {
    ValueType elementType = ValueType::UInt8;
    std::vector<Value> values;
};
struct Value {
    ValueType type = ValueType::UInt8;
    // Unsigned integers are held as uint64_t, signed ones as int64_t, Float32/Float64 as double,
    // Bool as bool, String as std::string, Array as shared_ptr<Array> (never null).
    std::variant<int64_t, uint64_t, double, bool, std::string, std::shared_ptr<Array>> v;

    std::optional<int64_t> asInt() const;     // any integer type that fits, or bool
    std::optional<double> asFloat() const;    // any number
    const std::string* asString() const;
    const Array* asArray() const;

    // Builders holding the alternative that `type` calls for. The writer checks the ranges
    // (e.g. an UInt8 of 300 makes write() fail).
    static Value ofUInt(ValueType t, uint64_t x) { return Value{t, x}; }
    static Value ofInt(ValueType t, int64_t x) { return Value{t, x}; }
    static Value ofFloat(ValueType t, double x) { return Value{t, x}; }
    static Value ofBool(bool x) { return Value{ValueType::Bool, x}; }
    static Value ofString(std::string x) { return Value{ValueType::String, std::move(x)}; }
    static Value ofArray(ValueType elementType, std::vector<Value> values);
};
// Deep comparison: same type, same value, arrays element by element.
bool operator==(const Value& a, const Value& b);

struct KeyValue {
    std::string key;
    Value value;
};

// Key-values with lookup by key: a GGUF file's metadata, or the same keys rebuilt from a model
// package's JSON (metadataFromJson). `source` names where they came from, for messages.
class Metadata {
public:
    Metadata() = default;
    explicit Metadata(std::string source) : m_source(std::move(source)) {}

    const std::string& source() const { return m_source; }
    // Appends kv; false (and nothing added) when the key is present already.
    bool add(KeyValue kv);
    void reserve(size_t n) { m_kv.reserve(n); }
    size_t indexOf(std::string_view key) const;  // SIZE_MAX when absent

    const std::vector<KeyValue>& entries() const { return m_kv; }
    const Value* find(std::string_view key) const;
    std::optional<int64_t> getInt(std::string_view key) const;
    std::optional<double> getFloat(std::string_view key) const;
    std::optional<std::string> getString(std::string_view key) const;
    std::optional<bool> getBool(std::string_view key) const;

private:
    std::string m_source;
    std::vector<KeyValue> m_kv;
    std::map<std::string, size_t, std::less<>> m_index;  // key -> index in m_kv
};

// The metadata whose keys `keep` accepts, as a JSON object text {key: value}: integers, floats,
// booleans, strings and arrays of them (a non-finite float becomes null).
std::string metadataToJson(const Metadata& m, const std::function<bool(std::string_view key)>& keep);
// Adds the members of a JSON object text to `m` (integers as Int64/UInt64, other numbers as
// Float64, arrays of one element type). ModelFileInvalid naming `what` for text that is not a
// JSON object, a null, a mixed or nested array, or a key `m` holds already.
Status metadataFromJson(const std::string& text, const std::string& what, Metadata& m);

struct TensorInfo {
    std::string name;
    std::vector<int64_t> dims;   // GGUF order: dims[0] is the fastest-varying (columns)
    uint32_t ggmlType = 0;       // the type id in the file
    gpu::DType type;             // the same, as one of ours
    uint64_t offset = 0;         // relative to the start of the tensor data section
    uint64_t bytes = 0;          // size of the data
    const uint8_t* data = nullptr;  // into the mapping

    int64_t elements() const;
    int64_t rows() const;        // product of dims[1..]; 1 for a vector
    int64_t cols() const { return dims.empty() ? 1 : dims[0]; }
};

// Name of a ggml type id ("Q4_K", "IQ2_XXS", ...) or nullptr if the id is unknown.
const char* ggmlTypeName(uint32_t ggmlType);
// Layout of every ggml type id a GGUF file may hold, supported by us or not, so that files can
// be validated (sizes, bounds) before we say which types we cannot run. nullptr if unknown.
struct GgmlTypeInfo {
    const char* name;
    int blockSize;   // values per block
    int blockBytes;  // bytes per block
};
const GgmlTypeInfo* ggmlTypeInfo(uint32_t ggmlType);
// Our DType for a ggml type id, if we support it.
std::optional<gpu::DType> dtypeFromGgml(uint32_t ggmlType);
uint32_t ggmlFromDtype(gpu::DType t);
// "F32, F16, BF16, Q8_0, ...": the ggml types dtypeFromGgml reads, for messages.
std::string supportedGgmlTypeNames();

// How many leading bytes of a GGUF file hold its header and tensor table (what a planner needs,
// without the weights): `complete` with `bytes` the start of the data section (the table's end
// rounded up to general.alignment) when `prefix` holds all of them, else a lower bound on them
// (a string's length, 8 bytes for each string of an array still to come, 24 for each tensor
// description), so a reader fetching ranges can ask for about what is missing. `error` (set, and
// complete) for a prefix that is no GGUF.
struct HeaderExtent {
    bool complete = false;
    uint64_t bytes = 0;
    std::string error;
};
HeaderExtent headerExtent(const uint8_t* prefix, size_t size);

class File {
public:
    // Maps and validates the whole header and tensor table. A tensor type dtypeFromGgml does not
    // read (Q8_1, Q8_K, TQ1_0, TQ2_0, the integer types, an unknown id) gives an UnsupportedModel
    // error naming the tensor and its type.
    static Result<std::unique_ptr<File>> open(const std::string& path);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return m_path; }
    uint32_t version() const { return m_version; }
    uint64_t fileSize() const { return m_size; }
    uint64_t alignment() const { return m_alignment; }
    // Start of the tensor data section (bytes from the start of the file). May equal or exceed
    // fileSize() only when the file holds no tensors.
    uint64_t dataOffset() const { return m_dataOffset; }

    const std::vector<KeyValue>& metadata() const { return m_meta.entries(); }
    const Metadata& meta() const { return m_meta; }
    const Value* find(std::string_view key) const { return m_meta.find(key); }
    std::optional<int64_t> getInt(std::string_view key) const { return m_meta.getInt(key); }
    std::optional<double> getFloat(std::string_view key) const { return m_meta.getFloat(key); }
    std::optional<std::string> getString(std::string_view key) const { return m_meta.getString(key); }
    std::optional<bool> getBool(std::string_view key) const { return m_meta.getBool(key); }

    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    const TensorInfo* tensor(std::string_view name) const;

private:
    File() = default;
    std::string m_path;
    uint32_t m_version = 0;
    uint64_t m_size = 0;
    uint64_t m_alignment = 32;
    uint64_t m_dataOffset = 0;
    const uint8_t* m_map = nullptr;
    std::unique_ptr<storage::MappedFile> m_mapping;  // keeps m_map and the tensor data valid
    Metadata m_meta;
    std::vector<TensorInfo> m_tensors;
    std::map<std::string, size_t, std::less<>> m_tensorIndex;  // name -> index in m_tensors
    friend class Parser;
};

// Writes GGUF v3. Metadata and tensor descriptions are collected first; write() then streams the
// header and the tensor data (padded to `alignment`) to a temporary file and renames it into
// place, so a failure or a full disk leaves no partial output. Keys keep the order in which they
// were first set; setting a key again replaces its value. "general.alignment" is always written
// (as the writer's alignment, whatever value was set for it).
class Writer {
public:
    explicit Writer(uint64_t alignment = 32);

    void setValue(std::string key, Value v);  // any type, nested arrays included
    void setUInt8(std::string key, uint8_t v);
    void setInt8(std::string key, int8_t v);
    void setUInt16(std::string key, uint16_t v);
    void setInt16(std::string key, int16_t v);
    void setInt64(std::string key, int64_t v);
    void setFloat64(std::string key, double v);
    void setUInt32(std::string key, uint32_t v);
    void setInt32(std::string key, int32_t v);
    void setUInt64(std::string key, uint64_t v);
    void setFloat32(std::string key, float v);
    void setBool(std::string key, bool v);
    void setString(std::string key, std::string v);
    void setStringArray(std::string key, std::vector<std::string> v);
    void setFloat32Array(std::string key, std::vector<float> v);
    void setInt32Array(std::string key, std::vector<int32_t> v);

    // dims in GGUF order (dims[0] = columns). `fill` is called once, at write time, to produce
    // the tensor's bytes into `out` (exactly the tensor's size): large models never sit in RAM.
    using FillFn = std::function<void(std::span<uint8_t> out)>;
    void addTensor(std::string name, gpu::DType type, std::vector<int64_t> dims, FillFn fill);

    // Validates everything (InvalidArgument for bad alignment, duplicate or empty tensor names,
    // bad dims, values out of range for their type), then writes. Io / DiskFull on I/O errors.
    Status write(const std::string& path) const;

private:
    struct PendingTensor {
        std::string name;
        gpu::DType type;
        std::vector<int64_t> dims;
        FillFn fill;
    };
    uint64_t m_alignment;
    std::vector<KeyValue> m_kv;
    std::vector<PendingTensor> m_tensors;
};

namespace detail {
// `s` in single quotes for a one-line error message: control and non-ASCII bytes as \xNN,
// long strings cut at 80 bytes.
std::string quoted(std::string_view s);
}  // namespace detail

}  // namespace spillway::gguf
