#pragma once
// Reference texts (tests/data/reference/*.greedy48.tsv: prompt TAB text) and the engine's greedy
// continuation of a prompt, for the tests that compare the two.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/device.h"
#include "reference_texts.h"

namespace spillway::testing_support {

// The prompt followed by `n` greedy tokens (fewer at end of sequence) from `session`; test
// failures on errors. *generated, if given, gets the number of tokens generated.
inline std::string greedyContinue(LlamaSession& session, const LlamaModel& model, const std::string& prompt, int n,
                                  int* generated = nullptr)
{
    SamplerSettings settings;
    settings.temperature = 0.0f;
    Sampler sampler(model.config().vocabSize, settings);
    std::string text = prompt;
    GenerationRequest request;
    request.prompt = prompt;
    request.maxNewTokens = n;
    request.onToken = [&](std::string_view piece, int32_t) {
        text += piece;
        return true;
    };
    auto stats = generate(session, sampler, request);
    EXPECT_TRUE(stats.ok()) << (stats ? "" : stats.error().message);
    if (generated && stats) *generated = stats->generatedTokens;
    return text;
}

// The same on a fresh session of the model's own context.
inline std::string greedyText(const LlamaModel& model, gpu::Device& device, const std::string& prompt, int n = 48,
                              int* generated = nullptr)
{
    auto session = LlamaSession::create(model, device, 0);
    EXPECT_TRUE(session.ok()) << (session ? "" : session.error().message);
    if (!session) return {};
    return greedyContinue(**session, model, prompt, n, generated);
}

}  // namespace spillway::testing_support
