#pragma once
// The generation loop: feed the prompt, then sample, token by token, streaming text out.

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spillway {

class LlamaSession;
class Sampler;

struct GenerationStats {
    int promptTokens = 0;          // BOS included
    int cachedTokens = 0;          // of those, already in the session's KV cache (not evaluated again)
    int evaluated = 0;             // leading tokens of `tokens` whose keys and values the session
                                   // holds at the end (the last sampled token is not run)
    int generatedTokens = 0;
    double promptSeconds = 0;      // from start until the first new token's logits
    double decodeSeconds = 0;      // the remaining new tokens
    double timeToFirstToken = 0;   // seconds from start to the first new token
    bool endOfText = false;        // stopped at EOS, or a token that ends the turn (endsTurn)
    bool stopped = false;          // stopped by the caller
    std::string fellBack;          // why generation moved to the fallback session ("" if not)
    std::vector<int32_t> tokens;   // prompt then generated ids

    double decodeTokensPerSecond() const
    {
        return generatedTokens > 1 && decodeSeconds > 0 ? (generatedTokens - 1) / decodeSeconds : 0.0;
    }
};

// What may be generated (constrained decoding: a grammar's tokens). A sampled token it does not
// allow is drawn again from the logits with every token it does not allow masked, which gives
// the masked distribution exactly; the mask is made only when the first draw fails.
class TokenConstraint {
public:
    virtual ~TokenConstraint() = default;
    virtual bool allows(int32_t token) = 0;
    // Sets every token it does not allow to -infinity; false when it allows none.
    virtual bool mask(std::span<float> logits) = 0;
    // The token was chosen (one it allows).
    virtual void accept(int32_t token) = 0;
};

struct GenerationRequest {
    std::string prompt;
    int maxNewTokens = 128;
    bool addBos = true;
    // The prompt as token ids (a conversation's history): used instead of `prompt` when not empty.
    std::vector<int32_t> tokens;
    // How many leading prompt tokens the session's KV cache holds already, from an earlier call
    // on the same session (a conversation's earlier turns): only the rest is evaluated. At most
    // the prompt's length - 1 is used (the last token's logits are needed).
    int cachedTokens = 0;
    // A sampled token (its text, "" for a control token, and its id) that this accepts ends the
    // reply as EOS does (not kept, not shown): the end-of-turn markers of chat templates. Called
    // for every sampled token but EOS, before onToken.
    std::function<bool(std::string_view text, int32_t token)> endsTurn;
    // Where set: the logits the first new token is sampled from (vocabSize floats), copied.
    std::vector<float>* firstLogits = nullptr;
    // Called with each new token's text (possibly a partial UTF-8 sequence); return false to stop.
    std::function<bool(std::string_view text, int32_t token)> onToken;
    const std::atomic<bool>* stop = nullptr;  // polled before each token
    // A device that fails mid-way (ErrorCode::DeviceLost: a lost or failed GPU) is survived when
    // this is set: called once with the error, it returns a session on another device (the CPU)
    // that outlives the generation, or nullptr to give up. The tokens so far run through it again
    // and generation goes on there; the text comes out as it would have (greedy decoding gives
    // the same tokens, up to the devices' rounding).
    std::function<LlamaSession*(const Error& why)> onDeviceLost;
    // Where set, only what it allows is generated (EOS included: it decides when the text may end).
    TokenConstraint* constraint = nullptr;
};

Result<GenerationStats> generate(LlamaSession& session, Sampler& sampler, const GenerationRequest& request);

}  // namespace spillway
