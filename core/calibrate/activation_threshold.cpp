#include "core/calibrate/activation_threshold.h"

#include <algorithm>
#include <cmath>

#include "core/calibrate/prune_calibration.h"
#include "core/calibrate/calibration.h"
#include "core/model/llama_model.h"

namespace spillway::compress {

Result<std::vector<float>> calibrateActivationThresholds(const LlamaModel& model, gpu::Device& device,
                                                         const ThresholdOptions& options)
{
    if (!(options.targetSparsity >= 0.0 && options.targetSparsity < 1.0))
        return makeError(ErrorCode::InvalidArgument, "activation thresholds: target sparsity must be in [0, 1)");
    const LlamaConfig& c = model.config();
    std::vector<NamedMatrix> downs;
    for (int l = 0; l < c.nLayers; ++l)
        downs.push_back({"blk." + std::to_string(l) + ".ffn_down.weight", model.weights().layers[size_t(l)].down, false});
    std::vector<std::vector<float>> magnitudes(size_t(c.nLayers));
    const std::vector<std::string> prompts =
        options.prompts.empty() ? builtinCalibrationPrompts() : options.prompts;
    SPILLWAY_TRY(runCalibration(
        model, device, prompts, options.maxTokensPerPrompt, downs,
        [&](size_t layer, std::span<const float> x, int, int) {
            for (float v : x) magnitudes[layer].push_back(std::fabs(v));
        },
        options.continueTokens));
    std::vector<float> thresholds;
    for (auto& m : magnitudes) {
        if (options.targetSparsity <= 0.0 || m.empty()) {
            thresholds.push_back(0.0f);
            continue;
        }
        // The largest magnitude among the smallest `target` share: dropping |x| <= it drops
        // that share (more where values tie).
        const size_t k = std::min(m.size() - 1, size_t(std::floor(options.targetSparsity * double(m.size()))));
        const size_t at = k == 0 ? 0 : k - 1;
        std::nth_element(m.begin(), m.begin() + ptrdiff_t(at), m.end());
        thresholds.push_back(k == 0 ? 0.0f : m[at]);
    }
    return thresholds;
}

ThresholdingDevice::ThresholdingDevice(gpu::Device& inner, const LlamaModel& model, std::vector<float> thresholds)
    : ForwardingDevice(inner), m_thresholds(std::move(thresholds))
{
    for (const LlamaLayerWeights& L : model.weights().layers) m_downs.push_back(L.down.data);
    m_thresholds.resize(m_downs.size(), 0.0f);
}

void ThresholdingDevice::matvec(std::span<const gpu::MatvecJob> jobs)
{
    std::vector<gpu::MatvecJob> changed(jobs.begin(), jobs.end());
    bool synced = false;
    for (gpu::MatvecJob& j : changed) {
        const auto it = std::find(m_downs.begin(), m_downs.end(), j.w.data);
        if (it == m_downs.end()) continue;
        if (!synced) m_inner.synchronize();  // x was written by earlier ops
        synced = true;
        const float t = m_thresholds[size_t(it - m_downs.begin())];
        m_scratch.assign(j.x, j.x + j.w.cols);
        for (float& v : m_scratch) {
            if (std::fabs(v) <= t) {
                ++m_dropped;
                v = 0.0f;
            }
        }
        m_seen += uint64_t(j.w.cols);
        j.x = m_scratch.data();
        m_inner.matvec({&j, 1});
        j.w.data = nullptr;  // done
    }
    std::vector<gpu::MatvecJob> rest;
    for (const gpu::MatvecJob& j : changed)
        if (j.w.data) rest.push_back(j);
    if (!rest.empty()) m_inner.matvec(rest);
}

Result<ThresholdQuality> measureThresholdQuality(const LlamaModel& model, gpu::Device& device,
                                                 const ThresholdOptions& options)
{
    auto thresholds = calibrateActivationThresholds(model, device, options);
    if (!thresholds) return thresholds.error();
    ThresholdingDevice thresholding(device, model, *thresholds);
    QualityOptions q;
    q.candidateDevice = &thresholding;
    q.weightsInPlace = true;
    auto quality = compareModels(model, model, device, q);
    if (!quality) return quality.error();
    ThresholdQuality out;
    out.thresholds = std::move(thresholds.value());
    out.droppedShare = thresholding.droppedShare();
    out.quality = *quality;
    return out;
}

}  // namespace spillway::compress
