// End to end on a GPU backend, built once per backend (SPILLWAY_TEST_BACKEND): test_cuda_generate
// (label gpu) and test_vulkan_generate (label vulkan; Mesa's lavapipe in CI). `spillway-cli
// generate --backend B` greedily continues the reference prompts of stories260K and
// relu-stories-260K exactly as the CPU backend does (tests/data/reference/*.greedy48.tsv), with
// F32, F16 and Q8 KV caches, with weights on the device, streamed from RAM and the SSD, split by
// rows with the CPU (HeteGen), prompts in batches; models of every GGUF type against the CPU's
// logits; the neuron cache on the device; the device's timeline marks; mixtures of experts. Skipped, with the
// registry's reason, where no such device is usable.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "core/calibrate/compress_model.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "core/trace/trace.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/registry.h"
#include "../common/cli_run.h"
#include "../common/llama_references.h"
#include "../common/reference_texts.h"
#include "../common/session_logits.h"

namespace {

// Where the build put them, unless the environment says otherwise (a staged copy of the binaries
// on a GPU machine: tests/bench/gpu/run_all.sh).
std::string pathFrom(const char* variable, const char* built)
{
    const char* value = std::getenv(variable);
    return value && *value ? value : built;
}
const std::string kData = pathFrom("SPILLWAY_TEST_DATA_DIR", SPILLWAY_TEST_DATA_DIR);
const std::string kCli = pathFrom("SPILLWAY_BIN_DIR", SPILLWAY_BIN_DIR) + "/spillway-cli";
constexpr const char* kBackend = SPILLWAY_TEST_BACKEND;

using testing_support::CliRun;
using spillway::testing_support::relativeL2;
using spillway::testing_support::sessionLogits;

std::string tempDir()
{
    const std::string dir = testing::TempDir() + "/test_" + std::string(kBackend) + "_generate-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    return dir;
}

// `env`: variable assignments put before the command ("NAME='value' ").
CliRun runCli(const std::string& args, const std::string& env = "")
{
    return testing_support::runProgram(kCli, args, tempDir(), env);
}

void skipWithoutDevice()
{
    for (const auto& b : spillway::gpu::backendStatus())
        if (b.name == kBackend && !b.usable) GTEST_SKIP() << "no usable " << kBackend << " device: " << b.reason;
}

TEST(GpuGenerate, GreedyTextMatchesTheReference)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    const auto refs = spillway::testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u) << "missing " << kData << "/reference/stories260K.greedy48.tsv";
    for (const auto& ref : refs) {
        const CliRun r = runCli("generate --backend " + std::string(kBackend) + " -m '" + kData + "/models/stories260K.gguf' -p '" +
                                ref.prompt + "' -n 48 --temp 0");
        EXPECT_EQ(r.exitCode, 0) << r.err;
        EXPECT_EQ(r.out, ref.text + "\n") << r.err;
    }
}

TEST(GpuGenerate, HalfAndInt8KvCaches)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    const auto refs = spillway::testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
    ASSERT_FALSE(refs.empty());
    const std::string& prompt = refs[0].prompt;
    // The CPU backend's text with the same cache type is the reference (f16 / q8 caches round).
    for (const char* kv : {"f16", "q8"}) {
        const std::string args = "generate -m '" + kData + "/models/stories260K.gguf' -p '" + prompt +
                                 "' -n 48 --temp 0 --kv-type " + kv;
        const CliRun cpu = runCli(args + " --backend cpu");
        ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
        const CliRun gpu = runCli(args + " --backend " + kBackend);
        EXPECT_EQ(gpu.exitCode, 0) << gpu.err;
        EXPECT_EQ(gpu.out, cpu.out) << kv << "\n" << gpu.err;
    }
}

// Weights streamed from RAM and from the SSD: the prefetcher uploads from its own thread, and
// the embedding comes one row at a time through one device buffer (each upload must wait for
// the getRow before it). The hardware probe is cached in this test's own folder, quick mode.
TEST(GpuGenerate, OffloadedTiersGiveTheReferenceText)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    const auto refs = spillway::testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
    ASSERT_FALSE(refs.empty());
    const std::string env = "XDG_CACHE_HOME='" + tempDir() + "/cache' ";
    for (const char* tier : {"ram", "ssd"}) {
        const CliRun r = runCli("generate --backend " + std::string(kBackend) + " -m '" + kData + "/models/stories260K.gguf' -p '" +
                                    refs[0].prompt + "' -n 48 --temp 0 --quick-probe --tier " + tier,
                                env);
        EXPECT_EQ(r.exitCode, 0) << tier << "\n" << r.err;
        EXPECT_EQ(r.out, refs[0].text + "\n") << tier << "\n" << r.err;
        EXPECT_NE(r.err.find("copied to the device"), std::string::npos) << tier << "\n" << r.err;
    }
}

// A bitmap sparse package (Wanda 50%, fp16 values) computed straight from the compressed form
// by the shader, on the device and streamed from RAM and the SSD: the CPU backend's text.
TEST(GpuGenerate, BitmapSparsePackageGivesTheCpuText)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    const std::string pkg = tempDir() + "/bitmap-pkg";
    std::filesystem::remove_all(pkg);
    const CliRun made = runCli("compress --backend " + std::string(kBackend) + " --preset balanced --no-quality -m '" + kData +
                               "/models/stories260K.gguf' -o '" + pkg + "'");
    ASSERT_EQ(made.exitCode, 0) << made.err;
    ASSERT_NE(made.out.find("bitmap sparse, 0 dense"), std::string::npos) << made.out;
    const std::string args = "generate -m '" + pkg + "' -p 'Once upon a time' -n 32 --temp 0";
    const CliRun cpu = runCli(args + " --backend cpu");
    ASSERT_EQ(cpu.exitCode, 0) << cpu.err;
    const std::string env = "XDG_CACHE_HOME='" + tempDir() + "/cache' ";
    for (const char* tier : {"", " --quick-probe --tier ram", " --quick-probe --tier ssd"}) {
        const CliRun gpu = runCli(args + " --backend " + kBackend + tier, env);
        EXPECT_EQ(gpu.exitCode, 0) << tier << "\n" << gpu.err;
        EXPECT_EQ(gpu.out, cpu.out) << tier << "\n" << gpu.err;
    }
    std::filesystem::remove_all(pkg);
}

// The visualizer's compute lane on a GPU comes from the device's own marks: per pass a span per
// layer and one for the head, in order, inside the host's window around the pass. The layers
// carry the compute (timed by the host, the layers would only be the recording of their ops and
// the head the wait for all of them).
TEST(GpuGenerate, LayerSpansAreTimedOnTheDevice)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model) << model.error().message;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    trace::Recorder recorder;
    SessionOptions options;
    options.contextLength = 64;
    options.streamer.trace = &recorder;
    auto session = LlamaSession::create(**model, **device, options);
    ASSERT_TRUE(session) << session.error().message;
    const int layers = (*model)->config().nLayers;
    const int32_t prompt[] = {1, 403, 407, 261};
    std::vector<std::pair<uint64_t, uint64_t>> windows;  // host clock around each pass
    for (int pass = 0; pass < 6; ++pass) {
        const uint64_t before = trace::nowNs();
        auto logits = pass == 0 ? (*session)->forward(prompt, 0) : (*session)->forward(int32_t(300 + pass), 3 + pass);
        ASSERT_TRUE(logits) << logits.error().message;
        windows.push_back({before, trace::nowNs()});
    }
    std::vector<std::vector<trace::Span>> byPass(windows.size());
    for (const trace::Span& s : recorder.snapshot())
        if (s.lane == trace::Lane::DeviceCompute && s.token < byPass.size()) byPass[s.token].push_back(s);
    uint64_t layerNs = 0, headNs = 0;
    for (size_t p = 0; p < byPass.size(); ++p) {
        const auto& spans = byPass[p];
        ASSERT_EQ(spans.size(), size_t(layers) + 1) << "pass " << p;
        for (size_t i = 0; i < spans.size(); ++i) {
            EXPECT_EQ(spans[i].layer, i + 1 < spans.size() ? int(i) : -1);
            EXPECT_LE(spans[i].startNs, spans[i].endNs);
            EXPECT_GE(spans[i].startNs, windows[p].first) << "pass " << p << " span " << i;
            EXPECT_LE(spans[i].endNs, windows[p].second) << "pass " << p << " span " << i;
            if (i > 0) {
                EXPECT_GE(spans[i].startNs, spans[i - 1].endNs) << "pass " << p << " span " << i;
            }
            (i + 1 < spans.size() ? layerNs : headNs) += spans[i].endNs - spans[i].startNs;
        }
    }
    EXPECT_GT(layerNs, headNs) << "layers " << layerNs << " ns, head " << headNs << " ns";
}

// The relu-llama checkpoint (llama2.c format, ReLU FFNs) on the device, from RAM and the SSD.
TEST(GpuGenerate, ReluModelGivesTheReferenceTextOnEveryTier)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    const auto refs = spillway::testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_FALSE(refs.empty()) << "missing " << kData << "/reference/relu-stories-260K.greedy48.tsv";
    const std::string env = "XDG_CACHE_HOME='" + tempDir() + "/cache' ";
    for (const char* tier : {"", " --quick-probe --tier ram", " --quick-probe --tier ssd"}) {
        for (const auto& ref : refs) {
            const CliRun r = runCli("generate --backend " + std::string(kBackend) + " -m '" + kData +
                                        "/models/relu-stories-260K/model_qint80.bin' --arch relu-llama -p '" +
                                        ref.prompt + "' -n 48 --temp 0" + tier,
                                    env);
            EXPECT_EQ(r.exitCode, 0) << tier << "\n" << r.err;
            EXPECT_EQ(r.out.substr(0, ref.text.size()), ref.text) << "'" << ref.prompt << "'" << tier << "\n" << r.err;
        }
    }
}

// The greedy token after each position's logits (vocab floats each).
std::vector<int32_t> greedyTokens(const std::vector<float>& logits, size_t vocab)
{
    std::vector<int32_t> out;
    for (size_t at = 0; at + vocab <= logits.size(); at += vocab)
        out.push_back(spillway::argmax({logits.data() + at, vocab}));
    return out;
}

// Every placement and prompt batch size on the device: weights on the device, streamed from
// pinned RAM and from the SSD (through the prefetcher's slots and, for the SSD, its staging),
// a random mix of tiers: the same kernels on the same numbers, so the logits are bitwise those of
// the device-resident run with the same batch size. A slot refilled while an op still reads it
// (CUDA's copies run on their own stream) would show here. Batch sizes 1, 2, 7, 32 and 33: small
// batches run a matvec per token (bitwise the one-token run); from 8 tokens on a GPU may run
// matrix products, whose sums run in another order with x rounded to 16 bits: the logits follow
// the one-token run to 2e-3 with the same greedy tokens. HeteGen's row split computes part of
// each matrix on the CPU: its logits follow the CPU device's to rounding, with the same tokens.
TEST(GpuGenerate, EveryPlacementAndBatchGivesTheResidentLogits)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    auto model = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(model) << model.error().message;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    auto cpu = gpu::createCpuDevice(2);
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < 39; ++i) prompt.push_back(int32_t(260 + (i * 37) % 240));  // 40 tokens
    SessionOptions base;
    base.contextLength = 64;
    base.batch = 1;
    const int steps = 8;
    const size_t vocab = size_t((*model)->config().vocabSize);
    const std::vector<float> onCpu = sessionLogits(**model, *cpu, base, prompt, steps);
    const std::vector<float> resident = sessionLogits(**model, **device, base, prompt, steps);
    ASSERT_EQ(resident.size(), size_t(steps + 1) * vocab);
    ASSERT_EQ(onCpu.size(), resident.size());
    EXPECT_LE(relativeL2(resident, onCpu), 1e-4);
    EXPECT_EQ(greedyTokens(resident, vocab), greedyTokens(onCpu, vocab));

    struct Case { std::string name; std::optional<plan::Placement> placement; int batch; };
    std::vector<Case> exact;
    for (int batch : {1, 2, 7, 32, 33}) exact.push_back({"device", std::nullopt, batch});
    for (plan::Tier tier : {plan::Tier::Host, plan::Tier::Ssd}) {
        for (int depth : {0, 1, 3}) {
            plan::Placement p = plan::uniformPlacement(**model, tier);
            p.prefetchDepth = depth;
            exact.push_back({plan::tierName(tier), p, depth == 1 ? 33 : 7});
        }
    }
    plan::Placement staged = plan::uniformPlacement(**model, plan::Tier::Ssd);
    staged.directToDevice = false;
    exact.push_back({"ssd via staging", staged, 32});
    for (unsigned seed = 1; seed <= 2; ++seed) {
        plan::Placement p = plan::uniformPlacement(**model, plan::Tier::Device);
        std::mt19937 rng(seed);
        for (auto& t : p.tensors) t.tier = static_cast<plan::Tier>(rng() % 3);
        p.prefetchDepth = int(seed);
        exact.push_back({"mixed " + std::to_string(seed), p, 32});
    }
    std::map<int, std::vector<float>> residentAt = {{1, resident}};  // batch size -> logits
    for (const Case& c : exact) {
        SessionOptions o = base;
        o.placement = c.placement;
        o.batch = c.batch;
        const std::vector<float> got = sessionLogits(**model, **device, o, prompt, steps);
        ASSERT_EQ(got.size(), resident.size()) << c.name;
        if (!residentAt.count(c.batch)) {
            ASSERT_FALSE(c.placement) << "a resident run of batch " << c.batch << " comes first";
            const double err = relativeL2(got, resident);
            std::printf("[ INFO     ] batch %d: rel L2 %.2e to one token at a time\n", c.batch, err);
            if (c.batch < 8) {
                EXPECT_EQ(0, std::memcmp(got.data(), resident.data(), got.size() * sizeof(float))) << "batch " << c.batch;
            } else {
                EXPECT_LE(err, 2e-3) << "batch " << c.batch;
                EXPECT_EQ(greedyTokens(got, vocab), greedyTokens(resident, vocab)) << "batch " << c.batch;
            }
            residentAt[c.batch] = got;
            continue;
        }
        const std::vector<float>& want = residentAt[c.batch];
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << c.name << ", batch " << c.batch << ": rel L2 " << relativeL2(got, want);
    }
    for (double fraction : {0.0, 0.37, 0.9}) {
        plan::Placement p = plan::uniformPlacement(**model, plan::Tier::Host);
        for (auto& t : p.tensors) t.deviceFraction = fraction;
        p.prefetchDepth = 1;
        SessionOptions o = base;
        o.placement = p;
        o.batch = 7;
        const std::vector<float> got = sessionLogits(**model, **device, o, prompt, steps);
        ASSERT_EQ(got.size(), onCpu.size()) << "split " << fraction;
        EXPECT_LE(relativeL2(got, onCpu), 1e-4) << "split " << fraction;
        EXPECT_EQ(greedyTokens(got, vocab), greedyTokens(onCpu, vocab)) << "split " << fraction;
    }
}

// The same on a model whose layers take the device a while (TinyLlama-1.1B's layer shape, two
// layers, Q8_0, random weights): a 33-token prompt queues hundreds of ops per layer, so the host
// runs far ahead of the device, and a slot the prefetcher refilled before those ops finished
// would change the logits. Streamed from RAM and the SSD with the shallowest and a deep prefetch.
TEST(GpuGenerate, SlotsAreRefilledOnlyAfterTheirOpsFinished)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    SyntheticOptions so;
    so.preset = "tinyllama-1.1b";
    so.type = gpu::DType::Q8_0;
    so.layers = 2;
    const std::string path = tempDir() + "/tinyllama-2-layers.gguf";
    const Status written = writeSyntheticModel(so, path);
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model) << model.error().message;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    // Mesa's lavapipe (CI) waits for every op before a copy, so no race can show there: a
    // shorter run keeps the test quick on a CPU.
    const bool cpuDriver = (*device)->info().name.find("llvmpipe") != std::string::npos;
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < (cpuDriver ? 6 : 32); ++i) prompt.push_back(int32_t(300 + i * 101));
    SessionOptions base;
    base.contextLength = 64;
    base.batch = int(prompt.size());
    const int steps = cpuDriver ? 1 : 4;
    const std::vector<float> resident = sessionLogits(**model, **device, base, prompt, steps);
    ASSERT_FALSE(resident.empty());
    for (plan::Tier tier : {plan::Tier::Host, plan::Tier::Ssd}) {
        for (int depth : {0, 2}) {
            plan::Placement p = plan::uniformPlacement(**model, tier);
            p.prefetchDepth = depth;
            SessionOptions o = base;
            o.placement = p;
            const std::vector<float> got = sessionLogits(**model, **device, o, prompt, steps);
            ASSERT_EQ(got.size(), resident.size()) << plan::tierName(tier) << " prefetch " << depth;
            EXPECT_EQ(0, std::memcmp(got.data(), resident.data(), got.size() * sizeof(float)))
                << plan::tierName(tier) << " prefetch " << depth << ": rel L2 " << relativeL2(got, resident);
        }
    }
    std::filesystem::remove(path);
}

// Relative L2 distance of each row of vocab floats.
std::vector<double> rowErrors(const std::vector<float>& got, const std::vector<float>& want, size_t vocab)
{
    std::vector<double> out;
    for (size_t at = 0; at + vocab <= want.size() && at + vocab <= got.size(); at += vocab)
        out.push_back(relativeL2(std::span(got).subspan(at, vocab), std::span(want).subspan(at, vocab)));
    return out;
}

// Logits of `tokens`: the first promptTokens as the prompt, every later one fed in turn.
std::vector<float> forcedLogits(const spillway::LlamaModel& model, spillway::gpu::Device& device,
                                const spillway::SessionOptions& options, const std::vector<int32_t>& tokens,
                                size_t promptTokens)
{
    const std::span<const int32_t> all(tokens);
    return sessionLogits(model, device, options, all.first(promptTokens), int(tokens.size() - promptTokens),
                         all.subspan(promptTokens));
}

// The types of the files people download (Q4_K_M files are Q4_K and Q6_K; Q5_K_M Q5_K and Q6_K;
// Q4_1 / Q5_0 where columns are no multiple of 256): a model of each, every matrix in that type
// (TinyLlama-1.1B's layer shape, two layers, random weights), read in its GGUF layout on the
// device. Fed the same 20-token prompt and 6 more tokens, each position's logits follow the CPU
// device's within 4x the distance between two of the CPU's own kernel sets (scalar and the
// widest this CPU runs: they differ in float summation order only, and on random weights that
// moves the Q8 rounding of x enough for 1-2e-2) or 1e-3, whichever is larger; in batches of 7 (a
// matvec per token, x in Q8 as on the CPU) and of 20 (matrix products on a GPU: weights
// dequantized to fp16, x rounded to fp16). The greedy token agrees at all but one position.
// Every backend (CUDA, Vulkan) computes every one of these types.
TEST(GpuGenerate, GgufQuantizedModelsFollowTheCpuLogits)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    auto cpu = gpu::createCpuDevice(2);
    auto scalar = gpu::createCpuDevice(2, gpu::CpuKernelSet::Scalar);
    std::vector<int32_t> tokens = {1};
    for (int i = 0; i < 25; ++i) tokens.push_back(int32_t(500 + i * 211));
    const size_t promptTokens = 20;
    SessionOptions o;
    o.contextLength = 64;
    for (gpu::DType type : {gpu::DType::Q4_K, gpu::DType::Q5_K, gpu::DType::Q6_K, gpu::DType::Q4_1, gpu::DType::Q5_0}) {
        if (!(*device)->supports(type)) {
            ADD_FAILURE() << gpu::dtypeName(type) << ": not computed by the " << kBackend << " backend";
            continue;
        }
        SyntheticOptions so;
        so.preset = "tinyllama-1.1b";
        so.type = type;
        so.layers = 2;
        const std::string path = tempDir() + "/tinyllama-" + gpu::dtypeName(type) + ".gguf";
        const Status written = writeSyntheticModel(so, path);
        ASSERT_TRUE(written.ok()) << written.error().message;
        auto model = LlamaModel::load(path);
        ASSERT_TRUE(model) << model.error().message;
        const size_t vocab = size_t((*model)->config().vocabSize);
        o.batch = 7;
        const std::vector<float> want = forcedLogits(**model, *cpu, o, tokens, promptTokens);
        const std::vector<double> spread = rowErrors(forcedLogits(**model, *scalar, o, tokens, promptTokens), want, vocab);
        ASSERT_FALSE(spread.empty());
        const double cpuSpread = *std::max_element(spread.begin(), spread.end());
        for (int batch : {7, 20}) {
            o.batch = batch;
            const std::vector<float> got = forcedLogits(**model, **device, o, tokens, promptTokens);
            ASSERT_EQ(got.size(), want.size()) << gpu::dtypeName(type);
            const std::vector<double> errors = rowErrors(got, want, vocab);
            const double worst = *std::max_element(errors.begin(), errors.end());
            const double limit = std::max(1e-3, 4 * cpuSpread);
            const std::vector<int32_t> gotTokens = greedyTokens(got, vocab), wantTokens = greedyTokens(want, vocab);
            size_t agree = 0;
            for (size_t i = 0; i < wantTokens.size(); ++i) agree += gotTokens[i] == wantTokens[i];
            std::printf("[ INFO     ] %s, batch %d: worst rel L2 %.2e to the CPU device (its scalar kernels: %.2e); "
                        "greedy token agrees at %zu of %zu positions\n",
                        gpu::dtypeName(type), batch, worst, cpuSpread, agree, wantTokens.size());
            EXPECT_LE(worst, limit) << gpu::dtypeName(type) << ", batch " << batch;
            EXPECT_GE(agree + 1, wantTokens.size()) << gpu::dtypeName(type) << ", batch " << batch;
        }
        std::filesystem::remove(path);
    }
}

// An OPT-125M-shaped ReLU model (2 layers, Q8_0, random weights) whose FFNs let 10% of their
// neurons through per token.
spillway::Status writeSparseOpt(const std::string& path)
{
    spillway::SyntheticOptions so;
    so.preset = "opt-125m";
    so.type = spillway::gpu::DType::Q8_0;
    so.layers = 2;
    so.alignment = 32;
    so.ffnDensity = {0.1};
    return spillway::writeSyntheticModel(so, path);
}

}  // namespace

// The neuron cache on the device (exact mode, an OPT-shaped ReLU model with int8 down columns):
// each layer's arrivals go up in one upload and are scattered to their slots, the down
// projection runs over the slots (rowSum), and the active neurons that find no slot are computed
// on the CPU and added. Fed the same tokens, its logits are the CPU device's cache's to float
// rounding (measured 1.1e-7; later positions as in the next test), it loads the same neurons,
// and it stays near the dense run (about 1e-2: the dense down matvec quantizes its input to Q8
// blocks, the cache sums in fp32). Random weights (synthetic-model generator), 10% of the FFN
// active per token.
TEST(GpuGenerate, NeuronCacheOnTheDeviceFollowsTheDenseCpuRun)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    const std::string path = tempDir() + "/opt-relu.gguf";
    const Status written = writeSparseOpt(path);
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto gpuDevice = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(gpuDevice) << gpuDevice.error().message;
    auto cpu = gpu::createCpuDevice(2);
    SessionOptions dense;
    dense.contextLength = 32;
    SessionOptions cached = dense;
    cached.neuronCache.capacity = c.ffnDim / 12;  // 256 slots for ~307 active neurons: some spill to the CPU
    auto onCpu = LlamaSession::create(**model, *cpu, dense);
    auto onCpuCached = LlamaSession::create(**model, *cpu, cached);
    auto onGpu = LlamaSession::create(**model, **gpuDevice, cached);
    ASSERT_TRUE(onCpu && onCpuCached && onGpu) << (onCpu ? "" : onCpu.error().message)
                                                  << (onCpuCached ? "" : onCpuCached.error().message)
                                                  << (onGpu ? "" : onGpu.error().message);
    int32_t token = 2;
    size_t agree = 0;
    const int steps = 8;
    auto relL2 = [&](const float* got, const std::vector<float>& want) {
        return relativeL2({got, size_t(c.vocabSize)}, want);
    };
    const auto best = [&](const float* v) { return int32_t(std::max_element(v, v + c.vocabSize) - v); };
    for (int pos = 0; pos < steps; ++pos) {
        auto want = (*onCpu)->forward(token, pos);
        ASSERT_TRUE(want) << want.error().message;
        const std::vector<float> denseLogits(*want, *want + c.vocabSize);
        auto cachedOnCpu = (*onCpuCached)->forward(token, pos);
        ASSERT_TRUE(cachedOnCpu) << cachedOnCpu.error().message;
        const std::vector<float> cpuLogits(*cachedOnCpu, *cachedOnCpu + c.vocabSize);
        auto got = (*onGpu)->forward(token, pos);
        ASSERT_TRUE(got) << got.error().message;
        const double toCpuCache = relL2(*got, cpuLogits), toDense = relL2(*got, denseLogits);
        std::printf("[ INFO     ] position %d: rel L2 %.2e to the CPU's cache, %.2e to dense (CPU cache to dense %.2e)\n",
                    pos, toCpuCache, toDense, relL2(cpuLogits.data(), denseLogits));
        // As below: equal to rounding until a last-bit difference of the summation order lands
        // on a rounding boundary of the next layer's Q8 input (position 3 here on CUDA: 5e-3).
        EXPECT_LE(toCpuCache, pos == 0 ? 1e-5 : 2e-2) << "position " << pos;
        EXPECT_LE(toDense, 3e-2) << "position " << pos;
        agree += best(*got) == best(denseLogits.data());
        token = best(denseLogits.data());  // all follow the dense run's tokens
    }
    EXPECT_GE(agree, size_t(steps - 1));
    const NeuronCacheReport gpuReport = (*onGpu)->neuronCacheReport();
    const NeuronCacheReport cpuReport = (*onCpuCached)->neuronCacheReport();
    EXPECT_GT(gpuReport.total.loaded, 0u);
    EXPECT_EQ(gpuReport.total.loaded, cpuReport.total.loaded);
    EXPECT_EQ(gpuReport.total.hits, cpuReport.total.hits);
    EXPECT_GT(gpuReport.total.active, uint64_t(steps) * c.nLayers * uint64_t(cached.neuronCache.capacity));
    std::filesystem::remove(path);
}

// Hot and cold neurons on a real device backend: a package of the same shape with activity
// frequencies (compress --predictors), each layer's hottest neurons pinned into the device's
// slots when the session starts (one upload and scatter per layer, int8 columns with their scale
// rows), the cold ones computed on the CPU from RAM beside them. Nothing is shipped per token.
// The first position's logits equal the CPU device's run of the same cache to float rounding (a
// pinned bundle in the wrong slot would be far off); later ones stay close and pick the same
// tokens: the device sums the slots' columns in another order than the CPU, and once such a
// last-bit difference lands on a rounding boundary of the Q8 input quantization, it grows to about
// 5e-3 (it does from position 3 with this prompt, in every configuration of the cache).
TEST(GpuGenerate, HotNeuronsPinnedOnTheDeviceColdOnesOnTheCpu)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    const std::string path = tempDir() + "/opt-relu-hot.gguf";
    const Status written = writeSparseOpt(path);
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto source = LlamaModel::load(path);
    ASSERT_TRUE(source) << source.error().message;
    auto cpu = gpu::createCpuDevice(2);
    const std::string package = tempDir() + "/opt-relu-hot-package";
    compress::CompressOptions co;
    co.qualityCheck = false;
    co.prune = {};
    co.quant = {};
    co.predictorRank = 8;
    co.predictorContinueTokens = 0;
    co.calibrationTokens = 16;
    auto compressed = compress::compressModel(**source, package, co, *cpu);
    ASSERT_TRUE(compressed) << compressed.error().message;
    auto model = LlamaModel::load(package);
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    auto gpuDevice = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(gpuDevice) << gpuDevice.error().message;
    SessionOptions o;
    o.contextLength = 32;
    o.neuronCache.capacity = c.ffnDim / 12;
    o.neuronCache.cold = ColdNeurons::Cpu;
    auto onCpu = LlamaSession::create(**model, *cpu, o);
    auto onGpu = LlamaSession::create(**model, **gpuDevice, o);
    ASSERT_TRUE(onCpu && onGpu) << (onGpu ? onCpu.error().message : onGpu.error().message);
    int32_t token = 2;
    int agree = 0;
    for (int pos = 0; pos < 8; ++pos) {
        auto want = (*onCpu)->forward(token, pos);
        ASSERT_TRUE(want) << want.error().message;
        const std::vector<float> cpuLogits(*want, *want + c.vocabSize);
        auto got = (*onGpu)->forward(token, pos);
        ASSERT_TRUE(got) << got.error().message;
        const double err = relativeL2({*got, size_t(c.vocabSize)}, cpuLogits);
        std::printf("[ INFO     ] position %d: rel L2 %.2e to the CPU device's cache\n", pos, err);
        EXPECT_LE(err, pos == 0 ? 1e-5 : 2e-2) << "position " << pos;
        token = int32_t(std::max_element(cpuLogits.begin(), cpuLogits.end()) - cpuLogits.begin());
        agree += int32_t(std::max_element(*got, *got + c.vocabSize) - *got) == token;
    }
    const NeuronCacheReport gpuReport = (*onGpu)->neuronCacheReport();
    const NeuronCacheReport cpuReport = (*onCpu)->neuronCacheReport();
    ASSERT_EQ(gpuReport.pinned.size(), size_t(c.nLayers));
    ASSERT_EQ(gpuReport.capacities.size(), size_t(c.nLayers));
    ASSERT_EQ(gpuReport.cold.size(), size_t(c.nLayers));
    for (int l = 0; l < c.nLayers; ++l) {
        EXPECT_EQ(gpuReport.pinned[size_t(l)], gpuReport.capacities[size_t(l)]) << l;  // every slot hot
        EXPECT_EQ(gpuReport.cold[size_t(l)], ColdNeurons::Cpu);
    }
    EXPECT_GT(gpuReport.total.hits, 0u);
    EXPECT_GT(gpuReport.total.slotless, 0u);
    EXPECT_EQ(gpuReport.shippedBytes(), 0u);
    EXPECT_GE(agree, 7);
    // The same neurons run, but for a few whose pre-activation lies within rounding of 0.
    EXPECT_NEAR(double(gpuReport.total.active), double(cpuReport.total.active), 0.01 * double(cpuReport.total.active));
    EXPECT_EQ(cpuReport.shippedBytes(), 0u);
    std::filesystem::remove(path);
    std::filesystem::remove_all(package);
}

// Mixtures of experts on the device (the three small MoE GGUFs of tests/data/models/moe): the
// router's logits come back to the host each layer, the experts' jobs are grouped by expert, the
// weighted sum uses the device's Scale / ScaledAdd ops. The logits follow the CPU's; the greedy
// tokens are the CPU's; with every expert left on the SSD (the expert cache's slots in device
// memory, 3 per layer), the same logits as resident on this device.
TEST(GpuGenerate, MixturesOfExpertsFollowTheCpu)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    auto cpu = gpu::createCpuDevice(2);
    for (const char* name : {"tiny-mixtral", "tiny-qwen2moe", "tiny-olmoe"}) {
        auto model = LlamaModel::load(kData + "/models/moe/" + name + ".gguf");
        ASSERT_TRUE(model) << model.error().message;
        const std::vector<int32_t> prompt = (*model)->tokenizer().encode("Lily and Tom went to the park", true);
        const size_t vocab = size_t((*model)->config().vocabSize);
        SessionOptions base;
        base.contextLength = 64;
        base.batch = 1;
        const std::vector<float> onCpu = sessionLogits(**model, *cpu, base, prompt, 8);
        const std::vector<float> resident = sessionLogits(**model, **device, base, prompt, 8);
        ASSERT_EQ(resident.size(), onCpu.size()) << name;
        EXPECT_LE(relativeL2(resident, onCpu), 1e-4) << name;
        EXPECT_EQ(greedyTokens(resident, vocab), greedyTokens(onCpu, vocab)) << name;
        SessionOptions cached = base;
        plan::Placement p = plan::uniformPlacement(**model, plan::Tier::Device);
        for (auto& t : p.tensors)
            if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
        cached.placement = p;
        cached.experts.slotsPerLayer = 3;
        const std::vector<float> got = sessionLogits(**model, **device, cached, prompt, 8);
        ASSERT_EQ(got.size(), resident.size()) << name;
        EXPECT_EQ(0, std::memcmp(got.data(), resident.data(), got.size() * sizeof(float)))
            << name << " experts through the cache: rel L2 " << relativeL2(got, resident);
    }
}

// The 2026 families on the device (tests/data/models/families: gpt-oss with sinks and sliding
// windows in rings; Qwen3.5 / Qwen3.5-MoE / Qwen3-Next with Gated
// DeltaNet layers and gated attention): the prompt, then the peer's greedy ids fed back, held to
// ik_llama.cpp's reference as test_families holds the CPU (first logits within 0.02, no parting
// from its greedy ids away from a tie under 0.005), and to the CPU device's logits one token at a
// time (1e-4) and in prompt batches (the device's fp16 matrix products: 5e-3); then an edit
// inside the reply goes back through a snapshot of the recurrent state (downloaded from and
// uploaded to the device) to the logits of a fresh session (5e-3, the same argmax).
TEST(GpuGenerate, TheNewFamiliesFollowIkLlamaCppAndTheCpu)
{
    skipWithoutDevice();
    if (IsSkipped()) return;
    using namespace spillway;
    auto device = gpu::createDevice(kBackend, {});
    ASSERT_TRUE(device) << device.error().message;
    const gpu::DeviceCapabilities& caps = (*device)->info().caps;
    if (!(caps.attentionSinks && caps.slidingWindow && caps.clampedSwiglu && caps.deltaNet && caps.sigmoidGate))
        GTEST_SKIP() << "the " << kBackend << " backend lacks ops of these families yet";
    auto cpu = gpu::createCpuDevice(2);
    for (const char* name : {"tiny-gpt-oss", "tiny-qwen35moe", "tiny-qwen35", "tiny-qwen3next"}) {
        SCOPED_TRACE(name);
        const std::string dir = kData + "/models/families/";
        auto model = LlamaModel::load(dir + name + ".gguf");
        ASSERT_TRUE(model) << model.error().message;
        const size_t vocab = size_t((*model)->config().vocabSize);
        for (const auto& ref : spillway::testing_support::readLlamaReferences(dir + name + ".reference.json")) {
            SCOPED_TRACE(ref.prompt);
            ASSERT_EQ((*model)->tokenizer().encode(ref.prompt, true), ref.promptIds);
            const int steps = int(ref.greedyIds.size()) - 1;
            std::vector<float> onCpu;
            for (int batch : {1, 16}) {
                SessionOptions o;
                o.contextLength = 256;
                o.kvType = gpu::KvType::F16;  // as the reference
                o.batch = batch;
                const std::vector<float> got = sessionLogits(**model, **device, o, ref.promptIds, steps, ref.greedyIds);
                ASSERT_EQ(got.size(), size_t(steps + 1) * vocab) << "batch " << batch;
                float firstOff = 0.0f;
                for (size_t i = 0; i < vocab && i < ref.firstLogits.size(); ++i)
                    firstOff = std::max(firstOff, std::fabs(got[i] - ref.firstLogits[i]));
                EXPECT_LT(firstOff, 2e-2f) << "batch " << batch;
                const std::vector<int32_t> ours = greedyTokens(got, vocab);
                int partings = 0;
                for (size_t s = 0; s < ref.greedyIds.size(); ++s) {
                    const float margin = s < ref.margins.size() ? ref.margins[s] : 1.0f;
                    partings += ours[s] != ref.greedyIds[s] && margin >= 0.005f;
                }
                EXPECT_EQ(partings, 0) << "batch " << batch << ": greedy ids part from ik_llama.cpp's";
                const std::vector<float> want = sessionLogits(**model, *cpu, o, ref.promptIds, steps, ref.greedyIds);
                const double off = relativeL2(got, want);
                std::printf("[ INFO     ] %s batch %d: first logits within %.4f of ik_llama.cpp's; rel L2 %.2e to the "
                            "CPU device\n", name, batch, firstOff, off);
                EXPECT_LE(off, batch == 1 ? 1e-4 : 5e-3) << "batch " << batch;
            }
        }
        // An edit inside the reply of the last reference: back to a snapshot on the device.
        const auto refs = spillway::testing_support::readLlamaReferences(dir + name + ".reference.json");
        std::vector<int32_t> tokens = refs.back().promptIds;
        tokens.insert(tokens.end(), refs.back().greedyIds.begin(), refs.back().greedyIds.end());
        const int back = int(tokens.size()) - 5;
        std::vector<int32_t> edited = tokens;
        edited[size_t(back)] = (edited[size_t(back)] + 7) % int32_t(vocab);
        SessionOptions o;
        o.contextLength = 256;
        o.stateSnapshotInterval = 16;
        auto fresh = LlamaSession::create(**model, **device, o);
        ASSERT_TRUE(fresh) << fresh.error().message;
        auto expected = (*fresh)->forward(edited, 0);
        ASSERT_TRUE(expected) << expected.error().message;
        const std::vector<float> want(*expected, *expected + vocab);
        auto session = LlamaSession::create(**model, **device, o);
        ASSERT_TRUE(session) << session.error().message;
        ASSERT_TRUE((*session)->forward(tokens, 0));
        auto got = (*session)->forward(std::span(edited).subspan(size_t(back)), back);
        ASSERT_TRUE(got) << got.error().message;
        // Both runs are prompt batches on the device, split differently (fp16 matrix products).
        const std::vector<float> after(*got, *got + vocab);
        EXPECT_LE(relativeL2(after, want), 5e-3) << "after going back to " << back;
        EXPECT_EQ(greedyTokens(after, vocab), greedyTokens(want, vocab)) << "after going back to " << back;
    }
}
