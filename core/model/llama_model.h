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
#include "core/formats/imported_model.h"
#include "core/model/model_config.h"
#include "gpu/device.h"

namespace spillway {

namespace gguf { class File; class Metadata; }
namespace storage { class Package; }
class Tokenizer;

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
    gpu::MatrixView gate;             // (ffnDim, dim)  w1; absent (data null) in an ungated FFN
    gpu::MatrixView up;               // (ffnDim, dim)  w3
    gpu::MatrixView down;             // (dim, ffnDim)  w2
    // Optional vectors (null when the architecture has none):
    const float* qBias = nullptr;        // (qDim)   Qwen2, OPT
    const float* kBias = nullptr;        // (kvDim)
    const float* vBias = nullptr;        // (kvDim)
    const float* oBias = nullptr;        // (dim)    OPT
    const float* qNorm = nullptr;        // (headDim) Qwen3: RMSNorm of each head of q and k
    const float* kNorm = nullptr;        // (headDim)
    const float* attnNormBias = nullptr; // (dim)    LayerNorm (OPT)
    const float* ffnNormBias = nullptr;  // (dim)
    const float* upBias = nullptr;       // (ffnDim) OPT fc1
    const float* downBias = nullptr;     // (dim)    OPT fc2
};

// Every float vector of a layer, with its GGUF name suffix and length: what the weight streamer
// keeps resident on the device, and what the loader binds.
struct LayerVectorMember {
    const float* LlamaLayerWeights::*member;
    const char* suffix;
    int (*length)(const LlamaConfig& c);
};
extern const LayerVectorMember kLayerVectors[12];

struct LlamaWeights {
    gpu::MatrixView tokenEmbedding;   // (vocab, embeddingDim)
    gpu::MatrixView positionEmbedding;  // (positions, dim), learned positions (OPT); else absent
    // Only where LlamaConfig::embedDim is set (opt-350m); else absent (data null):
    gpu::MatrixView projectIn;        // (dim, embeddingDim): embedding -> residual stream
    gpu::MatrixView projectOut;       // (embeddingDim, dim): last hidden state -> head input
    std::vector<LlamaLayerWeights> layers;
    const float* outputNorm = nullptr;  // (dim); null for post-norm models (no final norm)
    const float* outputNormBias = nullptr;  // (dim), LayerNorm only
    gpu::MatrixView output;           // (vocab, embeddingDim); the embedding itself when tied
};

// What a file does not record about itself (llama2.c checkpoints name no architecture).
struct ModelLoadOptions {
    std::string architecture;   // empty: the file's own (llama2.c: "llama")
    std::string tokenizerPath;  // llama2.c tokenizer.bin; empty: looked for beside the model
};

class LlamaModel {
public:
    // `path`: a GGUF file, a package folder (or its manifest.json), or a llama2.c checkpoint.
    // Every tensor's size and layout is checked (a bitmap sparse blob in full) before any view
    // is made of it.
    static Result<std::unique_ptr<LlamaModel>> load(const std::string& path, const ModelLoadOptions& options = {});
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
    std::unique_ptr<ImportedModel> m_imported;    // another format, imported
    std::vector<std::string> m_dataFiles;
    std::vector<ModelTensor> m_tensors;
    std::map<std::string, size_t, std::less<>> m_tensorIndex;  // name -> index in m_tensors
    LlamaConfig m_config;
    LlamaWeights m_weights;
    std::unique_ptr<Tokenizer> m_tokenizer;
    std::vector<std::vector<float>> m_ownedVectors;  // norms converted to F32
};

}  // namespace spillway
