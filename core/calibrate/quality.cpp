// Quality check: the reference runs the prompts and the perplexity text token by token and its
// prompt logits are kept; then the candidate runs the same tokens and each of its distributions
// is compared with the kept one. One session at a time, so the two models never need the device
// together.

#include "core/calibrate/quality.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::compress {

namespace {

// Written for this project: one of each kind a model meets (story, facts, a list, dialogue,
// instructions), so the comparison is not tuned to one style of text.
constexpr const char* kPrompts[] = {
    "Once upon a time, in a small house at the edge of a forest, there lived a girl who loved to "
    "draw pictures of animals.",
    "The heart is a muscle that pumps blood through the body. It beats about seventy times a "
    "minute when we rest.",
    "Things to pack for a day at the beach: a towel, a hat, two bottles of water, a book, some "
    "fruit and a ball.",
    "\"Where are you going?\" asked Sam. \"To the shop,\" said his sister. \"Do you want to "
    "come with me?\" \"Yes, please!\"",
    "To plant a seed, dig a small hole, drop the seed in, cover it with soil, and give it a "
    "little water every day.",
    "A week has seven days, a year has twelve months, and most years have three hundred and "
    "sixty-five days.",
};

// Written for this project: simple narrative English, about 1,500 characters.
constexpr const char* kPerplexityText =
    "On Saturday morning, Anna and her father walked to the market at the end of their street. "
    "The air was cool, and the sky was a pale, clean blue. At the first stall, an old woman sold "
    "apples, pears and plums from wooden boxes. Anna picked three red apples and put them "
    "carefully in her bag. Her father bought bread, a jar of honey and a bunch of carrots with "
    "long green tops. Near the fountain, a man was playing a slow song on a violin, and a small "
    "dog sat beside him, watching the people go by. Anna gave the man a coin, and he smiled and "
    "nodded without stopping the music. On the way home they stopped at the park. Children were "
    "running on the grass, and two boys were trying to fly a kite that would not stay in the "
    "air. Anna's father showed them how to hold the string and run against the wind. After a "
    "few tries the kite rose high above the trees, and the boys shouted with joy. When they got "
    "home, Anna helped her father wash the carrots and cut the bread. They ate lunch at the "
    "kitchen table by the open window, and they could hear birds singing in the garden. In the "
    "afternoon it began to rain, so Anna sat on the sofa with a book about the sea. She read "
    "about whales that sing to each other across the deep water, and about small fish that live "
    "among bright coral. When the rain stopped, she went outside to look for snails on the wet "
    "stones by the gate. Before dinner she drew a picture of a whale and a kite and gave it to "
    "her father. He put it on the door of the fridge, where everyone could see it.";

// The token ids both models run: every prompt, and the perplexity text.
struct QualityTokens {
    std::vector<std::vector<int32_t>> prompts;  // each cut to maxPromptTokens, none empty
    std::vector<int32_t> text;  // scored() + 1 ids, BOS first: text[i] predicts text[i + 1]
    int promptPositions = 0;    // sum of the prompts' lengths
    int scored() const { return int(text.size()) - 1; }
};

// Counts the tokens run by both models and reports the fraction done; false once cancelled.
class ProgressCounter {
public:
    ProgressCounter(const std::function<bool(double)>& callback, int64_t total)
        : m_callback(callback), m_total(total) {}
    bool step()
    {
        ++m_done;
        return !m_callback || m_callback(double(m_done) / double(m_total));
    }

private:
    const std::function<bool(double)>& m_callback;
    int64_t m_total;
    int64_t m_done = 0;
};

// out[i] = log softmax(logits)[i], in double. False if a logit is not finite.
bool logSoftmax(const float* logits, std::vector<double>& out)
{
    double maxLogit = -INFINITY;
    for (size_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(logits[i])) return false;
        maxLogit = std::max(maxLogit, double(logits[i]));
    }
    double sum = 0;
    for (size_t i = 0; i < out.size(); ++i) sum += std::exp(double(logits[i]) - maxLogit);
    const double logZ = maxLogit + std::log(sum);
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(logits[i]) - logZ;
    return true;
}

size_t argmax(const float* logits, size_t n)
{
    return size_t(std::max_element(logits, logits + n) - logits);
}

Error nonFinite(const LlamaModel& model, const char* where)
{
    return makeError(ErrorCode::ModelFileInvalid, "quality check: model " + model.path() +
                                                      " gave a non-finite logit on " + where);
}

Error cancelled() { return makeError(ErrorCode::Cancelled, "quality check cancelled"); }

// Runs `model` over every prompt and the text on one session, in batches that keep every
// token's logits (each prompt restarts at position 0, overwriting the cache it reads; the
// logits are those of one token at a time, bit for bit). atPrompt(index, logits) is called for
// the logits after every prompt token, index counting prompt positions across prompts; *nll
// gets the summed negative log-likelihood of the text's scored tokens, nats.
template <class AtPrompt>
Status runModel(const LlamaModel& model, gpu::Device& device, const QualityTokens& tokens,
                bool inPlace, const NeuronCacheOptions& cache, ProgressCounter& progress, AtPrompt&& atPrompt,
                double* nll)
{
    int longest = tokens.scored();
    for (const auto& p : tokens.prompts) longest = std::max(longest, int(p.size()));
    SessionOptions options;
    options.contextLength = longest + 1;
    options.batch = std::clamp(longest, 1, 32);
    options.everyLogits = true;  // every prefix's logits are needed
    options.neuronCache = cache;
    if (inPlace) {
        plan::Placement placement = plan::uniformPlacement(model, plan::Tier::Device);
        placement.mapInPlace = true;
        placement.prefetchDepth = 0;
        options.placement = placement;
    }
    auto session = LlamaSession::create(model, device, options);
    if (!session) return session.error();

    const size_t vocab = size_t(model.config().vocabSize);
    const size_t batch = size_t((*session)->batch());
    // Runs tokens[0, count) from position 0 a batch at a time; at(pos, logits) for each.
    auto run = [&](const std::vector<int32_t>& t, size_t count, auto&& at) -> Status {
        for (size_t pos = 0; pos < count;) {
            const size_t n = std::min(batch, count - pos);
            auto logits = (*session)->forward(std::span<const int32_t>(t.data() + pos, n), int(pos));
            if (!logits) return logits.error();
            for (size_t i = 0; i < n; ++i) {
                SPILLWAY_TRY(at(pos + i, *logits + i * vocab));
                if (!progress.step()) return cancelled();
            }
            pos += n;
        }
        return {};
    };
    int index = 0;
    for (const auto& prompt : tokens.prompts)
        SPILLWAY_TRY(run(prompt, prompt.size(), [&](size_t, const float* logits) { return atPrompt(index++, logits); }));

    std::vector<double> logProbs(vocab);
    double sum = 0;
    SPILLWAY_TRY(run(tokens.text, size_t(tokens.scored()), [&](size_t pos, const float* logits) -> Status {
        if (!logSoftmax(logits, logProbs)) return nonFinite(model, "the perplexity text");
        sum -= logProbs[size_t(tokens.text[pos + 1])];
        return {};
    }));
    *nll = sum;
    return {};
}

}  // namespace

std::span<const char* const> qualityPrompts() { return kPrompts; }

const char* perplexityText() { return kPerplexityText; }

std::string QualityReport::toJson() const
{
    nlohmann::ordered_json j = {
        {"meanKl", meanKl},
        {"maxKl", maxKl},
        {"top1Agreement", top1Agreement},
        {"positions", positions},
        {"perplexityReference", perplexityReference},
        {"perplexityCandidate", perplexityCandidate},
        {"perplexityTokens", perplexityTokens},
    };
    return j.dump();
}

Result<QualityReport> compareModels(const LlamaModel& reference, const LlamaModel& candidate,
                                    gpu::Device& device, const QualityOptions& options)
{
    const int vocab = reference.config().vocabSize;
    if (candidate.config().vocabSize != vocab)
        return makeError(ErrorCode::InvalidArgument,
                         "quality check: reference " + reference.path() + " has " +
                             std::to_string(vocab) + " tokens but candidate " + candidate.path() +
                             " has " + std::to_string(candidate.config().vocabSize) +
                             "; the two must share a vocabulary");
    if (options.maxPromptTokens < 1 || options.perplexityTokens < 1)
        return makeError(ErrorCode::InvalidArgument,
                         "quality check: maxPromptTokens (" +
                             std::to_string(options.maxPromptTokens) + ") and perplexityTokens (" +
                             std::to_string(options.perplexityTokens) + ") must be at least 1");

    QualityTokens tokens;
    const Tokenizer& tokenizer = reference.tokenizer();
    for (const char* prompt : kPrompts) {
        std::vector<int32_t> t = tokenizer.encode(prompt, true);
        t.resize(std::min(t.size(), size_t(options.maxPromptTokens)));
        if (t.empty()) continue;
        tokens.promptPositions += int(t.size());
        tokens.prompts.push_back(std::move(t));
    }
    tokens.text = tokenizer.encode(kPerplexityText, true);
    if (tokens.text.size() < 2)
        return makeError(ErrorCode::InvalidArgument,
                         "quality check: the perplexity text makes under two tokens with the "
                         "tokenizer of " + reference.path());
    tokens.text.resize(std::min(tokens.text.size(), size_t(options.perplexityTokens) + 1));

    ProgressCounter progress(options.progress,
                             2 * (int64_t(tokens.promptPositions) + tokens.scored()));
    const size_t n = size_t(vocab);

    // The reference's logits at every prompt position: (promptPositions, vocab).
    std::vector<float> referenceLogits(size_t(tokens.promptPositions) * n);
    auto keep = [&](int index, const float* logits) -> Status {
        std::copy(logits, logits + n, referenceLogits.data() + size_t(index) * n);
        return {};
    };
    double referenceNll = 0;
    SPILLWAY_TRY(runModel(reference, device, tokens, options.weightsInPlace, {}, progress, keep, &referenceNll));

    QualityReport report;
    std::vector<double> p(n), q(n);  // log-probabilities: reference, candidate
    double klSum = 0;
    int agree = 0;
    auto compare = [&](int index, const float* logits) -> Status {
        const float* kept = referenceLogits.data() + size_t(index) * n;
        if (!logSoftmax(kept, p)) return nonFinite(reference, "a prompt");
        if (!logSoftmax(logits, q)) return nonFinite(candidate, "a prompt");
        double kl = 0;
        for (size_t i = 0; i < n; ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
        kl = std::max(kl, 0.0);  // >= 0 in exact arithmetic; rounding can dip below
        klSum += kl;
        report.maxKl = std::max(report.maxKl, kl);
        agree += argmax(kept, n) == argmax(logits, n);
        return {};
    };
    double candidateNll = 0;
    gpu::Device& candidateDevice = options.candidateDevice ? *options.candidateDevice : device;
    SPILLWAY_TRY(runModel(candidate, candidateDevice, tokens, options.weightsInPlace, options.candidateNeuronCache,
                          progress, compare,
                          &candidateNll));

    report.positions = tokens.promptPositions;
    report.meanKl = report.positions > 0 ? klSum / report.positions : 0.0;
    report.top1Agreement = report.positions > 0 ? double(agree) / report.positions : 0.0;
    report.perplexityTokens = tokens.scored();
    report.perplexityReference = std::exp(referenceNll / report.perplexityTokens);
    report.perplexityCandidate = std::exp(candidateNll / report.perplexityTokens);
    return report;
}

}  // namespace spillway::compress
