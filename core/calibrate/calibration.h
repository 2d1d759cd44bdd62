#pragma once
// Calibration runs: prompts through a LlamaSession while a watcher sees the input of chosen
// weight matrices, token by token. Wanda's input norms (prune.h) and the activation-sparsity
// statistics (sparsity_stats.h) are both computed this way.

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/compress/prune.h"

namespace spillway {

class LlamaModel;

namespace compress {

// Sees the input x (the matrix's cols floats, host memory, valid during the call) of watched
// matrix `matrix` (an index into the watched list) for token `position` of prompt `prompt`.
using CalibrationWatcher =
    std::function<void(size_t matrix, std::span<const float> x, int prompt, int position)>;

// Runs every prompt (tokenized with BOS, cut to maxTokensPerPrompt tokens) through a
// LlamaSession on `device`, one token at a time, so every matrix (the output head included)
// sees every token, prompts in order, tokens in order. The session uses the weights in place
// (Placement::mapInPlace), so a matvec's weight pointer names its matrix: `watched` holds views
// of the model's own weights (LlamaWeights, linearMatrices), and `device` must compute on host
// memory (the CPU device). InvalidArgument otherwise, for no prompts, maxTokensPerPrompt < 1 or
// prompts without tokens; Internal (naming it) when a watched matrix saw no input.
// continueTokens > 0: after each prompt the model goes on for up to that many tokens of its own,
// sampled (temperature 0.8, top-k 40, top-p 0.95; seeded by the prompt's index, so runs repeat),
// stopping at EOS: more calibration text in the model's own distribution, which small prompt
// sets lack.
// progress(fraction of the prompts done), when given, is called after every token; false stops
// the run with ErrorCode::Cancelled.
// expertCounts, when given (mixtures of experts): how often the router chose each expert, per
// layer (layers x experts), over every token of the run.
Status runCalibration(const LlamaModel& model, gpu::Device& device,
                      std::span<const std::string> prompts, int maxTokensPerPrompt,
                      std::span<const NamedMatrix> watched, const CalibrationWatcher& watcher,
                      int continueTokens = 0, const std::function<bool(double)>& progress = {},
                      std::vector<uint64_t>* expertCounts = nullptr);

}  // namespace compress
}  // namespace spillway
