#pragma once
// Picks the next token from logits: greedy, or temperature sampling with top-k, top-p, min-p,
// a repetition penalty and presence / frequency penalties. Same seed, same settings, same logits: same tokens. Allocates only in
// the constructor.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace spillway {

struct SamplerSettings {
    float temperature = 0.8f;      // <= 0: greedy (argmax)
    int topK = 40;                 // <= 0: off
    float topP = 0.95f;            // >= 1: off
    float minP = 0.05f;            // <= 0: off; keep tokens with p >= minP * p(max)
    float repeatPenalty = 1.0f;    // 1: off; divides positive logits, multiplies negative ones
    int repeatLastN = 64;          // how many recent tokens the penalties look at
    // OpenAI's penalties, as llama.cpp applies them over the same recent tokens: a token seen
    // c times there loses c * frequencyPenalty + (c > 0) * presencePenalty from its logit.
    float presencePenalty = 0.0f;  // 0: off
    float frequencyPenalty = 0.0f; // 0: off
    uint64_t seed = 0;
};

class Sampler {
public:
    Sampler(int vocabSize, const SamplerSettings& settings);

    // Records a token of the context (prompt or generated) for the repetition penalty.
    void accept(int32_t token);
    // Chooses the next token. `logits` is not modified.
    int32_t sample(std::span<const float> logits);

    const SamplerSettings& settings() const { return m_settings; }

private:
    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };
    SamplerSettings m_settings;
    std::mt19937_64 m_rng;
    std::vector<Candidate> m_candidates;  // (vocab)
    std::vector<int32_t> m_recent;         // ring of the last repeatLastN tokens
    size_t m_recentNext = 0;
    size_t m_recentCount = 0;
};

// Index of the largest value; the first one on ties.
int32_t argmax(std::span<const float> values);

}  // namespace spillway
