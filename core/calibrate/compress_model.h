#pragma once
// One-click compression: a model (GGUF or package) in, a model package out (storage/package.h),
// its layer matrices pruned and/or group-quantized, then checked against the source
// (quality.h) with the report stored in the manifest.
//
// Per layer matrix (attn_q/k/v/output, ffn_gate/up/down); the embedding, the norms and the
// output head are copied as they are (Wanda and ENDOR leave the head dense):
//   no pruning, no quantization  -> copied
//   no pruning, int8 group 32    -> q8_0 (the same layout; every backend computes on it)
//   pruning and/or other quant   -> bitmap-<values>: f16 values (bf16 for a bf16 source), or
//                                   int8/int4 with the group asked for
// except that for a device that cannot compute on bitmap sparse weights (deviceSupportsBitmap
// false; every backend of this build can, so only a foreign module) every layer matrix keeps a dense form, whatever tier the plan
// gives it (streamed layers are computed on the device too): q8_0 when quantizing to int8, else
// copied.
//
// The source is only ever read (through a read-only mapping). The package is written to a
// temporary sibling folder, read back (every tensor's checksum), checked, and renamed into place: a failure, a full disk or a cancel
// leaves nothing behind.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/result.h"
#include "core/calibrate/predictor_training.h"
#include "core/compress/ffn_predictor.h"
#include "core/calibrate/quality.h"
#include "core/plan/placement.h"
#include "gpu/device.h"

namespace spillway {
class LlamaModel;
}

namespace spillway::compress {

enum class PruneMethod { None, Magnitude, Wanda };

struct PruneSpec {
    PruneMethod method = PruneMethod::None;
    double ratio = 0.5;  // unstructured: fraction of each row zeroed
    int n = 0, m = 0;    // m > 0: n:m instead (keep n of every m)
};

struct QuantSpec {
    int bits = 0;    // 0 (keep values), 8 or 4
    int group = 64;  // 32, 64 or 128
};

enum class Preset {
    Fast,      // int8 group 32 (q8_0), no pruning: ~53% of fp16, near lossless
    Balanced,  // Wanda 50%, fp16 values (ENDOR's setting): ~56% of fp16
    Smallest,  // Wanda 50% + int8 group 64: ~32% of fp16
    // ReLU models (OPT, ReLU-Llama) for the neuron cache: weights as they are, plus row-column
    // bundles and rank-64 predictors of the attention's input (no quality check: the dense
    // weights do not change). UnsupportedModel for SwiGLU models.
    Sparse,
};
const char* presetName(Preset p);  // "fast", "balanced", "smallest", "sparse"
std::optional<Preset> presetFromName(const std::string& name);

struct CompressProgress {
    std::string stage;        // "calibrating", "compressing", "verifying", "checking quality"
    double fraction = 0;      // of the whole job, 0..1
    uint64_t bytesDone = 0;   // source tensor bytes processed
    uint64_t bytesTotal = 0;
    double etaSeconds = -1;   // -1 while unknown
    std::string tensor;       // the tensor being written, if any
};

struct CompressOptions {
    PruneSpec prune;
    QuantSpec quant;
    int calibrationTokens = 64;        // per built-in calibration prompt (Wanda)
    bool qualityCheck = true;
    QualityOptions quality;            // its progress callback is ignored (progress below)
    // Where a planner would put each tensor on this machine (the packages' tier hints). Unset:
    // no hints.
    std::optional<plan::Placement> placement;
    bool deviceSupportsBitmap = true;
    uint64_t shardBytes = uint64_t{4} << 30;
    // > 0: also train activation predictors of this rank (ffn_predictor.h; ReLU models only,
    // UnsupportedModel otherwise) and store them: blk.N.ffn_pred_a.weight (rank, dim),
    // blk.N.ffn_pred_b.weight (neurons, rank), blk.N.ffn_pred_bias (neurons), f32, the held-out
    // recall and precision in the A tensor's extra JSON; and blk.N.ffn_activity (2, neurons),
    // each neuron's measured and predicted activity frequency (the hot neurons a cache pins).
    int predictorRank = 0;
    int predictorContinueTokens = 64;  // model-sampled calibration tokens after each prompt
    PredictorInput predictorInput = PredictorInput::Ffn;  // what they read (ffn_predictor.h)
    // Also store each FFN layer's row-column bundles (llama_model.h, FfnBundles: blk.N.ffn_bundle)
    // for the neuron cache to read one neuron at a time. ReLU models whose FFN matrices stay as
    // they are (no pruning; no quantization, or int8 of a q8_0 model): UnsupportedModel or
    // InvalidArgument otherwise.
    bool bundles = false;
    // Called often; false cancels (-> ErrorCode::Cancelled, nothing left behind).
    std::function<bool(const CompressProgress&)> progress;
};

CompressOptions presetOptions(Preset preset);

struct CompressReport {
    uint64_t sourceBytes = 0;        // tensor bytes of the source
    uint64_t outputBytes = 0;        // tensor bytes of the package
    uint64_t layerSourceBytes = 0;   // of the layer matrices alone
    uint64_t layerOutputBytes = 0;
    int bitmapTensors = 0, denseTensors = 0;
    double sparsity = 0;             // zeros / weights over the compressed layer matrices
    int predictors = 0;              // layers with a stored activation predictor
    uint64_t bundleBytes = 0;        // row-column bundles stored (all layers)
    double predictorRecall = 0.0;    // their mean held-out recall and precision
    double predictorPrecision = 0.0;
    std::optional<QualityReport> quality;
    double seconds = 0;
};

// `device`: the CPU device (Wanda's calibration and the quality check compute on host memory).
// Errors: InvalidArgument (bad options, output exists), DiskFull (checked first, from an
// estimate of the output size), Cancelled, ModelFileInvalid / Io as met.
Result<CompressReport> compressModel(const LlamaModel& source, const std::string& outDir,
                                     const CompressOptions& options, gpu::Device& device);

}  // namespace spillway::compress
