// spillway-cli convert: a model from one format to another (GGUF <-> Hugging Face folder; llama2.c
// checkpoints and packages as sources).

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_common.h"
#include "core/engine/chat_format.h"
#include "core/formats/gguf_split.h"
#include "core/model/convert_model.h"
#include "core/model/llama_model.h"
#include "offload.h"

namespace spillway::cli {

namespace {

struct ConvertCommandOptions {
    std::string model;
    std::string out;
    std::string to;
    bool force = false;
    std::string shardSize;
    std::string splitMaxSize;
    int splitMaxTensors = 0;
    std::string chatTemplateFile;
    ModelLoadOptions load;
};

// --split-max-size as llama-gguf-split reads it: M and G are 10^6 and 10^9 bytes ("50G"); the
// binary units (MiB, GiB) and the others as every size of spillway-cli.
Result<uint64_t> parseSplitSize(const std::string& text)
{
    std::string t = text;
    uint64_t scale = 1;
    if (t.ends_with("M") || t.ends_with("MB")) scale = 1'000'000;
    if (t.ends_with("G") || t.ends_with("GB")) scale = 1'000'000'000;
    if (t.ends_with("T") || t.ends_with("TB")) scale = 1'000'000'000'000;
    if (scale == 1) {
        auto bytes = parseBytes(text);
        if (!bytes) return makeError(ErrorCode::InvalidArgument, "--split-max-size: " + bytes.error().message);
        return bytes;
    }
    t.erase(t.find_first_of("MGT"));
    size_t used = 0;
    double value = 0;
    try {
        value = std::stod(t, &used);
    } catch (...) {
        used = 0;
    }
    if (used == 0 || used != t.size() || !(value > 0) || value > 1e9)
        return makeError(ErrorCode::InvalidArgument, "--split-max-size: '" + text + "' is not a size (e.g. 50G, 500M)");
    return uint64_t(value * double(scale));
}

int runConvert(const ConvertCommandOptions& o)
{
    ConvertOptions options;
    if (o.to == "gguf")
        options.target = ConvertTarget::Gguf;
    else if (o.to == "hf")
        options.target = ConvertTarget::HuggingFace;
    else
        return reportError(makeError(ErrorCode::InvalidArgument, "--to must be gguf or hf, not '" + o.to + "'"));
    options.overwrite = o.force;
    if (!o.shardSize.empty()) {
        auto bytes = parseBytes(o.shardSize);
        if (!bytes) return reportError(bytes.error());
        if (*bytes == 0) return reportError(makeError(ErrorCode::InvalidArgument, "--shard-size must be > 0"));
        options.shardBytes = *bytes;
    }
    if (!o.splitMaxSize.empty()) {
        auto bytes = parseSplitSize(o.splitMaxSize);
        if (!bytes) return reportError(bytes.error());
        options.splitMaxBytes = *bytes;
    }
    if (o.splitMaxTensors < 0) return reportError(makeError(ErrorCode::InvalidArgument, "--split-max-tensors must be > 0"));
    options.splitMaxTensors = o.splitMaxTensors;
    if (!o.chatTemplateFile.empty()) {
        auto text = readTextFile(o.chatTemplateFile);
        if (!text) return reportError(text.error());
        if (auto parsed = engine::ChatFormat::fromSource(*text, "", ""); !parsed)
            return reportError(makeError(ErrorCode::InvalidArgument,
                                         o.chatTemplateFile + ": the chat template does not parse: " + parsed.error().message));
        options.chatTemplate = std::move(*text);
    }
    auto model = LlamaModel::load(o.model, o.load);
    if (!model) return reportError(model.error());
    if (Status s = convertModel(**model, o.out, options); !s) return reportError(s.error());
    if (options.splitMaxBytes > 0 || options.splitMaxTensors > 0) {
        // Its parts, as the reader finds them from the first (which also checks what was written).
        const std::string prefix = splitOutputPrefix(o.out);
        const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
        std::string first;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec)) {
            const auto name = gguf::parseSplitName((dir / e.path().filename()).string());
            if (name && name->prefix == prefix && name->number == 1) first = (dir / e.path().filename()).string();
        }
        auto written = LlamaModel::load(first.empty() ? prefix + "-00001-of-00001.gguf" : first);
        if (!written) return reportError(written.error());
        std::fprintf(stderr, "wrote %zu parts of a split GGUF:\n", (*written)->dataFiles().size());
        for (const std::string& p : (*written)->dataFiles()) std::fprintf(stderr, "  %s\n", p.c_str());
        return ExitOk;
    }
    std::fprintf(stderr, "wrote %s (%s)\n", o.out.c_str(), o.to == "gguf" ? "GGUF" : "Hugging Face folder");
    return ExitOk;
}

}  // namespace

void addConvertCommand(CLI::App& app, int& exitCode)
{
    auto o = std::make_shared<ConvertCommandOptions>();
    auto* cmd = app.add_subcommand("convert", "Convert a model between GGUF and a Hugging Face folder");
    cmd->add_option("-m,--model", o->model, "GGUF file, Hugging Face folder, llama2.c checkpoint or package")
        ->required()
        ->check(CLI::ExistingPath);
    cmd->add_option("-o,--out", o->out, "Output: a .gguf file, or a folder for --to hf")->required();
    cmd->add_option("--to", o->to, "Output format: gguf or hf")->required()->check(CLI::IsMember({"gguf", "hf"}));
    cmd->add_flag("--force", o->force, "Replace the output if it exists");
    cmd->add_option("--shard-size", o->shardSize,
                    "--to hf: at most this much tensor data per safetensors shard (e.g. 2GiB, 500M; "
                    "default 5GB, as transformers)");
    cmd->add_option("--split-max-size", o->splitMaxSize,
                    "--to gguf: a split GGUF as llama-gguf-split writes it (OUT-00001-of-0000N.gguf ...), at most "
                    "this much tensor data per part (50G, 500M: 10^9 and 10^6 bytes, as llama-gguf-split; "
                    "GiB, MiB binary). A split model converted without it is joined into one file");
    cmd->add_option("--split-max-tensors", o->splitMaxTensors,
                    "--to gguf: a split GGUF with at most this many tensors per part");
    cmd->add_option("--chat-template-file", o->chatTemplateFile,
                    "--to gguf: write this Jinja chat template as the model's tokenizer.chat_template (a fixed "
                    "or replaced template)");
    cmd->add_option("--arch", o->load.architecture, "llama2.c checkpoints: the architecture (llama)");
    cmd->add_option("--tokenizer", o->load.tokenizerPath, "llama2.c checkpoints: tokenizer.bin")->check(CLI::ExistingFile);
    cmd->callback([o, &exitCode] { exitCode = runConvert(*o); });
}

}  // namespace spillway::cli
