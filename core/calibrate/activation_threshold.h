#pragma once
// Approximate activation sparsity for FFNs without a ReLU (SwiGLU): the inputs of ffn_down whose
// magnitude is at most a per-layer threshold are taken as zero, so that their neurons need not
// be read. Each layer's threshold is the `target` quantile of |activation| over calibration
// tokens (target 0.5: half of the activations dropped), and the cost in quality is measured
// against the dense model (KL divergence, top-1 agreement, perplexity; quality.h), nothing
// estimated.

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/calibrate/quality.h"
#include "gpu/forwarding_device.h"

namespace spillway {

class LlamaModel;

namespace compress {

struct ThresholdOptions {
    double targetSparsity = 0.5;       // share of activations to drop, [0, 1)
    std::vector<std::string> prompts;  // empty: builtinCalibrationPrompts()
    int maxTokensPerPrompt = 256;
    int continueTokens = 0;            // model-sampled tokens after each prompt
};

// Per layer: |x| <= threshold is dropped (0: only exact zeros).
Result<std::vector<float>> calibrateActivationThresholds(const LlamaModel& model, gpu::Device& device,
                                                         const ThresholdOptions& options);

// Passes every call on to the inner device (which computes on host memory); the input of each
// layer's ffn_down (identified by the model's own weight pointers: run sessions with the
// weights in place) has its values with |x| <= that layer's threshold zeroed first. Counts the
// inputs that reach ffn_down as zeros (dropped, or zero already).
class ThresholdingDevice final : public gpu::ForwardingDevice {
public:
    ThresholdingDevice(gpu::Device& inner, const LlamaModel& model, std::vector<float> thresholds);
    using Device::matvec;
    void matvec(std::span<const gpu::MatvecJob> jobs) override;
    double droppedShare() const { return m_seen ? double(m_dropped) / double(m_seen) : 0.0; }

private:
    std::vector<const void*> m_downs;  // per layer
    std::vector<float> m_thresholds;
    std::vector<float> m_scratch;
    uint64_t m_dropped = 0, m_seen = 0;
};

struct ThresholdQuality {
    std::vector<float> thresholds;
    double droppedShare = 0.0;  // ffn_down inputs that were zero, over the quality run
    QualityReport quality;      // the thresholded model against the dense one
};

// Calibrates the thresholds, then runs the quality check with them (CPU device).
Result<ThresholdQuality> measureThresholdQuality(const LlamaModel& model, gpu::Device& device,
                                                 const ThresholdOptions& options);

}  // namespace compress
}  // namespace spillway
