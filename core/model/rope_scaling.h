#pragma once
// RoPE scaling as one divisor per rotated pair (gpu::RopeParams::freqFactors): pair i's angle
// pos * base^(-2i/dims) is divided by factors[i].

#include <vector>

#include "core/model/model_config.h"

namespace spillway {

// The divisors of c's scaling: Llama 3's (transformers' _compute_llama3_parameters, llama.cpp's
// rope_freqs) or YaRN's (ggml's rope_yarn with ext_factor 1: the angle
// theta_extrap * (s (1 - ramp_i) + ramp_i), s = 1 / factor, ramp_i = 1 - clamp((i - lo) / max(0.001,
// hi - lo), 0, 1) between the correction dims lo = floor(d(beta_fast)), hi = ceil(d(beta_slow)),
// d(b) = dims ln(original_context / (2 pi b)) / (2 ln base); YaRN's magnitude correction is
// LlamaConfig::yarnAttnFactor, not here); and, with multi-section RoPE (LlamaConfig::ropeSections),
// an infinite divisor for each pair whose section holds no text position (its angle 0). Empty: no
// scaling (or linear, which freqScale does).
std::vector<float> ropeFrequencyFactors(const LlamaConfig& c);

}  // namespace spillway
