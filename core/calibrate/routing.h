#pragma once
// A mixture of experts' routing on calibration prompts: how often each layer's router chose each
// expert (the planner's routing profile, core/plan/routing_profile.h).

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/plan/routing_profile.h"

namespace spillway {

class LlamaModel;
namespace gpu { class Device; }

namespace compress {

struct RoutingOptions {
    std::vector<std::string> prompts;  // empty: the built-in calibration prompts
    int maxTokensPerPrompt = 256;
    int continueTokens = 64;           // the model's own sampled text after each prompt
    std::function<bool(double)> progress;
};

// Runs the prompts through `model` on `device` (the CPU device: runCalibration) and counts the
// experts chosen per layer. UnsupportedModel for a model without experts.
Result<plan::RoutingProfile> measureRouting(const LlamaModel& model, gpu::Device& device, const RoutingOptions& options);

}  // namespace compress
}  // namespace spillway
