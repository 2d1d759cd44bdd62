#pragma once
// Quality check of a compressed model against its reference: how far the candidate's next-token
// distributions move from the reference's (KL divergence, top-1 agreement) on a built-in prompt
// set, and the perplexity of both on a built-in text. Every figure comes from running the two
// models; nothing is estimated.

#include <functional>
#include <span>
#include <string>

#include "base/result.h"
#include "core/runtime/llama_session.h"
#include "gpu/device.h"

namespace spillway {
class LlamaModel;
}

namespace spillway::compress {

struct QualityOptions {
    int maxPromptTokens = 64;    // each prompt (BOS included) cut to this many tokens; >= 1
    int perplexityTokens = 256;  // tokens of the perplexity text scored (predicted); >= 1
    // Called after every token either model runs, with the fraction of all the work done
    // (0 < fraction <= 1, increasing; 1 after the last token). May be empty. Return false to
    // stop: compareModels then returns ErrorCode::Cancelled.
    std::function<bool(double fraction)> progress;
    // The candidate runs here instead of on `device` (a wrapper that changes some ops, say);
    // null: on `device`.
    gpu::Device* candidateDevice = nullptr;
    // Sessions use the weights in place (Placement::mapInPlace), so a wrapper device sees the
    // models' own weight pointers; needs a device that computes on host memory.
    bool weightsInPlace = false;
    // The candidate computes its FFN through a neuron cache (llama_session.h): the quality of
    // its predicted (approximate) mode against the dense reference. Off (capacity 0) by default.
    NeuronCacheOptions candidateNeuronCache;
};

struct QualityReport {
    double meanKl = 0;          // mean over positions of KL(P_reference || P_candidate), nats
    double maxKl = 0;           // the largest of those, nats
    double top1Agreement = 0;   // fraction of positions whose argmax agrees (first index on ties)
    int positions = 0;          // positions scored for KL / top-1 (every token of every prompt)
    double perplexityReference = 0;  // exp(mean NLL, nats/token) over the perplexity text
    double perplexityCandidate = 0;
    int perplexityTokens = 0;   // tokens whose NLL was scored (the BOS is context, not scored)

    // A JSON object with the fields above, named as here ("meanKl", ...).
    std::string toJson() const;
};

// Runs the built-in prompts (qualityPrompts()) through both models and compares their
// next-token distributions after every prefix of every prompt: a position's distribution is the
// softmax, in double precision, of the logits after that token. Then scores the perplexity of
// both on perplexityText(), cut to options.perplexityTokens scored tokens.
//
// Text is tokenized once, with the reference's tokenizer (BOS first), and the same token ids go
// to both models: the candidate is meant to be a compressed copy of the reference, sharing its
// vocabulary. Their vocabulary sizes must be equal: InvalidArgument naming both paths otherwise.
//
// Each model runs on its own LlamaSession on `device` with the default placement (weights on the
// device), one token at a time, and only one session exists at a time: the reference runs first
// and its logits at the prompt positions are kept in host memory (positions x vocab floats,
// about 400 x vocab x 4 bytes with the defaults), then the candidate runs and is compared.
//
// Errors: InvalidArgument for options out of range or a perplexity text shorter than two tokens;
// ModelFileInvalid (naming the model) when a model gives a non-finite logit; Cancelled when
// options.progress returns false; session and device errors as they come.
Result<QualityReport> compareModels(const LlamaModel& reference, const LlamaModel& candidate,
                                    gpu::Device& device, const QualityOptions& options = {});

// The built-in prompt set: short plain-English prompts of varied kind (story openings, facts, a
// list, a dialogue, instructions), written for this project.
std::span<const char* const> qualityPrompts();

// The built-in perplexity text: one plain-English paragraph of about 1,500 characters, written
// for this project.
const char* perplexityText();

}  // namespace spillway::compress
