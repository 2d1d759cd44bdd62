#include "core/model/llama_model.h"

#include "core/formats/gguf.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway {

namespace {

std::string shapeText(const std::vector<int64_t>& dims)
{
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

class WeightBinder {
public:
    WeightBinder(const gguf::File& file, std::vector<std::vector<float>>& owned)
        : m_file(file), m_owned(owned) {}

    // A matrix of `rows` rows by `cols` columns (GGUF dims {cols, rows}).
    Result<gpu::MatrixView> matrix(const std::string& name, int64_t rows, int64_t cols)
    {
        const auto* t = m_file.tensor(name);
        if (!t) return missing(name);
        if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)
            return wrongShape(*t, {cols, rows});
        gpu::MatrixView m;
        m.type = t->type;
        m.data = t->data;
        m.rows = rows;
        m.cols = cols;
        m.rowStride = gpu::rowBytes(t->type, cols);
        return m;
    }

    // A vector of n values as F32 (converted once at load when stored otherwise).
    Result<const float*> vector(const std::string& name, int64_t n)
    {
        const auto* t = m_file.tensor(name);
        if (!t) return missing(name);
        if (t->elements() != n || t->dims[0] != n) return wrongShape(*t, {n});
        if (t->type == gpu::DType::F32) {
            if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0)
                return makeError(ErrorCode::ModelFileInvalid,
                                 m_file.path() + ": tensor '" + name + "' is not 4-byte aligned");
            return reinterpret_cast<const float*>(t->data);
        }
        if (t->type != gpu::DType::F16 && t->type != gpu::DType::BF16)
            return makeError(ErrorCode::UnsupportedModel, m_file.path() + ": norm tensor '" + name +
                                 "' has type " + gpu::dtypeName(t->type) + " (expected F32/F16/BF16)");
        auto& out = m_owned.emplace_back(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            __builtin_memcpy(&h, t->data + 2 * i, 2);
            out[i] = t->type == gpu::DType::F16 ? gpu::fp16ToFp32(h) : gpu::bf16ToFp32(h);
        }
        return static_cast<const float*>(out.data());
    }

private:
    Error missing(const std::string& name) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_file.path() + ": missing tensor '" + name + "'");
    }
    Error wrongShape(const gguf::TensorInfo& t, const std::vector<int64_t>& expected) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_file.path() + ": tensor '" + t.name +
                             "' has shape " + shapeText(t.dims) + ", expected " + shapeText(expected));
    }
    const gguf::File& m_file;
    std::vector<std::vector<float>>& m_owned;
};

}  // namespace

LlamaModel::~LlamaModel() = default;

const std::string& LlamaModel::path() const { return m_file->path(); }

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path)
{
    auto file = gguf::File::open(path);
    if (!file) return file.error();
    auto model = std::unique_ptr<LlamaModel>(new LlamaModel());
    model->m_file = std::move(file.value());
    const gguf::File& f = *model->m_file;

    auto config = llamaConfigFromGguf(f);
    if (!config) return config.error();
    LlamaConfig& c = model->m_config = std::move(config.value());

    const auto* embd = f.tensor("token_embd.weight");
    if (!embd || embd->dims.size() != 2)
        return makeError(ErrorCode::ModelFileInvalid, path + ": missing 2-D tensor 'token_embd.weight'");
    if (embd->dims[1] < 1 || embd->dims[1] > (int64_t(1) << 24))
        return makeError(ErrorCode::ModelFileInvalid, path + ": vocabulary size out of range");
    c.vocabSize = static_cast<int>(embd->dims[1]);

    WeightBinder bind(f, model->m_ownedVectors);
    LlamaWeights& w = model->m_weights;
    const int64_t dim = c.dim, q = c.qDim(), kv = c.kvDim(), ffn = c.ffnDim, vocab = c.vocabSize;
    auto assignMatrix = [&](gpu::MatrixView& dst, const std::string& n, int64_t r, int64_t k) -> Status {
        auto m = bind.matrix(n, r, k);
        if (!m) return m.error();
        dst = *m;
        return {};
    };
    auto assignVector = [&](const float*& dst, const std::string& n, int64_t len) -> Status {
        auto v = bind.vector(n, len);
        if (!v) return v.error();
        dst = *v;
        return {};
    };
    SPILLWAY_TRY(assignMatrix(w.tokenEmbedding, "token_embd.weight", vocab, dim));
    w.layers.resize(static_cast<size_t>(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l) {
        auto& L = w.layers[static_cast<size_t>(l)];
        const std::string b = "blk." + std::to_string(l) + ".";
        SPILLWAY_TRY(assignVector(L.attnNorm, b + "attn_norm.weight", dim));
        SPILLWAY_TRY(assignMatrix(L.wq, b + "attn_q.weight", q, dim));
        SPILLWAY_TRY(assignMatrix(L.wk, b + "attn_k.weight", kv, dim));
        SPILLWAY_TRY(assignMatrix(L.wv, b + "attn_v.weight", kv, dim));
        SPILLWAY_TRY(assignMatrix(L.wo, b + "attn_output.weight", dim, q));
        SPILLWAY_TRY(assignVector(L.ffnNorm, b + "ffn_norm.weight", dim));
        SPILLWAY_TRY(assignMatrix(L.gate, b + "ffn_gate.weight", ffn, dim));
        SPILLWAY_TRY(assignMatrix(L.up, b + "ffn_up.weight", ffn, dim));
        SPILLWAY_TRY(assignMatrix(L.down, b + "ffn_down.weight", dim, ffn));
    }
    SPILLWAY_TRY(assignVector(w.outputNorm, "output_norm.weight", dim));
    if (f.tensor("output.weight")) {
        SPILLWAY_TRY(assignMatrix(w.output, "output.weight", vocab, dim));
    } else {
        w.output = w.tokenEmbedding;  // tied embeddings
    }

    auto vocabulary = vocabularyFromGguf(f);
    if (!vocabulary) return vocabulary.error();
    if (static_cast<int64_t>(vocabulary->tokens.size()) != vocab)
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": tokenizer has " + std::to_string(vocabulary->tokens.size()) +
                             " tokens but token_embd.weight has " + std::to_string(vocab) + " rows");
    auto tokenizer = Tokenizer::create(std::move(vocabulary.value()));
    if (!tokenizer) return tokenizer.error();
    model->m_tokenizer = std::move(tokenizer.value());
    return model;
}

uint64_t LlamaModel::weightBytesPerToken() const
{
    auto bytes = [](const gpu::MatrixView& m) { return uint64_t(m.rowStride) * uint64_t(m.rows); };
    uint64_t total = bytes(m_weights.output);
    for (const auto& L : m_weights.layers)
        total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.gate) +
                 bytes(L.up) + bytes(L.down) + 2 * sizeof(float) * uint64_t(m_config.dim);
    total += sizeof(float) * uint64_t(m_config.dim);
    return total;
}

uint64_t LlamaModel::parameterCount() const
{
    uint64_t n = 0;
    for (const auto& t : m_file->tensors()) n += static_cast<uint64_t>(t.elements());
    return n;
}

}  // namespace spillway
