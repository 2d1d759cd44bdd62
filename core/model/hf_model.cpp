#include "core/model/hf_model.h"

#include <filesystem>

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
    for (const safetensors::Tensor& t : table->tensors) {
        if (hfTensorIsSkipped(arch, t.name)) continue;
        if (tied && t.name == "lm_head.weight") continue;  // a copy of the embedding
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
        mt.data = t.data;
        mt.bytes = t.bytes;
        mt.file = t.shard;
        mt.fileOffset = t.fileOffset;
        model->tensors.push_back(std::move(mt));
    }
    return model;
}

}  // namespace spillway::hf
