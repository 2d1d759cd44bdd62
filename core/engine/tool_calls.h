#pragma once
// Tool calls as the model writes them, one syntax per template family, found from the template's
// text (toolSyntaxOf) and read from the reply's answer as it streams (ToolCallScanner):
//  - Tag: `<tool_call>` ... `</tool_call>`, its body JSON {"name", "arguments"} (Hermes, Qwen2.5,
//    Qwen3, and the generic prompt Spillway writes for a template that knows no tools), XML
//    `<function=NAME><parameter=KEY>VALUE</parameter></function>` (Qwen3.5, Qwen3-Coder) or
//    `NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>` (GLM-4.5 and later);
//  - Llama3Json: a reply that is one JSON object {"name", "parameters"} (Llama 3.1 to 3.3),
//    `<|python_tag|>` before it or not, several joined by `;`;
//  - Mistral: `[TOOL_CALLS]` then a JSON list of {"name", "arguments"} (Nemo, v0.3) or
//    `NAME[ARGS]{...}` for each call (Small 3.2, Devstral, Ministral 3);
//  - DeepSeek: `<｜tool▁calls▁begin｜>` ... `<｜tool▁calls▁end｜>`, each call
//    `<｜tool▁call▁begin｜>[function<｜tool▁sep｜>]NAME...<｜tool▁call▁end｜>` (R1, V3, V3.1 and later);
//  - Harmony (gpt-oss) calls are messages of their own: ReplyParser reads those.
// A call that does not parse is given back as the text it was, never dropped.

#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::engine {

enum class ReplyPart : uint8_t;

enum class ToolSyntax : uint8_t { None, Tag, Llama3Json, Mistral, DeepSeek, Harmony };
const char* toolSyntaxName(ToolSyntax syntax);  // "none", "tag", "llama3-json", "mistral", "deepseek", "harmony"

// The syntax a chat template asks its model to call tools in; Tag (with Spillway's own
// instructions, toolInstructions) for a template that names no tools.
ToolSyntax toolSyntaxOf(std::string_view templateSource);
// Whether a control token's vocabulary text is markup of `syntax` (`[TOOL_CALLS]`,
// `<|python_tag|>`...), which the reply parser must see.
bool isToolMarker(ToolSyntax syntax, std::string_view text);
// Whether the template renders the `tools` it is given itself.
bool templateKnowsTools(std::string_view templateSource);

struct ToolCall {
    std::string id;         // as the front end names it ("call_..."), "" until then
    std::string name;       // the function's name
    std::string arguments;  // JSON text, as OpenAI's function.arguments
};

// What a request offers the model: the syntax, and each function's parameters whose schema type
// is string (an XML-style call's values are JSON unless the schema says string).
struct ToolSet {
    ToolSyntax syntax = ToolSyntax::None;
    std::map<std::string, std::set<std::string>> stringParameters;
};
// From the request's tools (OpenAI's list of {"type": "function", "function": {name,
// parameters}}), as JSON text; malformed entries are skipped (the server checks them first).
ToolSet toolSetOf(ToolSyntax syntax, std::string_view toolsJson);

// The system prompt's text that offers `toolsJson` to a model whose template does not list tools:
// calls asked for in `syntax` (DeepSeek's as its model card writes them; Tag with a JSON body
// for every other).
std::string toolInstructions(ToolSyntax syntax, std::string_view toolsJson);

// The length of the longest end of `text` that begins one of `markers` (text held back: it may
// still become a marker when the next token comes). The reply parser's too.
size_t partialMarker(std::string_view text, std::span<const std::string_view> markers);

// The body of one call in each syntax, parsed; empty when it is not one (exposed for tests and
// fuzzing). Tag: what lies between `<tool_call>` and `</tool_call>`.
std::vector<ToolCall> parseToolCalls(const ToolSet& tools, std::string_view body);

// Reads tool calls out of a reply's answer: the text around them goes on as Content; each call
// that parses is given as a ToolName part (the function's name, which opens a call) and then a
// ToolCall part (its arguments). Text that may begin a call is held back until it is one or is not.
class ToolCallScanner {
public:
    using Sink = std::function<bool(ReplyPart part, std::string_view text)>;
    explicit ToolCallScanner(ToolSet tools);

    bool feed(std::string_view text, const Sink& sink);
    // The end of the reply: a call left open is read as far as it goes (a syntax that ends with
    // the reply), or given back as text.
    bool finish(const Sink& sink);
    const std::vector<ToolCall>& calls() const { return m_calls; }

private:
    bool emitCall(std::string_view raw, std::string_view body, const Sink& sink);
    bool text(std::string_view t, const Sink& sink);

    ToolSet m_tools;
    std::string m_pending;
    bool m_inCall = false;
    bool m_atStart = true;    // nothing but white space so far (Llama3Json calls only open here)
    bool m_afterCall = false; // white space after a call is held (dropped at the end)
    std::string m_open;       // the marker that opened the call in progress
    std::string m_held;       // white space after a call, given out if an answer follows
    std::vector<ToolCall> m_calls;
};

}  // namespace spillway::engine
