#pragma once
// A session's logits over a prompt and the tokens after it, and the distance between two such
// runs, for the tests that compare devices, placements and batch sizes.

#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "gpu/device.h"
#include "prompt_tolerance.h"

namespace spillway::testing_support {

// The prompt in one forward() call (the session takes it options.batch tokens at a time), then
// `steps` tokens one at a time: each the greedy choice of the logits before it, or feed[i] when
// `feed` is given (every run fed the same tokens: on random weights near-ties are common, and two
// correct devices soon choose differently). Rows of vocab floats: the prompt's last position, then
// each step. Empty, with a test failure, on an error.
// The same on a session the caller made (to look at its reports afterwards).
inline std::vector<float> sessionLogits(LlamaSession& session, std::span<const int32_t> prompt, int steps,
                                        std::span<const int32_t> feed = {})
{
    const size_t vocab = size_t(session.model().config().vocabSize);
    std::vector<float> all;
    auto logits = session.forward(prompt, 0);
    for (int i = 0;; ++i) {
        EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
        if (!logits) return {};
        all.insert(all.end(), *logits, *logits + vocab);
        if (i == steps) return all;
        const int32_t next = feed.empty() ? argmax({*logits, vocab}) : feed[size_t(i)];
        logits = session.forward(next, int(prompt.size()) + i);
    }
}

inline std::vector<float> sessionLogits(const LlamaModel& model, gpu::Device& device, const SessionOptions& options,
                                        std::span<const int32_t> prompt, int steps,
                                        std::span<const int32_t> feed = {})
{
    auto session = LlamaSession::create(model, device, options);
    EXPECT_TRUE(session) << (session ? "" : session.error().message);
    if (!session) return {};
    return sessionLogits(**session, prompt, steps, feed);
}

}  // namespace spillway::testing_support
