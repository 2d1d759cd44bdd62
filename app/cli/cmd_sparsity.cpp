// spillway-cli sparsity: per-layer FFN activation density on calibration prompts, the overlap of
// active neurons between consecutive tokens and over windows of k tokens, and how concentrated
// activations are on hot neurons: what an activation-sparsity runtime can save on this model.
// A mixture of experts' sparsity is its routing: how often each expert is chosen, per layer,
// kept as the routing profile the planner places experts by.

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/calibrate/predictor_training.h"
#include "core/calibrate/activation_sparsity.h"
#include "core/calibrate/activation_threshold.h"
#include "core/calibrate/routing.h"
#include "core/compress/ffn_predictor.h"
#include "core/model/llama_model.h"
#include "core/plan/neuron_cache_model.h"
#include "gpu/host.h"
#include "gpu/dtype.h"

namespace spillway::cli {

namespace {

struct SparsityCommand {
    std::string model;
    ModelLoadOptions load;
    std::string promptsFile;
    int tokens = 256;
    int continueTokens = 64;
    std::vector<int> windows = {1, 2, 4, 8, 16};
    double threshold = 0.0;
    int threads = 0;
    std::string json;
    int predictorRank = 0;
    std::vector<double> cacheBudgets;  // percent of the FFN weights
    std::string routingOut;            // mixtures of experts: where the routing profile goes
    double targetSparsity = -1.0;      // >= 0: approximate mode's thresholds and their quality
    double recall = 0.99;
};

Result<std::vector<std::string>> readPrompts(const std::string& path)
{
    if (path.empty()) return std::vector<std::string>();  // the built-in prompts
    std::ifstream in(path);
    if (!in) return makeError(ErrorCode::Io, path + ": cannot open the prompts file");
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) prompts.push_back(line);
    if (prompts.empty()) return makeError(ErrorCode::InvalidArgument, path + ": no prompts (one per line)");
    return prompts;
}

nlohmann::ordered_json toJson(const compress::SparsityReport& r, const std::string& model,
                              const std::vector<compress::FfnPredictor>& predictors)
{
    nlohmann::ordered_json layers = nlohmann::ordered_json::array();
    for (const auto& l : r.layers) {
        nlohmann::ordered_json windows = nlohmann::ordered_json::array();
        for (size_t w = 0; w < r.windows.size(); ++w)
            windows.push_back({{"k", r.windows[w]}, {"hit", l.windowHit[w]},
                               {"fetch", l.windowFetch[w]}, {"size", l.windowSize[w]}});
        layers.push_back({{"layer", l.layer}, {"neurons", l.neurons}, {"tokens", l.tokens},
                          {"density", l.density}, {"min_density", l.minDensity},
                          {"max_density", l.maxDensity}, {"hot10_share", l.hotShare},
                          {"windows", windows}});
    }
    nlohmann::ordered_json j = {{"model", model},      {"prompts", r.prompts},   {"tokens", r.tokens},
            {"threshold", r.threshold}, {"density", r.density()}, {"layers", layers}};
    if (!predictors.empty()) {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (const auto& p : predictors)
            list.push_back({{"layer", p.layer}, {"rank", p.rank}, {"recall", p.recall},
                            {"precision", p.precision}, {"predicted_density", p.predictedDensity},
                            {"density", p.density}, {"train_tokens", p.trainTokens},
                            {"test_tokens", p.testTokens}});
        j["predictors"] = list;
    }
    return j;
}

// A mixture of experts: its sparsity is its routing. Counts the experts chosen per layer, prints
// how concentrated the choices are and what the expert cache's slots would hit, and keeps the
// profile where the planner looks for it.
int runRouting(SparsityCommand& c, const LlamaModel& model)
{
    compress::RoutingOptions options;
    options.maxTokensPerPrompt = c.tokens;
    options.continueTokens = c.continueTokens;
    auto prompts = readPrompts(c.promptsFile);
    if (!prompts) return reportError(prompts.error());
    options.prompts = std::move(prompts.value());
    auto device = gpu::createCpuDevice(c.threads);
    auto measured = compress::measureRouting(model, *device, options);
    if (!measured) return reportError(measured.error());
    const plan::RoutingProfile& r = *measured;
    const LlamaConfig& cfg = model.config();
    const int slots = cfg.expertSlots(0);
    std::printf("Routing of %s: %d of %d experts per token, %llu tokens per layer (%s)\n", c.model.c_str(),
                cfg.nExpertsUsed, cfg.nExperts, static_cast<unsigned long long>(r.tokens), r.source.c_str());
    std::printf("busiest: the most chosen expert's share of the layer's choices (even: %.1f%%); hot %d: the %d most\n"
                "chosen experts' share; hits: an LRU cache of %d slots, expected (uniform routing: %.1f%%)\n\n",
                100.0 / cfg.nExperts, slots, slots, slots, 100.0 * slots / cfg.nExperts);
    std::printf("%5s  %8s  %7s  %7s  %6s\n", "layer", "busiest", ("hot" + std::to_string(slots)).c_str(), "unused", "hits");
    nlohmann::ordered_json layers = nlohmann::ordered_json::array();
    double hitsSum = 0;
    for (int l = 0; l < r.layers; ++l) {
        const std::span<const uint64_t> row = r.layerCounts(l);
        const std::vector<int> hot = r.hottest(l);
        const double choices = double(r.tokens) * double(r.used);
        uint64_t top = 0;
        int unused = 0;
        for (int i = 0; i < slots; ++i) top += row[hot[size_t(i)]];
        for (int e = 0; e < r.experts; ++e) unused += row[e] == 0;
        const std::vector<double> q = r.choiceRates(l);
        const double hits = plan::hitRate(q, plan::expectedMisses(q, slots));
        hitsSum += hits;
        std::printf("%5d  %7.1f%%  %6.1f%%  %7d  %5.1f%%\n", l, 100.0 * double(row[hot[0]]) / choices,
                    100.0 * double(top) / choices, unused, 100.0 * hits);
        layers.push_back({{"layer", l}, {"busiest_share", double(row[hot[0]]) / choices},
                          {"hot_share", double(top) / choices}, {"unused", unused}, {"expected_hit_rate", hits}});
    }
    std::printf("%5s  %8s  %7s  %7s  %5.1f%%\n", "all", "", "", "", 100.0 * hitsSum / r.layers);
    const std::string path = c.routingOut.empty() ? plan::routingProfilePath(c.model) : c.routingOut;
    if (Status saved = r.save(path); !saved) return reportError(saved.error());
    std::printf("\nrouting profile: %s (plan, generate, bench and the app place the experts by it)\n", path.c_str());
    if (!c.json.empty()) {
        std::ofstream out(c.json);
        nlohmann::ordered_json counts = nlohmann::ordered_json::array();
        for (int l = 0; l < r.layers; ++l)
            counts.push_back(std::vector<uint64_t>(r.layerCounts(l).begin(), r.layerCounts(l).end()));
        nlohmann::ordered_json j = {{"model", c.model}, {"experts", r.experts}, {"used", r.used},
                                    {"tokens", r.tokens}, {"slots", slots},     {"profile", path},
                                    {"layers", layers},   {"counts", counts}};
        out << j.dump(2) << "\n";
        if (!out) return reportError(makeError(ErrorCode::Io, c.json + ": cannot write"));
    }
    return ExitOk;
}

int runSparsity(SparsityCommand& c)
{
    auto model = LlamaModel::load(c.model, c.load);
    if (!model) return reportError(model.error());
    if ((*model)->config().moe()) return runRouting(c, **model);
    compress::SparsityOptions options;
    options.maxTokensPerPrompt = c.tokens;
    options.windows = c.windows;
    options.threshold = c.threshold;
    options.keepTraces = !c.cacheBudgets.empty();
    options.continueTokens = c.continueTokens;
    auto prompts = readPrompts(c.promptsFile);
    if (!prompts) return reportError(prompts.error());
    options.prompts = std::move(prompts.value());
    auto device = gpu::createCpuDevice(c.threads);
    auto report = compress::measureActivationSparsity(**model, *device, options);
    if (!report) return reportError(report.error());
    const compress::SparsityReport& r = *report;

    std::printf("FFN activation sparsity of %s: %d prompts, %lld tokens, active = |x| > %g\n",
                c.model.c_str(), r.prompts, static_cast<long long>(r.tokens), r.threshold);
    std::printf("hit k: share of a token's active neurons active in one of the k tokens before it;\n"
                "fetch k: share of the layer a k-token window cache loads per token\n\n");
    std::printf("%5s  %7s  %7s  %-15s  %6s", "layer", "neurons", "density", "(min-max)", "hot10");
    for (int k : r.windows)
        std::printf("  %7s %7s", ("hit" + std::to_string(k)).c_str(), ("fetch" + std::to_string(k)).c_str());
    std::printf("\n");
    for (const auto& l : r.layers) {
        char range[32];
        std::snprintf(range, sizeof range, "(%.1f-%.1f%%)", 100 * l.minDensity, 100 * l.maxDensity);
        std::printf("%5d  %7d  %6.1f%%  %-15s  %5.1f%%", l.layer, l.neurons, 100 * l.density, range,
                    100 * l.hotShare);
        for (size_t w = 0; w < r.windows.size(); ++w)
            std::printf("  %6.1f%% %6.1f%%", 100 * l.windowHit[w], 100 * l.windowFetch[w]);
        std::printf("\n");
    }
    std::printf("%5s  %7s  %6.1f%%  %-15s  %6s", "all", "", 100 * r.density(), "", "");
    for (size_t w = 0; w < r.windows.size(); ++w)
        std::printf("  %6.1f%% %6.1f%%", 100 * r.windowHit(w), 100 * r.windowFetch(w));
    std::printf("\n");
    nlohmann::ordered_json cacheJson = nlohmann::ordered_json::array();
    if (!c.cacheBudgets.empty()) {
        // A neuron's bundle: its gate and up rows and its down column (dim values each).
        const LlamaConfig& cfg = (*model)->config();
        const LlamaLayerWeights& L0 = (*model)->weights().layers.front();
        uint64_t bundle = gpu::rowBytes(L0.up.type, cfg.dim) + gpu::rowBytes(L0.down.type, cfg.dim);
        if (cfg.ffnGated) bundle += gpu::rowBytes(L0.gate.type, cfg.dim);
        std::printf("\nNeuron cache (LRU per layer, capacities shared out by measured density), "
                    "%llu-byte bundles,\nagainst dense offloading that keeps the same budget of FFN "
                    "weights resident and streams the rest:\n",
                    static_cast<unsigned long long>(bundle));
        std::printf("%7s  %10s  %8s  %14s  %14s  %9s\n", "budget", "bytes", "hit rate",
                    "cache B/token", "dense B/token", "fewer");
        for (double pct : c.cacheBudgets) {
            uint64_t ffn = 0;
            for (const auto& t : r.traces) ffn += uint64_t(t.neurons) * bundle;
            const auto budget = uint64_t(double(ffn) * pct / 100.0);
            const plan::NeuronCacheResult sim = plan::simulateNeuronCache(r.traces, bundle, budget);
            std::printf("%6.1f%%  %10llu  %7.1f%%  %14.0f  %14.0f  %8.1fx\n", pct,
                        static_cast<unsigned long long>(budget), 100 * sim.hitRate, sim.bytesPerToken,
                        sim.denseBytesPerToken, sim.reduction());
            cacheJson.push_back({{"budget_percent", pct}, {"budget_bytes", budget},
                                 {"bundle_bytes", bundle}, {"hit_rate", sim.hitRate},
                                 {"cache_bytes_per_token", sim.bytesPerToken},
                                 {"dense_bytes_per_token", sim.denseBytesPerToken},
                                 {"reduction", sim.reduction()}});
        }
    }
    std::vector<compress::FfnPredictor> predictors;
    if (c.predictorRank > 0) {
        compress::PredictorOptions po;
        po.rank = c.predictorRank;
        po.targetRecall = c.recall;
        po.prompts = options.prompts;
        po.maxTokensPerPrompt = c.tokens;
        po.continueTokens = c.continueTokens;
        auto trained = compress::trainFfnPredictors(**model, *device, po);
        if (!trained) return reportError(trained.error());
        predictors = std::move(trained.value());
        std::printf("\nLow-rank predictors (rank %d, offset for %.1f%% recall on the training prompts;\n"
                    "measured on held-out prompts):\n", c.predictorRank, 100 * c.recall);
        std::printf("%5s  %6s  %7s  %9s  %9s  %7s\n", "layer", "recall", "precise", "predicted",
                    "active", "tokens");
        for (const auto& p : predictors)
            std::printf("%5d  %5.1f%%  %6.1f%%  %8.1f%%  %8.1f%%  %7lld\n", p.layer, 100 * p.recall,
                        100 * p.precision, 100 * p.predictedDensity, 100 * p.density,
                        static_cast<long long>(p.testTokens));
    }
    nlohmann::ordered_json approxJson;
    if (c.targetSparsity >= 0.0) {
        compress::ThresholdOptions to;
        to.targetSparsity = c.targetSparsity;
        to.prompts = options.prompts;
        to.maxTokensPerPrompt = c.tokens;
        to.continueTokens = c.continueTokens;
        auto tq = compress::measureThresholdQuality(**model, *device, to);
        if (!tq) return reportError(tq.error());
        const compress::QualityReport& q = tq->quality;
        std::printf("\nApproximate mode: |activation| <= a per-layer threshold dropped (target %.1f%%);\n"
                    "quality against the dense model on the built-in quality prompts:\n",
                    100 * c.targetSparsity);
        std::printf("  thresholds:");
        for (float t : tq->thresholds) std::printf(" %.4g", t);
        std::printf("\n  zero inputs of ffn_down: %.1f%%; mean KL %.4g nats (max %.4g); top-1 agreement "
                    "%.1f%% over %d positions; perplexity %.3f -> %.3f\n",
                    100 * tq->droppedShare, q.meanKl, q.maxKl, 100 * q.top1Agreement, q.positions,
                    q.perplexityReference, q.perplexityCandidate);
        approxJson = {{"target_sparsity", c.targetSparsity}, {"thresholds", tq->thresholds},
                      {"zero_share", tq->droppedShare},
                      {"quality", nlohmann::json::parse(q.toJson())}};
    }
    if (!c.json.empty()) {
        std::ofstream out(c.json);
        nlohmann::ordered_json j = toJson(r, c.model, predictors);
        if (!cacheJson.empty()) j["neuron_cache"] = cacheJson;
        if (!approxJson.is_null()) j["approximate"] = approxJson;
        out << j.dump(2) << "\n";
        if (!out) return reportError(makeError(ErrorCode::Io, c.json + ": cannot write"));
    }
    return ExitOk;
}

}  // namespace

void addSparsityCommand(CLI::App& app, int& exitCode)
{
    auto c = std::make_shared<SparsityCommand>();
    c->model = demoModelPath();
    auto* cmd = app.add_subcommand(
        "sparsity", "Measure per-layer FFN activation density and its overlap across tokens (mixtures of experts: "
                    "how each layer routes, kept for the planner)");
    cmd->add_option("-m,--model", c->model, "Model: GGUF file, Hugging Face folder, package, llama2.c")
        ->check(CLI::ExistingPath);
    cmd->add_option("--arch", c->load.architecture,
                    "llama2.c checkpoints: the architecture the file does not record (llama, relu-llama)");
    cmd->add_option("--tokenizer", c->load.tokenizerPath, "llama2.c checkpoints: tokenizer.bin");
    cmd->add_option("--prompts", c->promptsFile, "Calibration prompts, one per line (default: built-in)")
        ->check(CLI::ExistingFile);
    cmd->add_option("-n,--tokens", c->tokens, "At most this many tokens of each prompt")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--continue", c->continueTokens,
                    "After each prompt, let the model go on for up to this many sampled tokens "
                    "(seeded; more calibration text)")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--windows", c->windows, "Window lengths k in tokens, comma-separated (default: 1,2,4,8,16)")
        ->delimiter(',')
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--threshold", c->threshold,
                    "Active means |x| > this (0: exact zeros, for ReLU models; SwiGLU models need > 0)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("-t,--threads", c->threads, "CPU threads (default: one per core)");
    cmd->add_option("--predictor-rank", c->predictorRank,
                    "Also train low-rank activation predictors of this rank and report their "
                    "held-out recall and precision (ReLU models)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--recall", c->recall, "Target recall of the predictors on the training prompts")
        ->check(CLI::Range(0.01, 1.0));
    cmd->add_option("--cache-budgets", c->cacheBudgets,
                    "Also model a neuron cache with these device budgets, in percent of the FFN "
                    "weights (comma-separated, e.g. 10,25,50), against dense offloading")
        ->delimiter(',')
        ->check(CLI::Range(0.0, 100.0));
    cmd->add_option("--target-sparsity", c->targetSparsity,
                    "Approximate mode (SwiGLU models): drop activations below per-layer thresholds "
                    "calibrated to this share (0..1) and report the quality cost (KL, top-1, perplexity)")
        ->check(CLI::Range(0.0, 0.999));
    cmd->add_option("--routing-out", c->routingOut,
                    "Mixtures of experts: write the routing profile here (default: where plan, generate, bench and "
                    "the app look for it, under ~/.cache/spillway/routing)");
    cmd->add_option("--json", c->json, "Also write the figures as JSON to this file");
    cmd->callback([c, &exitCode] { exitCode = runSparsity(*c); });
}

}  // namespace spillway::cli
