// The Llama forward pass on the real stories260K.gguf against llama.cpp's greedy outputs, and the
// engine's invariants: bitwise the same logits for any thread count, nothing allocated per token.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/greedy_text.h"
#include "../common/kernel_sets.h"
#include "../common/count_allocations.h"

using spillway::testing_support::g_allocations;

using namespace spillway;

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;
const std::string kModel = kData + "/models/stories260K.gguf";

class KernelSet : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { setenv("SPILLWAY_CPU_KERNELS", GetParam().c_str(), 1); }
    void TearDown() override { unsetenv("SPILLWAY_CPU_KERNELS"); }
};

}  // namespace

TEST_P(KernelSet, Stories260KMatchesLlamaCppGreedyText)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    for (int threads : {1, 2}) {
        auto device = gpu::createCpuDevice(threads);
        ASSERT_EQ(device->info().kernels, GetParam()) << "SPILLWAY_CPU_KERNELS did not pick the set";
        for (const auto& ref : refs) {
            int generated = 0;
            const std::string text = testing_support::greedyText(**model, *device, ref.prompt, 48, &generated);
            EXPECT_EQ(generated, 48);
            EXPECT_EQ(text, ref.text) << "kernels " << GetParam() << ", threads " << threads;
        }
    }
}

// Every set this CPU runs, named in the test's name (Cpu/KernelSet.X/avx2).
INSTANTIATE_TEST_SUITE_P(Cpu, KernelSet, ::testing::ValuesIn(testing_support::kernelSetNamesThisCpuRuns()),
                         [](const auto& info) { return info.param; });

TEST(Llama, LogitsAreBitwiseEqualForAnyThreadCount)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const int vocab = (*model)->config().vocabSize;
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 3, 5}) {
        auto device = gpu::createCpuDevice(threads);
        auto session = LlamaSession::create(**model, *device, 64);
        ASSERT_TRUE(session.ok()) << session.error().message;
        std::vector<float> all;
        const int tokens[] = {1, 403, 407, 261, 378, 500, 17, 300};
        for (int pos = 0; pos < 8; ++pos) {
            auto forwarded = (*session)->forward(tokens[pos], pos);
            ASSERT_TRUE(forwarded.ok()) << forwarded.error().message;
            const float* logits = *forwarded;
            all.insert(all.end(), logits, logits + vocab);
        }
        runs.push_back(std::move(all));
    }
    for (size_t i = 1; i < runs.size(); ++i)
        EXPECT_EQ(0, std::memcmp(runs[0].data(), runs[i].data(), runs[0].size() * sizeof(float)))
            << "thread count " << i;
    for (float v : runs[0]) ASSERT_TRUE(std::isfinite(v));
}

TEST(Llama, DecodingAllocatesNothingPerToken)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(2);
    auto session = LlamaSession::create(**model, *device, 128);
    ASSERT_TRUE(session.ok()) << session.error().message;
    (void)(*session)->forward(1, 0);  // warm-up: kernels may size their scratch once
    const long before = g_allocations.load();
    int token = 1;
    for (int pos = 1; pos < 100; ++pos) {
        auto logits = (*session)->forward(token, pos);
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        token = argmax({*logits, size_t((*model)->config().vocabSize)});
    }
    EXPECT_EQ(g_allocations.load() - before, 0);
}

TEST(Llama, ContextOverflowAndEmptyRequestsAreErrors)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto device = gpu::createCpuDevice(1);
    auto session = LlamaSession::create(**model, *device, 8);
    ASSERT_TRUE(session.ok()) << session.error().message;
    SamplerSettings settings;
    settings.temperature = 0.0f;
    Sampler sampler((*model)->config().vocabSize, settings);
    GenerationRequest request;
    request.prompt = "Once upon a time there was a very long prompt";
    request.maxNewTokens = 4;
    auto stats = generate(**session, sampler, request);
    ASSERT_FALSE(stats.ok());
    EXPECT_EQ(stats.error().code, ErrorCode::InvalidArgument);

    // Generation stops at the end of the context instead of running past it.
    request.prompt = "Once";
    request.maxNewTokens = 100;
    auto stopped = generate(**session, sampler, request);
    ASSERT_TRUE(stopped.ok()) << stopped.error().message;
    EXPECT_LE(stopped->promptTokens + stopped->generatedTokens, 9);
}

TEST(Llama, UnsupportedArchitectureIsNamed)
{
    const std::string path = testing::TempDir() + "/mamba.gguf";
    gguf::Writer w;
    w.setString("general.architecture", "mamba");
    w.setUInt32("mamba.embedding_length", 64);
    w.addTensor("token_embd.weight", gpu::DType::F32, {64, 8}, [](std::span<uint8_t> out) {
        std::fill(out.begin(), out.end(), uint8_t(0));
    });
    ASSERT_TRUE(w.write(path).ok());
    auto model = LlamaModel::load(path);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(model.error().message.find("'mamba'"), std::string::npos) << model.error().message;
    for (const char* arch : {"llama", "qwen2", "qwen3", "opt"})
        EXPECT_NE(model.error().message.find(arch), std::string::npos) << model.error().message;
    std::filesystem::remove(path);
}

TEST(Llama, SyntheticOptLoadsAndDecodes)
{
    // OPT's shapes (LayerNorm, learned positions, ungated ReLU FFN, biases): finite logits.
    const std::string path = testing::TempDir() + "/opt-synthetic.gguf";
    SyntheticOptions o;
    o.preset = "opt-6.7b";
    o.layers = 1;
    o.type = gpu::DType::Q4_0;
    ASSERT_TRUE(writeSyntheticModel(o, path).ok());
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    EXPECT_TRUE(c.layerNorm && c.learnedPositions && !c.ffnGated);
    EXPECT_EQ(c.positionOffset, 2);
    ASSERT_FALSE((*model)->weights().layers.empty());
    EXPECT_NE((*model)->weights().layers[0].qBias, nullptr);
    auto device = gpu::createCpuDevice(2);
    auto session = LlamaSession::create(**model, *device, 16);
    ASSERT_TRUE(session.ok()) << session.error().message;
    for (int pos = 0; pos < 3; ++pos) {
        auto logits = (*session)->forward(int32_t(pos + 5), pos);
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        for (int i = 0; i < c.vocabSize; i += 97) ASSERT_TRUE(std::isfinite((*logits)[i]));
    }
    std::filesystem::remove(path);
}

TEST(Llama, SyntheticTinyLlamaLoadsAndDecodes)
{
    const std::string path = testing::TempDir() + "/tinyllama-synthetic.gguf";
    SyntheticOptions o;
    o.preset = "tinyllama-1.1b";
    o.layers = 2;
    o.type = gpu::DType::Q8_0;
    ASSERT_TRUE(writeSyntheticModel(o, path).ok());
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const auto& c = (*model)->config();
    EXPECT_TRUE(c.synthetic);
    EXPECT_EQ(c.dim, 2048);
    EXPECT_EQ(c.nKvHeads, 4);
    EXPECT_EQ(c.ffnDim, 5632);
    EXPECT_EQ(c.vocabSize, 32000);
    // The built-in vocabulary is a working SentencePiece vocabulary.
    const auto& tok = (*model)->tokenizer();
    const std::string text = "the quick brown fox jumps over the lazy dog 42! ünïcödé";
    const auto ids = tok.encode(text, true);
    ASSERT_GE(ids.size(), 4u) << "the decode below runs the first 4 tokens";
    EXPECT_EQ(ids.front(), 1);
    EXPECT_LT(ids.size(), text.size());  // pieces merge
    EXPECT_EQ(tok.decode(ids), text);

    auto device = gpu::createCpuDevice(2);
    auto session = LlamaSession::create(**model, *device, 16);
    ASSERT_TRUE(session.ok()) << session.error().message;
    for (int pos = 0; pos < 4; ++pos) {
        auto forwarded = (*session)->forward(ids[size_t(pos)], pos);
        ASSERT_TRUE(forwarded.ok()) << forwarded.error().message;
        const float* logits = *forwarded;
        double sum = 0;
        for (int i = 0; i < c.vocabSize; ++i) {
            ASSERT_TRUE(std::isfinite(logits[i]));
            sum += std::fabs(logits[i]);
        }
        EXPECT_GT(sum, 0.0);
    }
    std::filesystem::remove(path);
}
