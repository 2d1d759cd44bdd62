// The tiered runtime on the CPU backend acting as the device: logits are bitwise identical for
// every placement and prefetch depth, budgets hold by the allocator's own accounting, the
// reference text survives every layer on the SSD, and I/O failures become errors.

#include <gtest/gtest.h>

#include <cstring>
#include <atomic>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/trace/trace.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/opaque_device.h"
#include "../common/session_logits.h"

using namespace spillway;

namespace {

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

std::unique_ptr<LlamaModel> loadModel(const std::string& path = kModel)
{
    auto m = LlamaModel::load(path);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(m.value()) : nullptr;
}

plan::Placement mixedPlacement(const LlamaModel& model, unsigned seed)
{
    plan::Placement p = plan::uniformPlacement(model, plan::Tier::Device);
    std::mt19937 rng(seed);
    for (auto& t : p.tensors) t.tier = static_cast<plan::Tier>(rng() % 3);
    return p;
}

using testing_support::OpaqueDevice;

plan::Placement splitPlacement(const LlamaModel& model, double fraction)
{
    plan::Placement p = plan::uniformPlacement(model, plan::Tier::Host);
    for (auto& t : p.tensors) t.deviceFraction = fraction;
    return p;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 66, 400, 259, 280, 288};

}  // namespace

TEST(Offload, LogitsBitwiseIdenticalAcrossPlacements)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(2);
    SessionOptions base;
    base.contextLength = 64;
    base.batch = 1;
    const std::vector<float> reference = testing_support::sessionLogits(*model, *device, base, kPrompt, 12);
    ASSERT_FALSE(reference.empty());

    struct Case { const char* name; plan::Placement placement; int batch; };
    std::vector<Case> cases;
    for (plan::Tier tier : {plan::Tier::Device, plan::Tier::Host, plan::Tier::Ssd}) {
        for (int depth : {0, 1, 3}) {
            plan::Placement p = plan::uniformPlacement(*model, tier);
            p.prefetchDepth = depth;
            cases.push_back({plan::tierName(tier), p, depth == 1 ? 4 : 1});
        }
    }
    plan::Placement staged = plan::uniformPlacement(*model, plan::Tier::Ssd);
    staged.directToDevice = false;  // through pinned staging and a host→device copy
    cases.push_back({"ssd via staging", staged, 3});
    for (double f : {0.0, 0.37, 0.9}) {
        plan::Placement p = splitPlacement(*model, f);
        p.prefetchDepth = 1;
        cases.push_back({"HeteGen split", p, 2});
    }
    for (unsigned seed = 1; seed <= 3; ++seed) {
        plan::Placement p = mixedPlacement(*model, seed);
        p.prefetchDepth = int(seed) - 1;
        cases.push_back({"mixed", p, int(seed) * 2});
    }
    for (const auto& c : cases) {
        SessionOptions o = base;
        o.placement = c.placement;
        o.batch = c.batch;
        const std::vector<float> got = testing_support::sessionLogits(*model, *device, o, kPrompt, 12);
        ASSERT_EQ(got.size(), reference.size()) << c.name;
        EXPECT_EQ(0, std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)))
            << c.name << " prefetch " << c.placement.prefetchDepth << " batch " << c.batch;
    }
}

// What spillway-cli bench reads for its ceiling: every layer and head matrix of the device tier
// as matvec reads it (data in device memory, the device's row layout), and nothing that is
// streamed through a slot or split with the CPU.
TEST(Offload, ResidentMatricesAreTheDeviceTiersMatrices)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(2);
    auto isMatrix = [](const std::string& name) {
        for (const char* suffix : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                   "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"})
            if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) return true;
        return name == "output.weight";
    };
    auto residentOf = [&](const std::optional<plan::Placement>& placement) {
        SessionOptions o;
        o.contextLength = 16;
        o.placement = placement;
        auto session = LlamaSession::create(*model, *device, o);
        EXPECT_TRUE(session) << (session ? "" : session.error().message);
        return session ? (*session)->streamer().residentMatrices() : std::vector<gpu::MatrixView>{};
    };

    // Everything on the device: the bytes a token reads, less the norm vectors.
    const std::vector<gpu::MatrixView> all = residentOf(std::nullopt);
    const LlamaConfig& c = model->config();
    ASSERT_EQ(all.size(), size_t(7 * c.nLayers + 1));
    uint64_t bytes = 0;
    std::set<const void*> distinct;
    for (const gpu::MatrixView& m : all) {
        bytes += gpu::matrixBytes(m);
        distinct.insert(m.data);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data) % 64, 0u);
    }
    EXPECT_EQ(distinct.size(), all.size());
    EXPECT_EQ(bytes + sizeof(float) * uint64_t(c.dim) * uint64_t(2 * c.nLayers + 1), model->weightBytesPerToken());
    // Copies, not the mapped file: the session's own device buffers.
    for (const gpu::MatrixView& m : all)
        for (const ModelTensor& t : model->tensors())
            EXPECT_FALSE(m.data >= t.data && m.data < t.data + t.bytes) << t.name;

    // Streamed from RAM or SSD, or split with the CPU: nothing stays.
    EXPECT_TRUE(residentOf(plan::uniformPlacement(*model, plan::Tier::Host)).empty());
    EXPECT_TRUE(residentOf(plan::uniformPlacement(*model, plan::Tier::Ssd)).empty());
    plan::Placement split = plan::uniformPlacement(*model, plan::Tier::Host);
    for (auto& t : split.tensors) t.deviceFraction = 0.5;
    EXPECT_TRUE(residentOf(split).empty());

    // Mixed: exactly the device-tier matrices.
    for (unsigned seed = 1; seed <= 3; ++seed) {
        const plan::Placement p = mixedPlacement(*model, seed);
        size_t expected = 0;
        uint64_t expectedBytes = 0;
        for (const auto& t : p.tensors)
            if (t.tier == plan::Tier::Device && isMatrix(t.name)) {
                ++expected;
                expectedBytes += t.bytes;
            }
        const std::vector<gpu::MatrixView> got = residentOf(p);
        uint64_t gotBytes = 0;
        for (const gpu::MatrixView& m : got) gotBytes += gpu::matrixBytes(m);
        EXPECT_EQ(got.size(), expected) << "seed " << seed;
        EXPECT_EQ(gotBytes, expectedBytes) << "seed " << seed;
    }
}

TEST(Offload, DeviceWithoutHostPointersGivesTheSameLogits)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto reference = gpu::createCpuDevice(2);
    SessionOptions base;
    base.contextLength = 64;
    base.batch = 3;
    const std::vector<float> expected = testing_support::sessionLogits(*model, *reference, base, kPrompt, 10);
    ASSERT_FALSE(expected.empty());
    struct Case { const char* name; plan::Placement placement; };
    std::vector<Case> cases = {{"device", plan::uniformPlacement(*model, plan::Tier::Device)},
                               {"ram", plan::uniformPlacement(*model, plan::Tier::Host)},
                               {"ssd", plan::uniformPlacement(*model, plan::Tier::Ssd)},
                               {"split 0.4", splitPlacement(*model, 0.4)},
                               {"split 0", splitPlacement(*model, 0.0)},
                               {"mixed", mixedPlacement(*model, 7)}};
    for (auto& c : cases) {
        OpaqueDevice device(gpu::createCpuDevice(2));
        SessionOptions o = base;
        o.placement = c.placement;
        const std::vector<float> got = testing_support::sessionLogits(*model, device, o, kPrompt, 10);
        ASSERT_EQ(got.size(), expected.size()) << c.name;
        EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float))) << c.name;
        EXPECT_GT(device.downloads.load(), 0u) << c.name;  // logits (and x for splits) came back
        if (c.placement.tensors.front().deviceFraction < 1.0) {
            EXPECT_GT(device.downloads.load(), 11u * uint64_t(model->config().nLayers)) << c.name;
        }
    }
}

TEST(Offload, StopDuringAPromptEndsAfterTheCurrentBatch)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    // A batch of 2 prompt tokens: 2 rmsnorms per token per layer, 1 before the head.
    const uint64_t perBatch = 2 * 2 * uint64_t(model->config().nLayers) + 1;
    OpaqueDevice device(gpu::createCpuDevice(1));
    std::atomic<bool> stop{false};
    device.stop = &stop;
    device.stopAfterRmsnorms = perBatch;  // set during the first batch
    SessionOptions o;
    o.contextLength = 64;
    o.batch = 2;
    o.placement = plan::uniformPlacement(*model, plan::Tier::Ssd);
    auto session = LlamaSession::create(*model, device, o);
    ASSERT_TRUE(session) << session.error().message;
    const uint64_t before = device.rmsnorms;
    SamplerSettings greedy;
    greedy.temperature = 0;
    Sampler sampler(model->config().vocabSize, greedy);
    GenerationRequest request;
    request.prompt = "Once upon a time there was a little girl";  // more than 2 tokens
    request.maxNewTokens = 8;
    request.stop = &stop;
    auto stats = generate(**session, sampler, request);
    ASSERT_TRUE(stats) << stats.error().message;
    ASSERT_GT(stats->promptTokens, 4);
    EXPECT_TRUE(stats->stopped);
    EXPECT_EQ(stats->generatedTokens, 0);
    EXPECT_EQ(device.rmsnorms - before, perBatch) << "one batch of two tokens ran, no more";
}

TEST(Offload, AnAsynchronousDeviceErrorFailsTheForwardPass)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    OpaqueDevice device(gpu::createCpuDevice(1));
    auto session = LlamaSession::create(*model, device, 32);
    ASSERT_TRUE(session) << session.error().message;
    ASSERT_TRUE((*session)->forward(1, 0));
    device.injected = makeError(ErrorCode::DeviceLost, "test device: lost");
    auto logits = (*session)->forward(2, 1);
    ASSERT_FALSE(logits);
    EXPECT_EQ(logits.error().code, ErrorCode::DeviceLost);
    EXPECT_NE(logits.error().message.find("lost"), std::string::npos);
}

// A device lost in the middle of generation (during the prompt, or after some new tokens): the
// generation moves to a CPU session, runs the tokens so far through it, and the greedy text is
// the reference text, whole. Without a fallback the error comes back; any other error is not
// survived.
TEST(Offload, ALostDeviceFallsBackToTheCpuAndTheTextIsWhole)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    const std::string references = std::string(SPILLWAY_TEST_DATA_DIR) + "/reference/stories260K.greedy48.tsv";
    std::ifstream tsv(references);
    ASSERT_TRUE(tsv) << "cannot read " << references;
    std::string line;
    ASSERT_TRUE(std::getline(tsv, line)) << "no line in " << references;
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << "no tab in the first line of " << references;
    const std::string prompt = line.substr(0, tab), expected = line.substr(tab + 1);
    for (int failAfter : {0, 1, 20}) {  // new tokens before the device fails (0: in the prompt)
        SCOPED_TRACE(failAfter);
        OpaqueDevice device(gpu::createCpuDevice(1));
        SessionOptions o;
        o.contextLength = 128;
        o.batch = 4;
        o.placement = plan::uniformPlacement(*model, plan::Tier::Ssd);
        auto session = LlamaSession::create(*model, device, o);
        ASSERT_TRUE(session) << session.error().message;
        auto cpu = gpu::createCpuDevice(1);
        std::unique_ptr<LlamaSession> fallback;
        std::string reason;
        SamplerSettings greedy;
        greedy.temperature = 0;
        Sampler sampler(model->config().vocabSize, greedy);
        GenerationRequest request;
        request.prompt = prompt;
        request.maxNewTokens = 48;
        std::string text;
        int seen = 0;
        if (failAfter == 0) device.injected = makeError(ErrorCode::DeviceLost, "test device: lost");
        request.onToken = [&](std::string_view piece, int32_t) {
            text += piece;
            if (++seen == failAfter) device.injected = makeError(ErrorCode::DeviceLost, "test device: lost");
            return true;
        };
        request.onDeviceLost = [&](const Error& why) -> LlamaSession* {
            reason = why.message;
            SessionOptions c;
            c.contextLength = (*session)->contextLength();
            auto s = LlamaSession::create(*model, *cpu, c);
            if (!s) return nullptr;
            fallback = std::move(*s);
            return fallback.get();
        };
        auto stats = generate(**session, sampler, request);
        ASSERT_TRUE(stats) << stats.error().message;
        EXPECT_EQ(reason, "test device: lost");
        EXPECT_EQ(stats->fellBack, "test device: lost");
        EXPECT_EQ(prompt + text, expected);
        EXPECT_EQ(stats->generatedTokens, 48);
    }

    // No fallback, or an error that is not a lost device: the error.
    for (ErrorCode code : {ErrorCode::DeviceLost, ErrorCode::OutOfDeviceMemory}) {
        OpaqueDevice device(gpu::createCpuDevice(1));
        auto session = LlamaSession::create(*model, device, 64);
        ASSERT_TRUE(session) << session.error().message;
        SamplerSettings greedy;
        greedy.temperature = 0;
        Sampler sampler(model->config().vocabSize, greedy);
        GenerationRequest request;
        request.prompt = prompt;
        request.maxNewTokens = 8;
        int calls = 0;
        if (code == ErrorCode::OutOfDeviceMemory)
            request.onDeviceLost = [&](const Error&) -> LlamaSession* { ++calls; return nullptr; };
        device.injected = makeError(code, "test device: failed");
        auto stats = generate(**session, sampler, request);
        ASSERT_FALSE(stats);
        EXPECT_EQ(stats.error().code, code);
        EXPECT_EQ(calls, 0);
    }
}

TEST(Offload, BudgetsHoldByTheAllocatorsAccounting)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    const LlamaConfig& c = model->config();
    const uint64_t working = LlamaSession::workingBytes(c, 64, 4);
    for (plan::Tier tier : {plan::Tier::Host, plan::Tier::Ssd}) {
        // Working buffers + norms + three slots of the largest unit (the tied head here), with
        // a little room: the session must fit, and its peak must stay under the limit.
        const uint64_t limit = working + (4u << 20);
        auto device = gpu::createCpuDevice(1, limit);
        SessionOptions o;
        o.contextLength = 64;
        o.batch = 4;
        o.placement = plan::uniformPlacement(*model, tier);
        o.placement->prefetchDepth = 2;
        o.streamer.hostBudget = 4u << 20;
        const auto logits = testing_support::sessionLogits(*model, *device, o, kPrompt, 8);
        ASSERT_FALSE(logits.empty());
        const gpu::MemoryStats stats = device->memoryStats();
        EXPECT_LE(stats.peak, limit);
        EXPECT_GT(stats.peak, working);  // slots were really allocated from the device
        EXPECT_LE(stats.hostPeak, o.streamer.hostBudget);
        EXPECT_EQ(stats.used, 0u);  // the session gave everything back
    }
    // A device budget below the working set is an error, not a crash.
    auto tiny = gpu::createCpuDevice(1, working / 2);
    auto session = LlamaSession::create(*model, *tiny, 64);
    ASSERT_FALSE(session);
    EXPECT_EQ(session.error().code, ErrorCode::OutOfDeviceMemory);
    // So is a RAM budget below the RAM tier's weights.
    auto device = gpu::createCpuDevice(1);
    SessionOptions o;
    o.contextLength = 64;
    o.placement = plan::uniformPlacement(*model, plan::Tier::Host);
    o.streamer.hostBudget = 4096;
    auto refused = LlamaSession::create(*model, *device, o);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::OutOfMemory);
    EXPECT_NE(refused.error().message.find("RAM budget"), std::string::npos);
}

TEST(Offload, ReferenceTextWithEveryLayerOnTheSsd)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    const std::string references = std::string(SPILLWAY_TEST_DATA_DIR) + "/reference/stories260K.greedy48.tsv";
    std::ifstream tsv(references);
    ASSERT_TRUE(tsv) << "cannot read " << references;
    auto device = gpu::createCpuDevice(2, 8u << 20);
    trace::Recorder recorder;
    std::string line;
    int checked = 0;
    while (std::getline(tsv, line)) {
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) continue;
        SessionOptions o;
        o.contextLength = 128;
        o.placement = plan::uniformPlacement(*model, plan::Tier::Ssd);
        // Alternate prefetching and naive loading; the trace is compared with the counters only
        // for naive runs, where no loader thread is still reading ahead when they are read.
        const bool naive = checked % 2 == 1;
        o.placement->prefetchDepth = naive ? 0 : 2;
        o.streamer.trace = &recorder;
        auto session = LlamaSession::create(*model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        SamplerSettings greedy;
        greedy.temperature = 0;
        Sampler sampler(model->config().vocabSize, greedy);
        GenerationRequest request;
        request.prompt = line.substr(0, tab);
        request.maxNewTokens = 48;
        std::string text = request.prompt;
        request.onToken = [&](std::string_view piece, int32_t) {
            text += piece;
            return true;
        };
        auto stats = generate(**session, sampler, request);
        ASSERT_TRUE(stats) << stats.error().message;
        EXPECT_EQ(text, line.substr(tab + 1));
        const StreamerStats st = (*session)->streamer().stats();
        EXPECT_GT(st.ssdBytes, 0u);
        // Every byte read from the SSD shows up in the trace.
        uint64_t traced = 0;
        for (const auto& s : recorder.snapshot())
            if (s.lane == trace::Lane::SsdRead) traced += s.bytes;
        if (naive) EXPECT_EQ(traced, st.ssdBytes);
        else EXPECT_GE(traced, st.ssdBytes / 2);
        session->reset();  // stops the loader before the next run's spans are counted
        recorder.clear();
        ++checked;
    }
    EXPECT_GE(checked, 3);
}

TEST(Offload, TruncatedFileWhileRunningIsAnError)
{
    ASSERT_TRUE(std::filesystem::is_regular_file(kModel)) << "cannot read " << kModel;
    const auto dir = std::filesystem::temp_directory_path() / ("spillway-offload-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const auto copy = dir / "model.gguf";
    std::filesystem::copy_file(kModel, copy, std::filesystem::copy_options::overwrite_existing);
    {
        auto model = loadModel(copy.string());
        ASSERT_TRUE(model);
        auto device = gpu::createCpuDevice(1);
        SessionOptions o;
        o.contextLength = 32;
        o.placement = plan::uniformPlacement(*model, plan::Tier::Ssd);
        o.placement->prefetchDepth = 0;  // naive: the next read happens on this thread
        auto session = LlamaSession::create(*model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        ASSERT_TRUE((*session)->forward(1, 0));
        std::filesystem::resize_file(copy, std::filesystem::file_size(copy) / 2);
        auto logits = (*session)->forward(2, 1);
        ASSERT_FALSE(logits);
        EXPECT_EQ(logits.error().code, ErrorCode::ModelFileInvalid);
        EXPECT_NE(logits.error().message.find("model.gguf"), std::string::npos);
    }
    std::filesystem::remove_all(dir);
}

// Opening a session reports the weights it copies in (device-tier matrices to the device, the RAM
// tier into pinned memory): from 0 to all of them, never past; cancelled from the callback, the
// opening fails with Cancelled and gives every byte back.
TEST(Offload, OpeningReportsTheWeightsItCopiesAndCanBeCancelled)
{
    auto model = loadModel();
    ASSERT_TRUE(model);
    auto device = std::make_unique<OpaqueDevice>(gpu::createCpuDevice(1));  // copies every device-tier weight
    for (unsigned seed = 1; seed <= 4; ++seed) {
        SessionOptions o;
        o.contextLength = 16;
        o.placement = mixedPlacement(*model, seed);
        std::vector<std::pair<uint64_t, uint64_t>> reports;
        o.streamer.loadProgress = [&](uint64_t done, uint64_t total) {
            reports.emplace_back(done, total);
            return true;
        };
        auto session = LlamaSession::create(*model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        ASSERT_GE(reports.size(), 2u);
        EXPECT_EQ(reports.front().first, 0u);
        const uint64_t total = reports.front().second;
        uint64_t previous = 0;
        for (const auto& [done, all] : reports) {
            EXPECT_EQ(all, total);
            EXPECT_GE(done, previous);
            previous = done;
        }
        EXPECT_EQ(reports.back().first, total) << "seed " << seed;
        const StreamerMemory& m = (*session)->streamer().memory();
        EXPECT_LE(total, m.residentDeviceBytes + m.hostBytes) << "seed " << seed;
        EXPECT_GE(total + 64 * 1024, m.residentDeviceBytes + m.hostBytes) << "seed " << seed;  // the norms: a few KiB
    }
    const uint64_t usedBefore = device->memoryStats().used, hostBefore = device->memoryStats().hostUsed;
    SessionOptions o;
    o.contextLength = 16;
    o.placement = mixedPlacement(*model, 2);
    int calls = 0;
    o.streamer.loadProgress = [&](uint64_t, uint64_t) { return ++calls < 4; };
    auto cancelled = LlamaSession::create(*model, *device, o);
    ASSERT_FALSE(cancelled);
    EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled);
    EXPECT_EQ(calls, 4);
    EXPECT_EQ(device->memoryStats().used, usedBefore);
    EXPECT_EQ(device->memoryStats().hostUsed, hostBefore);
}
