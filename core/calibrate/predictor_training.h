#pragma once
// Training the activation predictors of compress/ffn_predictor.h on calibration activations (the
// model runs: this is above the runtime), and the estimate of how long that takes.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/compress/ffn_predictor.h"

namespace spillway {

class LlamaModel;
namespace gpu { class Device; }

namespace compress {

struct PredictorOptions {
    int rank = 32;                 // clamped to the layer's dim
    PredictorInput input = PredictorInput::Ffn;
    double targetRecall = 0.99;    // on the training tokens
    int iterations = 6;            // subspace iterations
    int fitIterations = 100;       // logistic-regression steps (0: keep the SVD's B and bias)
    int threads = 0;               // for the training's matrix products (linalg.h); 0: one per core
    // Called often with the share of the work done (calibration first, then layer by layer);
    // false cancels (ErrorCode::Cancelled). May be empty.
    std::function<bool(double)> progress;
    std::vector<std::string> prompts;  // empty: builtinCalibrationPrompts()
    int maxTokensPerPrompt = 256;
    int continueTokens = 0;            // model-sampled tokens after each prompt (runCalibration)
    uint64_t seed = 1;
};

// Rough seconds training takes, for progress fractions whose ETA holds across stages: the
// calibration run reads every weight once per sampled token (at a nominal 30 GB/s) and once per
// batch of prompt tokens (about 4x that rate per token: Wanda's calibration of TinyLlama-1.1B
// took 8 s where one token per pass predicts 37 s), the fit is matrix products (at a nominal
// 50 GFLOP/s). The absolute figures are off on any given machine; the ratio between the two,
// and with other stages counted the same way, is what they are for.
struct PredictorWork {
    double calibrationSeconds = 0.0, fitSeconds = 0.0;
    double total() const { return calibrationSeconds + fitSeconds; }
};
inline constexpr double kNominalReadBytesPerSecond = 30e9;  // about a 2-core desktop's, as the fit's below
inline constexpr double kNominalFlopsPerSecond = 50e9;
inline constexpr double kNominalBatchedSpeedup = 4.0;  // prompt tokens in batches, per token
PredictorWork estimatePredictorWork(const LlamaModel& model, const PredictorOptions& options);

// One predictor per layer. UnsupportedModel for FFNs without exact zeros (SwiGLU: no ReLU);
// InvalidArgument for bad options, or too few prompts to hold some out (fewer than 2); Cancelled
// when options.progress says so.
Result<std::vector<FfnPredictor>> trainFfnPredictors(const LlamaModel& model, gpu::Device& device,
                                                     const PredictorOptions& options);

}  // namespace compress
}  // namespace spillway
