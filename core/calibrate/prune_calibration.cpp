// Wanda calibration: the squares of each weight matrix's inputs over the calibration prompts
// (runCalibration, calibration.cpp), and the built-in prompts.

#include "core/calibrate/prune_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "core/calibrate/calibration.h"
#include "core/compress/prune.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::compress {

namespace {

// Written for this project: short, varied everyday English (narrative, dialogue, facts,
// instructions, numbers), so that a small model's vocabulary and positions are exercised.
constexpr std::array<std::string_view, 12> kCalibrationPrompts = {
    "Once upon a time, a little girl named Lily found a shiny red ball in the park.",
    "The sun was warm, and the birds sang in the tall green trees near the river.",
    "\"Can I play with you?\" asked the small dog. The cat said yes, and they ran together.",
    "Tom wanted to build a big tower out of blocks, but it fell down twice.",
    "Water boils at one hundred degrees Celsius and freezes at zero.",
    "First, mix the flour and the eggs; then bake the cake for thirty minutes.",
    "The old man told his grandson a story about the sea and a brave sailor.",
    "It was raining, so Mom gave Ben a yellow coat and a blue umbrella.",
    "The train left the station at seven o'clock and arrived in the city at noon.",
    "She was sad because her kite was stuck in a tree, until her friend helped her.",
    "Every night the moon rose over the quiet village and the stars began to shine.",
    "One, two, three: the children counted the apples and shared them with everyone.",
};

}  // namespace

std::vector<std::string> builtinCalibrationPrompts()
{
    return {kCalibrationPrompts.begin(), kCalibrationPrompts.end()};
}

Result<ActivationNorms> collectActivationNorms(const LlamaModel& model, gpu::Device& device,
                                               std::span<const std::string> prompts,
                                               int maxTokensPerPrompt)
{
    const std::vector<NamedMatrix> matrices = linearMatrices(model);
    std::vector<std::vector<double>> sums;
    for (const NamedMatrix& m : matrices) sums.emplace_back(size_t(m.view.cols), 0.0);
    SPILLWAY_TRY(runCalibration(model, device, prompts, maxTokensPerPrompt, matrices,
                                [&](size_t i, std::span<const float> x, int, int) {
                                    std::vector<double>& s = sums[i];
                                    for (size_t c = 0; c < s.size() && c < x.size(); ++c)
                                        s[c] += double(x[c]) * double(x[c]);
                                }));
    ActivationNorms norms;
    for (size_t i = 0; i < matrices.size(); ++i) {
        std::vector<float>& out = norms[matrices[i].name];
        out.resize(sums[i].size());
        for (size_t c = 0; c < out.size(); ++c) out[c] = float(std::sqrt(sums[i][c]));
    }
    return norms;
}

}  // namespace spillway::compress
