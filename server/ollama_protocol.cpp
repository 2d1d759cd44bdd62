#include "server/ollama_protocol.h"

#include <chrono>
#include <ctime>
#include <map>
#include <variant>

#include <nlohmann/json.hpp>

namespace spillway::server {

using json = nlohmann::ordered_json;

namespace {

std::string toText(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError invalid(std::string param, std::string message) { return ApiError{400, std::move(message), "invalid_request_error", std::move(param), {}}; }

// RFC 3339 in UTC, as Ollama writes created_at and modified_at.
std::string timestamp(int64_t unixSeconds = -1)
{
    const std::time_t t = unixSeconds >= 0 ? std::time_t(unixSeconds) : std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int64_t nanoseconds(double seconds) { return int64_t(seconds * 1e9); }

// Ollama's request as the OpenAI body parseCompletionRequest reads; `openAiChat` says which of
// its two it is (generate with "raw", or on a base model, is a completion).
std::variant<json, ApiError> translate(const json& body, bool chat, bool chatting, bool& openAiChat)
{
    if (!body.is_object()) return invalid("", "the request body must be a JSON object");
    json out = json::object();
    if (auto m = body.find("model"); m != body.end()) out["model"] = *m;
    out["stream"] = body.contains("stream") && !body["stream"].is_null() ? body["stream"] : json(true);
    if (auto o = body.find("options"); o != body.end() && !o->is_null()) {
        if (!o->is_object()) return invalid("options", "'options' must be an object");
        for (const char* key : {"temperature", "top_p", "top_k", "min_p", "seed", "repeat_penalty", "presence_penalty",
                                "frequency_penalty", "repeat_last_n", "stop"})
            if (o->contains(key)) out[key] = (*o)[key];
        if (auto n = o->find("num_predict"); n != o->end() && n->is_number_integer() && n->get<int64_t>() > 0)
            out["max_tokens"] = *n;
    }
    if (auto f = body.find("format"); f != body.end() && !f->is_null() && !(f->is_string() && f->get<std::string>().empty())) {
        if (f->is_string() && *f == "json")
            out["response_format"] = {{"type", "json_object"}};
        else if (f->is_object())
            out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"strict", true}, {"schema", *f}}}};
        else
            return invalid("format", "'format' must be \"json\" or a JSON Schema object");
    }
    if (auto t = body.find("think"); t != body.end() && !t->is_null()) {
        if (t->is_boolean()) {
            out["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
        } else if (t->is_string() && (*t == "low" || *t == "medium" || *t == "high")) {
            out["chat_template_kwargs"] = {{"enable_thinking", true}};
            out["reasoning_effort"] = *t;
        } else {
            return invalid("think", "'think' must be true, false, \"low\", \"medium\" or \"high\"");
        }
    }
    if (auto t = body.find("tools"); t != body.end()) out["tools"] = *t;
    auto noImages = [](const json& m) { return !m.contains("images") || m["images"].is_null() || (m["images"].is_array() && m["images"].empty()); };
    if (!chat) {
        if (!noImages(body)) return invalid("images", "images are not supported: this model reads text only");
        const std::string prompt = body.value("prompt", std::string());
        const bool raw = body.value("raw", false);
        openAiChat = chatting && !raw;
        if (!openAiChat) {
            out["prompt"] = prompt;
            return out;
        }
        json messages = json::array();
        if (auto s = body.find("system"); s != body.end() && s->is_string() && !s->get<std::string>().empty())
            messages.push_back({{"role", "system"}, {"content", *s}});
        messages.push_back({{"role", "user"}, {"content", prompt}});
        out["messages"] = messages;
        return out;
    }
    openAiChat = true;
    auto messages = body.find("messages");
    if (messages == body.end() || !messages->is_array()) return invalid("messages", "'messages' must be an array");
    // Ollama's calls have no ids: they get theirs here, and a tool's result the id of the
    // earliest call of its function (tool_name) not yet answered.
    std::vector<std::pair<std::string, std::string>> pending;  // id, function
    int next = 0;
    json list = json::array();
    for (size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) return invalid(param, "each message must be an object");
        if (!noImages(m)) return invalid(param + ".images", "images are not supported: this model reads text only");
        json o = {{"role", m.value("role", json())}, {"content", m.contains("content") ? m["content"] : json("")}};
        if (auto t = m.find("thinking"); t != m.end() && t->is_string()) o["reasoning_content"] = *t;
        if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
            json converted = json::array();
            for (const json& c : *calls) {
                const json f = c.is_object() ? c.value("function", json::object()) : json::object();
                const std::string id = "call_" + std::to_string(next++);
                const json args = f.value("arguments", json::object());
                converted.push_back({{"id", id}, {"type", "function"},
                                     {"function", {{"name", f.value("name", json())}, {"arguments", args.is_string() ? args : json(toText(args))}}}});
                pending.emplace_back(id, f.value("name", std::string()));
            }
            o["tool_calls"] = converted;
        }
        if (o["role"] == "tool") {
            const std::string name = m.value("tool_name", m.value("name", std::string()));
            auto it = pending.begin();
            while (it != pending.end() && !name.empty() && it->second != name) ++it;
            if (it == pending.end() && !pending.empty()) it = pending.begin();
            o["tool_call_id"] = it != pending.end() ? it->first : "call_unknown";
            if (it != pending.end()) pending.erase(it);
        }
        list.push_back(std::move(o));
    }
    out["messages"] = list;
    return out;
}

json toolCallsJson(const std::vector<engine::ToolCall>& calls)
{
    json list = json::array();
    for (const engine::ToolCall& c : calls) {
        json args = json::parse(c.arguments, nullptr, false);
        if (!args.is_object()) args = json::object();
        list.push_back({{"function", {{"name", c.name}, {"arguments", args}}}});
    }
    return list;
}

class Ollama final : public Dialect {
public:
    Ollama(bool chat, bool chatting, std::string model) : m_chat(chat), m_chatting(chatting), m_model(std::move(model)) {}

    std::variant<CompletionRequest, ApiError> parse(std::string_view text) override
    {
        json body = json::parse(text.begin(), text.end(), nullptr, false);
        if (body.is_discarded()) return invalid("", "the request body is not valid JSON (or not valid UTF-8)");
        bool openAiChat = true;
        auto translated = translate(body, m_chat, m_chatting, openAiChat);
        if (auto* e = std::get_if<ApiError>(&translated)) return *e;
        return parseCompletionRequest(toText(std::get<json>(translated)), openAiChat);
    }
    std::string errorBody(const ApiError& e) const override { return ollamaError(e.message); }
    const char* streamType() const override { return "application/x-ndjson"; }
    std::vector<std::string> opening(const CompletionRequest&) override { return {}; }
    std::string piece(const CompletionRequest&, engine::ReplyPart part, const std::string& text, const ToolCallDelta*) override
    {
        // Ollama sends a call whole: the calls go out with the closing lines.
        if (part == engine::ReplyPart::ToolName || part == engine::ReplyPart::ToolCall || text.empty()) return {};
        json j = head();
        const char* field = part == engine::ReplyPart::Reasoning ? "thinking" : m_chat ? "content" : "response";
        if (m_chat) j["message"] = {{"role", "assistant"}, {"content", ""}};
        (m_chat ? j["message"] : j)[field] = text;
        if (!m_chat && part == engine::ReplyPart::Reasoning) j["response"] = "";
        j["done"] = false;
        return line(j);
    }
    std::vector<std::string> closing(const CompletionRequest&, const Finished& f) override
    {
        std::vector<std::string> out;
        if (!f.toolCalls.empty() && m_chat) {
            json j = head();
            j["message"] = {{"role", "assistant"}, {"content", ""}, {"tool_calls", toolCallsJson(f.toolCalls)}};
            j["done"] = false;
            out.push_back(line(j));
        }
        Finished last = f;
        last.text.clear();
        last.reasoning.clear();
        last.toolCalls.clear();
        out.push_back(line(final(last)));
        return out;
    }
    std::string streamError(const ApiError& e) const override { return ollamaError(e.message) + "\n"; }
    std::string end() const override { return {}; }
    std::string whole(const CompletionRequest&, const Finished& f) const override { return toText(final(f)); }

private:
    json head() const { return {{"model", m_model}, {"created_at", timestamp()}}; }
    static std::string line(const json& j) { return toText(j) + "\n"; }
    json final(const Finished& f) const
    {
        json j = head();
        if (m_chat) {
            j["message"] = {{"role", "assistant"}, {"content", f.text}};
            if (!f.reasoning.empty()) j["message"]["thinking"] = f.reasoning;
            if (!f.toolCalls.empty()) j["message"]["tool_calls"] = toolCallsJson(f.toolCalls);
        } else {
            j["response"] = f.text;
            if (!f.reasoning.empty()) j["thinking"] = f.reasoning;
        }
        j["done"] = true;
        j["done_reason"] = std::string(f.finish) == "length" ? "length" : "stop";
        j["total_duration"] = nanoseconds(f.totalSeconds);
        j["load_duration"] = 0;
        j["prompt_eval_count"] = f.usage.promptTokens;
        j["prompt_eval_duration"] = nanoseconds(f.promptSeconds);
        j["eval_count"] = f.usage.completionTokens;
        j["eval_duration"] = nanoseconds(f.decodeSeconds);
        return j;
    }

    bool m_chat, m_chatting;
    std::string m_model;
};

std::string parameterSize(uint64_t n)
{
    char buf[32];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
    else std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
    return buf;
}

json details(const ModelCard& m)
{
    return {{"parent_model", ""},
            {"format", "gguf"},
            {"family", m.architecture},
            {"families", json::array({m.architecture})},
            {"parameter_size", parameterSize(m.parameters)},
            {"quantization_level", m.quantization}};
}

}  // namespace

std::unique_ptr<Dialect> ollamaDialect(bool chat, bool chatting, std::string model)
{
    return std::make_unique<Ollama>(chat, chatting, std::move(model));
}

std::string ollamaTags(const std::vector<ModelCard>& models)
{
    json list = json::array();
    for (const ModelCard& m : models)
        list.push_back({{"name", m.name}, {"model", m.name}, {"modified_at", timestamp(m.modified)}, {"size", m.bytes},
                        {"digest", ""}, {"details", details(m)}});
    return toText(json{{"models", list}});
}

std::string ollamaPs(const std::vector<ModelCard>& models)
{
    json list = json::array();
    for (const ModelCard& m : models)
        list.push_back({{"name", m.name}, {"model", m.name}, {"size", m.bytes}, {"digest", ""}, {"details", details(m)},
                        {"expires_at", "0001-01-01T00:00:00Z"}, {"size_vram", 0}, {"context_length", m.contextLength}});
    return toText(json{{"models", list}});
}

std::string ollamaShow(const ModelCard& m)
{
    json info = {{"general.architecture", m.architecture}, {"general.parameter_count", m.parameters}};
    info[m.architecture + ".context_length"] = m.contextLength;
    return toText(json{{"modelfile", ""},
                       {"parameters", ""},
                       {"template", m.chatTemplate},
                       {"details", details(m)},
                       {"model_info", info},
                       {"capabilities", m.capabilities},
                       {"modified_at", timestamp(m.modified)}});
}

std::string ollamaVersion() { return R"({"version":"0.12.0"})"; }

std::string ollamaError(const std::string& message) { return toText(json{{"error", message}}); }

std::string ollamaShowModel(const std::string& body)
{
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object()) return {};
    for (const char* key : {"model", "name"})
        if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    return {};
}

}  // namespace spillway::server
