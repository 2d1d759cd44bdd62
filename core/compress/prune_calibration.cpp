// Wanda calibration: runs prompts through a LlamaSession on a device wrapper that sees every
// matvec and adds up the squares of its input, per weight matrix.

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "core/compress/prune.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::compress {

namespace {

// Written for this project: short, varied everyday English (narrative, dialogue, facts,
// instructions, numbers), so that a small model's vocabulary and positions are exercised.
constexpr std::array<std::string_view, 12> kCalibrationPrompts = {
    "Once upon a time, a little girl named Lily found a shiny red ball in the park.",
    "The sun was warm, and the birds sang in the tall green trees near the river.",
    "\"Can I play with you?\" asked the small dog. The cat said yes, and they ran together.",
    "Tom wanted to build a big tower out of blocks, but it fell down twice.",
    "Water boils at one hundred degrees Celsius and freezes at zero.",
    "First, mix the flour and the eggs; then bake the cake for thirty minutes.",
    "The old man told his grandson a story about the sea and a brave sailor.",
    "It was raining, so Mom gave Ben a yellow coat and a blue umbrella.",
    "The train left the station at seven o'clock and arrived in the city at noon.",
    "She was sad because her kite was stuck in a tree, until her friend helped her.",
    "Every night the moon rose over the quiet village and the stars began to shine.",
    "One, two, three: the children counted the apples and shared them with everyone.",
};

// Forwards every call to `inner`; a matvec whose weight is one of the watched matrices adds
// x_j^2 to that matrix's sums first. The device computes on host memory, so x is readable.
class NormRecordingDevice final : public gpu::Device {
public:
    NormRecordingDevice(gpu::Device& inner, const std::vector<NamedMatrix>& matrices)
        : m_inner(inner)
    {
        m_sums.resize(matrices.size());
        m_tokens.resize(matrices.size(), 0);
        for (size_t i = 0; i < matrices.size(); ++i) {
            m_index.emplace(matrices[i].view.data, i);
            m_sums[i].assign(size_t(matrices[i].view.cols), 0.0);
        }
    }
    const std::vector<std::vector<double>>& sums() const { return m_sums; }
    const std::vector<int64_t>& tokens() const { return m_tokens; }

    const gpu::DeviceInfo& info() const override { return m_inner.info(); }
    bool supports(gpu::DType t) const override { return m_inner.supports(t); }
    Result<gpu::Buffer> allocate(size_t b) override { return m_inner.allocate(b); }
    Result<gpu::Buffer> allocateHost(size_t b) override { return m_inner.allocateHost(b); }
    gpu::MemoryStats memoryStats() const override { return m_inner.memoryStats(); }
    void resetPeak() override { m_inner.resetPeak(); }
    void upload(void* d, const void* h, size_t b) override { m_inner.upload(d, h, b); }
    void download(void* h, const void* d, size_t b) override { m_inner.download(h, d, b); }
    void synchronize() override { m_inner.synchronize(); }
    void matvec(std::span<const gpu::MatvecJob> jobs) override
    {
        bool synced = false;
        for (const auto& j : jobs) {
            auto it = m_index.find(j.w.data);
            if (it == m_index.end() || j.w.cols != int64_t(m_sums[it->second].size())) continue;
            if (!synced) m_inner.synchronize();  // x was written by earlier ops
            synced = true;
            std::vector<double>& s = m_sums[it->second];
            for (size_t c = 0; c < s.size(); ++c) s[c] += double(j.x[c]) * double(j.x[c]);
            ++m_tokens[it->second];
        }
        m_inner.matvec(jobs);
    }
    void getRow(const gpu::MatrixView& w, int64_t r, float* out) override
    {
        m_inner.getRow(w, r, out);
    }
    void rmsnorm(const float* x, const float* w, float* o, int n, float e) override
    {
        m_inner.rmsnorm(x, w, o, n, e);
    }
    void rope(float* x, int h, int d, int p, const gpu::RopeParams& r) override
    {
        m_inner.rope(x, h, d, p, r);
    }
    void attention(const gpu::AttentionArgs& a) override { m_inner.attention(a); }
    void swiglu(const float* g, const float* u, float* o, int n) override
    {
        m_inner.swiglu(g, u, o, n);
    }
    void add(float* y, const float* x, int n) override { m_inner.add(y, x, n); }
    void pointwise(const gpu::PointwiseArgs& a) override { m_inner.pointwise(a); }
    void layernorm(const float* x, const float* w, const float* b, float* o, int n, float e) override
    {
        m_inner.layernorm(x, w, b, o, n, e);
    }

private:
    gpu::Device& m_inner;
    std::unordered_map<const void*, size_t> m_index;  // weight data -> matrix
    std::vector<std::vector<double>> m_sums;          // per matrix, (cols) sums of x_j^2
    std::vector<int64_t> m_tokens;                    // per matrix, inputs seen
};

}  // namespace

std::vector<std::string> builtinCalibrationPrompts()
{
    return {kCalibrationPrompts.begin(), kCalibrationPrompts.end()};
}

Result<ActivationNorms> collectActivationNorms(const LlamaModel& model, gpu::Device& device,
                                               std::span<const std::string> prompts,
                                               int maxTokensPerPrompt)
{
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

    const std::vector<NamedMatrix> matrices = linearMatrices(model);
    NormRecordingDevice recorder(device, matrices);
    SessionOptions options;
    options.contextLength = longest;
    options.batch = 1;  // the head runs on the last token of a batch only: 1 gives it every token
    plan::Placement placement = plan::uniformPlacement(model, plan::Tier::Device);
    placement.mapInPlace = true;  // matvec weight pointers are then the model's own views
    placement.prefetchDepth = 0;
    options.placement = placement;
    auto session = LlamaSession::create(model, recorder, options);
    if (!session) return session.error();
    for (const auto& t : tokenized) {
        // Each prompt starts again at position 0 (its KV entries overwrite the last prompt's).
        for (size_t i = 0; i < t.size(); ++i) {
            auto logits = (*session)->forward(t[i], int(i));
            if (!logits) return logits.error();
        }
    }

    ActivationNorms norms;
    for (size_t i = 0; i < matrices.size(); ++i) {
        if (recorder.tokens()[i] == 0)
            return makeError(ErrorCode::Internal,
                             "calibration: matrix '" + matrices[i].name +
                                 "' saw no input (weights not used in place?)");
        const auto& s = recorder.sums()[i];
        std::vector<float>& out = norms[matrices[i].name];
        out.resize(s.size());
        for (size_t c = 0; c < s.size(); ++c) out[c] = float(std::sqrt(s[c]));
    }
    return norms;
}

}  // namespace spillway::compress
