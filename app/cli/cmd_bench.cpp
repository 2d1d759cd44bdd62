// spillway-cli bench: decode speed against the memory-bandwidth bound of this machine.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "cli_common.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/registry.h"
#include "bench_command.h"

namespace spillway::cli {

namespace {



int runBench(BenchCommand& b)
{
    if (b.offload.offloading() || b.backend != "cpu") return runOffloadBench(b);
    using Clock = std::chrono::steady_clock;
    auto model = LlamaModel::load(b.model);
    if (!model) return reportError(model.error());
    gpu::DeviceOptions deviceOptions;
    deviceOptions.threads = b.threads;
    auto device = gpu::createDevice("cpu", deviceOptions);
    if (!device) return reportError(device.error());
    auto kvType = kvTypeOf(b.offload);
    if (!kvType) return reportError(kvType.error());
    SessionOptions sessionOptions;
    sessionOptions.contextLength = b.tokens + 8;
    sessionOptions.kvType = *kvType;
    auto session = LlamaSession::create(**model, **device, sessionOptions);
    if (!session) return reportError(session.error());
    const auto& config = (*model)->config();
    const auto& info = (*device)->info();

    // Warm-up: pulls every weight page into memory and the kernels into cache.
    int32_t token = 1;
    for (int pos = 0; pos < 2; ++pos)
        token = argmax({(*session)->forward(token, pos).value(), size_t(config.vocabSize)});

    // Decode: `tokens` greedy steps from position 2 on, `repeats` times. The memory bandwidth of
    // a shared machine moves from moment to moment, so each run is framed by two bandwidth
    // samples and compared with the higher of them (the conservative ceiling for that run); the
    // median run counts.
    const size_t bandwidthBytes = size_t(b.bandwidthMiB) << 20;
    const double bytesPerToken = double((*model)->weightBytesPerToken());
    struct Run { double tokensPerSecond, bandwidth, ratio; };
    std::vector<Run> runs;
    double before = gpu::measureHostReadBandwidth(info.threads, bandwidthBytes, 2);
    for (int r = 0; r < b.repeats; ++r) {
        int32_t t = token;
        const auto start = Clock::now();
        for (int pos = 2; pos < 2 + b.tokens; ++pos)
            t = argmax({(*session)->forward(t, pos).value(), size_t(config.vocabSize)});
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const double after = gpu::measureHostReadBandwidth(info.threads, bandwidthBytes, 2);
        const double ceiling = std::max(before, after);
        const double tps = b.tokens / seconds;
        runs.push_back({tps, ceiling, tps * bytesPerToken / ceiling});
        before = after;
    }
    std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.ratio < y.ratio; });
    const Run median = runs[runs.size() / 2];
    const double tokensPerSecond = median.tokensPerSecond;
    const double bandwidth = median.bandwidth;
    const double boundTokensPerSecond = bandwidth / bytesPerToken;
    const double ratio = median.ratio;
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
    std::printf("%-34s %d per run; %d runs, each between two bandwidth samples; median run shown\n",
                "decode tokens", b.tokens, b.repeats);
    std::printf("%-34s %.2f\n", "decode tokens/s", tokensPerSecond);
    std::printf("%-34s %.1f MiB\n", "weight bytes read per token", bytesPerToken / double(1 << 20));
    std::printf("%-34s %.2f GB/s\n", "achieved weight bandwidth", tokensPerSecond * bytesPerToken / 1e9);
    std::printf("%-34s %.2f GB/s\n", "measured memory read bandwidth", bandwidth / 1e9);
    std::printf("%-34s %.2f\n", "bandwidth-bound tokens/s", boundTokensPerSecond);
    std::printf("%-34s %.1f%%\n", "achieved / bound", 100.0 * ratio);
    std::printf("%-34s", "achieved / bound, every run");
    for (const Run& r : runs) std::printf(" %.1f%%", 100.0 * r.ratio);
    std::printf("\n");

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
            {"runs", everyRun},
            {"method", "each run framed by two bandwidth samples; ceiling = the higher; median run"},
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
    auto* cmd = app.add_subcommand("bench", "Measure decode speed against the memory-bandwidth bound");
    cmd->add_option("-m,--model", b->model, "GGUF model file or model package folder")->check(CLI::ExistingPath);
    cmd->add_option("-n,--tokens", b->tokens, "Tokens to decode per run")->check(CLI::Range(1, 4096));
    cmd->add_option("-r,--repeats", b->repeats, "Runs (the median counts)")->check(CLI::Range(1, 100));
    cmd->add_option("-t,--threads", b->threads, "CPU threads (default: one per core)");
    cmd->add_option("--bandwidth-mib", b->bandwidthMiB, "Buffer size of the bandwidth measurement")
        ->check(CLI::Range(64, 65536));
    cmd->add_option("--json", b->json, "Also write the figures as JSON to this file");
    cmd->add_option("--backend", b->backend, "Compute backend of offloaded runs: cpu, cuda, vulkan, auto");
    cmd->add_flag("--quality", b->quality,
                  "With --neuron-cache: also measure the cache's effect on quality against the dense model "
                  "(KL divergence, top-1 agreement, perplexity on the built-in texts)");
    cmd->add_option("-c,--ctx", b->context, "Context length (offloaded runs; default: tokens + 8)");
    addOffloadOptions(cmd, b->offload, true);
    addNeuronCacheOptions(cmd, b->offload);
    cmd->callback([b, &exitCode] { exitCode = runBench(*b); });
}

}  // namespace spillway::cli
