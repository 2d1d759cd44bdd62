// spillway-cli compress: a model (GGUF or package) into a compressed model package: pruning
// (magnitude / Wanda, unstructured or N:M), ENDOR's bitmap sparse format and group
// quantization, then a quality check against the source stored in the manifest.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/calibrate/compress_model.h"
#include "core/model/llama_model.h"
#include "gpu/host.h"
#include "offload.h"

namespace spillway::cli {

namespace {

std::atomic<bool> g_interrupted{false};
void onInterrupt(int) { g_interrupted.store(true); }

struct CompressCommand {
    std::string model;
    std::string output;
    std::string preset = "balanced";
    std::string prune;   // empty: the preset's
    std::string quant;   // empty: the preset's
    int threads = 0;
    bool noQuality = false;
    bool json = false;
    std::string backend = "cpu";
    OffloadOptions offload;
    ModelLoadOptions load;
    int predictors = -1;         // -1: the preset's
    std::string predictorInput;  // empty: the preset's
    bool bundles = false;        // true adds them to any preset
};

Error usage(const std::string& what) { return makeError(ErrorCode::InvalidArgument, what); }

// "none", "magnitude:0.5", "wanda:0.5", "wanda:2:4".
Result<compress::PruneSpec> parsePrune(const std::string& text)
{
    compress::PruneSpec p;
    if (text == "none") return compress::PruneSpec{};
    const size_t colon = text.find(':');
    const std::string method = text.substr(0, colon);
    if (method == "magnitude") p.method = compress::PruneMethod::Magnitude;
    else if (method == "wanda") p.method = compress::PruneMethod::Wanda;
    else return usage("--prune: method '" + method + "' is not magnitude or wanda (or none)");
    if (colon == std::string::npos) return p;  // ratio 0.5
    const std::string rest = text.substr(colon + 1);
    try {
        size_t used = 0;
        if (const size_t c2 = rest.find(':'); c2 != std::string::npos) {
            p.n = std::stoi(rest.substr(0, c2), &used);
            p.m = std::stoi(rest.substr(c2 + 1));
        } else {
            p.ratio = std::stod(rest, &used);
            if (used != rest.size()) throw std::invalid_argument(rest);
        }
    } catch (const std::exception&) {
        return usage("--prune: '" + text + "' is not METHOD:RATIO or METHOD:N:M");
    }
    if (p.m > 0 ? (p.n < 0 || p.n > p.m) : !(p.ratio >= 0 && p.ratio <= 1))
        return usage("--prune: ratio must be in [0, 1], N:M with 0 <= N <= M");
    return p;
}

// "none", "int8", "int8:g64", "int4:g128".
Result<compress::QuantSpec> parseQuant(const std::string& text)
{
    if (text == "none") return compress::QuantSpec{};
    compress::QuantSpec q;
    const size_t colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    if (kind == "int8") q.bits = 8;
    else if (kind == "int4") q.bits = 4;
    else return usage("--quant: '" + kind + "' is not int8 or int4 (or none)");
    if (colon != std::string::npos) {
        const std::string g = text.substr(colon + 1);
        if (g == "g32") q.group = 32;
        else if (g == "g64") q.group = 64;
        else if (g == "g128") q.group = 128;
        else return usage("--quant: group '" + g + "' is not g32, g64 or g128");
    }
    return q;
}

std::string gib(uint64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
    if (bytes < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1ull << 20));
    return buf;
}

int runCompress(CompressCommand& c)
{
    const auto preset = compress::presetFromName(c.preset);
    if (!preset) return reportError(usage("--preset: '" + c.preset + "' is not fast, balanced, smallest or sparse"));
    compress::CompressOptions options = compress::presetOptions(*preset);
    if (!c.prune.empty()) {
        auto p = parsePrune(c.prune);
        if (!p) return reportError(p.error());
        options.prune = *p;
    }
    if (!c.quant.empty()) {
        auto q = parseQuant(c.quant);
        if (!q) return reportError(q.error());
        options.quant = *q;
    }
    if (c.noQuality) options.qualityCheck = false;
    if (c.predictors >= 0) options.predictorRank = c.predictors;
    if (!c.predictorInput.empty())
        options.predictorInput =
            c.predictorInput == "attention" ? compress::PredictorInput::Attention : compress::PredictorInput::Ffn;
    if (c.bundles) options.bundles = true;

    auto loaded = LlamaModel::load(c.model, c.load);
    if (!loaded) return reportError(loaded.error());
    std::shared_ptr<const LlamaModel> model = std::move(*loaded);
    // The placement a run on this machine's chosen device would use: a device that cannot
    // compute on bitmap sparse weights keeps the layers it holds dense.
    if (c.backend != "cpu") {
        c.offload.alwaysPlan = true;
        auto run = prepareOffload(model, c.backend, c.threads, 0, c.offload, false);
        if (!run) return reportError(run.error());
        options.deviceSupportsBitmap = run->device().supports(gpu::DType::BitmapSparse);
        if (run->plan()) options.placement = run->plan()->placement;
    }
    auto device = gpu::createCpuDevice(c.threads);

    const bool tty = isatty(STDERR_FILENO);
    int lastPercent = -1;
    std::string lastStage;
    options.progress = [&](const compress::CompressProgress& p) {
        if (g_interrupted.load()) return false;
        const int percent = int(p.fraction * 100.0);
        if (percent == lastPercent && p.stage == lastStage) return true;
        if (!tty && p.stage == lastStage && percent < lastPercent + 10 && percent < 100) return true;
        lastPercent = percent;
        lastStage = p.stage;
        char eta[32] = "";
        if (p.etaSeconds >= 0) std::snprintf(eta, sizeof eta, "  ETA %.0f s", p.etaSeconds);
        std::fprintf(stderr, "%s[%3d%%] %s %s%s%s", tty ? "\r\033[K" : "", percent, p.stage.c_str(), p.tensor.c_str(),
                     eta, tty ? "" : "\n");
        return true;
    };
    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    auto report = compress::compressModel(*model, c.output, options, *device);
    if (tty) std::fprintf(stderr, "\n");
    if (!report) {
        if (report.error().code == ErrorCode::Cancelled)
            std::fprintf(stderr, "spillway-cli: compression interrupted; nothing was written\n");
        return reportError(report.error());
    }
    const compress::CompressReport& r = *report;
    if (c.json) {
        nlohmann::ordered_json j = {{"output", c.output},
                                    {"preset", c.preset},
                                    {"sourceBytes", r.sourceBytes},
                                    {"outputBytes", r.outputBytes},
                                    {"layerSourceBytes", r.layerSourceBytes},
                                    {"layerOutputBytes", r.layerOutputBytes},
                                    {"bitmapTensors", r.bitmapTensors},
                                    {"denseTensors", r.denseTensors},
                                    {"sparsity", r.sparsity},
                                    {"seconds", r.seconds}};
        if (r.bundleBytes > 0) j["bundleBytes"] = r.bundleBytes;
        if (r.predictors > 0)
            j["predictors"] = {{"layers", r.predictors}, {"rank", options.predictorRank},
                               {"recall", r.predictorRecall}, {"precision", r.predictorPrecision}};
        if (r.quality) j["quality"] = nlohmann::json::parse(r.quality->toJson());
        std::printf("%s\n", j.dump(2).c_str());
        return ExitOk;
    }
    std::printf("wrote %s\n", c.output.c_str());
    std::printf("  size: %s -> %s (%.1f%%); layer matrices %s -> %s (%.1f%%)\n", gib(r.sourceBytes).c_str(),
                gib(r.outputBytes).c_str(), 100.0 * double(r.outputBytes) / double(r.sourceBytes),
                gib(r.layerSourceBytes).c_str(), gib(r.layerOutputBytes).c_str(),
                r.layerSourceBytes ? 100.0 * double(r.layerOutputBytes) / double(r.layerSourceBytes) : 0.0);
    std::printf("  layer matrices: %d bitmap sparse, %d dense; sparsity %.1f%%\n", r.bitmapTensors, r.denseTensors,
                100.0 * r.sparsity);
    if (r.quality)
        std::printf("  quality vs source: mean KL %.4g nats (max %.4g), top-1 agreement %.1f%% over %d positions; "
                    "perplexity %.3f -> %.3f\n",
                    r.quality->meanKl, r.quality->maxKl, 100.0 * r.quality->top1Agreement, r.quality->positions,
                    r.quality->perplexityReference, r.quality->perplexityCandidate);
    if (r.bundleBytes > 0)
        std::printf("  row-column bundles: %.1f MiB (each neuron's FFN rows and column, one read apiece)\n",
                    double(r.bundleBytes) / double(1 << 20));
    if (r.predictors > 0)
        std::printf("  activation predictors: %d layers, rank %d; held-out recall %.1f%%, precision %.1f%% "
                    "(means over layers)\n",
                    r.predictors, options.predictorRank, 100.0 * r.predictorRecall, 100.0 * r.predictorPrecision);
    std::printf("  time: %.1f s\n", r.seconds);
    return ExitOk;
}

}  // namespace

void addCompressCommand(CLI::App& app, int& exitCode)
{
    auto c = std::make_shared<CompressCommand>();
    auto* cmd = app.add_subcommand("compress", "Prune and quantize a model into a compressed model package");
    cmd->add_option("-m,--model", c->model, "GGUF model file or model package folder")->required()->check(CLI::ExistingPath);
    cmd->add_option("-o,--output", c->output, "Package folder to create (must not exist)")->required();
    cmd->add_option("--preset", c->preset,
                    "fast (int8, no pruning), balanced (Wanda 50%, fp16), smallest (Wanda 50% + int8), sparse "
                    "(ReLU models: weights as they are, bundles and rank-64 predictors of the attention's input, "
                    "for the neuron cache); default balanced");
    cmd->add_option("--prune", c->prune, "none, magnitude:RATIO, wanda:RATIO or wanda:N:M (overrides the preset)");
    cmd->add_option("--quant", c->quant, "none, int8[:gN] or int4[:gN], N = 32, 64, 128 (overrides the preset)");
    cmd->add_flag("--no-quality", c->noQuality, "Skip the quality check against the source");
    cmd->add_flag("--bundles", c->bundles,
                  "Also store row-column bundles of each FFN layer (ReLU models; FFN kept as it is): the "
                  "neuron cache then reads one neuron's weights in one piece");
    cmd->add_option("--predictors", c->predictors,
                    "Also train and store low-rank activation predictors of this rank (ReLU models)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--predictor-input", c->predictorInput,
                    "What the predictors read: ffn (the FFN's input, most accurate) or attention (the "
                    "attention's input, as Deja Vu and Tricksy: the neuron cache then reads the missing "
                    "neurons while attention runs)")
        ->check(CLI::IsMember({"ffn", "attention"}));
    cmd->add_option("--arch", c->load.architecture,
                    "llama2.c checkpoints: the architecture the file does not record (llama, relu-llama)");
    cmd->add_option("--tokenizer", c->load.tokenizerPath, "llama2.c checkpoints: tokenizer.bin");
    cmd->add_option("-t,--threads", c->threads, "CPU threads (default: one per core)");
    cmd->add_option("--backend", c->backend,
                    "Device the package is for: cpu (default) or cuda/vulkan/auto (layers it would hold stay dense when it "
                    "cannot compute on bitmap sparse weights)");
    addOffloadOptions(cmd, c->offload, false);
    cmd->add_flag("--json", c->json, "Print the report as JSON");
    cmd->callback([c, &exitCode] { exitCode = runCompress(*c); });
}

}  // namespace spillway::cli
