// spillway-cli bench: decode speed against the memory-bandwidth bound of this machine.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli_common.h"
#include "core/formats/ggml_quants.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/host.h"
#include "gpu/registry.h"
#include "bench_command.h"

namespace spillway::cli {

namespace {

// Multiply-adds per second (2 flops each) of a prompt-sized matrix product on `device`: 256
// vectors through one 2048 x 2048 matrix in one matvec call (the CPU device multiplies the
// matrices: CpuDevice::gemm), the best of `repeats` (at least 3) runs. The matrix is of the
// model's own type, the product its prompts run (the CPU multiplies the quantized types as
// integers, faster than any float product: the float rate would not bound them); a type Spillway
// reads but does not write (Q2_K, Q3_K, the IQ types, MXFP4) gets random blocks with finite
// scales, which the integer product takes as long as real ones.
double matrixProductFlops(gpu::Device& device, int repeats, gpu::DType type)
{
    constexpr int64_t n = 256, dim = 2048;
    std::vector<float> w(size_t(dim * dim)), x(size_t(n * dim)), y(size_t(n * dim));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 2654435761u % 2001) - 1000) * 1e-3f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 40503u % 2001) - 1000) * 1e-3f;
    const size_t rowStride = gpu::rowBytes(type, dim);
    std::vector<uint8_t> encoded;
    const void* data = w.data();
    if (type != gpu::DType::F32) {
        encoded.resize(rowStride * size_t(dim));
        if (gguf::hasRowEncoder(type)) {
            for (int64_t r = 0; r < dim; ++r)
                gguf::quantizeRow(type, w.data() + r * dim, dim, encoded.data() + r * rowStride);
        } else {
            // Bytes below 0x30: every fp16 among them (a scale) is finite and small, every code valid.
            for (size_t i = 0; i < encoded.size(); ++i) encoded[i] = uint8_t((i * 2654435761u) >> 24) % 0x30;
        }
        data = encoded.data();
    }
    const gpu::MatrixView view{type, data, dim, dim, rowStride};
    std::vector<gpu::MatvecJob> jobs;
    for (int64_t j = 0; j < n; ++j) jobs.push_back({view, x.data() + j * dim, y.data() + j * dim});
    double best = 1e30;
    for (int r = 0; r < std::max(3, repeats) + 1; ++r) {
        const auto start = std::chrono::steady_clock::now();
        device.matvec(jobs);
        device.synchronize();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) best = std::min(best, s);  // the first warms up
    }
    return 2.0 * double(n) * double(dim) * double(dim) / best;
}



int runBench(BenchCommand& b)
{
    // A neuron cache is compared with dense offloading, which the offload bench does (with the
    // machine's own budgets when none are given); the plain CPU bench would ignore it.
    if (b.offload.offloading() || b.offload.neuronCache > 0 || b.backend != "cpu") return runOffloadBench(b);
    using Clock = std::chrono::steady_clock;
    auto loaded = LlamaModel::load(b.model);
    if (!loaded) return reportError(loaded.error());
    std::shared_ptr<const LlamaModel> model = std::move(*loaded);
    auto kvType = kvTypeOf(b.offload);
    if (!kvType) return reportError(kvType.error());
    engine::EngineOptions options;
    options.backend = "cpu";
    options.threads = b.threads;
    options.contextLength = std::max(b.tokens + 8, b.promptTokens);
    options.kvType = *kvType;
    options.batch = b.batch;
    auto engine = engine::Engine::open(model, options, printNotice);
    if (!engine) return reportError(engine.error());
    auto session = (*engine)->openSession();
    if (!session) return reportError(session.error());
    const auto& config = model->config();
    const auto& info = (*engine)->device().info();

    // Warm-up: pulls every weight page into memory and the kernels into cache.
    int32_t token = 1;
    for (int pos = 0; pos < 2; ++pos)
        token = argmax({(*session)->forward(token, pos).value(), size_t(config.vocabSize)});

    // Decode: `repeats` runs of `tokens` greedy steps from position 2 on. The ceiling is the
    // rate at which a plain read loop reads the same weights, from the same pages (a VM's guest
    // pages are not all equally fast: buffers of one process differ by 10-20%), with the same
    // threads. The memory bandwidth of a shared machine also moves by 10-20% within a second, so
    // every token is followed by one timed read, and each token is compared with the higher of
    // the two reads framing it (the conservative ceiling of its own moment). The median token
    // counts; a run's figure is the median of its tokens.
    const double bytesPerToken = double(model->weightBytesPerToken());
    std::unique_ptr<gpu::HostReadProbe> probe;
    std::string ceilingSource;
    if (b.bandwidthMiB > 0) {
        probe = std::make_unique<gpu::HostReadProbe>(info.threads, size_t(b.bandwidthMiB) << 20);
        ceilingSource = "a buffer of " + std::to_string(b.bandwidthMiB) + " MiB";
    } else {
        std::vector<gpu::HostReadProbe::Range> ranges;
        for (const gpu::MatrixView& m : (*session)->streamer().residentMatrices())
            ranges.push_back({m.data, size_t(matrixBytes(m))});
        probe = std::make_unique<gpu::HostReadProbe>(info.threads, std::move(ranges));
        ceilingSource = "the weights";
    }
    if (!probe->valid())
        return reportError(makeError(ErrorCode::OutOfMemory, "cannot read " + ceilingSource +
                                                                 " for the bandwidth measurement"));
    struct Run { double tokensPerSecond, bandwidth, ratio; };
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::vector<double> tokenRatios, tokenCeilings;  // one per timed token
    std::vector<Run> runs;
    double decodeSeconds = 0.0;
    double before = probe->read();
    for (int r = 0; r < b.repeats; ++r) {
        int32_t t = token;
        double runSeconds = 0.0;
        const size_t first = tokenRatios.size();
        for (int pos = 2; pos < 2 + b.tokens; ++pos) {
            const auto start = Clock::now();
            t = argmax({(*session)->forward(t, pos).value(), size_t(config.vocabSize)});
            const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
            const double after = probe->read();
            const double ceiling = std::max(before, after);
            tokenRatios.push_back(bytesPerToken / seconds / ceiling);
            tokenCeilings.push_back(ceiling);
            runSeconds += seconds;
            before = after;
        }
        decodeSeconds += runSeconds;
        runs.push_back({b.tokens / runSeconds, median({tokenCeilings.begin() + first, tokenCeilings.end()}),
                        median({tokenRatios.begin() + first, tokenRatios.end()})});
    }
    // The prompt: the same tokens as one batched forward pass (each matrix read once per batch
    // of `batch` tokens) and one token per pass (every token reads every weight, as a decode
    // does), each timed `repeats` times; the medians count. Positions restart at 0: the decode's
    // cache is overwritten.
    struct Prompt { double batched = 0, oneAtATime = 0, matrixFlops = 0; };
    const gpu::DType layerType = model->weights().layers.empty() ? gpu::DType::F32 : model->weights().layers[0].wq.type;
    // The product the prompt path runs for the layers' type (the integer one for the quantized
    // types the CPU set takes, the float one after conversion for the rest).
    const gpu::DType boundType = gguf::hasRowCodec(layerType) ? layerType : gpu::DType::F32;
    Prompt prompt;
    if (b.promptTokens > 0) {
        std::vector<int32_t> tokens(size_t(b.promptTokens));
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7919 + 3) % size_t(config.vocabSize));
        std::vector<double> batched, single;
        for (int r = 0; r < b.repeats; ++r) {
            auto start = Clock::now();
            if (auto l = (*session)->forward(std::span<const int32_t>(tokens), 0); !l) return reportError(l.error());
            batched.push_back(std::chrono::duration<double>(Clock::now() - start).count());
            start = Clock::now();
            for (size_t i = 0; i < tokens.size(); ++i)
                if (auto l = (*session)->forward(tokens[i], int(i)); !l) return reportError(l.error());
            single.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        }
        prompt.batched = double(b.promptTokens) / median(batched);
        prompt.oneAtATime = double(b.promptTokens) / median(single);
        prompt.matrixFlops = matrixProductFlops((*engine)->device(), b.repeats, boundType);
    }
    // A prompt token's arithmetic: 2 flops per weight of the matrices it goes through (not the
    // embedding rows it looks up, unless they are the head's too; of a mixture of experts' stacks,
    // the share of the experts it uses).
    double unusedExperts = 0.0;
    if (config.moe())
        for (const LlamaLayerWeights& L : model->weights().layers)
            unusedExperts += (double(L.expertGate.rows) * double(L.expertGate.cols) +
                              double(L.expertUp.rows) * double(L.expertUp.cols) +
                              double(L.expertDown.rows) * double(L.expertDown.cols)) *
                             (1.0 - double(config.nExpertsUsed) / double(config.nExperts));
    const double flopsPerToken =
        2.0 * (double(model->parameterCount()) - unusedExperts -
               (model->tiedEmbeddings() ? 0.0 : double(config.vocabSize) * double(config.dim)));
    const double arithmeticBound = prompt.matrixFlops > 0 ? prompt.matrixFlops / flopsPerToken : 0;

    std::sort(tokenRatios.begin(), tokenRatios.end());
    std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.ratio < y.ratio; });
    auto tokenRatioAt = [&](double q) { return tokenRatios[size_t(q * double(tokenRatios.size() - 1) + 0.5)]; };
    const double tokensPerSecond = double(tokenRatios.size()) / decodeSeconds;
    const double bandwidth = median(tokenCeilings);
    const double boundTokensPerSecond = bandwidth / bytesPerToken;
    const double ratio = tokenRatioAt(0.5);
    std::vector<double> allRatios;
    nlohmann::json everyRun = nlohmann::json::array();
    for (const Run& r : runs) {
        allRatios.push_back(r.ratio);
        everyRun.push_back({{"decode_tokens_per_s", r.tokensPerSecond},
                            {"memory_read_bandwidth_bytes_per_s", r.bandwidth},
                            {"ratio_to_bound", r.ratio}});
    }

    std::printf("%-34s %s\n", "model", b.model.c_str());
    std::printf("%-34s %s%s\n", "architecture", config.architecture.c_str(),
                config.synthetic ? " (SYNTHETIC: random weights)" : "");
    std::printf("%-34s %s, %d threads, %s kernels\n", "device", info.name.c_str(), info.threads,
                info.kernels.c_str());
    std::printf("%-34s %s\n", "KV cache type", gpu::kvTypeName(*kvType));
    std::printf("%-34s %d per run, %d runs; each token between two timed reads of %s (%.1f MiB)\n",
                "decode tokens", b.tokens, b.repeats, ceilingSource.c_str(),
                double(probe->bytes()) / double(1 << 20));
    std::printf("%-34s %.2f\n", "decode tokens/s", tokensPerSecond);
    std::printf("%-34s %.1f MiB\n", "weight bytes read per token", bytesPerToken / double(1 << 20));
    std::printf("%-34s %.2f GB/s\n", "achieved weight bandwidth", tokensPerSecond * bytesPerToken / 1e9);
    std::printf("%-34s %.2f GB/s (median of the tokens' ceilings)\n", "measured memory read bandwidth",
                bandwidth / 1e9);
    std::printf("%-34s %.2f\n", "bandwidth-bound tokens/s", boundTokensPerSecond);
    std::printf("%-34s %.1f%% (median token; quartiles %.1f%% %.1f%%)\n", "achieved / bound",
                100.0 * ratio, 100.0 * tokenRatioAt(0.25), 100.0 * tokenRatioAt(0.75));
    std::printf("%-34s", "achieved / bound, every run");
    for (const Run& r : runs) std::printf(" %.1f%%", 100.0 * r.ratio);
    std::printf("\n");
    if (b.promptTokens > 0) {
        std::printf("%-34s %d tokens, batches of %d, %d runs (medians)\n", "prompt", b.promptTokens,
                    (*session)->batch(), b.repeats);
        std::printf("%-34s %.2f tokens/s batched, %.2f one token per pass (head included): %.2fx\n", "prompt tokens/s",
                    prompt.batched, prompt.oneAtATime, prompt.batched / prompt.oneAtATime);
        std::printf("%-34s %.1f ms (the %d-token prompt batched, its first token's logits included)\n",
                    "prompt time to first token", 1000.0 * b.promptTokens / prompt.batched, b.promptTokens);
        std::printf("%-34s %.2fx (a batch reads each weight once for all its tokens)\n",
                    "prompt batched / bandwidth bound", prompt.batched / boundTokensPerSecond);
        std::printf("%-34s %.2f tokens/s (%.2f GFLOP per token at the %.1f GFLOP/s this device's %s matrix "
                    "products reach: 256 x 2048 x 2048)\n",
                    "prompt arithmetic bound", arithmeticBound, flopsPerToken / 1e9, prompt.matrixFlops / 1e9,
                    gpu::dtypeName(boundType));
        std::printf("%-34s %.1f%%\n", "prompt batched / arithmetic bound", 100.0 * prompt.batched / arithmeticBound);
    }

    if (!b.json.empty()) {
        nlohmann::json j = {
            {"model", b.model},
            {"architecture", config.architecture},
            {"synthetic", config.synthetic},
            {"device", info.name},
            {"kernels", info.kernels},
            {"threads", info.threads},
            {"kv_type", gpu::kvTypeName(*kvType)},
            {"decode_tokens", b.tokens},
            {"decode_tokens_per_s", tokensPerSecond},
            {"weight_bytes_per_token", bytesPerToken},
            {"memory_read_bandwidth_bytes_per_s", bandwidth},
            {"bandwidth_bound_tokens_per_s", boundTokensPerSecond},
            {"ratio_to_bound", ratio},
            {"ratio_to_bound_every_run", allRatios},
            {"ratio_to_bound_token_quartiles", {tokenRatioAt(0.25), ratio, tokenRatioAt(0.75)}},
            {"tokens_timed", tokenRatios.size()},
            {"ceiling_reads", ceilingSource},
            {"ceiling_read_bytes", probe->bytes()},
            {"runs", everyRun},
            {"prompt_tokens", b.promptTokens},
            {"prompt_batch", (*session)->batch()},
            {"prompt_tokens_per_s", b.promptTokens > 0 ? nlohmann::json(prompt.batched) : nlohmann::json(nullptr)},
            {"prompt_time_to_first_token_ms",
             b.promptTokens > 0 ? nlohmann::json(1000.0 * b.promptTokens / prompt.batched) : nlohmann::json(nullptr)},
            {"prompt_tokens_per_s_one_at_a_time",
             b.promptTokens > 0 ? nlohmann::json(prompt.oneAtATime) : nlohmann::json(nullptr)},
            {"prompt_arithmetic_bound_tokens_per_s", b.promptTokens > 0 ? nlohmann::json(arithmeticBound) : nlohmann::json(nullptr)},
            {"matrix_product_flops", b.promptTokens > 0 ? nlohmann::json(prompt.matrixFlops) : nlohmann::json(nullptr)},
            {"prompt_batched_over_bandwidth_bound",
             b.promptTokens > 0 ? nlohmann::json(prompt.batched / boundTokensPerSecond) : nlohmann::json(nullptr)},
            {"method", "each token framed by two timed reads (ceiling_reads); ceiling = the higher; "
                       "ratio = median token; a run's ratio = median of its tokens"},
        };
        std::ofstream out(b.json);
        out << j.dump(2) << "\n";
        if (!out) return reportError(makeError(ErrorCode::Io, b.json + ": cannot write"));
    }
    return ExitOk;
}

}  // namespace

void addBenchCommand(CLI::App& app, int& exitCode)
{
    auto b = std::make_shared<BenchCommand>();
    b->model = demoModelPath();
    auto* cmd = app.add_subcommand("bench", "Measure decode and prompt speed against the memory-bandwidth bound");
    cmd->add_option("-m,--model", b->model, "GGUF model file or model package folder")->check(CLI::ExistingPath);
    cmd->add_option("-n,--tokens", b->tokens, "Tokens to decode per run")->check(CLI::Range(1, 4096));
    cmd->add_option("--prompt-tokens", b->promptTokens,
                    "Prompt tokens timed as one batched pass and one token per pass (CPU; 0 = none)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--batch", b->batch, "Prompt tokens per pass over the weights (default: 256 on the CPU, 32 on a GPU)")->check(CLI::Range(1, 4096));
    cmd->add_option("-r,--repeats", b->repeats, "Runs (every token is timed; the median token counts)")->check(CLI::Range(1, 100));
    cmd->add_option("-t,--threads", b->threads, "CPU threads (default: one per core)");
    cmd->add_option("--bandwidth-mib", b->bandwidthMiB,
                    "The bandwidth ceiling reads a buffer of its own of this size (default: the "
                    "model's weights, as the decode reads them)")
        ->check(CLI::Range(64, 65536));
    cmd->add_option("--json", b->json, "Also write the figures as JSON to this file");
    cmd->add_option("--backend", b->backend, "Compute backend of offloaded runs: cpu, cuda, vulkan, auto");
    cmd->add_flag("--quality", b->quality,
                  "With --neuron-cache: also measure the cache's effect on quality against the dense model "
                  "(KL divergence, top-1 agreement, perplexity on the built-in texts)");
    cmd->add_flag("--no-baseline", b->noBaseline,
                  "Offloaded runs: skip the naive load-before-use baseline (a second decode of the same tokens)");
    cmd->add_flag("--no-calibrate", b->noCalibrate,
                  "Offloaded runs: do not feed this run's figures back into the cached hardware profile (by default "
                  "every run calibrates the planner's next prediction of the same regime)");
    cmd->add_flag("--random-tokens", b->randomTokens,
                  "Offloaded runs: feed seeded random tokens instead of the greedy text (as llama-bench does; a "
                  "random-weight model's greedy text repeats one token, which routes to the same experts)");
    cmd->add_option("--draw-routing", b->offload.drawRouting,
                    "Mixtures of experts, offloaded runs: draw each token's experts at this routing profile's rates "
                    "instead of the router's choice (a known skew on a random-weight model; the outputs are not the "
                    "model's, and the run does not calibrate)")
        ->check(CLI::ExistingFile);
    cmd->add_option("-c,--ctx", b->context, "Context length (offloaded runs; default: tokens + 8)");
    addOffloadOptions(cmd, b->offload, true);
    addNeuronCacheOptions(cmd, b->offload);
    cmd->callback([b, &exitCode] { exitCode = runBench(*b); });
}

}  // namespace spillway::cli
