#include "core/engine/reply_parser.h"

#include <algorithm>
#include <array>

namespace spillway::engine {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
// What ends a Harmony message's body (a model that opens the next message without closing this
// one included).
constexpr std::array<std::string_view, 4> kBodyEnds = {kEnd, kReturn, kCall, kStart};

bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t trailingSpace(std::string_view s)
{
    size_t n = 0;
    while (n < s.size() && isSpace(s[s.size() - 1 - n])) ++n;
    return n;
}

// The word after `key` in a Harmony header ("analysis" after "<|channel|>", the recipient after
// "to="), "" without one.
std::string headerWord(std::string_view header, std::string_view key)
{
    const size_t at = header.find(key);
    if (at == std::string_view::npos) return {};
    size_t begin = at + key.size();
    while (begin < header.size() && isSpace(header[begin])) ++begin;
    size_t end = begin;
    while (end < header.size() && !isSpace(header[end]) && header[end] != '<') ++end;
    return std::string(header.substr(begin, end - begin));
}

}  // namespace

const char* partName(ReplyPart part)
{
    switch (part) {
    case ReplyPart::Content: return "content";
    case ReplyPart::Reasoning: return "reasoning";
    case ReplyPart::ToolCall: return "tool_call";
    case ReplyPart::ToolName: return "tool_name";
    }
    return "content";
}

ReplyMarkup replyMarkupOf(std::string_view source)
{
    if (source.find(kChannel) != std::string_view::npos && source.find(kMessage) != std::string_view::npos)
        return ReplyMarkup::Harmony;
    if (source.find(kThinkClose) != std::string_view::npos) return ReplyMarkup::ThinkTags;
    return ReplyMarkup::Plain;
}

ReplyParser::ReplyParser(ReplyMarkup markup, std::string_view prompt, bool continuing, ToolSet tools)
    : m_markup(markup), m_scanner(std::move(tools))
{
    if (markup == ReplyMarkup::ThinkTags && continuing) {
        m_atStart = false;
    } else if (markup == ReplyMarkup::ThinkTags) {
        const std::string_view trimmed = prompt.substr(0, prompt.size() - trailingSpace(prompt));
        if (trimmed.ends_with(kThinkOpen)) {  // the template opened the thinking
            m_thinking = true;
            m_atStart = false;
        }
    } else if (markup == ReplyMarkup::Harmony) {
        // The prompt ends in the header of the assistant's message ("<|start|>assistant"), or in
        // a message's body being continued.
        const size_t start = prompt.rfind(kStart);
        const size_t message = prompt.rfind(kMessage);
        if (message != std::string_view::npos && (start == std::string_view::npos || message > start) &&
            prompt.find(kEnd, message) == std::string_view::npos) {
            openHarmonyMessage(prompt.substr(start == std::string_view::npos ? 0 : start,
                                             message - (start == std::string_view::npos ? 0 : start)));
            m_inHeader = false;
        }
    }
}

// The answer goes through the tool-call scanner; the rest straight out.
bool ReplyParser::give(ReplyPart part, std::string_view text, const Sink& sink)
{
    if (part == ReplyPart::ToolCall && !m_harmonyNameSent) {  // even a call without arguments has its name
        m_harmonyNameSent = true;
        if (!record(ReplyPart::ToolName, m_toolCalls.back().name, sink)) return false;
    }
    if (text.empty()) return true;
    if (part == ReplyPart::Content)
        return m_scanner.feed(text, [&](ReplyPart p, std::string_view t) { return record(p, t, sink); });
    if (part == ReplyPart::ToolCall) m_toolCalls.back().arguments += text;
    return record(part, text, sink);
}

bool ReplyParser::record(ReplyPart part, std::string_view text, const Sink& sink)
{
    if (text.empty()) return true;
    if (part == ReplyPart::Content) m_content += text;
    if (part == ReplyPart::Reasoning) m_reasoning += text;
    return !sink || sink(part, text);
}

bool ReplyParser::inAnswer() const
{
    switch (m_markup) {
    case ReplyMarkup::Plain: return true;
    case ReplyMarkup::ThinkTags: return !m_thinking;
    case ReplyMarkup::Harmony: return !m_inHeader && m_part == ReplyPart::Content && m_finalChannel;
    }
    return true;
}

std::vector<ToolCall> ReplyParser::toolCalls() const
{
    std::vector<ToolCall> calls = m_toolCalls;
    calls.insert(calls.end(), m_scanner.calls().begin(), m_scanner.calls().end());
    return calls;
}

bool ReplyParser::feed(std::string_view text, const Sink& sink)
{
    if (m_ended) return true;
    m_pending += text;
    switch (m_markup) {
    case ReplyMarkup::Plain: {
        const std::string all = std::move(m_pending);
        m_pending.clear();
        return give(ReplyPart::Content, all, sink);
    }
    case ReplyMarkup::ThinkTags: return feedThink(sink);
    case ReplyMarkup::Harmony: return feedHarmony(sink);
    }
    return true;
}

bool ReplyParser::feedThink(const Sink& sink)
{
    for (;;) {
        if (!m_thinking) {
            if (m_atStart) {  // white space, then perhaps `<think>`
                const size_t first = m_pending.find_first_not_of(" \t\r\n");
                if (first == std::string::npos) return true;
                const std::string_view rest = std::string_view(m_pending).substr(first);
                if (rest.starts_with(kThinkOpen)) {
                    m_pending.erase(0, first + kThinkOpen.size());
                    m_thinking = true;
                    m_atStart = false;
                    continue;
                }
                if (kThinkOpen.starts_with(rest)) return true;  // `<thi` so far
                m_atStart = false;
                m_pending.erase(0, first);
            }
            const std::string all = std::move(m_pending);
            m_pending.clear();
            return give(ReplyPart::Content, all, sink);
        }
        if (m_reasoning.empty()) m_pending.erase(0, std::min(m_pending.size(), m_pending.find_first_not_of(" \t\r\n")));
        const size_t close = m_pending.find(kThinkClose);
        if (close != std::string::npos) {
            std::string_view before = std::string_view(m_pending).substr(0, close);
            before.remove_suffix(trailingSpace(before));
            const std::string thought(before);
            m_pending.erase(0, close + kThinkClose.size());
            m_thinking = false;
            m_atStart = true;  // the answer's leading white space goes too
            if (!give(ReplyPart::Reasoning, thought, sink)) return false;
            continue;
        }
        // Held back: a `</thi` at the end, and white space that may precede the `</think>`.
        size_t keep = partialMarker(m_pending, std::array{kThinkClose});
        keep += trailingSpace(std::string_view(m_pending).substr(0, m_pending.size() - keep));
        const std::string ready = m_pending.substr(0, m_pending.size() - keep);
        m_pending.erase(0, ready.size());
        return give(ReplyPart::Reasoning, ready, sink);
    }
}

void ReplyParser::openHarmonyMessage(std::string_view header)
{
    const std::string channel = headerWord(header, kChannel);
    m_recipient = headerWord(header, "to=");
    m_finalChannel = channel == "final" || channel.empty();
    if (channel == "analysis") {
        m_part = ReplyPart::Reasoning;
    } else if (!m_recipient.empty() && m_recipient != "user" && m_recipient != "all") {
        m_part = ReplyPart::ToolCall;
        std::string name = m_recipient;
        if (name.starts_with("functions.")) name.erase(0, 10);
        m_toolCalls.push_back({{}, std::move(name), {}});
        m_harmonyNameSent = false;  // sent with the first piece of its arguments
    } else {
        m_part = ReplyPart::Content;  // final, and commentary the user is meant to see
    }
}

bool ReplyParser::feedHarmony(const Sink& sink)
{
    for (;;) {
        if (m_inHeader) {
            const size_t message = m_pending.find(kMessage);
            if (message == std::string::npos) {
                // A turn that ends before a message opens; a "header" that is plain text.
                for (std::string_view end : {kReturn, kCall})
                    if (m_pending.find(end) != std::string::npos) {
                        m_ended = true;
                        m_pending.clear();
                        return true;
                    }
                if (m_pending.size() > 256 && m_pending.find("<|") == std::string::npos) {
                    m_inHeader = false;
                    m_part = ReplyPart::Content;
                    m_finalChannel = true;
                    continue;
                }
                return true;
            }
            openHarmonyMessage(std::string_view(m_pending).substr(0, message));
            m_pending.erase(0, message + kMessage.size());
            m_inHeader = false;
            continue;
        }
        size_t at = std::string::npos;
        std::string_view marker;
        for (std::string_view end : kBodyEnds)
            if (const size_t p = m_pending.find(end); p < at) {
                at = p;
                marker = end;
            }
        if (at == std::string::npos) {
            const size_t keep = partialMarker(m_pending, kBodyEnds);
            const std::string ready = m_pending.substr(0, m_pending.size() - keep);
            m_pending.erase(0, ready.size());
            return give(m_part, ready, sink);
        }
        const std::string body = m_pending.substr(0, at);
        m_pending.erase(0, at + (marker == kStart ? 0 : marker.size()));
        const bool ok = give(m_part, body, sink);
        if (marker == kReturn || marker == kCall || (marker == kEnd && m_finalChannel)) {
            m_ended = true;
            m_pending.clear();
            return ok;
        }
        m_inHeader = true;
        if (!ok) return false;
    }
}

bool ReplyParser::finish(const Sink& sink)
{
    if (!finishMarkup(sink)) return false;
    return m_scanner.finish([&](ReplyPart p, std::string_view t) { return record(p, t, sink); });
}

bool ReplyParser::finishMarkup(const Sink& sink)
{
    std::string rest = std::move(m_pending);
    m_pending.clear();
    if (m_ended || rest.empty()) return true;
    switch (m_markup) {
    case ReplyMarkup::Plain: return give(ReplyPart::Content, rest, sink);
    case ReplyMarkup::ThinkTags:
        if (m_thinking) {
            rest.erase(rest.size() - trailingSpace(rest));
            return give(ReplyPart::Reasoning, rest, sink);
        }
        if (m_atStart && rest.find_first_not_of(" \t\r\n") == std::string::npos) return true;
        return give(ReplyPart::Content, rest, sink);
    case ReplyMarkup::Harmony:
        if (m_inHeader) return rest.find("<|") == std::string::npos ? give(ReplyPart::Content, rest, sink) : true;
        return give(m_part, rest, sink);
    }
    return true;
}

}  // namespace spillway::engine
