#include "core/engine/chat_format.h"

#include <nlohmann/json.hpp>

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
    f.m_toolSyntax = toolSyntaxOf(source);
    f.m_knowsTools = templateKnowsTools(source);
    f.m_knowsCalls = source.find("tool_calls") != std::string_view::npos;
    return f;
}

ToolSet ChatFormat::tools(std::string_view toolsJson) const
{
    if (!m_template || toolsJson.empty()) return {};
    return toolSetOf(m_toolSyntax, toolsJson);
}

namespace {

using json = nlohmann::ordered_json;  // key order kept, as the client and the model wrote it

// A call's arguments as templates read them: the object (they iterate its items or dump it),
// or the text where it is not one.
json argumentsValue(const std::string& arguments)
{
    json j = json::parse(arguments, nullptr, false);
    return j.is_object() ? j : json(arguments);
}

// The messages as the template sees them (transformers' shape: tool_calls with their function,
// tool results with their tool_call_id, reasoning as reasoning_content and as gpt-oss's
// thinking). A template that does not list tools gets them in the system prompt, and one that
// does not write calls gets them, and their results, as text.
json messagesJson(std::span<const Message> messages, bool knowsTools, bool knowsCalls, ToolSyntax syntax,
                  const std::string& tools)
{
    json list = json::array();
    const bool instruct = !tools.empty() && !knowsTools;
    if (instruct && (messages.empty() || messages.front().role != "system"))
        list.push_back({{"role", "system"}, {"content", toolInstructions(syntax, tools)}});
    for (size_t i = 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        json j = {{"role", m.role}, {"content", m.content}};  // "" where a client sent null: templates print None
        if (instruct && i == 0 && m.role == "system") j["content"] = m.content + "\n\n" + toolInstructions(syntax, tools);
        if (!m.reasoning.empty()) {
            j["reasoning_content"] = m.reasoning;
            j["thinking"] = m.reasoning;
        }
        if (!m.toolCalls.empty() && !knowsCalls) {
            std::string text = m.content;
            for (const ToolCall& c : m.toolCalls) {
                if (!text.empty()) text += '\n';
                text += "<tool_call>\n";
                text += "{\"name\": " + json(c.name).dump() + ", \"arguments\": " + argumentsValue(c.arguments).dump() + "}";
                text += "\n</tool_call>";
            }
            j["content"] = text;
        } else if (!m.toolCalls.empty()) {
            json calls = json::array();
            for (const ToolCall& c : m.toolCalls)
                calls.push_back({{"id", c.id},
                                 {"type", "function"},
                                 {"function", {{"name", c.name}, {"arguments", argumentsValue(c.arguments)}}}});
            j["tool_calls"] = calls;
        }
        if (m.role == "tool" && !knowsCalls) {
            j = {{"role", "user"}, {"content", "<tool_response>\n" + m.content + "\n</tool_response>"}};
        } else if (m.role == "tool") {
            j["tool_call_id"] = m.toolCallId;
            // The function's name, from the call it answers (some templates print it).
            for (size_t k = i; k-- > 0 && !j.contains("name");)
                for (const ToolCall& c : messages[k].toolCalls)
                    if (c.id == m.toolCallId) j["name"] = c.name;
        }
        list.push_back(std::move(j));
    }
    return list;
}

}  // namespace

Result<RenderedPrompt> ChatFormat::render(std::span<const Message> messages, const PromptOptions& prompt) const
{
    RenderedPrompt out;
    if (!m_template) {  // a base model continues the last prompt
        for (const Message& m : messages)
            if (m.role == "user") out.text = m.content;
        if (out.text.empty()) return makeError(ErrorCode::InvalidArgument, "there is no prompt to reply to");
        return out;
    }
    auto list = jinja::Value::fromJson(messagesJson(messages, m_knowsTools, m_knowsCalls, m_toolSyntax, prompt.tools).dump());
    if (!list) return makeError(ErrorCode::InvalidArgument, "the messages: " + list.error().message);
    chat::ChatTemplateOptions options;
    options.bosToken = m_bosText;
    options.eosToken = m_eosText;
    options.addGenerationPrompt = true;
    options.extraVariables = jinja::Value::dict();
    if (!prompt.tools.empty() && m_knowsTools) {
        auto tools = jinja::Value::fromJson(prompt.tools);
        if (!tools) return makeError(ErrorCode::InvalidArgument, "the tools: " + tools.error().message);
        options.extraVariables.set("tools", std::move(*tools));
    }
    if (prompt.thinking) options.extraVariables.set("enable_thinking", *prompt.thinking);
    if (!prompt.reasoningEffort.empty()) options.extraVariables.set("reasoning_effort", prompt.reasoningEffort);
    auto text = m_template->render(*list, options);
    if (!text) return makeError(ErrorCode::InvalidArgument, "the model's chat template: " + text.error().message);
    // Templates that write the BOS text themselves get no second one.
    out.addBos = m_bosText.empty() || text->rfind(m_bosText, 0) != 0;
    out.text = std::move(*text);
    return out;
}

bool ChatFormat::endsTurn(std::string_view text) const
{
    if (!m_template || m_markup == ReplyMarkup::Harmony) return false;
    static constexpr std::string_view kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
                                                 "<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (std::string_view e : kEnds)
        if (text == e) return true;
    return !m_eosText.empty() && text == m_eosText;
}

}  // namespace spillway::engine
