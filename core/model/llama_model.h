#pragma once
// A Llama-family model loaded from a GGUF file or a model package folder (storage/package.h):
// hyper-parameters, tokenizer and weight views into the memory-mapped files (nothing is copied
// but the small norm vectors of non-F32 files). Both sources end as one tensor table: each
// tensor's type, shape, bytes in the mapping, and the file and offset it lies at (what the
// weight streamer reads with direct I/O).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/model/model_config.h"
#include "gpu/device.h"

namespace spillway {

namespace gguf { class File; class Metadata; }
namespace storage { class Package; }
class Tokenizer;

struct ModelTensor {
    std::string name;
    gpu::DType type = gpu::DType::F32;
    std::vector<int64_t> dims;      // GGUF order: dims[0] is the columns
    const uint8_t* data = nullptr;  // in the memory mapping
    uint64_t bytes = 0;
    uint32_t file = 0;              // index into LlamaModel::dataFiles()
    uint64_t fileOffset = 0;        // where the bytes start in that file
};

// Tensor formats of model packages: "f32", "f16", "bf16", "q8_0", "q4_0" (the DTypes, a dense
// matrix row after row) and "bitmap-<values>" / "bitmap-<values>-g<group>" (a BitmapSparse blob:
// "bitmap-f16", "bitmap-int8-g64"; the blob's header must agree).
std::string packageFormatName(gpu::DType type, const void* blob = nullptr);
std::optional<gpu::DType> dtypeOfPackageFormat(std::string_view format);

struct LlamaLayerWeights {
    const float* attnNorm = nullptr;  // (dim)
    gpu::MatrixView wq;               // (qDim rows, dim cols)
    gpu::MatrixView wk;               // (kvDim, dim)
    gpu::MatrixView wv;               // (kvDim, dim)
    gpu::MatrixView wo;               // (dim, qDim)
    const float* ffnNorm = nullptr;   // (dim)
    gpu::MatrixView gate;             // (ffnDim, dim)  w1
    gpu::MatrixView up;               // (ffnDim, dim)  w3
    gpu::MatrixView down;             // (dim, ffnDim)  w2
};

struct LlamaWeights {
    gpu::MatrixView tokenEmbedding;   // (vocab, dim)
    std::vector<LlamaLayerWeights> layers;
    const float* outputNorm = nullptr;  // (dim)
    gpu::MatrixView output;           // (vocab, dim); the embedding itself when tied
};

class LlamaModel {
public:
    // `path`: a GGUF file, or a package folder (or its manifest.json). Every tensor's size and
    // layout is checked (a bitmap sparse blob in full) before any view is made of it.
    static Result<std::unique_ptr<LlamaModel>> load(const std::string& path);
    ~LlamaModel();

    const std::string& path() const { return m_path; }  // the file or the package folder
    bool isPackage() const { return m_package != nullptr; }
    const storage::Package* package() const { return m_package.get(); }  // nullptr for GGUF
    const LlamaConfig& config() const { return m_config; }
    const LlamaWeights& weights() const { return m_weights; }
    const Tokenizer& tokenizer() const { return *m_tokenizer; }
    // Every metadata key (a package's are rebuilt from its manifest, keyed as in GGUF).
    const gguf::Metadata& metadata() const;

    const std::vector<std::string>& dataFiles() const { return m_dataFiles; }
    const std::vector<ModelTensor>& tensors() const { return m_tensors; }
    const ModelTensor* tensor(std::string_view name) const;  // nullptr when absent
    // The output head shares the embedding (no output.weight).
    bool tiedEmbeddings() const { return tensor("output.weight") == nullptr; }

    // Bytes of weights one decoded token reads (every matrix once, the embedding row aside).
    uint64_t weightBytesPerToken() const;
    uint64_t parameterCount() const;

private:
    LlamaModel() = default;
    Status bind();  // config, weights and tokenizer from the tensor table and metadata
    std::string m_path;
    std::unique_ptr<gguf::File> m_file;           // a GGUF model
    std::unique_ptr<storage::Package> m_package;  // a package
    std::unique_ptr<gguf::Metadata> m_packageMeta;
    std::vector<std::string> m_dataFiles;
    std::vector<ModelTensor> m_tensors;
    std::map<std::string, size_t, std::less<>> m_tensorIndex;  // name -> index in m_tensors
    LlamaConfig m_config;
    LlamaWeights m_weights;
    std::unique_ptr<Tokenizer> m_tokenizer;
    std::vector<std::vector<float>> m_ownedVectors;  // norms converted to F32
};

}  // namespace spillway
