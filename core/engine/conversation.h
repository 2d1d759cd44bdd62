#pragma once
// A conversation on an engine: one session whose KV cache outlives the turns. Each request is
// the whole conversation so far (as front ends hold it); the conversation finds how much of it
// the cache already holds and evaluates only the rest:
//  - a new user message costs its own tokens (and the end of the previous reply);
//  - editing or regenerating an earlier turn keeps the cache up to the first token that differs;
//  - a conversation longer than the context drops its oldest turns (never the system prompt),
//    then enough to leave a quarter of the context free, and evaluates what remains again; the
//    next requests cut at the same turn while that fits, so they reuse the cache.
// The text already in the cache is not tokenized again: a request whose text goes on from it
// appends the tokens of the new text only (Tokenizer::encodeContinuation), so a reply's tokens
// stay the ones the model chose.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/engine/chat_format.h"
#include "core/engine/constraints.h"
#include "core/runtime/generator.h"
#include "core/runtime/sampler.h"

namespace spillway { class LlamaSession; }

namespace spillway::engine {

class Engine;

struct ReplyOptions {
    // At most this many new tokens; 0 or less: until the model ends its turn or the context is
    // full (ReplyStats::end says which), never a silent cut.
    int maxNewTokens = 512;
    SamplerSettings sampling;
    // Each new token's text (possibly part of a UTF-8 character); return false to stop.
    std::function<bool(std::string_view text, int32_t token)> onToken;
    // The reply by parts, as the chat format's markup separates them (ReplyParser): the model's
    // reasoning, its answer and its tool calls (a ToolName part opens each, ToolCall parts hold its
    // arguments), the markup left out; everything is Content for a
    // template without markup and for complete(). Called after onToken with what that token
    // made ready (text held back for a marker comes later). Return false to stop.
    std::function<bool(ReplyPart part, std::string_view text)> onPart;
    const std::atomic<bool>* stop = nullptr;  // polled between batches and tokens
    // Called once with the text given to the model (after any dropped turns), before it runs.
    std::function<void(const std::string& prompt)> onPrompt;
    std::vector<float>* firstLogits = nullptr;  // GenerationRequest::firstLogits
    // The last message is the assistant's reply so far (a stopped or cut one): the model goes on
    // from its end instead of starting a new turn; the new text continues it.
    bool continueLast = false;
    // Tools, thinking and reasoning effort for the template (reply() only); with tools the
    // answer's calls come apart as ToolName and ToolCall parts.
    PromptOptions prompt;
    // Constrained decoding (constraints.h): the answer is a text of this grammar (a thinking
    // model's reasoning before it is free), and the turn ends where the grammar's text is whole.
    GrammarPtr grammar;
    // The most tokens a ThinkTags reply may reason for (0: it answers at once), after which the
    // reasoning is closed for it ("\n</think>\n\n") and the answer follows; -1: no limit.
    // Reasoning in other markups (gpt-oss: its reasoning effort) is not limited.
    int reasoningBudget = -1;
};

struct ReplyStats : GenerationStats {
    // Why the reply ended: the model ended its turn (EOS or an end-of-turn marker), it reached
    // ReplyOptions::maxNewTokens, the context was full, or the caller stopped it.
    enum class End { Turn, Limit, Context, Stopped };
    End end = End::Turn;
    std::string prompt;       // the text given to the model (after any dropped turns)
    // The reply's parts, whole (what onPart gave, and any text held back till the end).
    std::string content, reasoning;
    std::vector<ToolCall> toolCalls;
    int droppedMessages = 0;  // oldest messages left out to fit the context
};

// "turn", "limit", "context", "stopped".
const char* endName(ReplyStats::End end);

class Conversation {
public:
    explicit Conversation(Engine& engine);
    ~Conversation();

    // Replies to `messages` (the last is the user's) in the engine's chat format; a base model
    // continues the last user message.
    Result<ReplyStats> reply(std::span<const Message> messages, const ReplyOptions& options);
    // Continues `text` as it is (no template): spillway-cli generate, completions.
    Result<ReplyStats> complete(const std::string& text, bool addBos, const ReplyOptions& options);

    // The tokens whose keys and values the session holds, in order (prompt and reply so far).
    std::span<const int32_t> cachedTokens() const { return {m_tokens.data(), size_t(m_evaluated)}; }
    // Tokens of the context; 0 before the first request opens the session.
    int contextLength() const;
    // The session of the last request (null before the first): its streamer, its neuron cache.
    const LlamaSession* session() const { return m_session.get(); }
    // Forgets the cache: the next request evaluates everything.
    void reset();
    // Opens the session now (it copies the weights in: EngineOptions::loadProgress reports it)
    // rather than at the first request. Nothing happens when it is open.
    Status open() { return ensureSession(); }

private:
    Status ensureSession();
    // The tokens of `text`: the cached ones and those of the new text where `text` goes on from
    // the cached text, else all of it encoded afresh.
    std::vector<int32_t> tokensOf(const std::string& text, bool addBos) const;
    // `tokens`: tokensOf(text, addBos), made by the caller (reply() has them from its fit check).
    Result<ReplyStats> run(const std::string& text, bool addBos, std::vector<int32_t> tokens, bool chatting,
                           const ReplyOptions& options);

    Engine& m_engine;
    std::unique_ptr<LlamaSession> m_session;
    std::vector<int32_t> m_tokens;  // the last request's prompt and reply tokens
    std::string m_text;             // their text (prompt text, then the reply's token texts)
    bool m_textBos = true;          // m_tokens began with BOS
    int m_evaluated = 0;            // leading m_tokens in the session's KV cache
    int m_droppedTurns = 0;         // oldest turns the last reply() left out (reply's cut)
    std::shared_ptr<const VocabularyBytes> m_vocabularyBytes;  // for constrained replies, made once
};

}  // namespace spillway::engine
