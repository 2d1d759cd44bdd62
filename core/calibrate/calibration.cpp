#include "core/calibrate/calibration.h"

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
// The device computes on host memory, so x is readable once earlier ops have finished. Every
// token of a forward pass goes through each matrix once, in order (a prompt batch's jobs on one
// matrix come in token order), so the k-th input a matrix shows after startTokens(p, first) is
// position first + k's.
class WatchingDevice final : public gpu::ForwardingDevice {
public:
    WatchingDevice(gpu::Device& inner, std::span<const NamedMatrix> watched,
                   const CalibrationWatcher& watcher)
        : ForwardingDevice(inner), m_watcher(watcher), m_seen(watched.size(), 0), m_since(watched.size(), 0)
    {
        for (size_t i = 0; i < watched.size(); ++i) m_index.emplace(watched[i].view.data, i);
    }
    const std::vector<int64_t>& seen() const { return m_seen; }
    void startTokens(int prompt, int firstPosition)
    {
        m_prompt = prompt;
        m_first = firstPosition;
        std::fill(m_since.begin(), m_since.end(), 0);
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
            m_watcher(it->second, {j.x, size_t(j.w.cols)}, m_prompt, m_first + m_since[it->second]++);
            ++m_seen[it->second];
        }
        m_inner.matvec(jobs);
    }

private:
    const CalibrationWatcher& m_watcher;
    std::unordered_map<const void*, size_t> m_index;  // weight data -> watched index
    std::vector<int64_t> m_seen;
    std::vector<int> m_since;  // inputs shown since startTokens, per watched matrix
    int m_prompt = 0, m_first = 0;
};

}  // namespace

Status runCalibration(const LlamaModel& model, gpu::Device& device,
                      std::span<const std::string> prompts, int maxTokensPerPrompt,
                      std::span<const NamedMatrix> watched, const CalibrationWatcher& watcher,
                      int continueTokens, const std::function<bool(double)>& progress,
                      std::vector<uint64_t>* expertCounts)
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
    // Each prompt goes through in batches (its logits are the last token's: what the first
    // sampled token needs), then the sampled tokens one by one. The logits are those of one
    // token at a time, bit for bit, so the samples are too.
    options.batch = std::clamp(longest, 1, 32);
    plan::Placement placement = plan::uniformPlacement(model, plan::Tier::Device);
    placement.mapInPlace = true;  // matvec weight pointers are then the model's own views
    placement.prefetchDepth = 0;
    options.placement = placement;
    auto session = LlamaSession::create(model, watching, options);
    if (!session) return session.error();
    const size_t vocab = size_t(model.config().vocabSize);
    for (size_t p = 0; p < tokenized.size(); ++p) {
        const auto& t = tokenized[p];
        if (t.empty()) continue;
        const size_t total = t.size() + size_t(continueTokens);
        auto tell = [&](size_t done) {
            return !progress || progress((double(p) + double(done) / double(total)) / double(tokenized.size()));
        };
        // Each prompt starts again at position 0 (its KV entries overwrite the last prompt's).
        SamplerSettings settings;
        settings.seed = p + 1;
        Sampler sampler(model.config().vocabSize, settings);
        watching.startTokens(int(p), 0);
        auto logits = (*session)->forward(std::span<const int32_t>(t), 0);
        if (!logits) return logits.error();
        for (int32_t token : t) sampler.accept(token);
        if (!tell(t.size())) return makeError(ErrorCode::Cancelled, "calibration cancelled");
        for (size_t i = t.size(); i < total; ++i) {
            const int32_t token = sampler.sample({*logits, vocab});
            if (token == model.tokenizer().eos()) break;
            watching.startTokens(int(p), int(i));
            logits = (*session)->forward(token, int(i));
            if (!logits) return logits.error();
            if (!tell(i + 1)) return makeError(ErrorCode::Cancelled, "calibration cancelled");
            sampler.accept(token);
        }
    }
    for (size_t i = 0; i < watched.size(); ++i)
        if (watching.seen()[i] == 0)
            return makeError(ErrorCode::Internal,
                             "calibration: matrix '" + watched[i].name +
                                 "' saw no input (weights not used in place?)");
    if (expertCounts) *expertCounts = (*session)->expertCounts();
    return {};
}

}  // namespace spillway::compress
