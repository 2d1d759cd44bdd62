#include "core/engine/conversation.h"

#include <algorithm>

#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::engine {

namespace {

// Room a reply needs besides its prompt before older turns are dropped: what was asked for (a
// reply without a limit: as much as may be asked), up to a quarter of the context (a reply that
// runs into the end stops there).
int replyRoom(int maxNewTokens, int context)
{
    const int quarter = std::max(1, context / 4);
    return maxNewTokens > 0 ? std::clamp(maxNewTokens, 1, quarter) : quarter;
}

}  // namespace

const char* endName(ReplyStats::End end)
{
    switch (end) {
    case ReplyStats::End::Turn: return "turn";
    case ReplyStats::End::Limit: return "limit";
    case ReplyStats::End::Context: return "context";
    case ReplyStats::End::Stopped: return "stopped";
    }
    return "turn";
}

Conversation::Conversation(Engine& engine) : m_engine(engine) {}
Conversation::~Conversation() = default;

int Conversation::contextLength() const { return m_session ? m_session->contextLength() : 0; }

void Conversation::reset()
{
    m_droppedTurns = 0;
    m_tokens.clear();
    m_text.clear();
    m_evaluated = 0;
}

Status Conversation::ensureSession()
{
    if (m_session) return {};
    auto session = m_engine.openSession();
    if (!session) return session.error();
    m_session = std::move(*session);
    reset();
    return {};
}

std::vector<int32_t> Conversation::tokensOf(const std::string& text, bool addBos) const
{
    const Tokenizer& tokenizer = m_engine.model().tokenizer();
    if (!m_tokens.empty() && addBos == m_textBos && text.size() >= m_text.size() && text.starts_with(m_text)) {
        std::vector<int32_t> tokens = m_tokens;
        const std::vector<int32_t> more = tokenizer.encodeContinuation(std::string_view(text).substr(m_text.size()));
        tokens.insert(tokens.end(), more.begin(), more.end());
        return tokens;
    }
    return tokenizer.encode(text, addBos);
}

Result<ReplyStats> Conversation::reply(std::span<const Message> all, const ReplyOptions& options)
{
    if (auto s = ensureSession(); !s) return s.error();
    const ChatFormat& format = m_engine.chat();
    // Continuing: the reply so far follows the prompt rendered for the messages before it.
    std::string partial;
    std::span<const Message> messages = all;
    if (options.continueLast && !all.empty() && all.back().role == "assistant") {
        partial = all.back().content;
        messages = all.first(all.size() - 1);
        // A Harmony reply goes on inside its final message.
        if (format.markup() == ReplyMarkup::Harmony) partial = "<|channel|>final<|message|>" + partial;
    }
    auto render = [&](std::span<const Message> kept) -> Result<RenderedPrompt> {
        auto prompt = format.render(kept, options.prompt);
        if (prompt) prompt->text += partial;
        return prompt;
    };
    if (!format.chatting()) {  // a base model: the last user message, continued
        auto prompt = render(messages);
        if (!prompt) return prompt.error();
        return run(prompt->text, prompt->addBos, tokensOf(prompt->text, prompt->addBos), false, options);
    }
    const int context = m_session->contextLength();
    const int room = replyRoom(options.maxNewTokens, context);

    // When the conversation does not fit, its oldest turns go (never the system prompt, never the
    // last message): as many as last time if that is enough now, else more, until a quarter of
    // the context is free besides. Each request holds the whole conversation, so keeping the cut
    // where it was lets the next turns reuse the cache; cutting one more turn per request would
    // evaluate the whole history again each time (llama.cpp's context shift discards half).
    const size_t first = !messages.empty() && messages.front().role == "system" ? 1 : 0;
    struct Cut {
        std::vector<Message> kept;
        int removed = 0;    // messages left out
        bool last = false;  // nothing more can go
    };
    auto cut = [&](int oldest) {
        Cut c{std::vector<Message>(messages.begin(), messages.end())};
        for (int k = 0; k < oldest && c.kept.size() - first > 1; ++k, ++c.removed)
            c.kept.erase(c.kept.begin() + ptrdiff_t(first));
        while (c.removed > 0 && c.kept.size() - first > 1 && (c.kept[first].role == "assistant" || c.kept[first].role == "tool")) {
            c.kept.erase(c.kept.begin() + ptrdiff_t(first));  // a reply (or a tool's result) does not lead
            ++c.removed;
        }
        c.last = c.kept.size() - first <= 1;
        return c;
    };
    // Each candidate is tokenized once: the tokens that decide whether it fits are the ones run.
    auto use = [&](const RenderedPrompt& prompt, std::vector<int32_t> tokens, int oldest,
                   int removed) -> Result<ReplyStats> {
        m_droppedTurns = oldest;
        auto stats = run(prompt.text, prompt.addBos, std::move(tokens), true, options);
        if (stats) stats->droppedMessages = removed;
        return stats;
    };
    std::vector<int> tries{0};
    if (m_droppedTurns > 0) tries.push_back(m_droppedTurns);
    for (int oldest : tries) {
        const Cut c = cut(oldest);
        auto prompt = render(c.kept);
        if (!prompt) return prompt.error();
        std::vector<int32_t> tokens = tokensOf(prompt->text, prompt->addBos);
        if (int(tokens.size()) + room <= context) return use(*prompt, std::move(tokens), oldest, c.removed);
    }
    for (int oldest = m_droppedTurns + 1;; ++oldest) {
        const Cut c = cut(oldest);
        auto prompt = render(c.kept);
        if (!prompt) return prompt.error();
        std::vector<int32_t> ids = tokensOf(prompt->text, prompt->addBos);
        const int tokens = int(ids.size());
        if (tokens + room + context / 4 <= context || (c.last && tokens + room <= context))
            return use(*prompt, std::move(ids), oldest, c.removed);
        if (c.last)
            return makeError(ErrorCode::InvalidArgument,
                             "the message has " + std::to_string(tokens) + " tokens with the system prompt; the " +
                                 std::to_string(context) + "-token context leaves room for " +
                                 std::to_string(std::max(0, context - room)));
    }
}

Result<ReplyStats> Conversation::complete(const std::string& text, bool addBos, const ReplyOptions& options)
{
    if (auto s = ensureSession(); !s) return s.error();
    return run(text, addBos, tokensOf(text, addBos), false, options);
}

Result<ReplyStats> Conversation::run(const std::string& text, bool addBos, std::vector<int32_t> tokens, bool chatting,
                                     const ReplyOptions& options)
{
    GenerationRequest request;
    request.tokens = std::move(tokens);
    if (request.tokens.empty())
        return makeError(ErrorCode::InvalidArgument, "the prompt is empty and the model has no BOS token");
    // The cache holds the tokens up to the first that differs.
    size_t common = 0;
    while (common < size_t(m_evaluated) && common < request.tokens.size() && m_tokens[common] == request.tokens[common])
        ++common;
    request.cachedTokens = int(common);
    // No limit: the generator stops when the context is full.
    request.maxNewTokens = options.maxNewTokens > 0 ? options.maxNewTokens : m_session->contextLength();
    request.stop = options.stop;
    request.firstLogits = options.firstLogits;
    // The reply's parts: each token's text through the parser; what it makes ready goes out after
    // the token's own text.
    const ChatFormat& format = m_engine.chat();
    const ReplyMarkup markup = chatting ? format.markup() : ReplyMarkup::Plain;
    ReplyParser parser(markup, text, options.continueLast, chatting ? format.tools(options.prompt.tools) : ToolSet{});
    std::vector<std::pair<ReplyPart, std::string>> ready;
    const ReplyParser::Sink collect = [&](ReplyPart part, std::string_view piece) {
        ready.emplace_back(part, std::string(piece));
        return true;
    };
    auto deliver = [&] {
        bool more = true;
        for (const auto& [part, piece] : ready)
            if (more && options.onPart) more = options.onPart(part, piece);
        ready.clear();
        return more;
    };
    const Vocabulary& vocab = m_engine.model().tokenizer().vocabulary();
    const ToolSyntax toolSyntax = chatting ? format.tools(options.prompt.tools).syntax : ToolSyntax::None;
    request.endsTurn = [&](std::string_view t, int32_t token) {
        // A control token's text is its markup ("<|end|>", "<|channel|>", "[TOOL_CALLS]").
        std::string_view marked = t;
        if (t.empty() && token >= 0 && size_t(token) < vocab.tokens.size() &&
            vocab.types[size_t(token)] == TokenType::Control)
            marked = vocab.tokens[size_t(token)];
        if (chatting && format.endsTurn(marked)) return true;
        const bool markupToken = markup == ReplyMarkup::Harmony || marked == "<think>" || marked == "</think>" ||
                                 (t.empty() && isToolMarker(toolSyntax, marked));
        parser.feed(markupToken ? marked : t, collect);
        return parser.turnEnded();
    };
    request.onToken = [&](std::string_view t, int32_t token) {
        if (options.onToken && !options.onToken(t, token)) return false;
        return deliver();
    };
    std::unique_ptr<LlamaSession> fallback;
    request.onDeviceLost = [&](const Error& why) -> LlamaSession* {
        auto cpu = m_engine.continueOnCpu(*m_session, why);
        if (!cpu) return nullptr;
        fallback = std::move(*cpu);
        return fallback.get();
    };
    std::unique_ptr<TokenConstraint> constraint;
    if (options.grammar) {
        if (!m_vocabularyBytes)
            m_vocabularyBytes = std::make_shared<const VocabularyBytes>(vocabularyBytes(m_engine.model().tokenizer(), format));
        constraint = answerConstraint(options.grammar, m_vocabularyBytes, parser);
    }
    if (options.reasoningBudget >= 0 && markup == ReplyMarkup::ThinkTags)
        constraint = reasoningBudget(options.reasoningBudget,
                                     m_engine.model().tokenizer().encodeContinuation("\n</think>\n\n"),
                                     std::move(constraint), parser);
    request.constraint = constraint.get();
    if (options.onPrompt) options.onPrompt(text);
    Sampler sampler(m_engine.model().config().vocabSize, options.sampling);
    auto stats = generate(*m_session, sampler, request);
    if (fallback) m_session = std::move(fallback);  // the CPU's session goes on from here
    if (stats && !stats->stopped) {
        parser.finish(collect);
        deliver();
    }
    if (!stats) {
        reset();  // what the cache holds is not known
        return stats.error();
    }
    // What the cache holds now, and its text: the prompt and the reply's tokens.
    const Tokenizer& tokenizer = m_engine.model().tokenizer();
    m_tokens = stats->tokens;
    m_textBos = addBos;
    m_text = text;
    for (size_t i = size_t(stats->promptTokens); i < m_tokens.size(); ++i)
        m_text += tokenizer.decodeToken(m_tokens[i - 1], m_tokens[i]);
    m_evaluated = stats->evaluated;
    ReplyStats out;
    static_cast<GenerationStats&>(out) = std::move(*stats);
    out.prompt = text;
    out.content = parser.content();
    out.reasoning = parser.reasoning();
    out.toolCalls = parser.toolCalls();
    out.end = out.endOfText  ? ReplyStats::End::Turn
              : out.stopped  ? ReplyStats::End::Stopped
              : options.maxNewTokens > 0 && out.generatedTokens >= options.maxNewTokens ? ReplyStats::End::Limit
                             : ReplyStats::End::Context;
    return out;
}

}  // namespace spillway::engine
