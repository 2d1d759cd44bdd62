// spillway-cli bench with budgets: decode with weights spread over device memory, RAM and the
// SSD as the planner placed them; measured against the planner's prediction, the probe's SSD
// bandwidth and the naive (load-before-use) baseline.

#include <chrono>
#include <random>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/calibrate/quality.h"
#include "core/model/llama_model.h"
#include "gpu/host.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "bench_command.h"

namespace spillway::cli {

namespace {

struct Measured {
    double tokensPerSecond = 0;
    double seconds = 0;
    uint64_t ssdBytes = 0;      // the streamer's
    uint64_t uploadBytes = 0;   // the streamer's host->device copies
    uint64_t stallNs = 0;
    // The neuron cache's (zeros when off): bundles loaded (bytes of their slices), and of those
    // the bytes read from the SSD (alignment and merged gaps included).
    NeuronCacheReport cache;
    uint64_t cacheLoadedBytes = 0, cacheSsdBytes = 0;
    uint64_t cacheShippedBytes = 0;  // of the loads from RAM, those copied to slots (not computed in place)
    // The expert cache's (mixtures of experts with experts on the SSD; zeros otherwise), this run's.
    ExpertCacheReport experts;
    // Bytes brought in from the slower tiers per run: SSD reads and RAM->device copies, the
    // neuron cache's loads included (SSD-sourced loads counted once, as read).
    uint64_t movedBytes() const
    {
        const uint64_t cacheRam = cache.ssdRequests ? 0 : cacheShippedBytes;
        return ssdBytes + uploadBytes + cacheSsdBytes + cacheRam + experts.ssdBytes;
    }
    // Every read of the SSD: the streamer's, the neuron cache's and the expert cache's.
    uint64_t allSsdBytes() const { return ssdBytes + cacheSsdBytes + experts.ssdBytes; }
    trace::Summary summary;
    std::vector<trace::Span> spans;
};

// Decodes `tokens` greedy steps after a two-token warm-up, with `options`; with `randomTokens`,
// each step feeds a seeded random token instead (llama-bench's way: a random-weight model's
// greedy text repeats one token, and then routes every token to the same experts).
Result<Measured> decode(engine::Engine& engine, const SessionOptions& options, int tokens, trace::Recorder* recorder,
                        bool randomTokens)
{
    using Clock = std::chrono::steady_clock;
    const LlamaModel& model = engine.model();
    auto session = engine.openSession(options);
    if (!session) return session.error();
    const int vocab = model.config().vocabSize;
    int32_t token = 1;
    for (int pos = 0; pos < 2; ++pos) {
        auto logits = (*session)->forward(token, pos);
        if (!logits) return logits.error();
        token = argmax({*logits, size_t(vocab)});
    }
    std::mt19937 rng(42);
    if (recorder) recorder->clear();
    const StreamerStats before = (*session)->streamer().stats();
    const NeuronCacheReport cacheBefore = (*session)->neuronCacheReport();
    const ExpertCacheReport expertsBefore = (*session)->expertCacheReport();
    const uint64_t t0 = trace::nowNs();
    const auto start = Clock::now();
    for (int pos = 2; pos < 2 + tokens; ++pos) {
        auto logits = (*session)->forward(token, pos);
        if (!logits) return logits.error();
        token = randomTokens ? int32_t(rng() % uint32_t(vocab)) : argmax({*logits, size_t(vocab)});
    }
    Measured m;
    m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const uint64_t t1 = trace::nowNs();
    const StreamerStats after = (*session)->streamer().stats();
    m.tokensPerSecond = tokens / m.seconds;
    m.ssdBytes = after.ssdBytes - before.ssdBytes;
    m.uploadBytes = after.uploadBytes - before.uploadBytes;
    m.cache = (*session)->neuronCacheReport();
    m.cacheLoadedBytes = m.cache.loadedBytes() - cacheBefore.loadedBytes();
    m.cacheShippedBytes = m.cache.shippedBytes() - cacheBefore.shippedBytes();
    m.cacheSsdBytes = m.cache.ssdBytes - cacheBefore.ssdBytes;
    m.experts = (*session)->expertCacheReport().since(expertsBefore);
    m.stallNs = after.stallNs - before.stallNs;
    if (recorder) {
        m.spans = recorder->snapshot();
        m.summary = trace::summarize(m.spans, t0, t1);
    }
    return m;
}

}  // namespace

int runOffloadBench(BenchCommand& b)
{
    auto loaded = LlamaModel::load(b.model);
    if (!loaded) return reportError(loaded.error());
    std::shared_ptr<const LlamaModel> model = std::move(*loaded);
    const int context = b.context > 0 ? b.context : b.tokens + 8;
    b.offload.alwaysPlan = true;
    auto run = prepareOffload(model, b.backend, b.threads, context, b.offload, true);
    if (!run) return reportError(run.error());
    const plan::PlanResult& plan = *run->plan();
    auto measured = decode(*run->engine, run->session(), b.tokens, run->recorder.get(), b.randomTokens);
    if (!measured) return reportError(measured.error());

    const bool streams = plan.ssdBytes > 0 || plan.hostWeightBytes > 0;
    std::optional<Measured> naive;
    if (streams && !b.offload.naive && !b.noBaseline) {
        SessionOptions n = run->session();
        n.placement->prefetchDepth = 0;
        n.streamer.trace = nullptr;
        auto m = decode(*run->engine, n, b.tokens, nullptr, b.randomTokens);
        if (!m) return reportError(m.error());
        naive = std::move(m.value());
    }

    // With a neuron cache: the dense offload path at the same budgets, for comparison.
    std::optional<Measured> dense;
    std::optional<plan::PlanResult> densePlan;
    if (b.offload.neuronCache > 0) {
        OffloadOptions o = b.offload;
        o.neuronCache = 0;
        o.tracePath.clear();
        auto denseRun = prepareOffload(model, b.backend, b.threads, context, o, false);
        if (!denseRun) return reportError(denseRun.error());
        auto m = decode(*denseRun->engine, denseRun->session(), b.tokens, nullptr, b.randomTokens);
        if (!m) return reportError(m.error());
        dense = std::move(m.value());
        densePlan = denseRun->plan();
    }

    // The neuron cache's effect on quality: the same model with and without it (predicted mode
    // is approximate; exact mode differs by rounding only).
    std::optional<compress::QualityReport> quality;
    if (b.quality && b.offload.neuronCache > 0) {
        compress::QualityOptions q;
        q.candidateNeuronCache = run->session().neuronCache;
        auto cpu = gpu::createCpuDevice(b.threads);
        auto r = compress::compareModels(*model, *model, *cpu, q);
        if (!r) return reportError(r.error());
        quality = *r;
    }

    const double ssdSeq = run->engine->profile().storage.sequentialBytesPerSecond;
    const double ssdRate = double(measured->allSsdBytes()) / measured->seconds;
    const double predicted = plan.tokensPerSecond();
    const auto& mem = run->device().memoryStats();
    std::printf("%s", plan::planText(plan, false).c_str());
    std::printf("\nmeasured (%d tokens%s)\n", b.tokens, b.offload.naive ? ", naive" : "");
    std::printf("  %-36s %.3f (predicted %.3f, measured/predicted %.2f)\n", "tokens/s", measured->tokensPerSecond,
                predicted, measured->tokensPerSecond / predicted);
    std::printf("  %-36s %.1f MiB/token (streamed weights %.1f, neuron cache %.1f, expert cache %.1f)\n", "SSD read",
                double(measured->allSsdBytes()) / double(b.tokens) / double(1 << 20),
                double(measured->ssdBytes) / double(b.tokens) / double(1 << 20),
                double(measured->cacheSsdBytes) / double(b.tokens) / double(1 << 20),
                double(measured->experts.ssdBytes) / double(b.tokens) / double(1 << 20));
    std::printf("  %-36s %.2f GB/s of the probe's %.2f GB/s sequential direct reads (%.0f%%)\n",
                "SSD throughput during decode", ssdRate / 1e9, ssdSeq / 1e9, 100.0 * ssdRate / ssdSeq);
    std::printf("  %-36s %.1f%% of decode time\n", "compute waiting for weights",
                100.0 * double(measured->stallNs) / 1e9 / measured->seconds);
    std::printf("  %-36s %s\n", "where the time went", measured->summary.text().c_str());
    std::printf("  %-36s %.1f MiB (budget %.1f), pinned RAM peak %.1f MiB\n", "device memory peak",
                mem.peak / double(1 << 20), mem.limit / double(1 << 20), mem.hostPeak / double(1 << 20));
    if (const ExpertCacheReport& ec = measured->experts; ec.layers > 0)
        std::printf("  %-36s %s (%.1f MiB), %d experts in RAM (%.1f MiB): hit rate "
                    "%.1f%%, %.1f%% served from RAM, %.2f MiB/token read from the SSD; router lookahead right for "
                    "%.1f%% of its guesses, %.2f MiB/token read ahead, %.1f%% of its guesses not read (their "
                    "layer's guesses too often wrong)\n",
                    "expert cache", ec.slotsText().c_str(), double(ec.slotBytes) / double(1 << 20),
                    ec.hostExperts, double(ec.hostBytes) / double(1 << 20), 100.0 * ec.hitRate(),
                    100.0 * ec.hostRate(), double(ec.ssdBytes) / double(b.tokens) / double(1 << 20),
                    100.0 * ec.lookaheadAccuracy(), double(ec.aheadBytes) / double(b.tokens) / double(1 << 20),
                    ec.guessed ? 100.0 * double(ec.unreadGuesses) / double(ec.guessed) : 0.0);
    if (!b.offload.drawRouting.empty())
        std::printf("  %-36s drawn at the rates of %s (%s): synthetic, not the model's router\n", "routing",
                    b.offload.drawRouting.c_str(), run->session().drawnRouting->source.c_str());
    if (naive)
        std::printf("  %-36s %.3f tokens/s; speed-up of the planned run %.2fx\n", "naive baseline",
                    naive->tokensPerSecond, measured->tokensPerSecond / naive->tokensPerSecond);
    if (dense) {
        const Measured& m = *measured;
        const double tokens = double(b.tokens);
        const LlamaConfig& c = model->config();
        const double cacheTokens = double(m.cache.total.tokens) / double(c.nLayers);
        std::printf("  %-36s %d bundles per layer (%s, from %s): hit rate %.1f%%, %.1f of %d neurons loaded per layer "
                    "and token\n",
                    "neuron cache", b.offload.neuronCache, b.offload.neuronMode.c_str(), b.offload.bundlesFrom.c_str(),
                    100.0 * m.cache.total.hitRate(), double(m.cache.total.loaded) / std::max(1.0, cacheTokens * c.nLayers),
                    c.ffnDim);
        std::string caps;
        for (int cap : m.cache.capacities) caps += (caps.empty() ? "" : " ") + std::to_string(cap);
        std::printf("  %-36s %s\n", "bundles per layer", caps.c_str());
        std::printf("  %-36s %s\n", "hot and cold neurons", hotColdText(m.cache).c_str());
        if (m.cache.ssdRequests)
            std::printf("  %-36s %.1f MiB/token in %.1f reads/token\n", "neuron bundles read from the SSD",
                        double(m.cacheSsdBytes) / tokens / double(1 << 20),
                        double(m.cache.ssdRequests) / std::max(1.0, cacheTokens));
        if (m.cache.earlyBytes)
            std::printf("  %-36s %.1f%% of the bundle reads (predictors of the attention's input)\n",
                        "read while attention ran", 100.0 * double(m.cache.earlyBytes) / double(std::max<uint64_t>(1, m.cache.ssdBytes)));
        std::printf("  %-36s %.2f MiB/token (SSD %.2f, RAM->device %.2f, neuron bundles %.2f)\n",
                    "bytes moved, neuron cache", double(m.movedBytes()) / tokens / double(1 << 20),
                    double(m.ssdBytes) / tokens / double(1 << 20), double(m.uploadBytes) / tokens / double(1 << 20),
                    double(m.cache.ssdRequests ? m.cacheSsdBytes : m.cacheShippedBytes) / tokens / double(1 << 20));
        std::printf("  %-36s %.2f MiB/token, %.3f tokens/s\n", "bytes moved, dense offload (same budget)",
                    double(dense->movedBytes()) / tokens / double(1 << 20), dense->tokensPerSecond);
        // Where a side moved nothing there is no ratio to print, only what happened.
        const uint64_t cacheMoved = m.movedBytes(), denseMoved = dense->movedBytes();
        char bytes[128];
        if (cacheMoved == 0 && denseMoved == 0)
            std::snprintf(bytes, sizeof bytes, "neither moved any bytes (all resident at these budgets)");
        else if (cacheMoved == 0)
            std::snprintf(bytes, sizeof bytes, "no bytes moved (the cache's misses were computed where they lie)");
        else if (denseMoved >= cacheMoved)
            std::snprintf(bytes, sizeof bytes, "%.2fx fewer bytes moved", double(denseMoved) / double(cacheMoved));
        else
            std::snprintf(bytes, sizeof bytes, "%.1f KiB/token more moved",
                          double(cacheMoved - denseMoved) / tokens / 1024.0);
        std::printf("  %-36s %s, %.2fx the tokens/s\n", "neuron cache vs dense offload", bytes,
                    m.tokensPerSecond / dense->tokensPerSecond);
    }
    if (quality)
        std::printf("  %-36s mean KL %.4f nats (max %.3f), top-1 agreement %.1f%% over %d positions; perplexity "
                    "%.3f -> %.3f\n",
                    "quality with the neuron cache", quality->meanKl, quality->maxKl, 100.0 * quality->top1Agreement,
                    quality->positions, quality->perplexityReference, quality->perplexityCandidate);
    const auto perToken = trace::summarizePerToken(measured->spans);
    for (size_t i = 0; i < perToken.size() && i < 8; ++i)
        std::printf("  token %-30u %.1f ms: %s\n", perToken[i].firstToken, perToken[i].windowNs / 1e6,
                    perToken[i].text().c_str());
    std::vector<trace::LanePrediction> predictions = {
        {trace::Lane::SsdRead, plan.lanes.ssdRead},
        {trace::Lane::HostToDevice, plan.lanes.hostToDevice},
        {trace::Lane::DeviceCompute, plan.lanes.deviceCompute},
    };
    std::printf("\n%s", trace::compareWithPrediction(measured->summary, predictions).c_str());
    // Every run calibrates: this run's figures go back into the cached hardware profile, and the
    // next prediction of this regime on this machine is scaled by them (core/hw/calibration.h).
    std::optional<hw::Calibration> calibrated;
    if (!b.offload.drawRouting.empty()) {
        std::printf("calibration: not recorded (the experts were drawn, not routed)\n");
    } else if (!b.noCalibrate) {
        auto c = engine::calibrateFromRun(plan, run->engine->profile(), measured->summary, b.tokens,
                                          1.0 / measured->tokensPerSecond, ssdRate);
        if (c) {
            calibrated = *c;
            std::printf("calibration: measured/predicted %.2f from the probe's figures alone; this regime (%s, %s-bound, "
                        "size class %d, %s) is now predicted at %.2f x the probe, from %d run%s\n",
                        plan.probeSecondsPerToken > 0 ? (1.0 / measured->tokensPerSecond) / plan.probeSecondsPerToken : 0.0,
                        plan.deviceName.c_str(), plan.bottleneck.c_str(), plan.sizeClass, plan.weightFormat.c_str(),
                        c->ratio, c->runs,
                        c->runs == 1 ? "" : "s");
        } else {
            std::printf("calibration: not recorded (%s)\n", c.error().message.c_str());
        }
    }

    if (!b.offload.tracePath.empty()) {
        auto st = trace::writeChromeTrace(measured->spans, b.offload.tracePath);
        if (!st) return reportError(st.error());
    }
    if (!b.json.empty()) {
        nlohmann::json j = nlohmann::json::parse(plan::planJson(plan));
        j.erase("tensors");
        j["model"] = b.model;
        j["synthetic"] = model->config().synthetic;
        j["decode_tokens"] = b.tokens;
        j["measured"] = {
            {"tokens_per_s", measured->tokensPerSecond},
            {"ssd_bytes_per_token", double(measured->ssdBytes) / b.tokens},  // the streamer's
            {"all_ssd_bytes_per_token", double(measured->allSsdBytes()) / b.tokens},
            {"ssd_bytes_per_s", ssdRate},                                      // all of them
            {"stall_fraction", double(measured->stallNs) / 1e9 / measured->seconds},
            {"bottleneck", measured->summary.text()},
            {"device_peak_bytes", mem.peak},
            {"pinned_ram_peak_bytes", mem.hostPeak},
        };
        j["probe_seconds_per_token"] = plan.probeSecondsPerToken;
        j["calibration_runs_before"] = plan.calibrationRuns;
        if (calibrated) j["calibration_after"] = {{"ratio", calibrated->ratio}, {"runs", calibrated->runs}};
        j["measured"]["moved_bytes_per_token"] = double(measured->movedBytes()) / b.tokens;
        if (!b.offload.drawRouting.empty())
            j["drawn_routing"] = {{"profile", b.offload.drawRouting}, {"source", run->session().drawnRouting->source}};
        if (const ExpertCacheReport& ec = measured->experts; ec.layers > 0)
            j["expert_cache"] = {
                {"layers", ec.layers},
                {"slots_per_layer", ec.slotsPerLayer},
                {"fewest_slots_per_layer", ec.fewestSlots},
                {"slot_bytes", ec.slotBytes},
                {"hit_rate", ec.hitRate()},
                {"hits", ec.hits},
                {"misses", ec.misses},
                {"ssd_bytes_per_token", double(ec.ssdBytes) / b.tokens},
                {"lookahead_accuracy", ec.lookaheadAccuracy()},
                {"misses_read_ahead", ec.prefetched},
                {"read_ahead_bytes_per_token", double(ec.aheadBytes) / b.tokens},
                {"guesses_not_read", ec.unreadGuesses},
                {"ram_experts", ec.hostExperts},
                {"ram_bytes", ec.hostBytes},
                {"ram_rate", ec.hostRate()},
                {"start_read_bytes", ec.startBytes},
            };
        if (dense) {
            const NeuronCacheReport& nc = measured->cache;
            j["neuron_cache"] = {
                {"capacity", b.offload.neuronCache},
                {"mode", b.offload.neuronMode},
                {"bundles_from", b.offload.bundlesFrom},
                {"hit_rate", nc.total.hitRate()},
                {"loaded_per_layer_token", double(nc.total.loaded) / std::max<double>(1.0, double(nc.total.tokens))},
                {"bundle_slice_bytes", nc.bundleBytes},
                {"bundle_ssd_bytes_per_token", double(measured->cacheSsdBytes) / b.tokens},
                {"bundle_bytes_read_during_attention", nc.earlyBytes},
                {"bundle_ssd_bytes", nc.ssdBytes},
                {"layer_capacities", nc.capacities},
                {"layer_pinned", nc.pinned},
                {"cold_neurons_on_cpu_per_layer_token", double(nc.total.slotless) / std::max<double>(1.0, double(nc.total.tokens))},
            };
            std::vector<std::string> cold;
            for (ColdNeurons c : nc.cold) cold.push_back(coldNeuronsName(c));
            j["neuron_cache"]["layer_cold_neurons"] = cold;
            j["dense_offload"] = {
                {"tokens_per_s", dense->tokensPerSecond},
                {"moved_bytes_per_token", double(dense->movedBytes()) / b.tokens},
                {"ssd_bytes_per_token", double(dense->ssdBytes) / b.tokens},
            };
            if (quality) j["neuron_cache"]["quality"] = nlohmann::json::parse(quality->toJson());
            if (measured->movedBytes() > 0)  // null when nothing moved
                j["bytes_moved_ratio"] = double(dense->movedBytes()) / double(measured->movedBytes());
            else
                j["bytes_moved_ratio"] = nullptr;
            j["tokens_per_s_ratio"] = measured->tokensPerSecond / dense->tokensPerSecond;
        }
        j["probe_ssd_sequential_bytes_per_s"] = ssdSeq;
        j["ssd_ratio_to_probe"] = ssdRate / ssdSeq;
        j["measured_over_predicted"] = measured->tokensPerSecond / predicted;
        if (naive) {
            j["naive_tokens_per_s"] = naive->tokensPerSecond;
            j["speedup_over_naive"] = measured->tokensPerSecond / naive->tokensPerSecond;
        }
        std::ofstream out(b.json);
        out << j.dump(2) << "\n";
        if (!out) return reportError(makeError(ErrorCode::Io, b.json + ": cannot write"));
    }
    return ExitOk;
}

}  // namespace spillway::cli
