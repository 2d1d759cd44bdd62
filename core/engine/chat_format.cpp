#include "core/engine/chat_format.h"

#include "core/chat/chat_template.h"
#include "core/model/llama_model.h"

namespace spillway::engine {

ChatFormat::ChatFormat() = default;
ChatFormat::~ChatFormat() = default;
ChatFormat::ChatFormat(const ChatFormat&) = default;
ChatFormat& ChatFormat::operator=(const ChatFormat&) = default;

ChatFormat ChatFormat::fromModel(const LlamaModel& model)
{
    ChatFormat f;
    auto info = chat::chatTemplateFromMetadata(model.metadata());
    if (!info) {
        if (info.error().code != ErrorCode::UnsupportedModel)  // absent is normal: a base model
            f.m_note = info.error().message;
        return f;
    }
    auto parsed = fromSource(info->source, info->bosToken, info->eosToken);
    if (!parsed) {
        f.m_note = parsed.error().message;
        return f;
    }
    return std::move(*parsed);
}

Result<ChatFormat> ChatFormat::fromSource(std::string_view source, std::string bosText, std::string eosText)
{
    auto parsed = chat::ChatTemplate::parse(source);
    if (!parsed) return parsed.error();
    ChatFormat f;
    f.m_template = std::make_shared<const chat::ChatTemplate>(std::move(*parsed));
    f.m_bosText = std::move(bosText);
    f.m_eosText = std::move(eosText);
    f.m_markup = replyMarkupOf(source);
    return f;
}

Result<RenderedPrompt> ChatFormat::render(std::span<const Message> messages) const
{
    RenderedPrompt out;
    if (!m_template) {  // a base model continues the last prompt
        for (const Message& m : messages)
            if (m.role == "user") out.text = m.content;
        if (out.text.empty()) return makeError(ErrorCode::InvalidArgument, "there is no prompt to reply to");
        return out;
    }
    std::vector<chat::ChatMessage> list;
    list.reserve(messages.size());
    for (const Message& m : messages) list.push_back({m.role, m.content});
    chat::ChatTemplateOptions options;
    options.bosToken = m_bosText;
    options.eosToken = m_eosText;
    options.addGenerationPrompt = true;
    auto text = m_template->render(list, options);
    if (!text) return makeError(ErrorCode::InvalidArgument, "the model's chat template: " + text.error().message);
    // Templates that write the BOS text themselves get no second one.
    out.addBos = m_bosText.empty() || text->rfind(m_bosText, 0) != 0;
    out.text = std::move(*text);
    return out;
}

bool ChatFormat::endsTurn(std::string_view text) const
{
    if (!m_template || m_markup == ReplyMarkup::Harmony) return false;
    static constexpr std::string_view kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>",
                                                 "<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (std::string_view e : kEnds)
        if (text == e) return true;
    return !m_eosText.empty() && text == m_eosText;
}

}  // namespace spillway::engine
