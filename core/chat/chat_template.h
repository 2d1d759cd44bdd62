#pragma once
// Chat templates: a conversation to the prompt text a model was trained on, by rendering the
// model's own Jinja template (GGUF `tokenizer.chat_template`, `chat_template` in Hugging Face's
// tokenizer_config.json) as transformers' apply_chat_template() does: the template sees
// `messages`, `bos_token`, `eos_token`, `add_generation_prompt`, `tools` and `documents` (None
// unless given), plus any extra variables.

#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/chat/jinja.h"

namespace spillway::gguf {
class Metadata;
}

namespace spillway::chat {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool"...
    std::string content;
};

struct ChatTemplateOptions {
    std::string bosToken;  // the texts of the model's BOS and EOS tokens ("<s>", "</s>")
    std::string eosToken;
    bool addGenerationPrompt = true;  // end with the header of the assistant's next turn
    // More variables for the template, as a dict (tools, enable_thinking, date_string...), or
    // Undefined for none. A name given here replaces the one set from the fields above.
    jinja::Value extraVariables;
    std::optional<std::tm> now;  // what strftime_now() formats; the local time when empty
};

class ChatTemplate {
public:
    // InvalidArgument "chat template syntax error at line L, column C: ..." for a template
    // that does not parse.
    static Result<ChatTemplate> parse(std::string_view source, const jinja::Limits& limits = {});

    // Errors are InvalidArgument, the template's own message for one that raises (e.g.
    // "chat template raised an error at line 1, column 120: Conversation roles must
    // alternate user/assistant/user/assistant/...").
    Result<std::string> render(std::span<const ChatMessage> messages,
                               const ChatTemplateOptions& options) const;
    // The same with messages given as template values: a list of dicts, for messages that carry
    // more than a role and a text (tool_calls, reasoning_content, lists of content parts).
    Result<std::string> render(const jinja::Value& messages,
                               const ChatTemplateOptions& options) const;

private:
    explicit ChatTemplate(jinja::Template t) : m_template(std::move(t)) {}
    jinja::Template m_template;
};

// Parses and renders in one call.
Result<std::string> renderChatTemplate(std::string_view source,
                                       std::span<const ChatMessage> messages,
                                       const ChatTemplateOptions& options);

// A model's chat template with the texts of its BOS and EOS tokens.
struct ModelChatTemplate {
    std::string source;    // tokenizer.chat_template
    std::string bosToken;  // tokenizer.ggml.tokens[tokenizer.ggml.bos_token_id], "" without one
    std::string eosToken;  // tokenizer.ggml.tokens[tokenizer.ggml.eos_token_id], "" without one

    ChatTemplateOptions options(bool addGenerationPrompt = true) const;
};

// From GGUF metadata (or the same keys rebuilt from a model package). UnsupportedModel when
// there is no tokenizer.chat_template (the caller may fall back to a template of its own);
// ModelFileInvalid, naming the key, for a token id that is not in tokenizer.ggml.tokens.
Result<ModelChatTemplate> chatTemplateFromMetadata(const gguf::Metadata& metadata);

}  // namespace spillway::chat
