// spillway-cli convert: a model from one format to another (GGUF <-> Hugging Face folder; llama2.c
// checkpoints and packages as sources).

#include <cstdio>
#include <memory>

#include "cli_common.h"
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
    ModelLoadOptions load;
};

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
    auto model = LlamaModel::load(o.model, o.load);
    if (!model) return reportError(model.error());
    if (Status s = convertModel(**model, o.out, options); !s) return reportError(s.error());
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
    cmd->add_option("--arch", o->load.architecture, "llama2.c checkpoints: the architecture (llama)");
    cmd->add_option("--tokenizer", o->load.tokenizerPath, "llama2.c checkpoints: tokenizer.bin")->check(CLI::ExistingFile);
    cmd->callback([o, &exitCode] { exitCode = runConvert(*o); });
}

}  // namespace spillway::cli
