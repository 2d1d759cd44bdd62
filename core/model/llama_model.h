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

namespace gguf { class SplitFile; class Metadata; }
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
    const float* attnSinks = nullptr;    // (nHeads) gpt-oss: each head's sink logit
    // Mixture-of-experts biases (gpt-oss): the router's, and each expert's rows' (stacked as the
    // matrices: expert e's at [e * rows, (e + 1) * rows)).
    const float* routerBias = nullptr;      // (nExperts)
    const float* expertGateBias = nullptr;  // (nExperts * expertFfnDim)
    const float* expertUpBias = nullptr;    // (nExperts * expertFfnDim)
    const float* expertDownBias = nullptr;  // (nExperts * dim)
    // Mixture of experts (LlamaConfig::moe(); gate, up and down are then absent): the router and
    // the experts' matrices stacked, expert e's rows at [e * rows, (e + 1) * rows) of each
    // (expertMatrix cuts one out), as GGUF stores them (one 3-D tensor each).
    gpu::MatrixView router;        // (nExperts, dim)                  ffn_gate_inp
    gpu::MatrixView expertGate;    // (nExperts * expertFfnDim, dim)   ffn_gate_exps
    gpu::MatrixView expertUp;      // (nExperts * expertFfnDim, dim)   ffn_up_exps
    gpu::MatrixView expertDown;    // (nExperts * dim, expertFfnDim)   ffn_down_exps
    // The shared expert (qwen2moe; absent elsewhere) and its gate, one row of dim.
    gpu::MatrixView sharedGate;    // (sharedExpertFfnDim, dim)        ffn_gate_shexp
    gpu::MatrixView sharedUp;      // (sharedExpertFfnDim, dim)        ffn_up_shexp
    gpu::MatrixView sharedDown;    // (dim, sharedExpertFfnDim)        ffn_down_shexp
    gpu::MatrixView sharedRouter;  // (1, dim)                         ffn_gate_inp_shexp
    // A linear-attention layer (LlamaConfig::AttentionKind::Linear: Gated DeltaNet; wq, wk, wv
    // and wo are then absent). Unfused (Qwen3.5): ssmQkv the convolution's channels [q | k | v],
    // ssmGate z, ssmBeta and ssmAlpha one row per value head. Fused (Qwen3-Next): ssmQkv is
    // ssm_in, per key head [q | k | v | z], and ssmBeta is ssm_ba, per key head [beta | alpha];
    // ssmGate and ssmAlpha absent.
    gpu::MatrixView ssmQkv;    // (convDim, dim) attn_qkv, or (convDim + valueDim, dim) ssm_in
    gpu::MatrixView ssmGate;   // (valueDim, dim)   attn_gate
    gpu::MatrixView ssmBeta;   // (vHeads, dim)     ssm_beta, or (2 vHeads, dim) ssm_ba
    gpu::MatrixView ssmAlpha;  // (vHeads, dim)     ssm_alpha
    gpu::MatrixView ssmOut;    // (dim, valueDim)   ssm_out
    const float* ssmConv = nullptr;    // (convDim, kernel) ssm_conv1d: each channel's taps, oldest first
    const float* ssmDtBias = nullptr;  // (vHeads) ssm_dt.bias
    const float* ssmA = nullptr;       // (vHeads) ssm_a: -exp(A_log), the decay's rate
    const float* ssmNorm = nullptr;    // (headVDim) ssm_norm: the output's per-head RMSNorm
};

// Expert e's rows of a stacked expert matrix (LlamaLayerWeights::expertGate, ...).
inline gpu::MatrixView expertMatrix(const gpu::MatrixView& stacked, int experts, int e)
{
    gpu::MatrixView m = stacked;
    m.rows = stacked.rows / experts;
    m.data = static_cast<const uint8_t*>(stacked.data) + size_t(e) * size_t(m.rows) * stacked.rowStride;
    return m;
}

// Every matrix of a layer, with its GGUF name suffix: what the planner places and the weight
// streamer moves (absent ones have null data).
struct LayerMatrixMember {
    gpu::MatrixView LlamaLayerWeights::*member;
    const char* suffix;
    bool moe = false;  // a mixture of experts' only (router, expert stacks, shared expert)
    const char* alias = nullptr;  // the name a file may give it instead (Qwen3-Next: ssm_in.weight)
};
extern const LayerMatrixMember kLayerMatrices[20];

// Every float vector of a layer, with its GGUF name suffix and length: what the weight streamer
// keeps resident on the device, and what the loader binds.
struct LayerVectorMember {
    const float* LlamaLayerWeights::*member;
    const char* suffix;
    int (*length)(const LlamaConfig& c);
    const char* alias = nullptr;  // the name some families give it (gpt-oss: post_attention_norm)
    // Stacked per expert (a 2-D GGUF tensor {inner, length / inner}); null: 1-D.
    int (*inner)(const LlamaConfig& c) = nullptr;
    // A linear-attention layer's own: required there, not bound in attention layers.
    bool linear = false;
};
extern const LayerVectorMember kLayerVectors[21];

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

// How a bundle stores its down column: `type` values (f32, f16 or bf16: the down matrix's own
// values), or, with group > 0, int8 quants whose scales stay in a table beside the bundles (one
// per row of the down matrix and group of `group` neurons: value = q * scale[neuron / group][row],
// exactly the down matrix's value for q8_0 (group 32) and q8_g64 (group 64) weights). Names:
// "f32", "f16", "bf16", "i8g32", "i8g64".
struct BundleColumn {
    gpu::DType type = gpu::DType::F32;  // when group == 0
    int group = 0;
    bool operator==(const BundleColumn&) const = default;
    size_t bytes(int64_t dim) const { return group > 0 ? size_t(dim) : gpu::rowBytes(type, dim); }
    std::string name() const;
};
// The column a down matrix of type `down` is bundled as: its own f32/f16/bf16 values, int8
// quants for q8_0 and q8_g64, f32 values for anything else.
BundleColumn bundleColumnFor(gpu::DType down);
std::optional<BundleColumn> bundleColumnOfName(std::string_view name);

// Row-column bundles of a ReLU FFN layer (LLM in a flash §3.2), stored by `compress --bundles`
// as the package tensor "blk.N.ffn_bundle", format "bundle-<rows>-<column>": per neuron j, its
// gate row (gated FFNs only), its up row (both in the layer's own type, <rows>) and its down
// column (BundleColumn), one after the other, so one contiguous read brings everything the
// neuron needs. Shape {neurons, parts * dim}: parts = 3 (gated) or 2 values of `dim` per neuron.
// Int8 columns come with "blk.N.ffn_bundle_scales" (f32, {neurons / group, dim}), kept resident.
struct FfnBundles {
    gpu::DType rowType = gpu::DType::F32;   // gate and up rows
    BundleColumn column;                    // the down column
    int parts = 2;                          // row parts + the column
    int64_t neurons = 0, dim = 0;
    size_t rowBytes = 0;                    // one gate or up row
    size_t downBytes = 0;                   // one down column
    size_t stride = 0;                      // one neuron: (parts - 1) * rowBytes + downBytes
    const uint8_t* data = nullptr;          // in the package's mapping
    const float* scales = nullptr;          // int8 columns: (neurons / group, dim)
    uint32_t file = 0;                      // index into dataFiles
    uint64_t fileOffset = 0;
    // Byte offsets of the parts within a bundle.
    size_t upOffset() const { return parts == 3 ? rowBytes : 0; }
    size_t downOffset() const { return size_t(parts - 1) * rowBytes; }
};

// The bundle format name, e.g. "bundle-q8_0-i8g32"; and its parse (nullopt for another format).
std::string bundleFormatName(gpu::DType rowType, const BundleColumn& column);
std::optional<std::pair<gpu::DType, BundleColumn>> bundleTypesOfFormat(std::string_view format);

// What a file does not record about itself (llama2.c checkpoints name no architecture).
struct ModelLoadOptions {
    std::string architecture;   // empty: the file's own (llama2.c: "llama")
    std::string tokenizerPath;  // llama2.c tokenizer.bin; empty: looked for beside the model
};

class LlamaModel {
public:
    // `path`: a GGUF file (or any part of a split GGUF: the model is then all its parts, each
    // tensor read from the part that holds it, dataFiles() the parts in order, path() the first),
    // a package folder (or its manifest.json), or a llama2.c checkpoint.
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
    // The tensor name of matrix m in layer `layer`: "blk.<layer>.<suffix>", or its alias where
    // the file has that name instead.
    std::string matrixName(int layer, const LayerMatrixMember& m) const;
    // Row-column bundles of every FFN layer (a package written with bundles), or empty.
    const std::vector<FfnBundles>& ffnBundles() const { return m_bundles; }
    // The output head shares the embedding (no output.weight).
    bool tiedEmbeddings() const { return tensor("output.weight") == nullptr; }

    // Bytes of weights one decoded token reads (every matrix once, the embedding row aside).
    uint64_t weightBytesPerToken() const;
    uint64_t parameterCount() const;

private:
    LlamaModel() = default;
    Status bind();  // config, weights and tokenizer from the tensor table and metadata
    std::string m_path;
    std::unique_ptr<gguf::SplitFile> m_file;      // a GGUF model: one file, or the parts of a split one
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
    std::vector<FfnBundles> m_bundles;
    std::vector<std::pair<std::string, FfnBundles>> m_bundleTensors;  // as listed, checked by bind()
};

}  // namespace spillway
