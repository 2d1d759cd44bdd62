#pragma once
// Activation sparsity of the FFN: which neurons are active (non-zero input to ffn_down) token by
// token, measured on calibration prompts. The figures that decide how much an activation-
// sparsity runtime can save (LLM in a flash §3.1, Tricksy, PowerInfer):
//  - density: the share of a layer's neurons active for a token;
//  - window hit rate for k tokens: the share of a token's active neurons that were active in at
//    least one of the k tokens before it (k = 1: consecutive-token overlap). A neuron cache that
//    keeps the last k tokens' neurons (LLM in a flash's windowing) already holds those;
//  - window fetch: neurons per token that such a cache must load (active, not in the window), and
//    window size: neurons it holds, both as shares of the layer;
//  - hot share: the share of all activations that fall on the 10% most often active neurons
//    (PowerInfer's power law: hot neurons stay resident, cold ones are fetched or computed
//    where they are).
// Averages are over tokens; a prompt's first token has no history and is left out of the window
// figures, and its next k - 1 tokens use the shorter history they have (windows restart at
// every prompt), so a larger window never shows a lower hit rate.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/plan/neuron_cache_model.h"

namespace spillway {

class LlamaModel;
namespace gpu { class Device; }

namespace compress {

struct LayerSparsity {
    int layer = 0;
    int neurons = 0;                 // the FFN's width
    int64_t tokens = 0;              // tokens measured
    double density = 0.0;            // mean share of neurons active per token
    double minDensity = 0.0, maxDensity = 0.0;  // over tokens
    std::vector<double> windowHit;   // per window k (SparsityOptions::windows), mean share
    std::vector<double> windowFetch; // per k: mean share of the layer loaded per token
    std::vector<double> windowSize;  // per k: mean share of the layer held
    double hotShare = 0.0;           // share of activations on the 10% most active neurons
};

struct SparsityReport {
    std::vector<int> windows;        // the k of each window column
    double threshold = 0.0;          // active: |x| > threshold
    int prompts = 0;
    int64_t tokens = 0;              // per layer
    std::vector<LayerSparsity> layers;
    std::vector<plan::ActivityTrace> traces;  // per layer, with SparsityOptions::keepTraces
    // Means over layers (each layer weighted by its neurons).
    double density() const;
    double windowHit(size_t k) const;
    double windowFetch(size_t k) const;
};

// Adds up one layer's figures, token by token.
class SparsityAccumulator {
public:
    // record: also keep every token's active ids (trace()).
    SparsityAccumulator(int neurons, std::vector<int> windows, double threshold, bool record = false);
    // The next prompt starts: the window history is dropped.
    void startPrompt();
    // This token's activations (neurons values; active where |x| > threshold).
    void add(std::span<const float> x);
    LayerSparsity result(int layer) const;
    const plan::ActivityTrace& trace() const { return m_trace; }

private:
    int m_neurons;
    std::vector<int> m_windows;
    double m_threshold;
    std::vector<int64_t> m_count;       // per neuron: tokens it was active for
    std::vector<int64_t> m_lastActive;  // per neuron: the last token (index) it was active for
    std::vector<int64_t> m_ageCount;    // scratch: neurons per age in tokens (capped)
    std::vector<int64_t> m_hitAges;     // scratch: this token's active neurons per age
    int64_t m_tokens = 0, m_windowTokens = 0, m_promptStart = 0;
    double m_density = 0.0, m_min = 1.0, m_max = 0.0;
    std::vector<double> m_hit, m_fetch, m_size;
    bool m_record = false;
    plan::ActivityTrace m_trace;
};

struct SparsityOptions {
    std::vector<std::string> prompts;  // empty: builtinCalibrationPrompts()
    int maxTokensPerPrompt = 256;
    std::vector<int> windows = {1, 2, 4, 8, 16};
    double threshold = 0.0;            // > 0 for SwiGLU models (no exact zeros)
    bool keepTraces = false;
    int continueTokens = 0;            // model-sampled tokens after each prompt (runCalibration)           // fill SparsityReport::traces (for the cache model)
};

// Runs the prompts through the model on `device` (the CPU device: see runCalibration) and
// measures every layer's FFN activations (the input of ffn_down).
Result<SparsityReport> measureActivationSparsity(const LlamaModel& model, gpu::Device& device,
                                                 const SparsityOptions& options);

}  // namespace compress
}  // namespace spillway
