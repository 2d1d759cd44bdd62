#include "core/chat/chat_template.h"

#include "core/formats/gguf.h"

namespace spillway::chat {

namespace {

Error chatError(const Error& e)
{
    return Error{e.code, "chat " + e.message};
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, const jinja::Limits& limits)
{
    Result<jinja::Template> t = jinja::Template::parse(source, jinja::Syntax{}, limits);
    if (!t) return chatError(t.error());
    return ChatTemplate(std::move(t).value());
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         const ChatTemplateOptions& options) const
{
    jinja::Value list = jinja::Value::list();
    for (const ChatMessage& m : messages) {
        jinja::Value message = jinja::Value::dict();
        message.set("role", m.role);
        message.set("content", m.content);
        list.push(std::move(message));
    }
    return render(list, options);
}

Result<std::string> ChatTemplate::render(const jinja::Value& messages,
                                         const ChatTemplateOptions& options) const
{
    if (!messages.isList())
        return makeError(ErrorCode::InvalidArgument, "chat template: messages must be a list");
    if (!options.extraVariables.isUndefined() && !options.extraVariables.isDict())
        return makeError(ErrorCode::InvalidArgument,
                         "chat template: extra variables must be a dict");
    jinja::Value variables = jinja::Value::dict();
    variables.set("messages", messages);
    variables.set("tools", nullptr);
    variables.set("documents", nullptr);
    variables.set("add_generation_prompt", options.addGenerationPrompt);
    variables.set("bos_token", options.bosToken);
    variables.set("eos_token", options.eosToken);
    for (const auto& [key, value] : options.extraVariables.entries()) variables.set(key, value);
    jinja::RenderOptions renderOptions;
    renderOptions.now = options.now;
    Result<std::string> text = m_template.render(variables, renderOptions);
    if (!text) return chatError(text.error());
    return text;
}

Result<std::string> renderChatTemplate(std::string_view source,
                                       std::span<const ChatMessage> messages,
                                       const ChatTemplateOptions& options)
{
    Result<ChatTemplate> t = ChatTemplate::parse(source);
    if (!t) return t.error();
    return t->render(messages, options);
}

ChatTemplateOptions ModelChatTemplate::options(bool addGenerationPrompt) const
{
    ChatTemplateOptions o;
    o.bosToken = bosToken;
    o.eosToken = eosToken;
    o.addGenerationPrompt = addGenerationPrompt;
    return o;
}

namespace {

// The text of the token whose id is under `key`: "" when the key is absent.
Result<std::string> tokenText(const gguf::Metadata& metadata, std::string_view key)
{
    const gguf::Value* idValue = metadata.find(key);
    if (!idValue) return std::string();
    const std::optional<int64_t> id = idValue->asInt();
    if (!id)
        return makeError(ErrorCode::ModelFileInvalid,
                         metadata.source() + ": " + std::string(key) + " is not an integer");
    const gguf::Value* tokensValue = metadata.find("tokenizer.ggml.tokens");
    const gguf::Array* tokens = tokensValue ? tokensValue->asArray() : nullptr;
    if (!tokens)
        return makeError(ErrorCode::ModelFileInvalid,
                         metadata.source() + ": " + std::string(key) +
                             " is set but tokenizer.ggml.tokens is missing");
    if (*id < 0 || static_cast<uint64_t>(*id) >= tokens->values.size())
        return makeError(ErrorCode::ModelFileInvalid,
                         metadata.source() + ": " + std::string(key) + " " + std::to_string(*id) +
                             " is not a token id (the vocabulary has " +
                             std::to_string(tokens->values.size()) + " tokens)");
    const std::string* text = tokens->values[static_cast<size_t>(*id)].asString();
    if (!text)
        return makeError(ErrorCode::ModelFileInvalid,
                         metadata.source() + ": tokenizer.ggml.tokens holds a non-string");
    return *text;
}

}  // namespace

Result<ModelChatTemplate> chatTemplateFromMetadata(const gguf::Metadata& metadata)
{
    ModelChatTemplate t;
    const gguf::Value* source = metadata.find("tokenizer.chat_template");
    if (!source)
        return makeError(ErrorCode::UnsupportedModel,
                         metadata.source() + " has no chat template (tokenizer.chat_template)");
    if (!source->asString())
        return makeError(ErrorCode::ModelFileInvalid,
                         metadata.source() + ": tokenizer.chat_template is not a string");
    t.source = *source->asString();
    Result<std::string> bos = tokenText(metadata, "tokenizer.ggml.bos_token_id");
    if (!bos) return bos.error();
    Result<std::string> eos = tokenText(metadata, "tokenizer.ggml.eos_token_id");
    if (!eos) return eos.error();
    t.bosToken = std::move(bos).value();
    t.eosToken = std::move(eos).value();
    return t;
}

}  // namespace spillway::chat
