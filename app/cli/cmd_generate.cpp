// spillway-cli generate: prompt in, the prompt and its continuation out on stdout.

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <random>

#include "cli_common.h"
#include "core/engine/constraints.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "offload.h"

namespace spillway::cli {

namespace {

std::atomic<bool> g_interrupted{false};
void onInterrupt(int) { g_interrupted.store(true); }

struct GenerateOptions {
    std::string model;
    ModelLoadOptions load;
    std::string prompt;
    int tokens = 128;
    int threads = 0;
    int context = 0;
    std::string backend = "cpu";
    SamplerSettings sampling;
    int64_t seed = -1;
    OffloadOptions offload;
    std::string jsonSchemaFile;  // constrain the text to JSON of this schema ("-": any object)
    std::string grammarFile;     // or to the texts of this GBNF grammar
};

int runGenerate(const GenerateOptions& o)
{
    auto loaded = LlamaModel::load(o.model, o.load);
    if (!loaded) return reportError(loaded.error());
    std::shared_ptr<const LlamaModel> model = std::move(*loaded);
    auto run = prepareOffload(model, o.backend, o.threads, o.context, o.offload, false);
    if (!run) return reportError(run.error());
    engine::Engine& engine = *run->engine;
    const std::string firstBackend = engine.device().info().backend;
    auto conversation = engine.conversation();

    engine::ReplyOptions reply;
    reply.sampling = o.sampling;
    reply.sampling.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();
    reply.maxNewTokens = o.tokens;
    reply.stop = &g_interrupted;
    if (!o.jsonSchemaFile.empty()) {
        std::string schema;
        if (o.jsonSchemaFile != "-") {
            auto text = readTextFile(o.jsonSchemaFile);
            if (!text) return reportError(text.error());
            schema = std::move(*text);
        }
        auto grammar = engine::jsonGrammar(schema);
        if (!grammar) return reportError(grammar.error());
        reply.grammar = *grammar;
    }
    if (!o.grammarFile.empty()) {
        if (!o.jsonSchemaFile.empty())
            return reportError(makeError(ErrorCode::InvalidArgument, "give --json-schema or --grammar-file, not both"));
        auto text = readTextFile(o.grammarFile);
        if (!text) return reportError(text.error());
        auto grammar = engine::gbnfGrammar(*text);
        if (!grammar) return reportError(Error{grammar.error().code, o.grammarFile + ": " + grammar.error().message});
        reply.grammar = *grammar;
    }
    reply.onToken = [](std::string_view text, int32_t) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    };
    std::signal(SIGINT, onInterrupt);
    std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
    std::fflush(stdout);
    auto stats = conversation->complete(o.prompt, true, reply);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!stats) return reportError(stats.error());

    const auto& s = *stats;
    const LlamaSession& session = *conversation->session();
    const auto& info = session.device().info();  // the CPU's when the session fell back to it
    std::fprintf(stderr, "\nmodel: %s | device: %s (%s kernels) | seed: %llu\n", o.model.c_str(),
                 info.name.c_str(), info.kernels.c_str(), (unsigned long long)reply.sampling.seed);
    std::fprintf(stderr, "prompt: %d tokens, time to first token %.1f ms (%.1f tokens/s)\n",
                 s.promptTokens, s.timeToFirstToken * 1e3,
                 s.timeToFirstToken > 0 ? s.promptTokens / s.timeToFirstToken : 0.0);
    std::fprintf(stderr, "generated: %d tokens in %.1f ms, %.2f tokens/s%s\n", s.generatedTokens,
                 (s.timeToFirstToken + s.decodeSeconds) * 1e3, s.decodeTokensPerSecond(),
                 s.endOfText ? " (end of text)" : "");
    if (const NeuronCacheReport nc = session.neuronCacheReport(); nc.total.tokens > 0) {
        const LlamaConfig& c = model->config();
        const double perToken = double(nc.total.loaded) / double(nc.total.tokens);  // per layer
        std::fprintf(stderr,
                     "neuron cache: %d bundles per layer (%s), hit rate %.1f%%, %.1f of %d neurons loaded per layer "
                     "and token (%.1f KiB per token; the same FFN part dense: %.1f KiB)\n",
                     o.offload.neuronCache, o.offload.neuronMode.c_str(), 100.0 * nc.total.hitRate(), perToken,
                     c.ffnDim, perToken * double(c.nLayers) * double(nc.bundleBytes) / 1024.0,
                     double(c.ffnDim) * double(c.nLayers) * double(nc.bundleBytes) / 1024.0);
        std::fprintf(stderr, "neuron cache: %s\n", cli::hotColdText(nc).c_str());
        if (nc.ssdRequests > 0)
            std::fprintf(stderr, "neuron bundles from the SSD: %.1f KiB per token in %.1f reads per token\n",
                         double(nc.ssdBytes) / double(nc.total.tokens / uint64_t(c.nLayers)) / 1024.0,
                         double(nc.ssdRequests) / double(nc.total.tokens / uint64_t(c.nLayers)));
    }
    if (const LlamaConfig& c = model->config(); c.moe()) {
        // How evenly the router spread the tokens: the busiest expert's share of a layer's choices
        // against the even share (1 / nExperts).
        const std::vector<uint64_t>& counts = session.expertCounts();
        double busiest = 0.0;
        for (int l = 0; l < c.nLayers; ++l) {
            uint64_t total = 0, top = 0;
            for (int e = 0; e < c.nExperts; ++e) {
                const uint64_t n = counts[size_t(l) * size_t(c.nExperts) + size_t(e)];
                total += n;
                top = std::max(top, n);
            }
            if (total) busiest = std::max(busiest, double(top) / double(total));
        }
        std::fprintf(stderr, "experts: %d of %d per token; the busiest expert of a layer took %.1f%% of its choices "
                             "(even: %.1f%%)\n",
                     c.nExpertsUsed, c.nExperts, 100.0 * busiest, 100.0 / c.nExperts);
        if (const ExpertCacheReport ec = session.expertCacheReport(); ec.layers > 0)
            std::fprintf(stderr,
                         "expert cache: %s (%.1f MiB), %d experts in RAM (%.1f MiB), hit "
                         "rate %.1f%%, %.1f%% served from RAM, %.1f MiB read from the SSD; router lookahead right for "
                         "%.1f%% of its guesses, %llu misses read ahead\n",
                         ec.slotsText().c_str(), double(ec.slotBytes) / double(1 << 20), ec.hostExperts,
                         double(ec.hostBytes) / double(1 << 20), 100.0 * ec.hitRate(), 100.0 * ec.hostRate(),
                         double(ec.ssdBytes) / double(1 << 20), 100.0 * ec.lookaheadAccuracy(),
                         (unsigned long long)ec.prefetched);
    }
    if (!s.fellBack.empty())
        std::fprintf(stderr, "finished on the CPU after the %s device failed: %s\n", firstBackend.c_str(),
                     s.fellBack.c_str());
    if (engine.plan() && s.fellBack.empty()) {
        const StreamerStats st = session.streamer().stats();
        std::fprintf(stderr, "offload: %.1f MiB read from the SSD, %.1f MiB copied to the device, "
                             "compute waited %.1f ms for weights\n",
                     st.ssdBytes / double(1 << 20), st.uploadBytes / double(1 << 20), st.stallNs / 1e6);
    }
    if (run->recorder && !o.offload.tracePath.empty()) {
        const auto spans = run->recorder->snapshot();
        if (!spans.empty()) {
            uint64_t begin = spans.front().startNs, end = spans.front().endNs;
            for (const auto& sp : spans) {
                begin = std::min(begin, sp.startNs);
                end = std::max(end, sp.endNs);
            }
            std::fprintf(stderr, "timeline: %s (trace: %s)\n", trace::summarize(spans, begin, end).text().c_str(),
                         o.offload.tracePath.c_str());
        }
        auto written = trace::writeChromeTrace(run->recorder->snapshot(), o.offload.tracePath);
        if (!written) return reportError(written.error());
    }
    if (s.stopped && g_interrupted.load()) return ExitInterrupted;
    return ExitOk;
}

}  // namespace

void addGenerateCommand(CLI::App& app, int& exitCode)
{
    auto o = std::make_shared<GenerateOptions>();
    o->model = demoModelPath();
    auto* cmd = app.add_subcommand("generate", "Generate text from a prompt");
    cmd->add_option("-m,--model", o->model, "GGUF file, model package folder or llama2.c checkpoint (default: the bundled demo model)")
        ->check(CLI::ExistingPath);
    cmd->add_option("--arch", o->load.architecture,
                    "llama2.c checkpoints: the architecture the file does not record (llama, relu-llama)");
    cmd->add_option("--tokenizer", o->load.tokenizerPath,
                    "llama2.c checkpoints: tokenizer.bin (default: tokenizer.bin or tok<vocab>.bin beside it)")
        ->check(CLI::ExistingFile);
    cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
    cmd->add_option("-n,--tokens", o->tokens, "Number of new tokens")->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--temp", o->sampling.temperature, "Temperature (0 = greedy)")
        ->check(CLI::Range(0.0, 100.0));
    cmd->add_option("--top-k", o->sampling.topK, "Keep the k most likely tokens (0 = off)");
    cmd->add_option("--top-p", o->sampling.topP, "Nucleus sampling threshold (1 = off)")
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--min-p", o->sampling.minP, "Drop tokens below min-p times the best (0 = off)")
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--repeat-penalty", o->sampling.repeatPenalty, "Repetition penalty (1 = off)")
        ->check(CLI::Range(0.01, 100.0));
    cmd->add_option("--presence-penalty", o->sampling.presencePenalty, "Subtract this from the logit of a token seen among the recent ones (0 = off)")
        ->check(CLI::Range(-2.0, 2.0));
    cmd->add_option("--frequency-penalty", o->sampling.frequencyPenalty, "Subtract this per time a token was seen among the recent ones (0 = off)")
        ->check(CLI::Range(-2.0, 2.0));
    cmd->add_option("--repeat-last-n", o->sampling.repeatLastN, "Tokens the penalty looks back at")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--seed", o->seed, "Random seed (default: random; printed on stderr)");
    cmd->add_option("--json-schema", o->jsonSchemaFile,
                    "Constrain the text to JSON that validates against this JSON Schema file ('-': any JSON object)");
    cmd->add_option("--grammar-file", o->grammarFile,
                    "Constrain the text to this GBNF grammar file (llama.cpp's format)");
    cmd->add_option("-t,--threads", o->threads, "CPU threads (default: one per core)")
        ->check(CLI::Range(0, 1024));
    cmd->add_option("-c,--ctx", o->context, "Context length (default: trained, at most 4096)")
        ->check(CLI::Range(0, 1 << 22));
    cmd->add_option("--backend", o->backend, "Compute backend: cpu, cuda, vulkan, auto");
    addNeuronCacheOptions(cmd, o->offload);
    addOffloadOptions(cmd, o->offload, true);
    cmd->callback([o, &exitCode] { exitCode = runGenerate(*o); });
}

}  // namespace spillway::cli
