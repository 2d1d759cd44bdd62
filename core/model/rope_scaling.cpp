#include "core/model/rope_scaling.h"

#include <algorithm>
#include <cmath>

namespace spillway {

std::vector<float> ropeFrequencyFactors(const LlamaConfig& c)
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

}  // namespace spillway
