#include "core/runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace spillway {

int32_t argmax(std::span<const float> values)
{
    int32_t best = 0;
    for (size_t i = 1; i < values.size(); ++i)
        if (values[i] > values[size_t(best)]) best = int32_t(i);
    return best;
}

Sampler::Sampler(int vocabSize, const SamplerSettings& settings)
    : m_settings(settings), m_rng(settings.seed), m_candidates(size_t(std::max(vocabSize, 1))),
      m_recent(size_t(std::max(settings.repeatLastN, 0)))
{
}

void Sampler::accept(int32_t token)
{
    if (m_recent.empty()) return;
    m_recent[m_recentNext] = token;
    m_recentNext = (m_recentNext + 1) % m_recent.size();
    m_recentCount = std::min(m_recentCount + 1, m_recent.size());
}

int32_t Sampler::sample(std::span<const float> logits)
{
    const size_t n = std::min(logits.size(), m_candidates.size());
    for (size_t i = 0; i < n; ++i) m_candidates[i] = {int32_t(i), logits[i], 0.0f};

    // The penalties, as llama.cpp applies them to each distinct recent token once: the repetition
    // penalty (CTRL's: divides a positive logit, multiplies a negative one), then the presence and
    // frequency penalties (penalty_present / penalty_freq, by how often it occurs among them).
    const bool repeat = m_settings.repeatPenalty != 1.0f;
    const bool counted = m_settings.presencePenalty != 0.0f || m_settings.frequencyPenalty != 0.0f;
    if ((repeat || counted) && m_recentCount > 0) {
        for (size_t r = 0; r < m_recentCount; ++r) {
            const int32_t t = m_recent[r];
            if (t < 0 || size_t(t) >= n) continue;
            bool seen = false;
            for (size_t e = 0; e < r && !seen; ++e) seen = m_recent[e] == t;
            if (seen) continue;
            float& l = m_candidates[size_t(t)].logit;
            if (repeat) l = l > 0.0f ? l / m_settings.repeatPenalty : l * m_settings.repeatPenalty;
            if (counted) {
                int count = 1;
                for (size_t e = r + 1; e < m_recentCount; ++e) count += m_recent[e] == t ? 1 : 0;
                l -= float(count) * m_settings.frequencyPenalty + m_settings.presencePenalty;
            }
        }
    }

    auto byLogit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    if (m_settings.temperature <= 0.0f) {
        const auto best = std::min_element(m_candidates.begin(), m_candidates.begin() + long(n), byLogit);
        return best->id;
    }

    // Top-k: keep the k best, sorted.
    size_t kept = n;
    if (m_settings.topK > 0 && size_t(m_settings.topK) < n) kept = size_t(m_settings.topK);
    std::partial_sort(m_candidates.begin(), m_candidates.begin() + long(kept),
                      m_candidates.begin() + long(n), byLogit);

    // Softmax at temperature over the kept candidates.
    auto softmax = [&](size_t count) {
        const float maxLogit = m_candidates[0].logit;
        double sum = 0.0;
        for (size_t i = 0; i < count; ++i) {
            m_candidates[i].p = std::exp((m_candidates[i].logit - maxLogit) / m_settings.temperature);
            sum += m_candidates[i].p;
        }
        for (size_t i = 0; i < count; ++i) m_candidates[i].p = float(m_candidates[i].p / sum);
    };
    softmax(kept);

    // Top-p: the smallest prefix whose probability reaches topP.
    if (m_settings.topP < 1.0f) {
        double cumulative = 0.0;
        for (size_t i = 0; i < kept; ++i) {
            cumulative += m_candidates[i].p;
            if (cumulative >= m_settings.topP) {
                kept = i + 1;
                break;
            }
        }
    }
    // Min-p: drop tokens far less likely than the best one.
    if (m_settings.minP > 0.0f) {
        const float floor = m_settings.minP * m_candidates[0].p;
        size_t i = 1;
        while (i < kept && m_candidates[i].p >= floor) ++i;
        kept = i;
    }
    softmax(kept);

    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    const double r = uniform(m_rng);
    double cumulative = 0.0;
    for (size_t i = 0; i < kept; ++i) {
        cumulative += m_candidates[i].p;
        if (r < cumulative) return m_candidates[i].id;
    }
    return m_candidates[kept - 1].id;
}

}  // namespace spillway
