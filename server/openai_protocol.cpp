#include "server/openai_protocol.h"

#include "server/dialect.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/tokenizer/utf8.h"

namespace spillway::server {

using nlohmann::json;

namespace {

std::string toText(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError invalid(std::string param, std::string message) { return ApiError{400, std::move(message), "invalid_request_error", std::move(param), {}}; }

// A number field within [lo, hi]; the error names the field.
std::optional<ApiError> readNumber(const json& body, const char* name, double lo, double hi, double& out)
{
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) return invalid(name, std::string("'") + name + "' must be a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
        return invalid(name, std::string("'") + name + "' must be between " + toText(lo) + " and " + toText(hi));
    out = v;
    return std::nullopt;
}

std::optional<ApiError> readInteger(const json& body, const char* name, int64_t lo, int64_t hi, int64_t& out,
                                    bool& given)
{
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer() && !(it->is_number_float() && std::trunc(it->get<double>()) == it->get<double>()))
        return invalid(name, std::string("'") + name + "' must be an integer");
    const double asDouble = it->get<double>();
    if (asDouble < double(lo) || asDouble > double(hi))
        return invalid(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi));
    out = it->is_number_unsigned() ? int64_t(it->get<uint64_t>()) : it->is_number_integer() ? it->get<int64_t>()
                                                                                              : int64_t(asDouble);
    given = true;
    return std::nullopt;
}

std::optional<ApiError> readBool(const json& body, const char* name, bool& out)
{
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean()) return invalid(name, std::string("'") + name + "' must be a boolean");
    out = it->get<bool>();
    return std::nullopt;
}

// A message's content: a string, or an array of parts of which only text parts are understood.
std::optional<ApiError> readContent(const json& content, size_t index, std::string& out)
{
    const std::string param = "messages[" + std::to_string(index) + "].content";
    if (content.is_null()) return std::nullopt;  // an assistant turn with tool calls only
    if (content.is_string()) {
        out = content.get<std::string>();
        return std::nullopt;
    }
    if (!content.is_array()) return invalid(param, "'content' must be a string or an array of text parts");
    for (const json& part : content) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            return invalid(param, "each content part must be an object with a 'type'");
        if (part["type"] != "text")
            return invalid(param, "content parts of type '" + part["type"].get<std::string>() +
                                      "' are not supported: this model reads text only");
        if (!part.contains("text") || !part["text"].is_string()) return invalid(param, "a text part needs a 'text' string");
        out += part["text"].get<std::string>();
    }
    return std::nullopt;
}

// An assistant message's tool_calls and reasoning (reasoning_content, or `reasoning` as
// OpenRouter and vLLM name it).
std::optional<ApiError> readAssistantParts(const json& m, const std::string& param, engine::Message& message)
{
    for (const char* key : {"reasoning_content", "reasoning"})
        if (auto it = m.find(key); it != m.end() && !it->is_null()) {
            if (!it->is_string()) return invalid(param + "." + key, std::string("'") + key + "' must be a string");
            if (message.reasoning.empty()) message.reasoning = it->get<std::string>();
        }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || calls->is_null()) return std::nullopt;
    if (message.role != "assistant") return invalid(param + ".tool_calls", "only an assistant message has 'tool_calls'");
    if (!calls->is_array()) return invalid(param + ".tool_calls", "'tool_calls' must be an array");
    for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string at = param + ".tool_calls[" + std::to_string(k) + "]";
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
            return invalid(at, "each tool call must be an object with a 'function'");
        const json& f = c["function"];
        if (!f.contains("name") || !f["name"].is_string()) return invalid(at + ".function.name", "a tool call needs a function 'name'");
        engine::ToolCall call;
        call.name = f["name"].get<std::string>();
        if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
        if (auto a = f.find("arguments"); a != f.end() && !a->is_null()) {
            if (a->is_string()) call.arguments = a->get<std::string>();
            else if (a->is_object()) call.arguments = toText(*a);
            else return invalid(at + ".function.arguments", "'arguments' must be a string of JSON");
        } else {
            call.arguments = "{}";
        }
        message.toolCalls.push_back(std::move(call));
    }
    return std::nullopt;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}], kept as
// JSON text for the template; tool_choice and parallel_tool_calls.
std::optional<ApiError> readTools(const json& body, CompletionRequest& r)
{
    std::set<std::string> names;
    if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
        if (!it->is_array()) return invalid("tools", "'tools' must be an array");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& t = (*it)[i];
            const std::string param = "tools[" + std::to_string(i) + "]";
            if (!t.is_object() || t.value("type", std::string()) != "function" || !t.contains("function") ||
                !t["function"].is_object())
                return invalid(param, "each tool must be {\"type\": \"function\", \"function\": {...}}");
            const json& f = t["function"];
            if (!f.contains("name") || !f["name"].is_string()) return invalid(param + ".function.name", "a function needs a 'name'");
            const std::string name = f["name"].get<std::string>();
            const bool valid = !name.empty() && name.size() <= 64 &&
                               std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.'; });
            if (!valid) return invalid(param + ".function.name", "a function's name is 1 to 64 letters, digits, '_', '-' or '.'");
            if (!names.insert(name).second) return invalid(param + ".function.name", "two tools are named '" + name + "'");
            if (f.contains("parameters") && !f["parameters"].is_object())
                return invalid(param + ".function.parameters", "'parameters' must be a JSON Schema object");
        }
        if (!it->empty()) r.promptOptions.tools = toText(*it);
    }
    if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
        using C = CompletionRequest::ToolChoice;
        if (it->is_string() && *it == "auto") r.toolChoice = C::Auto;
        else if (it->is_string() && *it == "none") r.toolChoice = C::None;
        else if (it->is_string() && *it == "required") r.toolChoice = C::Required;
        else if (it->is_object() && it->contains("function") && (*it)["function"].is_object() &&
                 (*it)["function"].contains("name") && (*it)["function"]["name"].is_string()) {
            r.toolChoice = C::Function;
            r.forcedTool = (*it)["function"]["name"].get<std::string>();
            if (!names.contains(r.forcedTool))
                return invalid("tool_choice", "tool_choice names '" + r.forcedTool + "', which is not in 'tools'");
        } else {
            return invalid("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        if ((r.toolChoice == C::Required || r.toolChoice == C::Function) && names.empty())
            return invalid("tool_choice", "tool_choice asks for a call, but no 'tools' were given");
        if (r.toolChoice == C::None) r.promptOptions.tools.clear();
    }
    if (auto e = readBool(body, "parallel_tool_calls", r.parallelToolCalls)) return *e;
    return std::nullopt;
}

// reasoning_effort (OpenAI's; gpt-oss's template takes low, medium, high) and the thinking switch
// (chat_template_kwargs.enable_thinking, as vLLM and llama-server take it; `think` too).
std::optional<ApiError> readReasoning(const json& body, CompletionRequest& r)
{
    if (auto it = body.find("reasoning_effort"); it != body.end() && !it->is_null()) {
        const std::string effort = it->is_string() ? it->get<std::string>() : std::string();
        if (effort != "minimal" && effort != "low" && effort != "medium" && effort != "high")
            return invalid("reasoning_effort", "'reasoning_effort' must be \"minimal\", \"low\", \"medium\" or \"high\"");
        r.promptOptions.reasoningEffort = effort == "minimal" ? "low" : effort;
    }
    if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) return invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object");
        if (auto t = it->find("enable_thinking"); t != it->end() && !t->is_null()) {
            if (!t->is_boolean()) return invalid("chat_template_kwargs.enable_thinking", "'enable_thinking' must be a boolean");
            r.promptOptions.thinking = t->get<bool>();
        }
        if (auto t = it->find("reasoning_effort"); t != it->end() && t->is_string()) r.promptOptions.reasoningEffort = t->get<std::string>();
    }
    return std::nullopt;
}

// response_format {type: text | json_object | json_schema {schema, strict}}; the top-level
// json_schema and the GBNF `grammar` llama-server takes (one of the three at most).
std::optional<ApiError> readResponseFormat(const json& body, CompletionRequest& r)
{
    auto compile = [&](const std::string& schema, bool strict, const char* param) -> std::optional<ApiError> {
        auto g = engine::jsonGrammar(schema, strict);
        if (!g) return invalid(param, g.error().message);
        r.grammar = *g;
        return std::nullopt;
    };
    auto given = [&](const char* key) { auto it = body.find(key); return it != body.end() && !it->is_null(); };
    bool formatted = false;  // a response_format other than text
    if (auto f = body.find("response_format"); f != body.end() && f->is_object())
        if (auto t = f->find("type"); t != f->end()) formatted = !(t->is_string() && t->get<std::string>() == "text");
    if (int(given("grammar")) + int(given("json_schema")) + int(formatted) > 1)
        return invalid("grammar", "give one of 'grammar', 'json_schema' and 'response_format', not more");
    if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) return invalid("grammar", "'grammar' must be a GBNF grammar's text");
        auto g = engine::gbnfGrammar(it->get<std::string>());
        if (!g) return invalid("grammar", g.error().message);
        r.grammar = *g;
        return std::nullopt;
    }
    if (auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) return invalid("json_schema", "'json_schema' must be a JSON Schema object");
        if (auto e = compile(toText(*it), true, "json_schema")) return e;
    }
    auto it = body.find("response_format");
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
        return invalid("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = (*it)["type"].get<std::string>();
    if (type == "text") return std::nullopt;
    if (type == "json_object") return compile("", true, "response_format");
    if (type != "json_schema")
        return invalid("response_format.type", "response_format type '" + type + "' is not supported (text, json_object, json_schema)");
    const json* spec = it->contains("json_schema") && (*it)["json_schema"].is_object() ? &(*it)["json_schema"] : nullptr;
    if (!spec || !spec->contains("schema") || !(*spec)["schema"].is_object())
        return invalid("response_format.json_schema.schema", "a json_schema response format needs its 'schema' object");
    const bool strict = !spec->contains("strict") || !(*spec)["strict"].is_boolean() || (*spec)["strict"].get<bool>();
    return compile(toText((*spec)["schema"]), strict, "response_format.json_schema.schema");
}

}  // namespace

std::string errorBody(const ApiError& e)
{
    json error = {{"message", e.message},
                  {"type", e.type},
                  {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                  {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
    return toText(json{{"error", error}});
}

std::variant<CompletionRequest, ApiError> parseCompletionRequest(std::string_view text, bool chat, const Limits& limits)
{
    json body = json::parse(text.begin(), text.end(), nullptr, false);
    if (body.is_discarded())
        return invalid("", "the request body is not valid JSON (or not valid UTF-8)");
    if (!body.is_object()) return invalid("", "the request body must be a JSON object");
    CompletionRequest r;
    r.chat = chat;
    if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) return invalid("model", "'model' must be a string");
        r.model = it->get<std::string>();
    }
    if (chat) {
        auto it = body.find("messages");
        if (it == body.end() || !it->is_array() || it->empty())
            return invalid("messages", "'messages' must be a non-empty array");
        if (it->size() > limits.maxMessages)
            return invalid("messages", "at most " + std::to_string(limits.maxMessages) + " messages");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& m = (*it)[i];
            const std::string param = "messages[" + std::to_string(i) + "]";
            if (!m.is_object()) return invalid(param, "each message must be an object");
            auto role = m.find("role");
            if (role == m.end() || !role->is_string()) return invalid(param + ".role", "each message needs a 'role' string");
            std::string name = role->get<std::string>();
            if (name == "developer") name = "system";
            if (name != "system" && name != "user" && name != "assistant" && name != "tool")
                return invalid(param + ".role", "role '" + name + "' is not supported (system, developer, user, assistant, tool)");
            engine::Message message{name, {}};
            if (auto content = m.find("content"); content != m.end())
                if (auto e = readContent(*content, i, message.content)) return *e;
            if (auto e = readAssistantParts(m, param, message)) return *e;
            if (name == "tool") {
                auto id = m.find("tool_call_id");
                if (id == m.end() || !id->is_string())
                    return invalid(param + ".tool_call_id", "a tool message needs the 'tool_call_id' of the call it answers");
                message.toolCallId = id->get<std::string>();
            }
            r.messages.push_back(std::move(message));
        }
    } else {
        auto it = body.find("prompt");
        if (it == body.end() || it->is_null()) return invalid("prompt", "'prompt' is required");
        if (it->is_string()) {
            r.prompt = it->get<std::string>();
        } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
            r.prompt = (*it)[0].get<std::string>();
        } else {
            return invalid("prompt", "'prompt' must be a string (or an array of one string)");
        }
    }
    if (chat) {
        if (auto e = readTools(body, r)) return *e;
        if (auto e = readReasoning(body, r)) return *e;
    }
    if (auto e = readResponseFormat(body, r)) return *e;
    int64_t n = 1;
    bool given = false;
    if (auto e = readInteger(body, "n", 1, 1, n, given)) return ApiError{400, "only n = 1 is supported", "invalid_request_error", "n", {}};
    int64_t maxTokens = 0;
    given = false;
    if (auto e = readInteger(body, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), maxTokens, given)) return *e;
    if (!given)
        if (auto e = readInteger(body, "max_tokens", 1, std::numeric_limits<int32_t>::max(), maxTokens, given)) return *e;
    r.maxTokens = int(maxTokens);
    // Sampling fields by OpenAI's names and llama.cpp's extensions, each kept at the engine's
    // default when absent (the penalties look at the last repeat_last_n tokens, as llama.cpp's).
    struct FloatField { const char* name; double lo, hi; float* into; };
    const FloatField floats[] = {
        {"temperature", 0.0, 2.0, &r.sampling.temperature},       {"top_p", 0.0, 1.0, &r.sampling.topP},
        {"min_p", 0.0, 1.0, &r.sampling.minP},                    {"repeat_penalty", 0.01, 100.0, &r.sampling.repeatPenalty},
        {"presence_penalty", -2.0, 2.0, &r.sampling.presencePenalty}, {"frequency_penalty", -2.0, 2.0, &r.sampling.frequencyPenalty}};
    for (const FloatField& f : floats) {
        double value = *f.into;
        if (auto e = readNumber(body, f.name, f.lo, f.hi, value)) return *e;
        *f.into = float(value);
    }
    struct IntField { const char* name; int* into; };
    for (const IntField& f : {IntField{"top_k", &r.sampling.topK}, IntField{"repeat_last_n", &r.sampling.repeatLastN}}) {
        int64_t value = *f.into;
        given = false;
        if (auto e = readInteger(body, f.name, 0, 1 << 20, value, given)) return *e;
        *f.into = int(value);
    }
    int64_t seed = 0;
    given = false;
    if (auto e = readInteger(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed, given))
        return *e;
    if (given) {
        r.sampling.seed = uint64_t(seed);
        r.seeded = true;
    }
    if (auto e = readBool(body, "stream", r.stream)) return *e;
    if (auto e = readBool(body, "echo", r.echo)) return *e;
    if (r.echo && chat) return invalid("echo", "'echo' is for /v1/completions");
    if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) return invalid("stream_options", "'stream_options' must be an object");
        if (auto e = readBool(*it, "include_usage", r.includeUsage)) return invalid("stream_options.include_usage", e->message);
    }
    if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
        if (it->is_string()) {
            r.stop.push_back(it->get<std::string>());
        } else if (it->is_array()) {
            for (const json& s : *it) {
                if (!s.is_string()) return invalid("stop", "'stop' must be a string or an array of strings");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            return invalid("stop", "'stop' must be a string or an array of strings");
        }
        if (r.stop.size() > limits.maxStops)
            return invalid("stop", "at most " + std::to_string(limits.maxStops) + " stop sequences");
        for (const std::string& s : r.stop)
            if (s.size() > limits.maxStopBytes)
                return invalid("stop", "a stop sequence may be at most " + std::to_string(limits.maxStopBytes) + " bytes");
        std::erase_if(r.stop, [](const std::string& s) { return s.empty(); });
    }
    return r;
}

namespace {

// What every response and chunk begins with.
json envelope(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model, bool chunk)
{
    return {{"id", id},
            {"object", !r.chat ? "text_completion" : chunk ? "chat.completion.chunk" : "chat.completion"},
            {"created", created},
            {"model", model}};
}

json usageJson(const Usage& usage)
{
    return {{"prompt_tokens", usage.promptTokens},
            {"completion_tokens", usage.completionTokens},
            {"total_tokens", usage.promptTokens + usage.completionTokens}};
}

}  // namespace

std::string completionResponse(const CompletionRequest& r, const std::string& id, int64_t created,
                               const std::string& model, const std::string& text, const char* finishReason,
                               const Usage& usage, const std::string& reasoning,
                               const std::vector<engine::ToolCall>& toolCalls)
{
    json choice = {{"index", 0}, {"finish_reason", finishReason}, {"logprobs", nullptr}};
    if (r.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", text.empty() && !toolCalls.empty() ? json(nullptr) : json(text)}};
        if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
        if (!toolCalls.empty()) {
            json calls = json::array();
            for (const engine::ToolCall& c : toolCalls)
                calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
            choice["message"]["tool_calls"] = calls;
        }
    } else {
        choice["text"] = text;
    }
    json j = envelope(r, id, created, model, false);
    j["choices"] = json::array({choice});
    j["usage"] = usageJson(usage);
    return toText(j);
}

std::string completionChunk(const CompletionRequest& r, const std::string& id, int64_t created,
                            const std::string& model, std::string_view text, bool first, const char* finishReason,
                            std::string_view reasoning, const ToolCallDelta* toolCall)
{
    json choice = {{"index", 0}, {"finish_reason", finishReason ? json(finishReason) : json(nullptr)}, {"logprobs", nullptr}};
    if (r.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || (first && !finishReason)) delta["content"] = std::string(text);
        if (!reasoning.empty()) delta["reasoning_content"] = std::string(reasoning);
        if (toolCall) {
            json call = {{"index", toolCall->index}};
            if (!toolCall->id.empty()) {
                call["id"] = toolCall->id;
                call["type"] = "function";
                call["function"] = {{"name", toolCall->name}, {"arguments", toolCall->arguments}};
            } else {
                call["function"] = {{"arguments", toolCall->arguments}};
            }
            delta["tool_calls"] = json::array({call});
        }
        choice["delta"] = delta;
    } else {
        choice["text"] = std::string(text);
    }
    json j = envelope(r, id, created, model, true);
    j["choices"] = json::array({choice});
    if (r.includeUsage) j["usage"] = nullptr;
    return toText(j);
}

std::string usageChunk(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                       const Usage& usage)
{
    json j = envelope(r, id, created, model, true);
    j["choices"] = json::array();
    j["usage"] = usageJson(usage);
    return toText(j);
}

std::string modelsResponse(const std::vector<std::string>& models, int64_t created)
{
    json list = json::array();
    for (const std::string& id : models)
        list.push_back({{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "spillway"}});
    return toText(json{{"object", "list"}, {"data", list}});
}

namespace {

// Bytes at the end of `s` that begin a UTF-8 character not yet complete (0 when none).
size_t incompleteTail(std::string_view s)
{
    const size_t n = s.size();
    for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
        const unsigned char c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return length > back ? back : 0;
    }
    return 0;
}

}  // namespace

std::string TextGate::feed(std::string_view text)
{
    if (m_stopped) return {};
    m_pending.append(text);
    for (const std::string& stop : m_stops) {
        if (const size_t at = m_pending.find(stop); at != std::string::npos) {
            m_stopped = true;
            std::string out = validUtf8(std::string_view(m_pending).substr(0, at));
            m_pending.clear();
            return out;
        }
    }
    // Keep the longest tail that begins a stop sequence, and any unfinished character.
    size_t keep = incompleteTail(m_pending);
    for (const std::string& stop : m_stops)
        for (size_t k = std::min(stop.size() - 1, m_pending.size()); k > keep; --k)
            if (std::string_view(m_pending).substr(m_pending.size() - k) == std::string_view(stop).substr(0, k)) {
                keep = k;
                break;
            }
    std::string out = validUtf8(std::string_view(m_pending).substr(0, m_pending.size() - keep));
    m_pending.erase(0, m_pending.size() - keep);
    return out;
}

std::string TextGate::flush()
{
    if (m_stopped) return {};
    std::string out = validUtf8(m_pending);
    m_pending.clear();
    return out;
}

std::string validUtf8(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8::sequenceLength(text, i);
        if (n > 0) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            out += "\xEF\xBF\xBD";  // U+FFFD for each byte that starts no well-formed character
            ++i;
        }
    }
    return out;
}

namespace {

class OpenAi final : public Dialect {
public:
    OpenAi(bool chat, std::string id, int64_t created, std::string model)
        : m_chat(chat), m_id(std::move(id)), m_created(created), m_model(std::move(model))
    {
    }
    std::variant<CompletionRequest, ApiError> parse(std::string_view body) override { return parseCompletionRequest(body, m_chat); }
    std::string errorBody(const ApiError& e) const override { return server::errorBody(e); }
    const char* streamType() const override { return "text/event-stream"; }
    std::vector<std::string> opening(const CompletionRequest& r) override
    {
        // A chat stream opens with the role; a completion with the prompt when echoed.
        std::vector<std::string> out;
        if (r.chat) out.push_back(event(completionChunk(r, m_id, m_created, m_model, "", true, nullptr)));
        if (r.echo) out.push_back(event(completionChunk(r, m_id, m_created, m_model, validUtf8(r.prompt), false, nullptr)));
        return out;
    }
    std::string piece(const CompletionRequest& r, engine::ReplyPart part, const std::string& text,
                      const ToolCallDelta* call) override
    {
        const bool thought = part == engine::ReplyPart::Reasoning;
        return event(completionChunk(r, m_id, m_created, m_model, thought ? "" : text, false, nullptr, thought ? text : "", call));
    }
    std::vector<std::string> closing(const CompletionRequest& r, const Finished& f) override
    {
        std::vector<std::string> out = {event(completionChunk(r, m_id, m_created, m_model, "", false, f.finish))};
        if (r.includeUsage) out.push_back(event(usageChunk(r, m_id, m_created, m_model, f.usage)));
        return out;
    }
    std::string streamError(const ApiError& e) const override { return event(server::errorBody(e)); }
    std::string end() const override { return "data: [DONE]\n\n"; }
    std::string whole(const CompletionRequest& r, const Finished& f) const override
    {
        const std::string text = r.echo ? r.prompt + f.text : f.text;
        return completionResponse(r, m_id, m_created, m_model, text, f.finish, f.usage, f.reasoning, f.toolCalls);
    }

private:
    static std::string event(const std::string& data) { return "data: " + data + "\n\n"; }
    bool m_chat;
    std::string m_id;
    int64_t m_created;
    std::string m_model;
};

}  // namespace

std::unique_ptr<Dialect> openAiDialect(bool chat, std::string id, int64_t created, std::string model)
{
    return std::make_unique<OpenAi>(chat, std::move(id), created, std::move(model));
}

}  // namespace spillway::server
