#pragma once
// How a model wants a conversation written: its chat template (with the texts of its BOS and EOS
// tokens) and the texts that end its turn. A model without a usable template is a base model:
// it continues the last user message.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/engine/reply_parser.h"

namespace spillway {
class LlamaModel;
namespace chat { class ChatTemplate; }
}

namespace spillway::engine {

struct Message {
    std::string role;  // "system", "user", "assistant", "tool"
    std::string content;
    std::string reasoning;            // an assistant's thinking (reasoning_content), for templates that keep it
    std::vector<ToolCall> toolCalls;  // an assistant's calls
    std::string toolCallId;           // a tool's result: the call it answers
    bool operator==(const Message&) const = default;
};

// What a request asks of the prompt beside its messages.
struct PromptOptions {
    std::string tools;              // OpenAI's tools list, JSON text ("" = none)
    std::optional<bool> thinking;   // enable_thinking, for templates that take it
    std::string reasoningEffort;    // reasoning_effort ("low", "medium", "high"), "" = the template's default
};

struct RenderedPrompt {
    std::string text;
    bool addBos = true;  // false where the template writes the BOS text itself
};

class ChatFormat {
public:
    ChatFormat();
    ~ChatFormat();
    ChatFormat(const ChatFormat&);
    ChatFormat& operator=(const ChatFormat&);

    // The model's tokenizer.chat_template. None (a base model) is no error; one that does not
    // parse leaves a base model too, with note() saying why.
    static ChatFormat fromModel(const LlamaModel& model);
    // A template given as text (a user's own, or a test's): InvalidArgument where it does not parse.
    static Result<ChatFormat> fromSource(std::string_view source, std::string bosText, std::string eosText);

    bool chatting() const { return m_template != nullptr; }
    // The template's text ("" for a base model).
    const std::string& source() const { return m_source; }
    // Why the model's template is not used ("" when it is, or there is none).
    const std::string& note() const { return m_note; }
    // The text of the conversation with the assistant's next turn opened (a base model: the last
    // user message, to continue). InvalidArgument when there is nothing to reply to or the
    // template raises.
    // With tools, a template that knows none is given them in the system prompt, its tool
    // results as user turns and its calls as text, in the generic Tag syntax (toolInstructions).
    Result<RenderedPrompt> render(std::span<const Message> messages, const PromptOptions& prompt = {}) const;
    // How the model writes tool calls, with the request's tools (ToolSyntax::None for a base model
    // or no tools).
    ToolSet tools(std::string_view toolsJson) const;
    // Whether a generated token's text (a control token's: its vocabulary text) ends the
    // assistant's turn: the model's EOS text and the end-of-turn markers of the common template
    // families (only while chatting). A Harmony reply ends where its ReplyParser says instead.
    bool endsTurn(std::string_view tokenText) const;
    // How the template marks a reply's reasoning and tool calls (Plain for a base model).
    ReplyMarkup markup() const { return m_markup; }
    // Whether the template's text names `variable` ("enable_thinking", "reasoning_effort"): what
    // a front end may offer to set through PromptOptions.
    bool mentions(std::string_view variable) const
    {
        return chatting() && m_source.find(variable) != std::string::npos;
    }

private:
    std::shared_ptr<const chat::ChatTemplate> m_template;
    std::string m_bosText, m_eosText, m_note, m_source;
    ReplyMarkup m_markup = ReplyMarkup::Plain;
    ToolSyntax m_toolSyntax = ToolSyntax::None;
    bool m_knowsTools = false;  // the template renders `tools` itself
    bool m_knowsCalls = false;  // and the assistant's tool_calls and the tools' results
};

}  // namespace spillway::engine
