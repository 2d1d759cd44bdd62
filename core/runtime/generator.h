#pragma once
// The generation loop: feed the prompt, then sample, token by token, streaming text out.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spillway {

class LlamaSession;
class Sampler;

struct GenerationStats {
    int promptTokens = 0;          // BOS included
    int generatedTokens = 0;
    double promptSeconds = 0;      // from start until the first new token's logits
    double decodeSeconds = 0;      // the remaining new tokens
    double timeToFirstToken = 0;   // seconds from start to the first new token
    bool endOfText = false;        // stopped at EOS
    bool stopped = false;          // stopped by the caller
    std::string fellBack;          // why generation moved to the fallback session ("" if not)
    std::vector<int32_t> tokens;   // prompt then generated ids

    double decodeTokensPerSecond() const
    {
        return generatedTokens > 1 && decodeSeconds > 0 ? (generatedTokens - 1) / decodeSeconds : 0.0;
    }
};

struct GenerationRequest {
    std::string prompt;
    int maxNewTokens = 128;
    bool addBos = true;
    // Called with each new token's text (possibly a partial UTF-8 sequence); return false to stop.
    std::function<bool(std::string_view text, int32_t token)> onToken;
    const std::atomic<bool>* stop = nullptr;  // polled before each token
    // A device that fails mid-way (ErrorCode::DeviceLost: a lost or failed GPU) is survived when
    // this is set: called once with the error, it returns a session on another device (the CPU)
    // that outlives the generation, or nullptr to give up. The tokens so far run through it again
    // and generation goes on there; the text comes out as it would have (greedy decoding gives
    // the same tokens, up to the devices' rounding).
    std::function<LlamaSession*(const Error& why)> onDeviceLost;
};

Result<GenerationStats> generate(LlamaSession& session, Sampler& sampler, const GenerationRequest& request);

}  // namespace spillway
