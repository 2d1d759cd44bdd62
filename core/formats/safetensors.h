#pragma once
// safetensors reader and writer (Hugging Face's weight format), single files and sharded folders.
// Layout: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, "<tensor>": {"dtype": "F16", "shape": [rows, cols],
//    "data_offsets": [begin, end]}, ...}
// then the data section; offsets are bytes relative to its start. Shapes are row-major with the
// outermost dimension first (the reverse of GGUF's dims). Spec: github.com/huggingface/safetensors
//
// The reader memory-maps the file and checks every dtype, shape and offset before use: model
// files are untrusted input, and a bad one gives an Error naming the file and the problem.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gpu/dtype.h"

namespace spillway::storage {
class MappedFile;
}

namespace spillway::safetensors {

// The largest header the reader accepts (bytes), as the reference implementation does.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A dtype as safetensors names it: "F32", "BF16", "I64", "F8_E4M3", "F4" ...
struct DTypeInfo {
    const char* name;
    int bits;                          // per element (4 and 6 for the sub-byte float types)
    std::optional<gpu::DType> dtype;   // ours, for the types the engine computes on
};
// nullptr for a name the format does not define.
const DTypeInfo* dtypeInfo(std::string_view name);
// "F32", "F16" or "BF16"; nullptr for our types safetensors cannot hold (quantized blocks).
const char* dtypeName(gpu::DType type);

struct Tensor {
    std::string name;
    std::string dtypeName;             // as in the file
    std::optional<gpu::DType> dtype;   // F32, F16 and BF16 only; see requireSupported()
    std::vector<int64_t> shape;        // outermost first; empty for a scalar (one element)
    uint32_t shard = 0;                // index into TensorTable::files (0 for a single file)
    uint64_t fileOffset = 0;           // where the bytes start, from the start of the file
    uint64_t bytes = 0;
    const uint8_t* data = nullptr;     // into the mapping

    int64_t elements() const;          // product of the shape (1 for a scalar)
};

// The tensor's type when the engine can run it, else UnsupportedModel naming the file, the
// tensor and its dtype. Files with such tensors (I64 position ids, BOOL masks, FP8 weights)
// open fine: the loader decides which tensors it needs.
Result<gpu::DType> requireSupported(const Tensor& tensor, const std::string& path);

class File {
public:
    // Maps the file and validates the header: length (<= kMaxHeaderBytes and within the file),
    // JSON, "__metadata__" (strings only), and for each tensor its dtype, shape (dims >= 0, the
    // element count overflow-checked), and data_offsets (begin <= end, inside the data section,
    // end - begin == elements * dtype size, no two tensors overlapping). ModelFileInvalid for a
    // bad file, Io when it cannot be read.
    static Result<File> open(const std::string& path);
    File(File&&) noexcept;
    File& operator=(File&&) noexcept;
    ~File();

    const std::string& path() const { return m_path; }
    uint64_t fileSize() const { return m_size; }
    uint64_t dataOffset() const { return m_dataOffset; }   // 8 + header length
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }
    // In data-offset order.
    const std::vector<Tensor>& tensors() const { return m_tensors; }
    const Tensor* tensor(std::string_view name) const;

private:
    File() = default;
    std::string m_path;
    uint64_t m_size = 0;
    uint64_t m_dataOffset = 0;
    std::unique_ptr<storage::MappedFile> m_mapping;   // keeps the tensors' data valid
    std::map<std::string, std::string> m_metadata;
    std::vector<Tensor> m_tensors;
    std::map<std::string, size_t, std::less<>> m_index;  // name -> index in m_tensors
    friend class HeaderParser;
};

// All tensors of a model stored as one or several safetensors files.
struct TensorTable {
    std::vector<std::string> paths;                    // the files, in file-name order
    std::vector<std::shared_ptr<const File>> files;    // kept open; tensors point into them
    std::map<std::string, std::string> metadata;       // the index's "metadata" (or the file's)
    std::vector<Tensor> tensors;                       // shard by shard, in data-offset order
    std::map<std::string, size_t, std::less<>> index;  // name -> index in tensors

    const Tensor* find(std::string_view name) const;
};

// One file as a table of one shard.
Result<TensorTable> openSingle(const std::string& path);
// A sharded model from its index ("model.safetensors.index.json": {"metadata": {...},
// "weight_map": {tensor: file}}). Shard files are found beside the index; names with a '/' or
// "..", missing files (all of them named in the message), a tensor that is not in the shard the
// map names, or a tensor held by two shards give ModelFileInvalid. Tensors a shard holds beyond
// the map are kept. Index metadata values that are not strings are kept as their JSON text.
Result<TensorTable> openIndexed(const std::string& indexPath);

// Writes a safetensors file: header JSON ("__metadata__" first, then tensors in the order they
// were added), padded with spaces to a multiple of 8 bytes as the Python library does, then the
// tensors' bytes back to back. Everything goes to a temporary file beside the target that is
// fsynced and renamed into place; on any failure (I/O, a full disk, a fill callback throwing)
// the temporary file is removed and the target is left as it was.
class Writer {
public:
    using FillFn = std::function<void(std::span<uint8_t> out)>;

    void setMetadata(std::string key, std::string value);  // replaces an earlier value
    // `fill` is called once, at write time, with exactly the tensor's size (for large models
    // that never sit in RAM whole). dtypeName is any safetensors dtype ("F32", "I64", ...).
    void addTensor(std::string name, std::string dtypeName, std::vector<int64_t> shape,
                   FillFn fill);
    void addTensor(std::string name, gpu::DType type, std::vector<int64_t> shape, FillFn fill);
    // `bytes` is copied into the writer.
    void addTensor(std::string name, gpu::DType type, std::vector<int64_t> shape,
                   std::span<const uint8_t> bytes);

    // InvalidArgument for an empty, duplicate or "__metadata__" name, an unknown dtype, a
    // negative dimension, or byte data of the wrong size; Io / DiskFull / Internal on failure.
    Status write(const std::string& path) const;
    // The bytes write() produces (header + data), for sharding decisions; 0 when invalid.
    uint64_t fileBytes() const;

private:
    struct PendingTensor {
        std::string name;
        std::string dtypeName;
        std::vector<int64_t> shape;
        FillFn fill;
        std::optional<uint64_t> givenBytes;  // the size of copied bytes, checked at write time
    };
    Result<std::string> header(std::vector<uint64_t>& sizes) const;
    std::vector<std::pair<std::string, std::string>> m_metadata;
    std::vector<PendingTensor> m_tensors;
};

// Writes "model.safetensors.index.json" text: {"metadata": {"total_size": totalBytes, ...},
// "weight_map": {tensor: file}} with tensors sorted by name, as transformers writes it, through
// a temporary file and rename. `extraMetadata` values are written as strings.
Status writeIndex(const std::string& path, const std::map<std::string, std::string>& weightMap,
                  uint64_t totalBytes,
                  const std::map<std::string, std::string>& extraMetadata = {});

}  // namespace spillway::safetensors
