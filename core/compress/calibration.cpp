#include "core/compress/calibration.h"

#include <algorithm>
#include <unordered_map>

#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/forwarding_device.h"

namespace spillway::compress {

namespace {

// Passes every call on; a matvec whose weight is watched shows its input to the watcher first.
// The device computes on host memory, so x is readable once earlier ops have finished.
class WatchingDevice final : public gpu::ForwardingDevice {
public:
    WatchingDevice(gpu::Device& inner, std::span<const NamedMatrix> watched,
                   const CalibrationWatcher& watcher)
        : ForwardingDevice(inner), m_watcher(watcher), m_seen(watched.size(), 0)
    {
        for (size_t i = 0; i < watched.size(); ++i) m_index.emplace(watched[i].view.data, i);
    }
    const std::vector<int64_t>& seen() const { return m_seen; }
    void setToken(int prompt, int position)
    {
        m_prompt = prompt;
        m_position = position;
    }

    using Device::matvec;
    void matvec(std::span<const gpu::MatvecJob> jobs) override
    {
        bool synced = false;
        for (const auto& j : jobs) {
            auto it = m_index.find(j.w.data);
            if (it == m_index.end()) continue;
            if (!synced) m_inner.synchronize();  // x was written by earlier ops
            synced = true;
            m_watcher(it->second, {j.x, size_t(j.w.cols)}, m_prompt, m_position);
            ++m_seen[it->second];
        }
        m_inner.matvec(jobs);
    }

private:
    const CalibrationWatcher& m_watcher;
    std::unordered_map<const void*, size_t> m_index;  // weight data -> watched index
    std::vector<int64_t> m_seen;
    int m_prompt = 0, m_position = 0;
};

}  // namespace

Status runCalibration(const LlamaModel& model, gpu::Device& device,
                      std::span<const std::string> prompts, int maxTokensPerPrompt,
                      std::span<const NamedMatrix> watched, const CalibrationWatcher& watcher,
                      int continueTokens, const std::function<bool(double)>& progress)
{
    if (continueTokens < 0 || continueTokens > (1 << 20))
        return makeError(ErrorCode::InvalidArgument, "calibration: continueTokens out of range");
    if (prompts.empty()) return makeError(ErrorCode::InvalidArgument, "calibration: no prompts");
    if (maxTokensPerPrompt < 1)
        return makeError(ErrorCode::InvalidArgument,
                         "calibration: maxTokensPerPrompt must be >= 1");
    if (!device.info().caps.hostPointers)
        return makeError(ErrorCode::InvalidArgument,
                         "calibration needs a device that computes on host memory (the CPU "
                         "device), not " + device.info().backend);

    std::vector<std::vector<int32_t>> tokenized;
    int longest = 0;
    for (const std::string& p : prompts) {
        std::vector<int32_t> t = model.tokenizer().encode(p, true);
        if (int64_t(t.size()) > maxTokensPerPrompt) t.resize(size_t(maxTokensPerPrompt));
        longest = std::max(longest, int(t.size()));
        tokenized.push_back(std::move(t));
    }
    if (longest == 0)
        return makeError(ErrorCode::InvalidArgument, "calibration: prompts have no tokens");

    WatchingDevice watching(device, watched, watcher);
    SessionOptions options;
    options.contextLength = longest + continueTokens;
    options.batch = 1;  // the head runs on the last token of a batch only: 1 gives it every token
    plan::Placement placement = plan::uniformPlacement(model, plan::Tier::Device);
    placement.mapInPlace = true;  // matvec weight pointers are then the model's own views
    placement.prefetchDepth = 0;
    options.placement = placement;
    auto session = LlamaSession::create(model, watching, options);
    if (!session) return session.error();
    for (size_t p = 0; p < tokenized.size(); ++p) {
        const auto& t = tokenized[p];
        // Each prompt starts again at position 0 (its KV entries overwrite the last prompt's).
        SamplerSettings settings;
        settings.seed = p + 1;
        Sampler sampler(model.config().vocabSize, settings);
        int32_t token = t.empty() ? -1 : t[0];
        const size_t total = t.size() + size_t(continueTokens);
        for (size_t i = 0; i < total && token >= 0; ++i) {
            watching.setToken(int(p), int(i));
            auto logits = (*session)->forward(token, int(i));
            if (!logits) return logits.error();
            if (progress && !progress((double(p) + double(i + 1) / double(total)) / double(tokenized.size())))
                return makeError(ErrorCode::Cancelled, "calibration cancelled");
            sampler.accept(token);
            if (i + 1 < t.size()) {
                token = t[i + 1];
            } else if (i + 1 < total) {
                token = sampler.sample({*logits, size_t(model.config().vocabSize)});
                if (token == model.tokenizer().eos()) token = -1;
            }
        }
    }
    for (size_t i = 0; i < watched.size(); ++i)
        if (watching.seen()[i] == 0)
            return makeError(ErrorCode::Internal,
                             "calibration: matrix '" + watched[i].name +
                                 "' saw no input (weights not used in place?)");
    return {};
}

}  // namespace spillway::compress
