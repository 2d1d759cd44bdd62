#include "core/model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spillway {

namespace {

// Interleaved multi-section RoPE (ggml's IMROPE) for text: pair i's sector is i mod the
// sections' sum; sectors 3k, 3k+1 and 3k+2 below three times the t, h and w sections take the
// position (a text token's t = h = w), any other the e section's 0: its angle is 0, which an
// infinite divisor gives.
void applyTextSections(const LlamaConfig& c, std::vector<float>& factors)
{
    const int* s = c.ropeSections;
    const int total = s[0] + s[1] + s[2] + s[3];
    for (size_t i = 0; i < factors.size(); ++i) {
        const int sector = int(i) % total;
        const bool positioned = (sector % 3 == 1 && sector < 3 * s[1]) || (sector % 3 == 2 && sector < 3 * s[2]) ||
                                (sector % 3 == 0 && sector < 3 * s[0]);
        if (!positioned) factors[i] = std::numeric_limits<float>::infinity();
    }
}

std::vector<float> scalingFactors(const LlamaConfig& c);

}  // namespace

std::vector<float> ropeFrequencyFactors(const LlamaConfig& c)
{
    std::vector<float> factors = scalingFactors(c);
    const int pairs = c.ropeDims / 2;
    if (pairs >= 1 && c.ropeSections[0] + c.ropeSections[1] + c.ropeSections[2] + c.ropeSections[3] > 0) {
        if (factors.empty()) factors.assign(size_t(pairs), 1.0f);
        applyTextSections(c, factors);
    }
    return factors;
}

namespace {

std::vector<float> scalingFactors(const LlamaConfig& c)
{
    const int pairs = c.ropeDims / 2;
    if (pairs < 1 || c.ropeFactor <= 0.0f) return {};
    std::vector<float> factors(size_t(pairs), 1.0f);
    if (c.yarn) {
        const double dims = c.ropeDims, base = c.ropeBase;
        auto corrDim = [&](double beta) {
            return dims * std::log(double(c.ropeOriginalContext) / (beta * 2.0 * M_PI)) / (2.0 * std::log(base));
        };
        const double lo = std::max(0.0, std::floor(corrDim(c.yarnBetaFast)));
        const double hi = std::min(dims - 1.0, std::ceil(corrDim(c.yarnBetaSlow)));
        const double scale = 1.0 / c.ropeFactor;
        for (int i = 0; i < pairs; ++i) {
            const double y = (i - lo) / std::max(0.001, hi - lo);
            const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
            factors[size_t(i)] = float(1.0 / (scale * (1.0 - ramp) + ramp));
        }
        return factors;
    }
    // Llama 3: wavelengths longer than original_context / low_freq_factor are slowed by the
    // factor, shorter than original_context / high_freq_factor kept, a ramp between.
    const double lowWavelen = c.ropeOriginalContext / double(c.ropeLowFreqFactor);
    const double highWavelen = c.ropeOriginalContext / double(c.ropeHighFreqFactor);
    for (int i = 0; i < pairs; ++i) {
        const double freq = std::pow(double(c.ropeBase), -2.0 * i / c.ropeDims);
        const double wavelen = 2.0 * M_PI / freq;
        if (wavelen > lowWavelen) {
            factors[size_t(i)] = c.ropeFactor;
        } else if (wavelen >= highWavelen) {
            const double smooth =
                (c.ropeOriginalContext / wavelen - c.ropeLowFreqFactor) / (c.ropeHighFreqFactor - c.ropeLowFreqFactor);
            factors[size_t(i)] = float(1.0 / ((1.0 - smooth) / c.ropeFactor + smooth));
        }
    }
    return factors;
}

}  // namespace

}  // namespace spillway
