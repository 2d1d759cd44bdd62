#pragma once
// Wanda's calibration: the input statistics of every linear matrix, from running the model over
// calibration prompts (the pruning itself is compress/prune.h).

#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/compress/prune.h"

namespace spillway {
class LlamaModel;
namespace gpu { class Device; }
}

namespace spillway::compress {

// A dozen short, varied English sentences written for this project (not taken from a data set):
// enough to exercise every column on small models and in tests. Real Wanda runs use 128
// sequences of 2048 tokens from C4; pass such text as `prompts` for production pruning.
std::vector<std::string> builtinCalibrationPrompts();

// Runs every prompt (tokenized with BOS, cut to maxTokensPerPrompt tokens) through a
// LlamaSession on `device`, one token at a time so that every matrix, the output head included,
// sees every token, and accumulates (in double) the squared inputs of each matrix in
// linearMatrices(model). The session uses the weights in place (Placement::mapInPlace), so each
// matvec's weight pointer identifies its matrix; `device` must therefore compute on host memory
// (the CPU device): InvalidArgument otherwise, or for no prompts / maxTokensPerPrompt < 1.
// Results do not depend on the device's thread count (each matvec output has one owner).
Result<ActivationNorms> collectActivationNorms(const LlamaModel& model, gpu::Device& device,
                                               std::span<const std::string> prompts,
                                               int maxTokensPerPrompt);

}  // namespace spillway::compress
