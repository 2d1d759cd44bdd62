// spillway-cli make-synthetic: real shapes, random weights, for benchmarks.

#include <cctype>
#include <chrono>
#include <cstdio>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/formats/gguf.h"
#include "core/model/synthetic_model.h"

namespace spillway::cli {

namespace {

struct SyntheticCommand {
    std::string preset;
    std::string type = "f16";
    std::string output;
    int layers = 0;
    uint64_t alignment = 4096;
    std::vector<double> ffnDensity;
    std::string ffnDensityFrom;
    double ffnDensitySpread = 1.0;
    uint64_t seed = 1;
};

int runSynthetic(const SyntheticCommand& c)
{
    SyntheticOptions options;
    options.preset = c.preset;
    options.layers = c.layers;
    options.seed = c.seed;
    options.alignment = c.alignment;
    options.ffnDensity = c.ffnDensity;
    options.ffnDensitySpread = c.ffnDensitySpread;
    if (!c.ffnDensityFrom.empty()) {
        // The per-layer densities measured by `spillway-cli sparsity --json`.
        std::ifstream in(c.ffnDensityFrom);
        const auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded() || !j.contains("layers") || !j["layers"].is_array())
            return reportError(makeError(ErrorCode::InvalidArgument,
                                         c.ffnDensityFrom + ": not the JSON of spillway-cli sparsity (no \"layers\")"));
        options.ffnDensity.clear();
        for (const auto& l : j["layers"])
            if (l.contains("density") && l["density"].is_number()) options.ffnDensity.push_back(l["density"].get<double>());
        if (options.ffnDensity.empty())
            return reportError(makeError(ErrorCode::InvalidArgument, c.ffnDensityFrom + ": no layer densities"));
    }
    // Every GGUF type the engine computes on: the dtype names of gpu/dtype.h, in lower case
    // (not BitmapSparse and Q8_G64, which GGUF does not hold).
    std::string known;
    bool found = false;
    for (int i = 0; i < gpu::kDTypeCount; ++i) {
        const gpu::DType t = gpu::DType(i);
        if (t == gpu::DType::BitmapSparse || t == gpu::DType::Q8_G64) continue;
        std::string name = gpu::dtypeName(t);
        for (char& ch : name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        known += (known.empty() ? "" : ", ") + name;
        if (name == c.type) {
            options.type = t;
            found = true;
        }
    }
    if (!found)
        return reportError(makeError(ErrorCode::InvalidArgument, "unknown type '" + c.type + "' (" + known + ")"));
    const auto start = std::chrono::steady_clock::now();
    if (auto s = writeSyntheticModel(options, c.output); !s) return reportError(s.error());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto file = gguf::File::open(c.output);
    if (!file) return reportError(file.error());
    std::fprintf(stderr, "wrote %s: synthetic %s (random weights), %s, %zu tensors, %.2f GiB in %.1f s\n",
                 c.output.c_str(), c.preset.c_str(), c.type.c_str(), (*file)->tensors().size(),
                 double((*file)->fileSize()) / double(1 << 30), seconds);
    return ExitOk;
}

}  // namespace

void addSyntheticCommand(CLI::App& app, int& exitCode)
{
    auto c = std::make_shared<SyntheticCommand>();
    std::string presets;
    for (const auto& p : syntheticPresets()) presets += (presets.empty() ? "" : "|") + p.name;
    auto* cmd = app.add_subcommand("make-synthetic",
                                   "Write a model with real shapes and random weights (benchmarks)");
    cmd->add_option("--preset", c->preset, presets)->required();
    cmd->add_option("--type", c->type, "Matrix type: f16|bf16|f32|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_nl|iq4_xs|iq3_xxs|iq3_s|iq2_xxs|iq2_xs|iq2_s|iq1_s|iq1_m|mxfp4 (norms stay f32; the types without an encoder get random codes)");
    cmd->add_option("-o,--output", c->output, "Output GGUF file")->required();
    cmd->add_option("--layers", c->layers, "Number of layers (default: the preset's)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--seed", c->seed, "Seed of the random weights");
    auto* density = cmd->add_option("--ffn-density", c->ffnDensity,
                    "opt-* presets: share of FFN neurons active per token, one value or a per-layer "
                    "profile spread over the layers (comma-separated)")
        ->delimiter(',')
        ->check(CLI::Range(0.0001, 0.9999));
    cmd->add_option("--ffn-density-from", c->ffnDensityFrom,
                    "opt-* presets: take the per-layer profile from `spillway-cli sparsity --json` output")
        ->check(CLI::ExistingFile)
        ->excludes(density);
    cmd->add_option("--ffn-density-spread", c->ffnDensitySpread,
                    "How unequal neurons are (0: all alike; default 1: hot and cold neurons)")
        ->check(CLI::Range(0.0, 10.0));
    cmd->add_option("--align", c->alignment, "Tensor data alignment (4096: laid out for direct I/O)")
        ->check(CLI::IsMember({32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}));
    cmd->callback([c, &exitCode] { exitCode = runSynthetic(*c); });
}

}  // namespace spillway::cli
