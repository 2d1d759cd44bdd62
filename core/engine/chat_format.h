#pragma once
// How a model wants a conversation written: its chat template (with the texts of its BOS and EOS
// tokens) and the texts that end its turn. A model without a usable template is a base model:
// it continues the last user message.

#include <memory>
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
    std::string role;  // "system", "user", "assistant"
    std::string content;
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
    // Why the model's template is not used ("" when it is, or there is none).
    const std::string& note() const { return m_note; }
    // The text of the conversation with the assistant's next turn opened (a base model: the last
    // user message, to continue). InvalidArgument when there is nothing to reply to or the
    // template raises.
    Result<RenderedPrompt> render(std::span<const Message> messages) const;
    // Whether a generated token's text (a control token's: its vocabulary text) ends the
    // assistant's turn: the model's EOS text and the end-of-turn markers of the common template
    // families (only while chatting). A Harmony reply ends where its ReplyParser says instead.
    bool endsTurn(std::string_view tokenText) const;
    // How the template marks a reply's reasoning and tool calls (Plain for a base model).
    ReplyMarkup markup() const { return m_markup; }

private:
    std::shared_ptr<const chat::ChatTemplate> m_template;
    std::string m_bosText, m_eosText, m_note;
    ReplyMarkup m_markup = ReplyMarkup::Plain;
};

}  // namespace spillway::engine
