#include "core/model/hf_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <utility>
#include <vector>

#include "core/formats/hf_config.h"
#include "core/formats/safetensors.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/sentencepiece_model.h"

namespace spillway::hf {

namespace fs = std::filesystem;

namespace {

std::string folderOf(const std::string& path)
{
    std::error_code ec;
    if (fs::is_directory(path, ec)) return path;
    return fs::path(path).parent_path().string();
}

bool present(const fs::path& p)
{
    std::error_code ec;
    return fs::exists(p, ec);
}

// The weights: the sharded index, model.safetensors, or the one .safetensors file there is.
Result<safetensors::TensorTable> openWeights(const std::string& path, const fs::path& dir)
{
    if (fs::path(path).extension() == ".safetensors") return safetensors::openSingle(path);
    if (present(dir / "model.safetensors.index.json"))
        return safetensors::openIndexed((dir / "model.safetensors.index.json").string());
    if (present(dir / "model.safetensors")) return safetensors::openSingle((dir / "model.safetensors").string());
    std::vector<fs::path> found;
    bool pickle = false;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.path().extension() == ".safetensors") found.push_back(e.path());
        if (name.rfind("pytorch_model", 0) == 0 && e.path().extension() == ".bin") pickle = true;
    }
    if (found.size() == 1) return safetensors::openSingle(found[0].string());
    if (found.size() > 1)
        return makeError(ErrorCode::ModelFileInvalid,
                         dir.string() + ": several .safetensors files but no model.safetensors.index.json saying "
                                        "which tensor is where");
    if (pickle)
        return makeError(ErrorCode::UnsupportedModel,
                         dir.string() + ": the weights are PyTorch pickles (pytorch_model*.bin), which are never "
                                        "loaded (loading a pickle can run code); use the model's safetensors files");
    return makeError(ErrorCode::ModelFileInvalid, dir.string() + ": no weights (model.safetensors or a sharded "
                                                                 "model.safetensors.index.json)");
}

// A layer's experts' matrices (each a tensor of its own in HF) as the one 3-D tensor GGUF has:
// experts 0..E-1 (E = {arch}.expert_count), each the same type and shape, copied one after
// another into a buffer the model keeps (an in-memory tensor: the planner keeps it in RAM or on
// the device; `convert --to gguf` writes the stacks to a file that streams from the SSD).
Status stackExperts(ImportedModel& model, const safetensors::TensorTable& table, const std::string& name,
                    std::vector<std::pair<int64_t, const safetensors::Tensor*>>& experts)
{
    const std::string arch = model.metadata.getString("general.architecture").value_or("");
    const int64_t count = model.metadata.getInt(arch + ".expert_count").value_or(0);
    std::sort(experts.begin(), experts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const safetensors::Tensor& first = *experts.front().second;
    const std::string where = table.paths.at(first.shard);
    auto type = safetensors::requireSupported(first, where);
    if (!type) return type.error();
    for (size_t e = 0; e < experts.size(); ++e) {
        const safetensors::Tensor& t = *experts[e].second;
        if (experts[e].first != int64_t(e))
            return makeError(ErrorCode::ModelFileInvalid,
                             where + ": the experts of '" + name + "' are not numbered 0.." + std::to_string(count - 1) +
                                 ": " + (experts[e].first < int64_t(e) ? "expert " + std::to_string(experts[e].first) +
                                                                             " appears twice"
                                                                       : "expert " + std::to_string(e) + " is missing"));
        if (t.shape.size() != 2 || t.shape != first.shape || t.dtypeName != first.dtypeName)
            return makeError(ErrorCode::ModelFileInvalid,
                             table.paths.at(t.shard) + ": tensor '" + t.name + "' is not a matrix of the shape and type "
                                                                               "of expert 0's");
    }
    if (int64_t(experts.size()) != count)
        return makeError(ErrorCode::ModelFileInvalid, where + ": '" + name + "' has " + std::to_string(experts.size()) +
                                                          " experts; config.json says " + std::to_string(count));
    auto buffer = std::shared_ptr<uint8_t[]>(new (std::nothrow) uint8_t[first.bytes * experts.size()]);
    if (!buffer)
        return makeError(ErrorCode::OutOfMemory, where + ": no memory to stack the experts of '" + name + "' (" +
                                                     std::to_string(first.bytes * experts.size()) + " bytes)");
    for (size_t e = 0; e < experts.size(); ++e)
        std::memcpy(buffer.get() + e * first.bytes, experts[e].second->data, first.bytes);
    ModelTensor mt;
    mt.name = name;
    mt.type = *type;
    mt.dims = {first.shape[1], first.shape[0], int64_t(experts.size())};
    mt.data = buffer.get();
    mt.bytes = first.bytes * experts.size();
    mt.file = kInMemoryTensor;
    model.keepAlive.push_back(std::shared_ptr<const void>(buffer, buffer.get()));
    model.tensors.push_back(std::move(mt));
    return {};
}

}  // namespace

bool looksLikeModelFolder(const std::string& path)
{
    std::error_code ec;
    if (fs::is_directory(path, ec))
        return present(fs::path(path) / "config.json") && !present(fs::path(path) / "manifest.json");
    return fs::path(path).extension() == ".safetensors" && present(fs::path(folderOf(path)) / "config.json");
}

Result<std::unique_ptr<ImportedModel>> importModelFolder(const std::string& path)
{
    const fs::path dir = folderOf(path);
    auto model = std::make_unique<ImportedModel>();
    model->path = path;
    model->metadata = gguf::Metadata(dir.string());
    gguf::Metadata& meta = model->metadata;

    // Tokenizer first: generation_config.json's ids (in config) then do not collide with it.
    gguf::Metadata tokenizer(dir.string());
    if (present(dir / "tokenizer.json")) {
        SPILLWAY_TRY(tokenizerMetadataFromHf((dir / "tokenizer.json").string(),
                                             present(dir / "tokenizer_config.json") ? (dir / "tokenizer_config.json").string()
                                                                                   : std::string(),
                                             tokenizer));
    } else if (present(dir / "tokenizer.model")) {
        SPILLWAY_TRY(tokenizerMetadataFromSentencePiece((dir / "tokenizer.model").string(), tokenizer));
    } else {
        return makeError(ErrorCode::ModelFileInvalid, dir.string() + ": no tokenizer (tokenizer.json or tokenizer.model)");
    }
    gguf::Metadata config(dir.string());
    SPILLWAY_TRY(metadataFromHfConfig((dir / "config.json").string(),
                                      present(dir / "generation_config.json") ? (dir / "generation_config.json").string()
                                                                             : std::string(),
                                      config));
    // config.json's keys, then the tokenizer's where config.json did not say (its BOS/EOS ids,
    // from generation_config.json, are what generation stops on).
    for (const gguf::KeyValue& kv : config.entries()) meta.add(kv);
    for (const gguf::KeyValue& kv : tokenizer.entries()) meta.add(kv);
    const std::string arch = meta.getString("general.architecture").value_or("");
    if (arch == "llama" || arch == "mistral") meta.add({"spillway.rope.neox", gguf::Value::ofBool(true)});
    meta.add({"spillway.source_format", gguf::Value::ofString("huggingface")});

    auto table = openWeights(path, dir);
    if (!table) return table.error();
    for (const std::string& p : table->paths) model->dataFiles.push_back(p);
    for (const auto& f : table->files) model->keepAlive.push_back(f);
    const bool tied = meta.getBool("spillway.tied_embeddings").value_or(false);
    std::map<std::string, std::vector<std::pair<int64_t, const safetensors::Tensor*>>> stacks;
    for (const safetensors::Tensor& t : table->tensors) {
        if (hfTensorIsSkipped(arch, t.name)) continue;
        if (tied && t.name == "lm_head.weight") continue;  // a copy of the embedding
        if (auto expert = ggufExpertTensorName(arch, t.name)) {
            stacks[expert->gguf].emplace_back(expert->expert, &t);
            continue;
        }
        const auto name = ggufTensorName(arch, t.name);
        if (!name)
            return makeError(ErrorCode::UnsupportedModel, table->paths.at(t.shard) + ": tensor '" + t.name +
                                                              "' is not part of a '" + arch +
                                                              "' model as this version knows it");
        auto type = safetensors::requireSupported(t, table->paths.at(t.shard));
        if (!type) return type.error();
        ModelTensor mt;
        mt.name = *name;
        mt.type = *type;
        mt.dims.assign(t.shape.rbegin(), t.shape.rend());
        if (mt.dims.empty()) mt.dims.push_back(1);
        // Qwen2-MoE's shared expert gate is a Linear(hidden, 1): GGUF keeps it as a vector.
        if (mt.dims.size() == 2 && mt.dims[1] == 1 && mt.name.ends_with("ffn_gate_inp_shexp.weight")) mt.dims.pop_back();
        mt.data = t.data;
        mt.bytes = t.bytes;
        mt.file = t.shard;
        mt.fileOffset = t.fileOffset;
        model->tensors.push_back(std::move(mt));
    }
    for (auto& [name, experts] : stacks) SPILLWAY_TRY(stackExperts(*model, *table, name, experts));
    return model;
}

}  // namespace spillway::hf
