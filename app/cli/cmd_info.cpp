// spillway-cli info: what a model file holds.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <vector>

#include "cli_common.h"
#include "core/formats/gguf.h"
#include "core/formats/gguf_split.h"
#include "core/model/llama_model.h"
#include "core/model/model_config.h"
#include "storage/package.h"

namespace spillway::cli {

namespace {


std::string valueText(const gguf::Value& v)
{
    if (const auto* s = v.asString()) return s->size() > 80 ? "\"" + s->substr(0, 77) + "...\"" : "\"" + *s + "\"";
    if (const auto* a = v.asArray())
        return std::string("[") + gguf::valueTypeName(a->elementType) + " x " +
               std::to_string(a->values.size()) + "]";
    if (v.type == gguf::ValueType::Bool) return std::get<bool>(v.v) ? "true" : "false";
    if (v.type == gguf::ValueType::Float32 || v.type == gguf::ValueType::Float64) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", *v.asFloat());
        return buf;
    }
    if (const auto i = v.asInt()) return std::to_string(*i);
    if (std::holds_alternative<uint64_t>(v.v)) return std::to_string(std::get<uint64_t>(v.v));
    return "?";
}

// A model package: the manifest's view (formats, tiers, quality) of what LlamaModel loads.
// The shape of the model, and of its experts where it is a mixture of experts.
void printHyperParameters(const LlamaConfig& c)
{
    std::printf("hyper-parameters: dim %d, layers %d, heads %d, kv heads %d, head dim %d, ffn %d, context %d\n", c.dim,
                c.nLayers, c.nHeads, c.nKvHeads, c.headDim, c.moe() ? c.expertFfnDim : c.ffnDim, c.trainedContext);
    if (!c.moe()) return;
    std::printf("mixture of experts: %d experts of ffn %d, %d per token (weights %s)", c.nExperts, c.expertFfnDim,
                c.nExpertsUsed, c.expertWeightsNormalized ? "renormalized" : "as routed");
    if (c.sharedExpertFfnDim > 0) std::printf(", a shared expert of ffn %d", c.sharedExpertFfnDim);
    std::printf("\n");
}

// A Hugging Face folder or a llama2.c checkpoint: what the engine imported from it.
int runImportedInfo(const LlamaModel& m, bool showMetadata)
{
    const LlamaConfig& c = m.config();
    uint64_t bytes = 0;
    for (const auto& t : m.tensors()) bytes += t.bytes;
    const auto source = m.metadata().getString("spillway.source_format");
    std::printf("model: %s\nformat: %s, %zu file(s), %zu tensors, %s\n", m.path().c_str(),
                source ? source->c_str() : "imported", m.dataFiles().size(), m.tensors().size(),
                humanBytes(double(bytes)).c_str());
    std::printf("architecture: %s%s%s\n", c.architecture.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
    printHyperParameters(c);
    std::printf("parameters: %.3f M\n", double(m.parameterCount()) / 1e6);
    if (showMetadata) {
        std::printf("\nmetadata:\n");
        for (const auto& kv : m.metadata().entries())
            std::printf("  %-44s %s\n", kv.key.c_str(), valueText(kv.value).c_str());
    }
    std::printf("\n%-32s %-8s %-16s %5s %12s %12s\n", "tensor", "type", "shape", "file", "offset", "bytes");
    for (const auto& t : m.tensors()) {
        std::string shape;
        for (size_t i = t.dims.size(); i-- > 0;) shape += std::to_string(t.dims[i]) + (i ? " x " : "");
        const std::string file = t.file == kInMemoryTensor ? "mem" : std::to_string(t.file);
        std::printf("%-32s %-8s %-16s %5s %12llu %12llu\n", t.name.c_str(), gpu::dtypeName(t.type), shape.c_str(),
                    file.c_str(), (unsigned long long)t.fileOffset, (unsigned long long)t.bytes);
    }
    return ExitOk;
}

int runPackageInfo(const std::string& path, bool showMetadata, bool verify)
{
    auto model = LlamaModel::load(path);
    if (!model) return reportError(model.error());
    const LlamaModel& m = **model;
    if (!m.package()) return runImportedInfo(m, showMetadata);
    const storage::PackageManifest& man = m.package()->manifest();
    const LlamaConfig& c = m.config();
    uint64_t bytes = 0;
    for (const auto& t : man.tensors) bytes += t.bytes;
    std::printf("package: %s\nformat: Spillway model package v%d, %zu shard(s), %zu tensors, %s\n", m.path().c_str(),
                man.version, man.shardSizes.size(), man.tensors.size(), humanBytes(double(bytes)).c_str());
    std::printf("architecture: %s%s%s\n", c.architecture.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
    if (c.synthetic) std::printf("SYNTHETIC: real shapes, random weights (benchmarks only)\n");
    printHyperParameters(c);
    std::printf("parameters: %.3f M (%.2f bits per weight)\n", double(m.parameterCount()) / 1e6,
                m.parameterCount() ? 8.0 * double(bytes) / double(m.parameterCount()) : 0.0);
    if (!man.qualityJson.empty()) std::printf("quality vs source: %s\n", man.qualityJson.c_str());
    if (verify) {
        const Status ok = m.package()->verify();
        if (!ok) return reportError(ok.error());
        std::printf("checksums: all %zu tensors match (XXH3-64)\n", man.tensors.size());
    }
    if (showMetadata) {
        std::printf("\nmetadata:\n");
        for (const auto& kv : m.metadata().entries())
            std::printf("  %-44s %s\n", kv.key.c_str(), valueText(kv.value).c_str());
    }
    std::printf("\n%-32s %-16s %-14s %-7s %5s %12s %12s\n", "tensor", "format", "shape", "tier", "shard", "offset", "bytes");
    for (const auto& t : man.tensors) {
        std::string shape;
        for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.shape[i]);
        std::printf("%-32s %-16s %-14s %-7s %5u %12llu %12llu\n", t.name.c_str(), t.format.c_str(), shape.c_str(),
                    t.tierHint.c_str(), t.shard, (unsigned long long)t.offset, (unsigned long long)t.bytes);
    }
    return ExitOk;
}

int runInfo(const std::string& path, bool showMetadata, bool verify)
{
    std::error_code ec;
    // Packages, Hugging Face folders and llama2.c checkpoints go through the engine's loader;
    // GGUF files (by their magic) are described from the file itself, a split one from all its
    // parts (any part named): the first part's metadata, every part's tensors.
    const std::string name = std::filesystem::path(path).filename().string();
    char magic[4] = {};
    std::ifstream(path, std::ios::binary).read(magic, 4);
    if (std::filesystem::is_directory(path, ec) || name == "manifest.json" || name == "config.json" ||
        (std::memcmp(magic, "GGUF", 4) != 0 && std::filesystem::path(path).extension() != ".gguf"))
        return runPackageInfo(path, showMetadata, verify);
    auto file = gguf::SplitFile::open(path);
    if (!file) return reportError(file.error());
    const gguf::SplitFile& split = **file;
    const gguf::File& f = *split.parts().front();
    std::printf("file: %s\nformat: GGUF v%u, %s, alignment %llu, %zu tensors, %zu metadata keys\n",
                split.path().c_str(), f.version(), humanBytes(double(split.totalBytes())).c_str(),
                (unsigned long long)f.alignment(), split.tensors().size(), f.metadata().size());
    if (split.isSplit()) {
        std::printf("split into %zu parts:\n", split.parts().size());
        for (const auto& part : split.parts())
            std::printf("  %s  %s, %zu tensors\n", part->path().c_str(), humanBytes(double(part->fileSize())).c_str(),
                        part->tensors().size());
    }

    auto config = llamaConfigFromGguf(f);
    if (config) {
        const auto& c = *config;
        std::printf("architecture: %s%s%s\n", c.architecture.c_str(), c.name.empty() ? "" : "  name: ",
                    c.name.c_str());
        if (c.synthetic) std::printf("SYNTHETIC: real shapes, random weights (benchmarks only)\n");
        printHyperParameters(c);
        std::printf("rms norm eps %g, rope base %g, rope dims %d, rope freq scale %g\n", c.normEps,
                    c.ropeBase, c.ropeDims, c.ropeFreqScale);
    } else {
        const auto arch = f.getString("general.architecture");
        std::printf("architecture: %s (%s)\n", arch ? arch->c_str() : "?", config.error().message.c_str());
    }

    std::map<std::string, std::pair<int, uint64_t>> byType;  // type -> (tensors, bytes)
    uint64_t params = 0, bytes = 0;
    for (const gguf::PartTensor& pt : split.tensors()) {
        const gguf::TensorInfo& t = *pt.info;
        auto& e = byType[gpu::dtypeName(t.type)];
        ++e.first;
        e.second += t.bytes;
        params += uint64_t(t.elements());
        bytes += t.bytes;
    }
    // By their share of the bytes, largest first: "Q3_K 61 % (9 tensors, 450.0 KiB), Q4_K 24 % ...".
    std::vector<std::pair<std::string, std::pair<int, uint64_t>>> shares(byType.begin(), byType.end());
    std::stable_sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    std::string types;
    for (const auto& [name, e] : shares) {
        char share[32];
        std::snprintf(share, sizeof share, " %.0f %%", bytes ? 100.0 * double(e.second) / double(bytes) : 0.0);
        types += (types.empty() ? "" : ", ") + name + share + " (" + std::to_string(e.first) +
                 (e.first == 1 ? " tensor, " : " tensors, ") + humanBytes(double(e.second)) + ")";
    }
    std::printf("file type: %s\nparameters: %.3f M, tensor data %s (%.2f bits per weight)\n",
                types.c_str(), double(params) / 1e6, humanBytes(double(bytes)).c_str(),
                params ? 8.0 * double(bytes) / double(params) : 0.0);

    if (showMetadata) {
        std::printf("\nmetadata:\n");
        for (const auto& kv : f.metadata()) std::printf("  %-44s %s\n", kv.key.c_str(), valueText(kv.value).c_str());
    }
    std::printf("\n%-32s %-7s %-22s %12s %12s%s\n", "tensor", "type", "shape", "offset", "bytes",
                split.isSplit() ? "  part" : "");
    for (const gguf::PartTensor& pt : split.tensors()) {
        const gguf::TensorInfo& t = *pt.info;
        std::string shape;
        for (size_t i = 0; i < t.dims.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.dims[i]);
        std::printf("%-32s %-7s %-22s %12llu %12llu", t.name.c_str(), gpu::dtypeName(t.type), shape.c_str(),
                    (unsigned long long)t.offset, (unsigned long long)t.bytes);
        if (split.isSplit()) std::printf("  %5u", pt.part + 1);
        std::printf("\n");
    }
    return ExitOk;
}

}  // namespace

void addInfoCommand(CLI::App& app, int& exitCode)
{
    auto path = std::make_shared<std::string>(demoModelPath());
    auto metadata = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("info", "Print a model's architecture, hyper-parameters and tensors");
    cmd->add_option("-m,--model", *path, "GGUF file, Hugging Face folder, llama2.c checkpoint or package (default: the bundled demo model)")
        ->check(CLI::ExistingPath);
    auto verify = std::make_shared<bool>(false);
    cmd->add_flag("--metadata", *metadata, "Also list every metadata key");
    cmd->add_flag("--verify", *verify, "Model packages: recompute every tensor's checksum");
    cmd->callback([path, metadata, verify, &exitCode] { exitCode = runInfo(*path, *metadata, *verify); });
}

}  // namespace spillway::cli
