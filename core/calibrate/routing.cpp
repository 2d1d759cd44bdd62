#include "core/calibrate/routing.h"

#include "core/calibrate/calibration.h"
#include "core/calibrate/prune_calibration.h"
#include "core/model/llama_model.h"

namespace spillway::compress {

Result<plan::RoutingProfile> measureRouting(const LlamaModel& model, gpu::Device& device, const RoutingOptions& options)
{
    const LlamaConfig& c = model.config();
    if (!c.moe())
        return makeError(ErrorCode::UnsupportedModel, model.path() + " has no experts: there is no routing to measure");
    const std::vector<std::string> prompts = options.prompts.empty() ? builtinCalibrationPrompts() : options.prompts;
    std::vector<uint64_t> counts;
    SPILLWAY_TRY(runCalibration(model, device, prompts, options.maxTokensPerPrompt, {}, {}, options.continueTokens,
                                options.progress, &counts));
    plan::RoutingProfile p;
    p.layers = c.nLayers;
    p.experts = c.nExperts;
    p.used = c.nExpertsUsed;
    p.counts = std::move(counts);
    if (p.counts.size() != size_t(c.nLayers) * size_t(c.nExperts))
        return makeError(ErrorCode::Internal, "routing: the session counted no experts");
    uint64_t first = 0;
    for (uint64_t n : p.layerCounts(0)) first += n;
    p.tokens = first / uint64_t(c.nExpertsUsed);
    p.source = "calibration: " + std::to_string(prompts.size()) + " prompts" +
               (options.prompts.empty() ? " (built in)" : "") + ", up to " + std::to_string(options.maxTokensPerPrompt) +
               " tokens each and " + std::to_string(options.continueTokens) + " of the model's own";
    return p;
}

}  // namespace spillway::compress
