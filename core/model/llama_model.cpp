#include "core/model/llama_model.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/formats/gguf.h"
#include "core/formats/gguf_split.h"
#include "core/model/hf_model.h"
#include "core/formats/llama2c.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/sparse_format.h"
#include "storage/package.h"

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
    WeightBinder(const LlamaModel& model, std::vector<std::vector<float>>& owned)
        : m_model(model), m_owned(owned) {}

    // A matrix of `rows` rows by `cols` columns (GGUF dims {cols, rows}).
    Result<gpu::MatrixView> matrix(const std::string& name, int64_t rows, int64_t cols)
    {
        return rowsOf(name, {cols, rows}, rows, cols);
    }

    // A 3-D tensor of `count` matrices of `rows` x `cols` (GGUF dims {cols, rows, count}) as one
    // matrix of count * rows rows; a 1-D one of cols values (count = rows = 1) as one row.
    Result<gpu::MatrixView> stacked(const std::string& name, int64_t count, int64_t rows, int64_t cols)
    {
        if (count == 1 && rows == 1) return rowsOf(name, {cols}, 1, cols);
        return rowsOf(name, {cols, rows, count}, count * rows, cols);
    }

    // A vector of n values as F32 (converted once at load when stored otherwise).
    // inner > 0: a 2-D tensor {inner, n / inner} (one row per expert), read as n values.
    Result<const float*> vector(const std::string& name, int64_t n, int64_t inner = 0)
    {
        const ModelTensor* t = m_model.tensor(name);
        if (!t) return missing(name);
        const std::vector<int64_t> dims = inner > 0 ? std::vector<int64_t>{inner, n / inner} : std::vector<int64_t>{n};
        if (t->dims != dims || (inner > 0 && n % inner != 0)) return wrongShape(*t, dims);
        if (t->type == gpu::DType::F32) {
            if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) return reinterpret_cast<const float*>(t->data);
            auto& out = m_owned.emplace_back(static_cast<size_t>(n));  // misaligned (safetensors): a copy
            std::memcpy(out.data(), t->data, size_t(n) * sizeof(float));
            return static_cast<const float*>(out.data());
        }
        if (t->type != gpu::DType::F16 && t->type != gpu::DType::BF16)
            return makeError(ErrorCode::UnsupportedModel, m_model.path() + ": norm tensor '" + name +
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
    // The tensor `name`, of GGUF dims `dims`, as `rows` rows of `cols` values.
    Result<gpu::MatrixView> rowsOf(const std::string& name, const std::vector<int64_t>& dims, int64_t rows, int64_t cols)
    {
        const ModelTensor* t = m_model.tensor(name);
        if (!t) return missing(name);
        if (t->dims != dims) return wrongShape(*t, dims);
        gpu::MatrixView m;
        m.type = t->type;
        m.data = t->data;
        m.rows = rows;
        m.cols = cols;
        m.rowStride = gpu::rowBytes(t->type, cols);
        return m;
    }
    Error missing(const std::string& name) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_model.path() + ": missing tensor '" + name + "'");
    }
    Error wrongShape(const ModelTensor& t, const std::vector<int64_t>& expected) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_model.path() + ": tensor '" + t.name +
                             "' has shape " + shapeText(t.dims) + ", expected " + shapeText(expected));
    }
    const LlamaModel& m_model;
    std::vector<std::vector<float>>& m_owned;
};

// "int8-g64" for a quantized blob's values, "f16" for a float one.
std::string blobValuesName(const gpu::BitmapSparseView& v)
{
    std::string s = gpu::sparseValuesName(v.format);
    if (gpu::isQuantized(v.format)) s += "-g" + std::to_string(v.group);
    return s;
}

}  // namespace

std::string packageFormatName(gpu::DType type, const void* blob)
{
    if (type == gpu::DType::BitmapSparse)
        return blob ? "bitmap-" + blobValuesName(gpu::viewBitmapBlob(blob)) : std::string("bitmap");
    std::string s = gpu::dtypeName(type);
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::optional<gpu::DType> dtypeOfPackageFormat(std::string_view format)
{
    if (format.rfind("bitmap-", 0) == 0) return gpu::DType::BitmapSparse;
    for (int i = 0; i < gpu::kDTypeCount; ++i) {
        const auto t = static_cast<gpu::DType>(i);
        if (t != gpu::DType::BitmapSparse && packageFormatName(t) == format) return t;
    }
    return std::nullopt;
}

std::string BundleColumn::name() const
{
    return group > 0 ? "i8g" + std::to_string(group) : packageFormatName(type);
}

BundleColumn bundleColumnFor(gpu::DType down)
{
    switch (down) {
    case gpu::DType::F16:
    case gpu::DType::BF16: return {down, 0};
    case gpu::DType::Q8_0: return {gpu::DType::F32, 32};
    case gpu::DType::Q8_G64: return {gpu::DType::F32, 64};
    default: return {gpu::DType::F32, 0};
    }
}

std::optional<BundleColumn> bundleColumnOfName(std::string_view name)
{
    if (name == "i8g32") return BundleColumn{gpu::DType::F32, 32};
    if (name == "i8g64") return BundleColumn{gpu::DType::F32, 64};
    const auto t = dtypeOfPackageFormat(name);
    if (t && (*t == gpu::DType::F32 || *t == gpu::DType::F16 || *t == gpu::DType::BF16)) return BundleColumn{*t, 0};
    return std::nullopt;
}

std::string bundleFormatName(gpu::DType rowType, const BundleColumn& column)
{
    return "bundle-" + packageFormatName(rowType) + "-" + column.name();
}

std::optional<std::pair<gpu::DType, BundleColumn>> bundleTypesOfFormat(std::string_view format)
{
    constexpr std::string_view prefix = "bundle-";
    if (format.substr(0, prefix.size()) != prefix) return std::nullopt;
    const std::string_view rest = format.substr(prefix.size());
    const size_t dash = rest.rfind('-');
    if (dash == std::string_view::npos) return std::nullopt;
    const auto rows = dtypeOfPackageFormat(rest.substr(0, dash));
    const auto column = bundleColumnOfName(rest.substr(dash + 1));
    if (!rows || !column || *rows == gpu::DType::BitmapSparse) return std::nullopt;
    return std::make_pair(*rows, *column);
}

const LayerVectorMember kLayerVectors[21] = {
    {&LlamaLayerWeights::attnNorm, "attn_norm.weight", [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::ffnNorm, "ffn_norm.weight", [](const LlamaConfig& c) { return c.dim; },
     "post_attention_norm.weight"},
    {&LlamaLayerWeights::qBias, "attn_q.bias", [](const LlamaConfig& c) { return c.qDim(); }},
    {&LlamaLayerWeights::kBias, "attn_k.bias", [](const LlamaConfig& c) { return c.kvDim(); }},
    {&LlamaLayerWeights::vBias, "attn_v.bias", [](const LlamaConfig& c) { return c.kvDim(); }},
    {&LlamaLayerWeights::oBias, "attn_output.bias", [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::qNorm, "attn_q_norm.weight", [](const LlamaConfig& c) { return c.qkNormWhole ? c.qDim() : c.headDim; }},
    {&LlamaLayerWeights::kNorm, "attn_k_norm.weight", [](const LlamaConfig& c) { return c.qkNormWhole ? c.kvDim() : c.headDim; }},
    {&LlamaLayerWeights::attnNormBias, "attn_norm.bias", [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::ffnNormBias, "ffn_norm.bias", [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::upBias, "ffn_up.bias", [](const LlamaConfig& c) { return c.ffnDim; }},
    {&LlamaLayerWeights::downBias, "ffn_down.bias", [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::attnSinks, "attn_sinks.weight", [](const LlamaConfig& c) { return c.nHeads; }},
    {&LlamaLayerWeights::routerBias, "ffn_gate_inp.bias", [](const LlamaConfig& c) { return c.nExperts; }},
    {&LlamaLayerWeights::expertGateBias, "ffn_gate_exps.bias", [](const LlamaConfig& c) { return c.nExperts * c.expertFfnDim; },
     nullptr, [](const LlamaConfig& c) { return c.expertFfnDim; }},
    {&LlamaLayerWeights::expertUpBias, "ffn_up_exps.bias", [](const LlamaConfig& c) { return c.nExperts * c.expertFfnDim; },
     nullptr, [](const LlamaConfig& c) { return c.expertFfnDim; }},
    {&LlamaLayerWeights::expertDownBias, "ffn_down_exps.bias", [](const LlamaConfig& c) { return c.nExperts * c.dim; },
     nullptr, [](const LlamaConfig& c) { return c.dim; }},
    {&LlamaLayerWeights::ssmConv, "ssm_conv1d.weight", [](const LlamaConfig& c) { return c.ssmConvDim() * c.ssmConvKernel; },
     nullptr, [](const LlamaConfig& c) { return c.ssmConvKernel; }, true},
    {&LlamaLayerWeights::ssmDtBias, "ssm_dt.bias", [](const LlamaConfig& c) { return c.ssmVHeads; }, nullptr, nullptr, true},
    {&LlamaLayerWeights::ssmA, "ssm_a", [](const LlamaConfig& c) { return c.ssmVHeads; }, nullptr, nullptr, true},
    {&LlamaLayerWeights::ssmNorm, "ssm_norm.weight", [](const LlamaConfig& c) { return c.ssmHeadVDim; }, nullptr, nullptr,
     true},
};

const LayerMatrixMember kLayerMatrices[20] = {
    {&LlamaLayerWeights::wq, "attn_q.weight"},
    {&LlamaLayerWeights::wk, "attn_k.weight"},
    {&LlamaLayerWeights::wv, "attn_v.weight"},
    {&LlamaLayerWeights::wo, "attn_output.weight"},
    {&LlamaLayerWeights::gate, "ffn_gate.weight"},
    {&LlamaLayerWeights::up, "ffn_up.weight"},
    {&LlamaLayerWeights::down, "ffn_down.weight"},
    {&LlamaLayerWeights::router, "ffn_gate_inp.weight", true},
    {&LlamaLayerWeights::expertGate, "ffn_gate_exps.weight", true},
    {&LlamaLayerWeights::expertUp, "ffn_up_exps.weight", true},
    {&LlamaLayerWeights::expertDown, "ffn_down_exps.weight", true},
    {&LlamaLayerWeights::sharedGate, "ffn_gate_shexp.weight", true},
    {&LlamaLayerWeights::sharedUp, "ffn_up_shexp.weight", true},
    {&LlamaLayerWeights::sharedDown, "ffn_down_shexp.weight", true},
    {&LlamaLayerWeights::sharedRouter, "ffn_gate_inp_shexp.weight", true},
    {&LlamaLayerWeights::ssmQkv, "attn_qkv.weight", false, "ssm_in.weight"},
    {&LlamaLayerWeights::ssmGate, "attn_gate.weight"},
    {&LlamaLayerWeights::ssmBeta, "ssm_beta.weight", false, "ssm_ba.weight"},
    {&LlamaLayerWeights::ssmAlpha, "ssm_alpha.weight"},
    {&LlamaLayerWeights::ssmOut, "ssm_out.weight"},
};

LlamaModel::~LlamaModel() = default;

const gguf::Metadata& LlamaModel::metadata() const
{
    return m_file ? m_file->meta() : m_imported ? m_imported->metadata : *m_packageMeta;
}

const ModelTensor* LlamaModel::tensor(std::string_view name) const
{
    const auto it = m_tensorIndex.find(name);
    return it == m_tensorIndex.end() ? nullptr : &m_tensors[it->second];
}

std::string LlamaModel::matrixName(int layer, const LayerMatrixMember& m) const
{
    const std::string b = "blk." + std::to_string(layer) + ".";
    return m.alias && !tensor(b + m.suffix) && tensor(b + m.alias) ? b + m.alias : b + m.suffix;
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& pathIn, const ModelLoadOptions& options)
{
    namespace fs = std::filesystem;
    auto model = std::unique_ptr<LlamaModel>(new LlamaModel());
    std::error_code ec;
    std::string path = pathIn;
    // A llama2.c checkpoint's descriptor: the checkpoint with the architecture and tokenizer it
    // names; the model keeps the descriptor's path (the library entry).
    if (llama2c::isDescriptor(path) && !fs::is_directory(path, ec)) {
        if (!options.architecture.empty() || !options.tokenizerPath.empty())
            return makeError(ErrorCode::InvalidArgument, path + ": the descriptor names the architecture and tokenizer");
        auto d = llama2c::readDescriptor(path);
        if (!d) return d.error();
        ModelLoadOptions named = options;
        named.architecture = d->architecture;
        named.tokenizerPath = d->tokenizer;
        auto loaded = load(d->checkpoint, named);
        if (!loaded) return loaded.error();
        (*loaded)->m_path = path;
        return loaded;
    }
    // A folder's descriptor stands for the folder (a package's manifest, a Hugging Face config).
    if (fs::path(path).filename() == "manifest.json" || fs::path(path).filename() == "config.json")
        path = fs::path(path).parent_path().string();
    // Nothing there: say so, before any rule about what kind of file it would have been.
    if (!fs::exists(pathIn, ec))
        return makeError(ErrorCode::Io, pathIn + ": no such file or folder");
    if (fs::path(path).extension() == ".safetensors" && !hf::looksLikeModelFolder(path))
        return makeError(ErrorCode::UnsupportedModel,
                         path + ": a safetensors file without the config.json of its model folder beside it (the "
                                "file holds weights only; open the folder it came with)");
    if (fs::path(path).extension() == ".bin" && fs::path(path).filename().string().rfind("pytorch_model", 0) == 0)
        return makeError(ErrorCode::UnsupportedModel,
                         path + ": a PyTorch pickle, which is never loaded (loading a pickle can run code); "
                                "use the model's safetensors or GGUF files");
    if (hf::looksLikeModelFolder(path)) {
        if (!options.architecture.empty())
            return makeError(ErrorCode::InvalidArgument, path + ": config.json names the architecture; an override "
                                                                "applies to llama2.c checkpoints only");
        auto imported = hf::importModelFolder(path);
        if (!imported) return imported.error();
        model->m_imported = std::move(imported.value());
        model->m_path = model->m_imported->path;
        model->m_dataFiles = model->m_imported->dataFiles;
        model->m_tensors = model->m_imported->tensors;
    } else if (!fs::is_directory(path, ec) && llama2c::looksLikeCheckpoint(path)) {
        llama2c::ImportOptions io;
        if (!options.architecture.empty()) io.architecture = options.architecture;
        io.tokenizerPath = options.tokenizerPath;
        auto imported = llama2c::importCheckpoint(path, io);
        if (!imported) return imported.error();
        model->m_imported = std::move(imported.value());
        model->m_path = model->m_imported->path;
        model->m_dataFiles = model->m_imported->dataFiles;
        model->m_tensors = model->m_imported->tensors;
    } else if (!options.architecture.empty()) {
        return makeError(ErrorCode::InvalidArgument,
                         path + ": the architecture is named by the file itself; an override applies to llama2.c "
                                "checkpoints only");
    } else if (fs::is_directory(path, ec)) {
        auto package = storage::Package::open(path);
        if (!package) return package.error();
        model->m_package = std::make_unique<storage::Package>(std::move(package.value()));
        const storage::Package& pkg = *model->m_package;
        const storage::PackageManifest& man = pkg.manifest();
        model->m_path = pkg.dir();
        const std::string manifestPath = pkg.dir() + "/manifest.json";
        model->m_packageMeta = std::make_unique<gguf::Metadata>(pkg.dir());
        gguf::Metadata& meta = *model->m_packageMeta;
        if (!man.hyperParametersJson.empty())
            SPILLWAY_TRY(gguf::metadataFromJson(man.hyperParametersJson, manifestPath + " (hyperParameters)", meta));
        if (!man.tokenizerJson.empty())
            SPILLWAY_TRY(gguf::metadataFromJson(man.tokenizerJson, manifestPath + " (tokenizer)", meta));
        if (!meta.find("general.architecture"))
            meta.add({"general.architecture", gguf::Value::ofString(man.architecture)});
        if (!man.chatTemplate.empty() && !meta.find("tokenizer.chat_template"))
            meta.add({"tokenizer.chat_template", gguf::Value::ofString(man.chatTemplate)});
        for (uint32_t i = 0; i < man.shardSizes.size(); ++i) model->m_dataFiles.push_back(pkg.shardPath(i));
        for (const storage::PackageTensor& pt : man.tensors) {
            auto bad = [&](const std::string& why) {
                return makeError(ErrorCode::ModelFileInvalid, manifestPath + ": tensor '" + pt.name + "' " + why);
            };
            if (pt.format.rfind("bundle-", 0) == 0) {
                // Row-column bundles (checked against the layers by bind()).
                const auto types = bundleTypesOfFormat(pt.format);
                if (!types) return bad("has format '" + pt.format + "', which is not a bundle format this version reads");
                if (pt.shape.size() != 2 || pt.shape[0] < 1 || pt.shape[1] < 1) return bad("should be 2-D (neurons, values)");
                auto bytes = pkg.map(pt);
                if (!bytes) return bytes.error();
                FfnBundles b;
                b.rowType = types->first;
                b.column = types->second;
                b.neurons = pt.shape[0];
                b.data = bytes->data();
                b.file = pt.shard;
                b.fileOffset = pt.offset;
                b.dim = pt.shape[1];   // parts * dim until bind() knows dim
                b.stride = bytes->size();  // the whole tensor until bind() checks it
                model->m_bundleTensors.emplace_back(pt.name, b);
                continue;
            }
            const auto type = dtypeOfPackageFormat(pt.format);
            if (!type)
                return makeError(ErrorCode::UnsupportedModel, manifestPath + ": tensor '" + pt.name +
                                     "' has format '" + pt.format + "', which this version cannot read");
            if (pt.shape.empty() || pt.shape.size() > 4) return bad("has " + std::to_string(pt.shape.size()) + " dimensions");
            ModelTensor t;
            t.name = pt.name;
            t.type = *type;
            t.dims.assign(pt.shape.rbegin(), pt.shape.rend());  // manifest: outermost first
            auto bytes = pkg.map(pt);
            if (!bytes) return bytes.error();
            t.data = bytes->data();
            t.bytes = bytes->size();
            t.file = pt.shard;
            t.fileOffset = pt.offset;
            const int64_t cols = t.dims[0];
            int64_t rows = 1;
            for (size_t d = 1; d < t.dims.size(); ++d) {
                if (t.dims[d] < 0 || (t.dims[d] && rows > (int64_t(1) << 40) / t.dims[d])) return bad("is too large");
                rows *= t.dims[d];
            }
            if (*type == gpu::DType::BitmapSparse) {
                if (const std::string problem = gpu::checkBitmapBlob(t.data, t.bytes); !problem.empty()) return bad(problem);
                const gpu::BitmapSparseView v = gpu::viewBitmapBlob(t.data);
                if (t.dims.size() != 2 || v.rows != rows || v.cols != cols)
                    return bad("holds a " + std::to_string(v.rows) + " x " + std::to_string(v.cols) +
                               " bitmap sparse blob, not its shape " + shapeText(pt.shape));
                if (pt.format != "bitmap-" + blobValuesName(v))
                    return bad("is '" + pt.format + "' but its blob holds bitmap-" + blobValuesName(v));
            } else {
                const auto& tr = gpu::dtypeTraits(*type);
                if (cols < 0 || cols % tr.blockSize != 0)
                    return bad("has " + std::to_string(cols) + " columns, not a multiple of " + std::to_string(tr.blockSize));
                if (uint64_t(gpu::rowBytes(*type, cols)) * uint64_t(rows) != t.bytes)
                    return bad("is " + std::to_string(t.bytes) + " bytes, its shape and format need " +
                               std::to_string(uint64_t(gpu::rowBytes(*type, cols)) * uint64_t(rows)));
            }
            model->m_tensors.push_back(std::move(t));
        }
    } else {
        // One file, or every part of a split GGUF (any part opens them all): each tensor keeps
        // the part it lies in as its file.
        auto file = gguf::SplitFile::open(path);
        if (!file) return file.error();
        model->m_file = std::move(file.value());
        const gguf::SplitFile& f = *model->m_file;
        model->m_path = f.path();
        model->m_dataFiles = f.partPaths();
        for (const gguf::PartTensor& pt : f.tensors()) {
            const gguf::TensorInfo& info = *pt.info;
            model->m_tensors.push_back(ModelTensor{info.name, info.type, info.dims, info.data, info.bytes, pt.part,
                                                   pt.fileOffset});
        }
    }
    for (size_t i = 0; i < model->m_tensors.size(); ++i)
        if (!model->m_tensorIndex.emplace(model->m_tensors[i].name, i).second)
            return makeError(ErrorCode::ModelFileInvalid, model->m_path + ": tensor '" + model->m_tensors[i].name + "' appears twice");
    SPILLWAY_TRY(model->bind());
    return model;
}

Status LlamaModel::bind()
{
    const std::string& path = m_path;
    auto config = llamaConfigFromMetadata(metadata());
    if (!config) return config.error();
    LlamaConfig& c = m_config = std::move(config.value());

    const ModelTensor* embd = tensor("token_embd.weight");
    if (!embd || embd->dims.size() != 2)
        return makeError(ErrorCode::ModelFileInvalid, path + ": missing 2-D tensor 'token_embd.weight'");
    if (embd->dims[1] < 1 || embd->dims[1] > (int64_t(1) << 24))
        return makeError(ErrorCode::ModelFileInvalid, path + ": vocabulary size out of range");
    if (embd->type == gpu::DType::BitmapSparse)
        return makeError(ErrorCode::UnsupportedModel, path + ": token_embd.weight is bitmap sparse (embeddings must be dense)");
    c.vocabSize = static_cast<int>(embd->dims[1]);

    WeightBinder bind(*this, m_ownedVectors);
    LlamaWeights& w = m_weights;
    const int64_t dim = c.dim, q = c.qDim(), kv = c.kvDim(), ffn = c.ffnDim, vocab = c.vocabSize;
    const int64_t embDim = c.embeddingDim();
    auto assignMatrix = [&](gpu::MatrixView& dst, const std::string& n, int64_t r, int64_t k) -> Status {
        auto m = bind.matrix(n, r, k);
        if (!m) return m.error();
        dst = *m;
        return {};
    };
    auto assignVector = [&](const float*& dst, const std::string& n, int64_t len, int64_t inner = 0) -> Status {
        auto v = bind.vector(n, len, inner);
        if (!v) return v.error();
        dst = *v;
        return {};
    };
    SPILLWAY_TRY(assignMatrix(w.tokenEmbedding, "token_embd.weight", vocab, embDim));
    if (c.embedDim > 0) {
        SPILLWAY_TRY(assignMatrix(w.projectIn, "proj_in.weight", dim, embDim));
        SPILLWAY_TRY(assignMatrix(w.projectOut, "proj_out.weight", embDim, dim));
    }
    if (c.learnedPositions) {
        const ModelTensor* pe = tensor("position_embd.weight");
        if (!pe || pe->dims.size() != 2 || pe->dims[1] <= c.positionOffset)
            return makeError(ErrorCode::ModelFileInvalid, path + ": missing 2-D tensor 'position_embd.weight'");
        SPILLWAY_TRY(assignMatrix(w.positionEmbedding, "position_embd.weight", pe->dims[1], dim));
        // Positions past the table do not exist: the context is bounded by it.
        c.trainedContext = std::min<int64_t>(c.trainedContext, pe->dims[1] - c.positionOffset);
    }
    // A mixture of experts' FFN: the router, the stacked experts and (where the file has it and
    // the metadata says its width) the shared expert with its gate.
    auto bindExperts = [&](LlamaLayerWeights& L, const std::string& b) -> Status {
        const int64_t experts = c.nExperts, width = c.expertFfnDim;
        auto stacked = [&](gpu::MatrixView& dst, const std::string& n, int64_t count, int64_t r, int64_t k) -> Status {
            auto m = bind.stacked(n, count, r, k);
            if (!m) return m.error();
            dst = *m;
            return {};
        };
        if (tensor(b + "ffn_gate.0.weight"))
            return makeError(ErrorCode::UnsupportedModel,
                             path + ": stores each expert as its own tensor (" + b +
                                 "ffn_gate.0.weight, an older Mixtral GGUF); convert it with a current llama.cpp "
                                 "(convert_hf_to_gguf.py) so that each layer's experts are one ffn_*_exps tensor");
        SPILLWAY_TRY(assignMatrix(L.router, b + "ffn_gate_inp.weight", experts, dim));
        SPILLWAY_TRY(stacked(L.expertGate, b + "ffn_gate_exps.weight", experts, width, dim));
        SPILLWAY_TRY(stacked(L.expertUp, b + "ffn_up_exps.weight", experts, width, dim));
        SPILLWAY_TRY(stacked(L.expertDown, b + "ffn_down_exps.weight", experts, dim, width));
        if (c.sharedExpertFfnDim > 0 && tensor(b + "ffn_up_shexp.weight")) {
            const int64_t shared = c.sharedExpertFfnDim;
            SPILLWAY_TRY(assignMatrix(L.sharedGate, b + "ffn_gate_shexp.weight", shared, dim));
            SPILLWAY_TRY(assignMatrix(L.sharedUp, b + "ffn_up_shexp.weight", shared, dim));
            SPILLWAY_TRY(assignMatrix(L.sharedDown, b + "ffn_down_shexp.weight", dim, shared));
            SPILLWAY_TRY(stacked(L.sharedRouter, b + "ffn_gate_inp_shexp.weight", 1, 1, dim));
        }
        return {};
    };
    // Norm weights are required; biases, QK norms and LayerNorm biases are taken when present
    // (LayerNorm models must have theirs).
    auto required = [&](const char* suffix) {
        const std::string sfx = suffix;
        return sfx == "attn_norm.weight" || sfx == "ffn_norm.weight" ||
               (c.layerNorm && (sfx == "attn_norm.bias" || sfx == "ffn_norm.bias"));
    };
    w.layers.resize(static_cast<size_t>(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l) {
        auto& L = w.layers[static_cast<size_t>(l)];
        const std::string b = "blk." + std::to_string(l) + ".";
        const bool linear = c.linearLayer(l);
        if (linear) {
            // Gated DeltaNet: its projections, fused (ssm_in, ssm_ba) or apart.
            const int64_t conv = c.ssmConvDim(), value = c.ssmValueDim(), vHeads = c.ssmVHeads;
            if (c.ssmFusedInput) {
                SPILLWAY_TRY(assignMatrix(L.ssmQkv, b + "ssm_in.weight", conv + value, dim));
                SPILLWAY_TRY(assignMatrix(L.ssmBeta, b + "ssm_ba.weight", 2 * vHeads, dim));
            } else {
                SPILLWAY_TRY(assignMatrix(L.ssmQkv, b + "attn_qkv.weight", conv, dim));
                SPILLWAY_TRY(assignMatrix(L.ssmGate, b + "attn_gate.weight", value, dim));
                SPILLWAY_TRY(assignMatrix(L.ssmBeta, b + "ssm_beta.weight", vHeads, dim));
                SPILLWAY_TRY(assignMatrix(L.ssmAlpha, b + "ssm_alpha.weight", vHeads, dim));
            }
            SPILLWAY_TRY(assignMatrix(L.ssmOut, b + "ssm_out.weight", dim, value));
        } else {
            // A gated attention's q rows hold each head's q and its output gate.
            SPILLWAY_TRY(assignMatrix(L.wq, b + "attn_q.weight", c.attentionOutputGate ? 2 * q : q, dim));
            SPILLWAY_TRY(assignMatrix(L.wk, b + "attn_k.weight", kv, dim));
            SPILLWAY_TRY(assignMatrix(L.wv, b + "attn_v.weight", kv, dim));
            SPILLWAY_TRY(assignMatrix(L.wo, b + "attn_output.weight", dim, q));
        }
        if (c.moe()) {
            SPILLWAY_TRY(bindExperts(L, b));
        } else {
            if (c.ffnGated) SPILLWAY_TRY(assignMatrix(L.gate, b + "ffn_gate.weight", ffn, dim));
            SPILLWAY_TRY(assignMatrix(L.up, b + "ffn_up.weight", ffn, dim));
            SPILLWAY_TRY(assignMatrix(L.down, b + "ffn_down.weight", dim, ffn));
        }
        for (const LayerVectorMember& v : kLayerVectors) {
            // A vector under its other name where the file has that one instead (gpt-oss's FFN norm).
            const std::string name = v.alias && !tensor(b + v.suffix) && tensor(b + v.alias) ? v.alias : v.suffix;
            // A linear layer's own vectors are required there (and nowhere else).
            if (v.linear && !linear) continue;
            if (required(v.suffix) || v.linear || tensor(b + name))
                SPILLWAY_TRY(assignVector(L.*(v.member), b + name, v.length(c), v.inner ? v.inner(c) : 0));
        }
        if (c.attentionSinks && !L.attnSinks)
            return makeError(ErrorCode::ModelFileInvalid, path + ": missing tensor '" + b + "attn_sinks.weight' (" +
                                                              c.architecture + " attends with sinks)");
    }
    if (!c.postNorm) {  // post-norm blocks end normed: no final norm
        SPILLWAY_TRY(assignVector(w.outputNorm, "output_norm.weight", dim));
        if (c.layerNorm) SPILLWAY_TRY(assignVector(w.outputNormBias, "output_norm.bias", dim));
    }
    if (!tiedEmbeddings()) {
        SPILLWAY_TRY(assignMatrix(w.output, "output.weight", vocab, embDim));
    } else {
        w.output = w.tokenEmbedding;  // tied embeddings
    }

    if (!m_bundleTensors.empty()) {
        // Row-column bundles: one per layer, shaped and typed as the layer's FFN.
        const std::string where = path + "/manifest.json";
        m_bundles.assign(size_t(c.nLayers), FfnBundles{});
        std::vector<bool> seen(size_t(c.nLayers), false);
        for (auto& [name, b] : m_bundleTensors) {
            auto bad = [&](const std::string& why) {
                return makeError(ErrorCode::ModelFileInvalid, where + ": tensor '" + name + "' " + why);
            };
            int layer = -1;
            if (std::sscanf(name.c_str(), "blk.%d.ffn_bundle", &layer) != 1 || layer < 0 || layer >= c.nLayers ||
                name != "blk." + std::to_string(layer) + ".ffn_bundle")
                return bad("does not name a layer of this model");
            if (seen[size_t(layer)]) return bad("appears twice");
            seen[size_t(layer)] = true;
            const LlamaLayerWeights& L = w.layers[size_t(layer)];
            const int parts = c.ffnGated ? 3 : 2;
            const uint64_t total = b.stride;
            if (b.neurons != ffn || b.dim != parts * dim)
                return bad("should be " + std::to_string(ffn) + " x " + std::to_string(parts * dim) + " (neurons, " +
                           std::to_string(parts) + " x dim)");
            if (b.rowType != L.up.type) return bad("holds rows of another type than the layer's ffn_up");
            if (b.column != bundleColumnFor(L.down.type))
                return bad("holds down columns as " + b.column.name() + ", not as the layer's ffn_down needs (" +
                           bundleColumnFor(L.down.type).name() + ")");
            const auto& rt = gpu::dtypeTraits(b.rowType);
            if (dim % rt.blockSize != 0) return bad("has rows that are not whole blocks");
            b.parts = parts;
            b.dim = dim;
            b.rowBytes = gpu::rowBytes(b.rowType, dim);
            b.downBytes = b.column.bytes(dim);
            if (b.column.group > 0) {
                const std::string scalesName = "blk." + std::to_string(layer) + ".ffn_bundle_scales";
                const ModelTensor* sc = tensor(scalesName);
                if (!sc || sc->type != gpu::DType::F32 || sc->dims.size() != 2 || sc->dims[0] != dim ||
                    sc->dims[1] != ffn / b.column.group || ffn % b.column.group != 0)
                    return bad("has int8 columns but no f32 '" + scalesName + "' of " +
                               std::to_string(ffn / b.column.group) + " x " + std::to_string(dim));
                b.scales = reinterpret_cast<const float*>(sc->data);
            }
            b.stride = size_t(parts - 1) * b.rowBytes + b.downBytes;
            if (uint64_t(b.stride) * uint64_t(b.neurons) != total)
                return bad("is " + std::to_string(total) + " bytes, its shape and format need " +
                           std::to_string(uint64_t(b.stride) * uint64_t(b.neurons)));
            m_bundles[size_t(layer)] = b;
        }
        for (int l = 0; l < c.nLayers; ++l)
            if (!seen[size_t(l)])
                return makeError(ErrorCode::ModelFileInvalid,
                                 where + ": has FFN bundles for some layers but not for layer " + std::to_string(l));
        m_bundleTensors.clear();
    }

    auto vocabulary = vocabularyFromMetadata(metadata());
    if (!vocabulary) return vocabulary.error();
    if (static_cast<int64_t>(vocabulary->tokens.size()) != vocab)
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": tokenizer has " + std::to_string(vocabulary->tokens.size()) +
                             " tokens but token_embd.weight has " + std::to_string(vocab) + " rows");
    auto tokenizer = Tokenizer::create(std::move(vocabulary.value()));
    if (!tokenizer) return tokenizer.error();
    m_tokenizer = std::move(tokenizer.value());
    return {};
}

uint64_t LlamaModel::weightBytesPerToken() const
{
    uint64_t total = gpu::matrixBytes(m_weights.output);
    if (m_weights.projectIn.data)
        total += gpu::matrixBytes(m_weights.projectIn) + gpu::matrixBytes(m_weights.projectOut);
    const LlamaConfig& c = m_config;
    for (const auto& L : m_weights.layers) {
        total += gpu::matrixBytes(L.ssmQkv) + gpu::matrixBytes(L.ssmGate) + gpu::matrixBytes(L.ssmBeta) +
                 gpu::matrixBytes(L.ssmAlpha) + gpu::matrixBytes(L.ssmOut);
        total += gpu::matrixBytes(L.wq) + gpu::matrixBytes(L.wk) + gpu::matrixBytes(L.wv) + gpu::matrixBytes(L.wo) +
                 gpu::matrixBytes(L.gate) + gpu::matrixBytes(L.up) + gpu::matrixBytes(L.down) +
                 2 * sizeof(float) * uint64_t(c.dim);
        // A mixture of experts reads its router, shared expert and nExpertsUsed of the experts.
        total += gpu::matrixBytes(L.router) + gpu::matrixBytes(L.sharedGate) + gpu::matrixBytes(L.sharedUp) +
                 gpu::matrixBytes(L.sharedDown) + gpu::matrixBytes(L.sharedRouter);
        if (c.moe())
            total += (gpu::matrixBytes(L.expertGate) + gpu::matrixBytes(L.expertUp) + gpu::matrixBytes(L.expertDown)) /
                     uint64_t(c.nExperts) * uint64_t(c.nExpertsUsed);
    }
    total += sizeof(float) * uint64_t(m_config.dim);
    return total;
}

uint64_t LlamaModel::parameterCount() const
{
    uint64_t n = 0;
    for (const auto& t : m_tensors) {
        uint64_t e = 1;
        for (int64_t d : t.dims) e *= static_cast<uint64_t>(d);
        n += e;
    }
    return n;
}

}  // namespace spillway
