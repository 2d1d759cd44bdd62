#pragma once
// Activation predictors for ReLU FFNs (Deja Vu; LLM in a flash §3.1): from a layer's FFN input x
// (dim values), guess which of its neurons will be active before their weights are read, so
// that only those are fetched.
//
// Each layer's predictor is low-rank: logits = B (A x) + bias, A (rank, dim), B (neurons, rank);
// neuron j is predicted active when logits[j] > 0. It is trained in two steps on calibration
// activations, on the CPU:
//  1. A spans the top right-singular subspace of the matrix whose rows decide activity (ffn_gate
//     for ReLU-gated FFNs, ffn_up for OPT), found by subspace iteration, and B = W Aᵀ: B A x is
//     then the best rank-`rank` approximation of that matrix's pre-activation W x; bias is the
//     FFN's own (up bias, or minus the ReLU shift).
//  2. With A fixed, B and bias are fitted by logistic regression on the training prompts'
//     activity labels (each neuron a regression on the shared features A x; positives weighted
//     up, since a missed neuron costs more than a spare one).
//  3. A per-layer offset is added to bias, raising it until the predictor finds `targetRecall`
//     of the active neurons on the training prompts (missing one costs a late fetch in exact
//     mode, or quality in approximate mode; a false positive only costs bytes).
// Recall and precision are then measured on held-out prompts (every fourth calibration prompt).
// Steps 1 and 2 run as float matrix products (OpenBLAS, linalg.h): a layer of OPT-6.7B's shape
// (16384 neurons, dim 4096) at rank 64 on ~850 training tokens takes seconds, not minutes.
//
// This header is the stored predictors and their use (the runtime's); the training, which runs
// the model, is core/calibrate/predictor_training.h.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway {

class LlamaModel;
namespace gpu { class Device; }

namespace compress {

// What a predictor reads. Ffn: the FFN's own input (after attention and the FFN norm), the
// most accurate. Attention: the attention's input (the layer's normed input, as Deja Vu and
// Tricksy do), known before attention runs, so the missing neurons can be read while it does.
enum class PredictorInput { Ffn, Attention };

struct FfnPredictor {
    int layer = 0;
    PredictorInput input = PredictorInput::Ffn;
    int rank = 0, dim = 0, neurons = 0;
    std::vector<float> a;     // (rank, dim), row-major
    std::vector<float> b;     // (neurons, rank), row-major
    std::vector<float> bias;  // (neurons), the calibrated offset included
    // Measured on held-out calibration tokens:
    double recall = 0.0;      // share of active neurons predicted active
    double precision = 0.0;   // share of predicted neurons that were active
    double predictedDensity = 0.0, density = 0.0;  // shares of the layer per token
    int64_t trainTokens = 0, testTokens = 0;
    // The hit rate of an LRU neuron cache of this layer holding kHitCurveShares[i] of its neurons,
    // replayed over every calibration token: for the true active sets (exact mode) and for the
    // predicted ones (predicted mode). Empty when not measured. The planner's estimate of what a
    // cache loads per token comes from these.
    std::vector<float> hitCurve, predictedHitCurve;
    // The same with the cache's hot neurons pinned as a shipping cache pins them (those active on
    // at least kDefaultHotFrequency of the tokens, up to half the slots; LRU over the others).
    std::vector<float> pinnedHitCurve, predictedPinnedHitCurve;
    // The curve at `share` of the neurons (linear between points; -1 when not measured). pinned:
    // the pinned curve where it was recorded, else the plain one.
    double hitRateAt(double share, bool predicted, bool pinned = false) const;
    // Per neuron, the share of every calibration token on which it was active (frequency) or
    // predicted active (predictedFrequency): what picks the hot neurons a cache keeps resident
    // (PowerInfer). Empty when not measured (packages from before they were stored).
    std::vector<float> frequency, predictedFrequency;
    // The hit rate of a static cache holding the `slots` most frequently active neurons: the
    // share of activity they carry. -1 when the frequencies were not measured.
    double staticHitRate(int slots, bool predicted) const;
    // The `slots` most frequently active neurons, most frequent first (ties: lower id first);
    // with minFrequency > 0, only those active at least that often. Empty when not measured.
    std::vector<uint32_t> hottest(int slots, bool predicted, double minFrequency = 0.0) const;

    // Predicted active neuron ids for input x (dim floats: the FFN's or the attention's input,
    // as `input` says), ascending; `scratch` (grown to rank + neurons floats) avoids allocating.
    // Vectorized on one thread (linalg::matvec).
    void predict(const float* x, std::vector<uint32_t>& active, std::vector<float>& scratch) const;
};

inline constexpr double kHitCurveShares[] = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0};

// Tensor names (after "blk.N.") of a predictor stored in a model package (compress_model.h).
inline constexpr const char* kPredictorA = "ffn_pred_a.weight";     // (rank, dim) f32
inline constexpr const char* kPredictorB = "ffn_pred_b.weight";     // (neurons, rank) f32
inline constexpr const char* kPredictorBias = "ffn_pred_bias";      // (neurons) f32
// (2, neurons) f32: row 0 the frequency, row 1 the predicted frequency (optional).
inline constexpr const char* kNeuronActivity = "ffn_activity";

// The extra JSON stored with a predictor's A tensor: rank, recall, precision, densities, tokens.
std::string predictorExtra(const FfnPredictor& p);

// The predictors a model carries (every layer, or none: an empty list); ModelFileInvalid for
// partial or misshapen ones. The measured figures come from the package's record beside each A
// tensor (0 where it has none).
// recordsOnly: the shapes and measured figures without the weights (a, b and bias stay empty):
// what planning needs, without copying the matrices.
Result<std::vector<FfnPredictor>> loadFfnPredictors(const LlamaModel& model, bool recordsOnly = false);
// Whether the model carries predictors (a cheap look at the tensor table; loadFfnPredictors
// checks them).
bool hasFfnPredictors(const LlamaModel& model);
// Whether the model carries activity frequencies (kNeuronActivity; a look at the tensor table).
bool hasNeuronActivity(const LlamaModel& model);

}  // namespace compress
}  // namespace spillway
