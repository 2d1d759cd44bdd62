#include "core/runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway {

namespace {

// Runs tokens[from..] through the session at their positions, in batches; the logits after the
// last. *evaluated follows each batch done; *stopped is set when `stop` is raised between batches.
Result<const float*> feed(LlamaSession& session, std::span<const int32_t> tokens, size_t from,
                          const std::atomic<bool>* stop, bool* stopped, int* evaluated)
{
    Result<const float*> logits = static_cast<const float*>(nullptr);
    for (size_t done = from; done < tokens.size() && !*stopped;) {
        const size_t n = std::min(tokens.size() - done, size_t(session.batch()));
        logits = session.forward(tokens.subspan(done, n), int(done));
        if (!logits) return logits.error();
        done += n;
        *evaluated = int(done);
        if (done < tokens.size() && stop && stop->load(std::memory_order_relaxed)) *stopped = true;
    }
    return logits;
}

}  // namespace

Result<GenerationStats> generate(LlamaSession& session, Sampler& sampler, const GenerationRequest& request)
{
    using Clock = std::chrono::steady_clock;
    const Tokenizer& tokenizer = session.model().tokenizer();
    const int vocab = session.model().config().vocabSize;
    GenerationStats stats;
    stats.tokens = !request.tokens.empty() ? request.tokens : tokenizer.encode(request.prompt, request.addBos);
    if (stats.tokens.empty())
        return makeError(ErrorCode::InvalidArgument, "the prompt is empty and the model has no BOS token");
    stats.promptTokens = int(stats.tokens.size());
    if (stats.promptTokens >= session.contextLength())
        return makeError(ErrorCode::InvalidArgument,
                         "the prompt has " + std::to_string(stats.promptTokens) +
                             " tokens, more than the context length " +
                             std::to_string(session.contextLength()) + " allows");
    for (int32_t t : stats.tokens) {
        if (t < 0 || t >= vocab) return makeError(ErrorCode::Internal, "a prompt token id is out of the vocabulary's range");
        sampler.accept(t);
    }
    stats.tokens.reserve(stats.tokens.size() + size_t(std::max(request.maxNewTokens, 0)));
    stats.cachedTokens = std::clamp(request.cachedTokens, 0, stats.promptTokens - 1);
    stats.evaluated = stats.cachedTokens;

    const auto start = Clock::now();
    auto firstTokenAt = start;
    if (request.stop && request.stop->load(std::memory_order_relaxed)) {
        stats.stopped = true;
        return stats;
    }
    // The prompt goes through the layers in batches (streamed weights come in once per batch);
    // then one token at a time.
    // The stop flag is checked between batches: with offloaded weights one batch can take a
    // while.
    LlamaSession* current = &session;
    // A lost device: every token so far through the fallback session, once.
    auto recover = [&](const Error& why) -> Result<const float*> {
        if (why.code != ErrorCode::DeviceLost || !request.onDeviceLost || !stats.fellBack.empty()) return why;
        LlamaSession* next = request.onDeviceLost(why);
        if (!next) return why;
        stats.fellBack = why.message;
        current = next;
        stats.evaluated = 0;
        return feed(*current, stats.tokens, 0, request.stop, &stats.stopped, &stats.evaluated);
    };
    Result<const float*> logits = static_cast<const float*>(nullptr);
    // A hybrid model keeps its recurrent state where the prompt's last token starts: Regenerate
    // and the next turn (whose prompt repeats this one) go back no further than there.
    current->keepStateAt(stats.promptTokens - 1);
    if (request.maxNewTokens > 0) {
        logits = feed(*current, stats.tokens, size_t(stats.cachedTokens), request.stop, &stats.stopped,
                      &stats.evaluated);
        if (!logits) logits = recover(logits.error());
        if (!logits) return logits.error();
        if (request.firstLogits && *logits) request.firstLogits->assign(*logits, *logits + vocab);
    }
    int32_t token = stats.tokens.back();
    std::vector<float> masked;  // the logits with what the constraint does not allow masked
    // A token is sampled only where it has a position of its own in the context: the cache, and
    // the tokens of the exchange, never hold more than the context's positions.
    for (int pos = stats.promptTokens; request.maxNewTokens > 0 && !stats.stopped && pos < current->contextLength();) {
        const int32_t previous = token;
        token = sampler.sample(std::span<const float>(*logits, size_t(vocab)));
        if (request.constraint && !request.constraint->allows(token)) {
            masked.assign(*logits, *logits + vocab);
            if (!request.constraint->mask(masked)) {  // nothing may come: the text is as whole as it gets
                stats.endOfText = true;
                break;
            }
            token = sampler.sample(masked);
        }
        if (request.constraint) request.constraint->accept(token);
        sampler.accept(token);
        if (stats.generatedTokens == 0) firstTokenAt = Clock::now();
        if (tokenizer.isEndOfGeneration(token)) {
            stats.endOfText = true;
            break;
        }
        std::string text = tokenizer.decodeToken(previous, token);
        if (request.endsTurn && request.endsTurn(text, token)) {
            stats.endOfText = true;
            break;
        }
        stats.tokens.push_back(token);
        ++stats.generatedTokens;
        if (request.onToken && !request.onToken(text, token)) {
            stats.stopped = true;
            break;
        }
        // The new token runs at `pos` (it is in the context) if more are wanted.
        if (stats.generatedTokens >= request.maxNewTokens) break;
        if (request.stop && request.stop->load(std::memory_order_relaxed)) {
            stats.stopped = true;
            break;
        }
        logits = current->forward(token, pos);
        if (logits) stats.evaluated = pos + 1;
        if (!logits) logits = recover(logits.error());
        if (!logits) return logits.error();
        ++pos;
    }
    const auto end = Clock::now();
    if (stats.generatedTokens == 0 && !stats.endOfText) firstTokenAt = end;
    stats.timeToFirstToken = std::chrono::duration<double>(firstTokenAt - start).count();
    stats.promptSeconds = stats.timeToFirstToken;
    stats.decodeSeconds = std::chrono::duration<double>(end - firstTokenAt).count();
    return stats;
}

}  // namespace spillway
