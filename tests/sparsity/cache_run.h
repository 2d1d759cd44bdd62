#pragma once
// A greedy generation through a LlamaSession with the given options (the neuron-cache tests):
// the text, the cache's report, the logits of BOS at position 0 afterwards (comparable between
// runs whatever came before) and the device's memory figures.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "gpu/device.h"
#include "../common/greedy_text.h"

namespace spillway::testing_support {

struct CacheRun {
    std::string text;  // the prompt and its continuation
    NeuronCacheReport report;
    std::vector<float> logits;  // of BOS at position 0, after the generation
    gpu::MemoryStats memory;
};

inline CacheRun greedyRun(const LlamaModel& model, gpu::Device& device, const SessionOptions& options,
                          const std::string& prompt, int tokens)
{
    CacheRun run;
    auto session = LlamaSession::create(model, device, options);
    EXPECT_TRUE(session.ok()) << session.error().message;
    if (!session) return run;
    run.text = greedyContinue(**session, model, prompt, tokens);
    run.report = (*session)->neuronCacheReport();
    auto logits = (*session)->forward(1, 0);
    EXPECT_TRUE(logits.ok());
    if (logits) run.logits.assign(*logits, *logits + model.config().vocabSize);
    run.memory = device.memoryStats();
    return run;
}

}  // namespace spillway::testing_support
