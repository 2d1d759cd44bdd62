#pragma once
// Pieces of the tests that build tiny random models with gguf::Writer and compare the engine's
// logits with references written in the tests (test_opt, test_hf_archs).

#include <gtest/gtest.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "gpu/cpu/cpu_device.h"
#include "session_logits.h"

namespace spillway::testing_support {

// A SentencePiece-style vocabulary of 259 tokens: <unk> <s> </s> and the 256 byte tokens.
inline constexpr int kByteVocabulary = 259;
inline void addByteVocabulary(gguf::Writer& w)
{
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens.push_back(buf);
    }
    w.setString("tokenizer.ggml.model", "llama");
    w.setStringArray("tokenizer.ggml.tokens", tokens);
    w.setFloat32Array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
    w.setUInt32("tokenizer.ggml.bos_token_id", 1);
    w.setUInt32("tokenizer.ggml.eos_token_id", 2);
}

// The double-precision references' y = W x + b, W (rows, cols) row-major; b may be empty.
inline std::vector<double> referenceLinear(const std::vector<double>& w, const std::vector<double>& b,
                                           const std::vector<double>& x, int rows)
{
    const size_t cols = x.size();
    std::vector<double> y(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
        double s = b.empty() ? 0.0 : b[size_t(r)];
        for (size_t c = 0; c < cols; ++c) s += w[size_t(r) * cols + c] * x[c];
        y[size_t(r)] = s;
    }
    return y;
}

// The logits after each of `tokens`, fed one at a time from position 0 (CPU, 2 threads).
inline std::vector<std::vector<float>> logitsAtEachPosition(const LlamaModel& model, const std::vector<int>& tokens,
                                                            int context, gpu::KvType kvType = gpu::KvType::F32)
{
    auto device = gpu::createCpuDevice(2);
    SessionOptions o;
    o.contextLength = context;
    o.kvType = kvType;
    auto session = LlamaSession::create(model, *device, o);
    EXPECT_TRUE(session.ok()) << (session ? "" : session.error().message);
    std::vector<std::vector<float>> all;
    if (!session) return all;
    const int vocab = model.config().vocabSize;
    for (size_t p = 0; p < tokens.size(); ++p) {
        auto logits = (*session)->forward(tokens[p], int(p));
        EXPECT_TRUE(logits.ok()) << (logits ? "" : logits.error().message);
        if (!logits) break;
        all.emplace_back(*logits, *logits + vocab);
    }
    return all;
}

// A prompt run in batches (each matrix gets all of a batch's tokens in one dispatch) gives the
// logits of the same tokens fed one at a time: `oneAtATime` from logitsAtEachPosition. The first
// `promptTokens` go in batches of `batch`, the rest one by one (decoding on the cache the batches
// wrote). Batches under 8 tokens run the matvec kernels and match bit for bit; from 8 tokens the
// CPU multiplies matrices (session_logits.h: kPromptFloatTolerance), the same greedy token.
inline void expectBatchedPromptMatches(const LlamaModel& model, const std::vector<int>& tokens, int context,
                                       const std::vector<std::vector<float>>& oneAtATime, size_t promptTokens,
                                       int batch, gpu::KvType kvType = gpu::KvType::F32)
{
    ASSERT_EQ(oneAtATime.size(), tokens.size());
    ASSERT_LE(promptTokens, tokens.size());
    ASSERT_GT(promptTokens, 0u);
    auto device = gpu::createCpuDevice(2);
    SessionOptions o;
    o.contextLength = context;
    o.batch = batch;
    o.kvType = kvType;
    auto session = LlamaSession::create(model, *device, o);
    ASSERT_TRUE(session.ok()) << session.error().message;
    const bool exact = batch < 8 || promptTokens < 8;
    const size_t vocab = size_t(model.config().vocabSize);
    auto expectMatch = [&](const float* got, const std::vector<float>& want, const std::string& where) {
        const std::vector<float> g(got, got + vocab);
        if (exact) {
            EXPECT_EQ(g, want) << where;
            return;
        }
        EXPECT_LE(relativeL2(g, want), kvType == gpu::KvType::F32 ? kPromptFloatTolerance : kPromptRoundedKvTolerance)
            << where;
        EXPECT_EQ(std::max_element(g.begin(), g.end()) - g.begin(), std::max_element(want.begin(), want.end()) - want.begin())
            << where;
    };
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + std::ptrdiff_t(promptTokens));
    auto logits = (*session)->forward(std::span<const int32_t>(prompt), 0);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    expectMatch(*logits, oneAtATime[promptTokens - 1], "the prompt's last token, batch " + std::to_string(batch));
    for (size_t p = promptTokens; p < tokens.size(); ++p) {
        logits = (*session)->forward(tokens[p], int(p));
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        expectMatch(*logits, oneAtATime[p], "position " + std::to_string(p) + ", batch " + std::to_string(batch));
    }
}

}  // namespace spillway::testing_support
