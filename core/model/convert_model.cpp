#include "core/model/convert_model.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/formats/gguf.h"
#include "core/formats/gguf_split.h"
#include "core/formats/hf_config.h"
#include "core/formats/safetensors.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "gpu/host.h"

namespace spillway {

namespace fs = std::filesystem;

namespace {

// Keys that describe how this engine imported a file, not the model.
bool importOnlyKey(std::string_view key)
{
    return key == "spillway.rope.neox" || key == "spillway.source_format" || key == "general.alignment" ||
           gguf::isSplitKey(key);  // a split model's parts: a joined or re-split output writes its own
}

// Rows of a tensor as the permutation sees them: a matrix's rows, a bias's elements.
struct RowShape {
    int64_t rows;
    size_t rowBytes;
};

RowShape rowShape(const ModelTensor& t)
{
    if (t.dims.size() == 1) return {t.dims[0], size_t(t.bytes / uint64_t(std::max<int64_t>(t.dims[0], 1)))};
    return {t.dims[1], gpu::rowBytes(t.type, t.dims[0])};
}

// Whether tensor `name` is stored in the other ecosystem's Q/K row order and must be permuted
// on its way out; heads for the permutation in *heads.
bool needsPermutation(const LlamaModel& model, const ModelTensor& t, ConvertTarget target, int* heads)
{
    const LlamaConfig& c = model.config();
    if (!hfNeedsRopePermutation(c.architecture, t.name)) return false;
    // Source order: Hugging Face's (rotate-half) when the engine rotates halves for a Llama.
    const bool sourceIsHf = c.ropeNeox;
    const bool targetIsHf = target == ConvertTarget::HuggingFace;
    if (sourceIsHf == targetIsHf) return false;
    *heads = t.name.find("attn_k") != std::string::npos ? c.nKvHeads : c.nHeads;
    return true;
}

Status writeGguf(const LlamaModel& model, const std::string& out, const ConvertOptions& options)
{
    std::vector<gguf::KeyValue> metadata;
    for (const gguf::KeyValue& kv : model.metadata().entries())
        if (!importOnlyKey(kv.key) && !(options.chatTemplate && kv.key == "tokenizer.chat_template"))
            metadata.push_back(kv);
    if (options.chatTemplate) metadata.push_back({"tokenizer.chat_template", gguf::Value::ofString(*options.chatTemplate)});
    std::vector<gguf::TensorSource> tensors;
    for (const ModelTensor& t : model.tensors()) {
        if (gguf::ggmlFromDtype(t.type) == 0 && t.type != gpu::DType::F32)
            return makeError(ErrorCode::UnsupportedModel, model.path() + ": tensor '" + t.name + "' is " +
                                                              packageFormatName(t.type) + ", which GGUF cannot hold");
        int heads = 0;
        const bool permute = needsPermutation(model, t, ConvertTarget::Gguf, &heads);
        const RowShape shape = rowShape(t);
        const ModelTensor* src = &t;
        tensors.push_back({t.name, t.type, t.dims, [src, permute, heads, shape](std::span<uint8_t> dst) {
            if (!permute || !permuteRopeRows(src->data, dst.data(), shape.rows, shape.rowBytes, heads, true))
                std::memcpy(dst.data(), src->data, dst.size());
        }});
    }
    if (options.splitMaxBytes > 0 || options.splitMaxTensors > 0) {
        const gguf::SplitPlan plan{options.splitMaxBytes, options.splitMaxTensors};
        auto parts = gguf::writeSplit(metadata, tensors, splitOutputPrefix(out), plan);
        if (!parts) return parts.error();
        return {};
    }
    gguf::Writer w;
    for (gguf::KeyValue& kv : metadata) w.setValue(std::move(kv.key), std::move(kv.value));
    for (gguf::TensorSource& t : tensors) w.addTensor(std::move(t.name), t.type, std::move(t.dims), std::move(t.fill));
    return w.write(out);
}

Status writeText(const fs::path& path, const std::string& text)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(text.data(), std::streamsize(text.size()));
    f.close();
    if (!f) return makeError(ErrorCode::Io, path.string() + ": cannot write");
    return {};
}

Status writeHfFolder(const LlamaModel& model, const fs::path& dir, uint64_t shardBytes)
{
    const LlamaConfig& c = model.config();
    const gguf::Metadata& meta = model.metadata();
    auto config = hfConfigFromMetadata(meta, model.tiedEmbeddings());
    if (!config) return config.error();
    auto generation = hfGenerationConfigFromMetadata(meta);
    if (!generation) return generation.error();
    auto tokenizer = hfTokenizerJsonFromMetadata(meta);
    if (!tokenizer) return tokenizer.error();
    auto tokenizerConfig = hfTokenizerConfigFromMetadata(meta);
    if (!tokenizerConfig) return tokenizerConfig.error();
    SPILLWAY_TRY(writeText(dir / "config.json", *config));
    SPILLWAY_TRY(writeText(dir / "generation_config.json", *generation));
    SPILLWAY_TRY(writeText(dir / "tokenizer.json", *tokenizer));
    SPILLWAY_TRY(writeText(dir / "tokenizer_config.json", *tokenizerConfig));

    std::shared_ptr<gpu::Device> cpu;  // dequantizes quantized rows
    // Shards: a new one when the next tensor would take the current one past shardBytes.
    std::vector<safetensors::Writer> shards(1);
    std::vector<std::vector<std::string>> shardNames(1);
    uint64_t shardData = 0, totalData = 0;
    shards.back().setMetadata("format", "pt");
    auto writerFor = [&](const std::string& name, uint64_t bytes) -> safetensors::Writer& {
        if (shardData > 0 && shardData + bytes > shardBytes) {
            shards.emplace_back().setMetadata("format", "pt");
            shardNames.emplace_back();
            shardData = 0;
        }
        shardData += bytes;
        totalData += bytes;
        shardNames.back().push_back(name);
        return shards.back();
    };
    // One HF tensor: `shape` (outermost first) of `type` at `data`; rows dequantized to F32 where
    // safetensors has no such type; Q/K rows permuted where `permute`.
    auto addTensor = [&](const std::string& name, gpu::DType type, const std::vector<int64_t>& shape,
                         const uint8_t* data, uint64_t bytes, bool permute, int heads) -> Status {
        if (safetensors::dtypeName(type)) {
            const RowShape rs = shape.size() == 1 ? RowShape{shape[0], size_t(bytes / uint64_t(std::max<int64_t>(shape[0], 1)))}
                                                  : RowShape{shape[0], gpu::rowBytes(type, shape.back())};
            writerFor(name, bytes).addTensor(name, type, shape, [data, permute, heads, rs](std::span<uint8_t> dst) {
                if (!permute || !permuteRopeRows(data, dst.data(), rs.rows, rs.rowBytes, heads, false))
                    std::memcpy(dst.data(), data, dst.size());
            });
            return {};
        }
        if (shape.size() != 2)
            return makeError(ErrorCode::UnsupportedModel, model.path() + ": tensor '" + name + "' is " +
                                                              packageFormatName(type) + " and not a matrix");
        if (!cpu) cpu = gpu::createCpuDevice(1);
        gpu::MatrixView view;
        view.type = type;
        view.data = data;
        view.cols = shape[1];
        view.rows = shape[0];
        view.rowStride = gpu::rowBytes(type, view.cols);
        gpu::Device* device = cpu.get();
        const uint64_t f32Bytes = uint64_t(view.rows) * uint64_t(view.cols) * 4;
        writerFor(name, f32Bytes).addTensor(name, gpu::DType::F32, shape, [device, view, permute, heads](std::span<uint8_t> dst) {
            std::vector<float> all(size_t(view.rows * view.cols));
            for (int64_t r = 0; r < view.rows; ++r) device->getRow(view, r, all.data() + r * view.cols);
            const auto* bytes = reinterpret_cast<const uint8_t*>(all.data());
            if (!permute || !permuteRopeRows(bytes, dst.data(), view.rows, size_t(view.cols) * 4, heads, false))
                std::memcpy(dst.data(), bytes, dst.size());
        });
        return {};
    };
    for (const ModelTensor& t : model.tensors()) {
        std::vector<int64_t> shape(t.dims.rbegin(), t.dims.rend());
        if (t.dims.size() == 3) {
            // A mixture of experts' stack: one HF tensor per expert.
            const int64_t experts = t.dims[2];
            const uint64_t each = t.bytes / uint64_t(std::max<int64_t>(experts, 1));
            for (int64_t e = 0; e < experts; ++e) {
                const auto name = hfExpertTensorName(c.architecture, t.name, e);
                if (!name)
                    return makeError(ErrorCode::UnsupportedModel, model.path() + ": tensor '" + t.name +
                                                                      "' has no Hugging Face name in a '" + c.architecture +
                                                                      "' model");
                SPILLWAY_TRY(addTensor(*name, t.type, {shape[1], shape[2]}, t.data + e * each, each, false, 0));
            }
            continue;
        }
        const auto name = hfTensorName(c.architecture, t.name);
        if (!name)
            return makeError(ErrorCode::UnsupportedModel, model.path() + ": tensor '" + t.name +
                                                              "' has no Hugging Face name in a '" + c.architecture + "' model");
        // Qwen2-MoE's shared expert gate: a vector in GGUF, a Linear(hidden, 1) in HF.
        if (t.dims.size() == 1 && t.name.ends_with("ffn_gate_inp_shexp.weight")) shape = {1, t.dims[0]};
        int heads = 0;
        const bool permute = needsPermutation(model, t, ConvertTarget::HuggingFace, &heads);
        SPILLWAY_TRY(addTensor(*name, t.type, shape, t.data, t.bytes, permute, heads));
    }
    if (shards.size() == 1) return shards[0].write((dir / "model.safetensors").string());
    std::map<std::string, std::string> weightMap;
    for (size_t i = 0; i < shards.size(); ++i) {
        char file[64];
        std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        SPILLWAY_TRY(shards[i].write((dir / file).string()));
        for (const std::string& n : shardNames[i]) weightMap[n] = file;
    }
    return safetensors::writeIndex((dir / "model.safetensors.index.json").string(), weightMap, totalData);
}

}  // namespace

std::string splitOutputPrefix(const std::string& outPath)
{
    if (const auto name = gguf::parseSplitName(outPath)) return name->prefix;
    if (outPath.size() > 5 && outPath.ends_with(".gguf")) return outPath.substr(0, outPath.size() - 5);
    return outPath;
}

Status convertModel(const LlamaModel& model, const std::string& outPath, const ConvertOptions& options)
{
    const LlamaConfig& c = model.config();
    if (c.architecture == "relu-llama")
        return makeError(ErrorCode::UnsupportedModel,
                         model.path() + ": relu-llama (the thesis' shifted-ReLU models) has no GGUF or Hugging Face "
                                        "architecture to be written as; run the llama2.c checkpoint itself");
    std::error_code ec;
    if (fs::exists(outPath, ec) && !options.overwrite)
        return makeError(ErrorCode::InvalidArgument, outPath + " exists already (pass --force to replace it)");
    const bool split = options.splitMaxBytes > 0 || options.splitMaxTensors > 0;
    if (split && options.target != ConvertTarget::Gguf)
        return makeError(ErrorCode::InvalidArgument, "a split output (--split-max-size, --split-max-tensors) is a GGUF; "
                                                     "a Hugging Face folder is sharded by --shard-size");
    if (options.chatTemplate && options.target != ConvertTarget::Gguf)
        return makeError(ErrorCode::InvalidArgument,
                         "a chat template is written into a GGUF; a Hugging Face folder keeps it in tokenizer_config.json");
    if (split && !options.overwrite) {
        // Any part of an earlier split under the same name, whatever its count.
        const std::string prefix = splitOutputPrefix(outPath);
        const fs::path dir = fs::path(prefix).parent_path().empty() ? fs::path(".") : fs::path(prefix).parent_path();
        for (const auto& e : fs::directory_iterator(dir, ec)) {
            const auto name = gguf::parseSplitName((dir / e.path().filename()).string());
            if (name && fs::path(name->prefix).filename() == fs::path(prefix).filename())
                return makeError(ErrorCode::InvalidArgument,
                                 e.path().string() + " exists already (pass --force to replace it)");
        }
    }
    if (options.target == ConvertTarget::Gguf) {
        if (fs::is_directory(outPath, ec))
            return makeError(ErrorCode::InvalidArgument, outPath + " is a folder; a GGUF output is a file");
        return writeGguf(model, outPath, options);
    }
    // A folder: built beside the target, renamed into place when complete.
    const fs::path target = fs::absolute(outPath, ec);
    std::random_device rd;
    const fs::path temp = target.parent_path() / (target.filename().string() + ".partial-" + std::to_string(rd()));
    if (!fs::create_directories(temp, ec))
        return makeError(ErrorCode::Io, temp.string() + ": cannot create (" + ec.message() + ")");
    Status written = writeHfFolder(model, temp, options.shardBytes);
    if (written) {
        if (fs::exists(target, ec)) fs::remove_all(target, ec);
        fs::rename(temp, target, ec);
        if (ec) written = makeError(ErrorCode::Io, target.string() + ": cannot rename the finished folder into place (" +
                                                       ec.message() + ")");
    }
    if (!written) fs::remove_all(temp, ec);
    return written;
}

}  // namespace spillway
