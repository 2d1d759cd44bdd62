#pragma once
// A reply's parts as the model marks them: its reasoning apart from its answer, and the tool
// calls it makes, with the markup itself left out. The markup is the chat template's:
//  - ThinkTags (Qwen3 and 3.5, DeepSeek-R1, GLM): `<think>` ... `</think>` at the start of the
//    reply, or a generation prompt that opens the thinking itself (ends with `<think>`);
//  - Harmony (gpt-oss): messages `<|channel|>NAME<|message|>` ... `<|end|>`, each after
//    `<|start|>assistant`; the analysis channel is reasoning, final the answer, commentary
//    addressed `to=functions.NAME` a tool call, commentary to no one (a preamble) answer. The
//    turn ends at `<|return|>`, `<|call|>`, or `<|end|>` after a final message (an `<|end|>`
//    after analysis does not end it, as the template's own comment says).
// The answer's tool calls in the other templates' syntaxes are read by a ToolCallScanner
// (tool_calls.h) when the request offered tools.
// Tokens are fed one at a time by their text, control tokens by their vocabulary text ("<|end|>").
// A marker cut across tokens is held back until it is whole or cannot be one.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine/tool_calls.h"

namespace spillway::engine {

// A tool call comes as a ToolName part (the function's name: a new call opens) and ToolCall parts
// (pieces of its arguments' JSON).
enum class ReplyPart : uint8_t { Content, Reasoning, ToolCall, ToolName };
const char* partName(ReplyPart part);  // "content", "reasoning", "tool_call", "tool_name"

enum class ReplyMarkup : uint8_t { Plain, ThinkTags, Harmony };
// From the chat template's text: Harmony where it writes `<|channel|>`, ThinkTags where it
// knows `</think>`, Plain otherwise (and for base models).
ReplyMarkup replyMarkupOf(std::string_view templateSource);

class ReplyParser {
public:
    // Gets each piece of a part's text; false stops the reply.
    using Sink = std::function<bool(ReplyPart part, std::string_view text)>;

    // `prompt`: the text the reply goes on from (its end says where the reply starts: inside a
    // thinking block the template opened, or a Harmony message being continued). `continuing`:
    // the prompt ends in the answer of a reply being continued. `tools`: what the request
    // offered (no syntax: the answer is all Content).
    ReplyParser(ReplyMarkup markup, std::string_view prompt, bool continuing = false, ToolSet tools = {});

    // The next token's text. Returns what the sink returned (true when nothing was given it).
    bool feed(std::string_view text, const Sink& sink);
    // The end of the reply: text held back for a marker that never came is given out.
    bool finish(const Sink& sink);
    // The token fed last ended the assistant's turn (Harmony's end markers).
    bool turnEnded() const { return m_ended; }
    // Whether the next token is the answer's (not the reasoning, not Harmony's markup or other
    // channels): where constrained decoding applies.
    bool inAnswer() const;
    // Whether the next token is a ThinkTags reply's reasoning (a reasoning budget counts it).
    bool inThinkTags() const { return m_markup == ReplyMarkup::ThinkTags && m_thinking; }
    // Whether a `<think>` may still open the reasoning (a ThinkTags reply that has not begun).
    bool mayOpenThinking() const { return m_markup == ReplyMarkup::ThinkTags && m_atStart && !m_thinking; }

    const std::string& content() const { return m_content; }
    const std::string& reasoning() const { return m_reasoning; }
    // Harmony's calls (their arguments as the model wrote them) and then the scanner's.
    std::vector<ToolCall> toolCalls() const;

private:
    bool give(ReplyPart part, std::string_view text, const Sink& sink);
    bool record(ReplyPart part, std::string_view text, const Sink& sink);
    bool finishMarkup(const Sink& sink);
    bool feedThink(const Sink& sink);
    bool feedHarmony(const Sink& sink);
    void openHarmonyMessage(std::string_view header);

    ReplyMarkup m_markup;
    std::string m_pending;  // text not yet given out (a marker may begin in it)
    bool m_ended = false;

    // ThinkTags
    bool m_thinking = false;
    bool m_atStart = true;  // nothing but white space yet: a `<think>` may still open

    // Harmony
    bool m_inHeader = true;     // between `<|start|>` (or the prompt's end) and `<|message|>`
    ReplyPart m_part = ReplyPart::Content;
    bool m_finalChannel = false;
    std::string m_recipient;

    std::string m_content, m_reasoning;
    std::vector<ToolCall> m_toolCalls;  // Harmony's
    ToolCallScanner m_scanner;          // the answer's calls in other syntaxes
    bool m_harmonyNameSent = true;
};

}  // namespace spillway::engine
