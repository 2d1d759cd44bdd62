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
    f.m_source = std::string(source);
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
jinja::Value argumentsValue(const std::string& arguments)
{
    const json j = json::parse(arguments, nullptr, false);
    if (j.is_object())
        if (auto v = jinja::Value::fromJson(arguments)) return std::move(*v);
    return jinja::Value(arguments);
}

std::string argumentsText(const std::string& arguments)
{
    const json j = json::parse(arguments, nullptr, false);
    return j.is_object() ? j.dump() : json(arguments).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The messages as the template sees them (transformers' shape: tool_calls with their function,
// tool results with their tool_call_id, reasoning as reasoning_content and as gpt-oss's
// thinking). A template that does not list tools gets them in the system prompt, and one that
// does not write calls gets them, and their results, as text. Built as template values, not
// JSON: a message's bytes go to the template as they are (a reply cut inside a character too).
jinja::Value messageValues(std::span<const Message> messages, bool knowsTools, bool knowsCalls, ToolSyntax syntax,
                           const std::string& tools)
{
    jinja::Value list = jinja::Value::list();
    auto message = [](const std::string& role, const std::string& content) {
        jinja::Value m = jinja::Value::dict();
        m.set("role", role);
        m.set("content", content);  // "" where a client sent null: templates print None
        return m;
    };
    const bool instruct = !tools.empty() && !knowsTools;
    if (instruct && (messages.empty() || messages.front().role != "system"))
        list.push(message("system", toolInstructions(syntax, tools)));
    for (size_t i = 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        if (m.role == "tool" && !knowsCalls) {
            list.push(message("user", "<tool_response>\n" + m.content + "\n</tool_response>"));
            continue;
        }
        std::string content = m.content;
        if (instruct && i == 0 && m.role == "system") content += "\n\n" + toolInstructions(syntax, tools);
        if (!m.toolCalls.empty() && !knowsCalls)
            for (const ToolCall& c : m.toolCalls) {
                if (!content.empty()) content += '\n';
                content += "<tool_call>\n{\"name\": " + json(c.name).dump() + ", \"arguments\": " + argumentsText(c.arguments) +
                           "}\n</tool_call>";
            }
        jinja::Value j = message(m.role, content);
        if (!m.reasoning.empty()) {
            j.set("reasoning_content", m.reasoning);
            j.set("thinking", m.reasoning);
        }
        if (!m.toolCalls.empty() && knowsCalls) {
            jinja::Value calls = jinja::Value::list();
            for (const ToolCall& c : m.toolCalls) {
                jinja::Value function = jinja::Value::dict();
                function.set("name", c.name);
                function.set("arguments", argumentsValue(c.arguments));
                jinja::Value call = jinja::Value::dict();
                call.set("id", c.id);
                call.set("type", "function");
                call.set("function", std::move(function));
                calls.push(std::move(call));
            }
            j.set("tool_calls", std::move(calls));
        }
        if (m.role == "tool") {
            j.set("tool_call_id", m.toolCallId);
            // The function's name, from the call it answers (some templates print it).
            bool named = false;
            for (size_t k = i; k-- > 0 && !named;)
                for (const ToolCall& c : messages[k].toolCalls)
                    if (c.id == m.toolCallId && !named) {
                        j.set("name", c.name);
                        named = true;
                    }
        }
        list.push(std::move(j));
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
    const jinja::Value list = messageValues(messages, m_knowsTools, m_knowsCalls, m_toolSyntax, prompt.tools);
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
    static constexpr std::string_view kEnds[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
                                                 "<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (std::string_view e : kEnds)
        if (text == e) return true;
    return !m_eosText.empty() && text == m_eosText;
}

}  // namespace spillway::engine
