#pragma once
// A Llama-family model loaded from GGUF: hyper-parameters, tokenizer and weight views into the
// memory-mapped file (nothing is copied but the small norm vectors of non-F32 files).

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/model/model_config.h"
#include "gpu/device.h"

namespace spillway {

namespace gguf { class File; }
class Tokenizer;

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
    static Result<std::unique_ptr<LlamaModel>> load(const std::string& path);
    ~LlamaModel();

    const std::string& path() const;
    const LlamaConfig& config() const { return m_config; }
    const LlamaWeights& weights() const { return m_weights; }
    const Tokenizer& tokenizer() const { return *m_tokenizer; }
    const gguf::File& file() const { return *m_file; }

    // Bytes of weights one decoded token reads (every matrix once, the embedding row aside).
    uint64_t weightBytesPerToken() const;
    uint64_t parameterCount() const;

private:
    LlamaModel() = default;
    std::unique_ptr<gguf::File> m_file;
    LlamaConfig m_config;
    LlamaWeights m_weights;
    std::unique_ptr<Tokenizer> m_tokenizer;
    std::vector<std::vector<float>> m_ownedVectors;  // norms converted to F32
};

}  // namespace spillway
