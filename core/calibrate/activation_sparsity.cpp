#include "core/calibrate/activation_sparsity.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "core/calibrate/prune_calibration.h"
#include "core/calibrate/calibration.h"
#include "core/model/llama_model.h"

namespace spillway::compress {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 2;

}  // namespace

SparsityAccumulator::SparsityAccumulator(int neurons, std::vector<int> windows, double threshold,
                                         bool record)
    : m_neurons(std::max(neurons, 1)), m_windows(std::move(windows)), m_threshold(threshold),
      m_count(size_t(m_neurons), 0), m_lastActive(size_t(m_neurons), kNever),
      m_hit(m_windows.size(), 0.0), m_fetch(m_windows.size(), 0.0), m_size(m_windows.size(), 0.0),
      m_record(record)
{
    m_trace.neurons = m_neurons;
    if (m_record) m_trace.offsets.push_back(0);
    int maxK = 1;
    for (int k : m_windows) maxK = std::max(maxK, k);
    m_ageCount.assign(size_t(maxK) + 2, 0);  // ages 0..maxK, then one bucket for older
}

void SparsityAccumulator::startPrompt() { m_promptStart = m_tokens; }

void SparsityAccumulator::add(std::span<const float> x)
{
    const int64_t t = m_tokens;
    const bool history = t > m_promptStart;
    const int64_t maxAge = int64_t(m_ageCount.size()) - 1;  // "older than every window"

    // Pass 1: active neurons, and for each the age (tokens since it was last active before t).
    int64_t active = 0;
    std::vector<int64_t>& hitsWithin = m_hitAges;  // active neurons of age a
    hitsWithin.assign(size_t(maxAge) + 1, 0);
    const size_t n = std::min(x.size(), size_t(m_neurons));
    for (size_t j = 0; j < n; ++j) {
        if (!(std::fabs(double(x[j])) > m_threshold)) continue;
        ++active;
        ++m_count[j];
        if (m_record) m_trace.ids.push_back(uint32_t(j));
        const int64_t last = m_lastActive[j];
        if (history && last >= m_promptStart) hitsWithin[size_t(std::min(t - last, maxAge))]++;
        m_lastActive[j] = t;
    }
    if (m_record) m_trace.offsets.push_back(m_trace.ids.size());
    const double share = double(active) / m_neurons;
    m_density += share;
    m_min = std::min(m_min, share);
    m_max = std::max(m_max, share);

    if (history) {
        // Pass 2: ages of every neuron after this token (0: active now), for the window sizes.
        std::fill(m_ageCount.begin(), m_ageCount.end(), 0);
        for (size_t j = 0; j < size_t(m_neurons); ++j) {
            const int64_t last = m_lastActive[j];
            if (last < m_promptStart) continue;
            const int64_t age = t - last;
            if (age <= maxAge) m_ageCount[size_t(age)]++;
        }
        for (size_t w = 0; w < m_windows.size(); ++w) {
            const int k = m_windows[w];
            int64_t hits = 0, held = 0;
            for (int a = 1; a <= k; ++a) hits += hitsWithin[size_t(a)];
            for (int a = 0; a < k; ++a) held += m_ageCount[size_t(a)];
            m_hit[w] += active > 0 ? double(hits) / double(active) : 1.0;
            m_fetch[w] += double(active - hits) / m_neurons;
            m_size[w] += double(held) / m_neurons;
        }
        ++m_windowTokens;
    }
    ++m_tokens;
}

LayerSparsity SparsityAccumulator::result(int layer) const
{
    LayerSparsity r;
    r.layer = layer;
    r.neurons = m_neurons;
    r.tokens = m_tokens;
    if (m_tokens == 0) return r;
    r.density = m_density / double(m_tokens);
    r.minDensity = m_min;
    r.maxDensity = m_max;
    const double wt = double(std::max<int64_t>(m_windowTokens, 1));
    for (size_t w = 0; w < m_windows.size(); ++w) {
        r.windowHit.push_back(m_hit[w] / wt);
        r.windowFetch.push_back(m_fetch[w] / wt);
        r.windowSize.push_back(m_size[w] / wt);
    }
    std::vector<int64_t> counts = m_count;
    std::sort(counts.begin(), counts.end(), std::greater<>());
    const size_t hot = size_t(std::ceil(0.1 * double(counts.size())));
    int64_t total = 0, top = 0;
    for (size_t j = 0; j < counts.size(); ++j) {
        total += counts[j];
        if (j < hot) top += counts[j];
    }
    r.hotShare = total > 0 ? double(top) / double(total) : 0.0;
    return r;
}

namespace {

// The mean over layers of one figure, each layer weighted by its neurons; layers without the
// figure are left out.
template <class Get>
double weightedMean(const std::vector<LayerSparsity>& layers, Get get)
{
    double sum = 0.0, weight = 0.0;
    for (const LayerSparsity& l : layers) {
        const std::optional<double> v = get(l);
        if (!v) continue;
        sum += *v * l.neurons;
        weight += l.neurons;
    }
    return weight > 0 ? sum / weight : 0.0;
}

std::optional<double> at(const std::vector<double>& v, size_t k)
{
    return k < v.size() ? std::optional<double>(v[k]) : std::nullopt;
}

}  // namespace

double SparsityReport::density() const
{
    return weightedMean(layers, [](const LayerSparsity& l) { return std::optional<double>(l.density); });
}

double SparsityReport::windowHit(size_t k) const
{
    return weightedMean(layers, [k](const LayerSparsity& l) { return at(l.windowHit, k); });
}

double SparsityReport::windowFetch(size_t k) const
{
    return weightedMean(layers, [k](const LayerSparsity& l) { return at(l.windowFetch, k); });
}

Result<SparsityReport> measureActivationSparsity(const LlamaModel& model, gpu::Device& device,
                                                 const SparsityOptions& options)
{
    for (int k : options.windows)
        if (k < 1 || k > 4096)
            return makeError(ErrorCode::InvalidArgument,
                             "sparsity: window " + std::to_string(k) + " is not in 1..4096");
    if (!(options.threshold >= 0.0))
        return makeError(ErrorCode::InvalidArgument, "sparsity: threshold must be >= 0");
    const std::vector<std::string> prompts =
        options.prompts.empty() ? builtinCalibrationPrompts() : options.prompts;

    const LlamaConfig& c = model.config();
    if (c.moe())
        return makeError(ErrorCode::UnsupportedModel,
                         "sparsity: " + model.path() + " is a mixture of experts; this measures the neurons of dense "
                         "FFNs (its sparsity is its routing: generate and bench report how the experts were chosen)");
    std::vector<NamedMatrix> downs;
    std::vector<SparsityAccumulator> layers;
    for (int l = 0; l < c.nLayers; ++l) {
        downs.push_back({"blk." + std::to_string(l) + ".ffn_down.weight",
                         model.weights().layers[size_t(l)].down, false});
        layers.emplace_back(c.ffnDim, options.windows, options.threshold, options.keepTraces);
    }
    int lastPrompt = -1;
    SPILLWAY_TRY(runCalibration(model, device, prompts, options.maxTokensPerPrompt, downs,
                                [&](size_t layer, std::span<const float> x, int prompt, int) {
                                    if (prompt != lastPrompt) {
                                        for (auto& a : layers) a.startPrompt();
                                        lastPrompt = prompt;
                                    }
                                    layers[layer].add(x);
                                },
                                options.continueTokens));
    SparsityReport report;
    report.windows = options.windows;
    report.threshold = options.threshold;
    report.prompts = int(prompts.size());
    for (int l = 0; l < c.nLayers; ++l) {
        report.layers.push_back(layers[size_t(l)].result(l));
        if (options.keepTraces) report.traces.push_back(layers[size_t(l)].trace());
    }
    report.tokens = report.layers.empty() ? 0 : report.layers.front().tokens;
    return report;
}

}  // namespace spillway::compress
