#include "core/engine/tool_calls.h"

#include <algorithm>
#include <array>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/engine/reply_parser.h"

namespace spillway::engine {

using json = nlohmann::ordered_json;  // arguments keep the model's key order

namespace {

constexpr std::string_view kTagOpen = "<tool_call>";
constexpr std::string_view kTagClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralOpen = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kDeepSeekOpen = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekClose = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCallOpen = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallClose = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s)
{
    const size_t b = s.find_first_not_of(kSpace);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

bool blank(std::string_view s) { return s.find_first_not_of(kSpace) == std::string_view::npos; }

std::optional<json> parseJson(std::string_view text)
{
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

// Where the JSON object or array that opens at `from` ends (one past its closing bracket), npos
// when it does not close in `s`.
size_t jsonValueEnd(std::string_view s, size_t from)
{
    int depth = 0;
    bool inString = false, escaped = false;
    for (size_t i = from; i < s.size(); ++i) {
        const char c = s[i];
        if (inString) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') inString = false;
            continue;
        }
        if (c == '"') inString = true;
        else if (c == '{' || c == '[') ++depth;
        else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    }
    return std::string_view::npos;
}

// Arguments as OpenAI gives them: the JSON text of an object. A string that holds an object's
// JSON is taken as that object.
std::optional<std::string> argumentsText(const json& arguments)
{
    if (arguments.is_object()) return arguments.dump();
    if (arguments.is_string()) {
        auto inner = parseJson(arguments.get<std::string>());
        if (inner && inner->is_object()) return inner->dump();
    }
    return std::nullopt;
}

// {"name": ..., "arguments" | "parameters": {...}}.
std::optional<ToolCall> callOfObject(const json& j)
{
    if (!j.is_object()) return std::nullopt;
    const json* fields = &j;
    if (auto f = j.find("function"); f != j.end() && f->is_object()) fields = &*f;  // {"type": "function", "function": {...}}
    auto name = fields->find("name");
    if (name == fields->end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
    auto arguments = fields->find("arguments");
    if (arguments == fields->end()) arguments = fields->find("parameters");
    std::optional<std::string> args = arguments == fields->end() ? std::optional<std::string>("{}") : argumentsText(*arguments);
    if (!args) return std::nullopt;
    ToolCall call{{}, name->get<std::string>(), std::move(*args)};
    if (auto id = j.find("id"); id != j.end() && id->is_string()) call.id = id->get<std::string>();
    return call;
}

// An XML-style value: JSON where it reads as JSON and the schema does not say string.
json typedValue(const ToolSet& tools, const std::string& function, const std::string& key, std::string_view raw)
{
    std::string_view value = raw;
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    auto f = tools.stringParameters.find(function);
    const bool isString = f != tools.stringParameters.end() && f->second.contains(key);
    if (!isString)
        if (auto j = parseJson(value)) return *j;
    return std::string(value);
}

// `<function=NAME>` (`<parameter=KEY>` VALUE `</parameter>`)* `</function>`.
std::vector<ToolCall> parseXmlFunction(const ToolSet& tools, std::string_view body)
{
    constexpr std::string_view kFunction = "<function=", kParameter = "<parameter=", kParameterEnd = "</parameter>";
    std::vector<ToolCall> calls;
    size_t at = 0;
    while ((at = body.find(kFunction, at)) != std::string_view::npos) {
        const size_t nameEnd = body.find('>', at);
        if (nameEnd == std::string_view::npos) return {};
        const std::string name(trim(body.substr(at + kFunction.size(), nameEnd - at - kFunction.size())));
        const size_t end = body.find("</function>", nameEnd);
        if (name.empty() || end == std::string_view::npos) return {};
        json arguments = json::object();
        const std::string_view inside = body.substr(nameEnd + 1, end - nameEnd - 1);
        size_t p = 0;
        while ((p = inside.find(kParameter, p)) != std::string_view::npos) {
            const size_t keyEnd = inside.find('>', p);
            const size_t valueEnd = keyEnd == std::string_view::npos ? keyEnd : inside.find(kParameterEnd, keyEnd);
            if (valueEnd == std::string_view::npos) return {};
            const std::string key(trim(inside.substr(p + kParameter.size(), keyEnd - p - kParameter.size())));
            arguments[key] = typedValue(tools, name, key, inside.substr(keyEnd + 1, valueEnd - keyEnd - 1));
            p = valueEnd + kParameterEnd.size();
        }
        calls.push_back({{}, name, arguments.dump()});
        at = end;
    }
    return calls;
}

// NAME (`<arg_key>KEY</arg_key>` `<arg_value>VALUE</arg_value>`)*.
std::vector<ToolCall> parseArgKeys(const ToolSet& tools, std::string_view body)
{
    constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>", kValue = "<arg_value>", kValueEnd = "</arg_value>";
    const size_t first = body.find(kKey);
    const std::string name(trim(body.substr(0, first)));
    if (name.empty() || name.find_first_of("<>{}\n") != std::string::npos) return {};
    json arguments = json::object();
    size_t p = first;
    while (p != std::string_view::npos) {
        const size_t keyEnd = body.find(kKeyEnd, p);
        const size_t value = keyEnd == std::string_view::npos ? keyEnd : body.find(kValue, keyEnd);
        const size_t valueEnd = value == std::string_view::npos ? value : body.find(kValueEnd, value);
        if (valueEnd == std::string_view::npos || !blank(body.substr(keyEnd + kKeyEnd.size(), value - keyEnd - kKeyEnd.size())))
            return {};
        const std::string key(trim(body.substr(p + kKey.size(), keyEnd - p - kKey.size())));
        const std::string_view raw = body.substr(value + kValue.size(), valueEnd - value - kValue.size());
        arguments[key] = typedValue(tools, name, key, raw);
        p = body.find(kKey, valueEnd);
        if (!blank(body.substr(valueEnd + kValueEnd.size(), (p == std::string_view::npos ? body.size() : p) -
                                                                valueEnd - kValueEnd.size())))
            return {};
    }
    return {ToolCall{{}, name, arguments.dump()}};
}

std::vector<ToolCall> parseTag(const ToolSet& tools, std::string_view body)
{
    const std::string_view t = trim(body);
    if (t.starts_with('{')) {
        auto j = parseJson(t);
        if (!j) return {};
        if (auto call = callOfObject(*j)) return {*call};
        return {};
    }
    if (t.starts_with("<function=")) return parseXmlFunction(tools, t);
    return parseArgKeys(tools, t);
}

// JSON objects one after another, `;` or white space between them.
std::vector<ToolCall> parseLlama3(std::string_view body)
{
    std::string_view t = trim(body);
    if (t.starts_with(kPythonTag)) t = trim(t.substr(kPythonTag.size()));
    std::vector<ToolCall> calls;
    size_t at = 0;
    while (at < t.size()) {
        if (t[at] != '{') return {};
        const size_t end = jsonValueEnd(t, at);
        if (end == std::string_view::npos) return {};
        auto j = parseJson(t.substr(at, end - at));
        std::optional<ToolCall> call = j ? callOfObject(*j) : std::nullopt;
        if (!call) return {};
        calls.push_back(std::move(*call));
        at = t.find_first_not_of(" \t\r\n;", end);
        if (at == std::string_view::npos) break;
    }
    return calls;
}

std::vector<ToolCall> parseMistral(std::string_view body)
{
    std::vector<ToolCall> calls;
    std::string_view rest = body;
    while (!blank(rest)) {
        std::string_view t = trim(rest);
        if (t.starts_with(kMistralOpen)) t = trim(t.substr(kMistralOpen.size()));
        if (t.starts_with('[')) {  // [{"name": ..., "arguments": ...}, ...]
            const size_t end = jsonValueEnd(t, 0);
            auto j = end == std::string_view::npos ? std::nullopt : parseJson(t.substr(0, end));
            if (!j || !j->is_array() || j->empty()) return {};
            for (const json& item : *j) {
                auto call = callOfObject(item);
                if (!call) return {};
                calls.push_back(std::move(*call));
            }
            rest = t.substr(end);
            continue;
        }
        // NAME [CALL_ID]ID? [ARGS] {...}
        const size_t args = t.find(kMistralArgs);
        if (args == std::string_view::npos) return {};
        std::string_view head = t.substr(0, args);
        std::string id;
        if (const size_t c = head.find(kMistralCallId); c != std::string_view::npos) {
            id = std::string(trim(head.substr(c + kMistralCallId.size())));
            head = head.substr(0, c);
        }
        const std::string name(trim(head));
        const size_t open = t.find_first_not_of(kSpace, args + kMistralArgs.size());
        if (name.empty() || open == std::string_view::npos || t[open] != '{') return {};
        const size_t end = jsonValueEnd(t, open);
        auto j = end == std::string_view::npos ? std::nullopt : parseJson(t.substr(open, end - open));
        if (!j || !j->is_object()) return {};
        calls.push_back({id, name, j->dump()});
        rest = t.substr(end);
    }
    return calls;
}

std::vector<ToolCall> parseDeepSeek(std::string_view body)
{
    std::vector<ToolCall> calls;
    size_t at = 0;
    while ((at = body.find(kDeepSeekCallOpen, at)) != std::string_view::npos) {
        const size_t begin = at + kDeepSeekCallOpen.size();
        size_t end = body.find(kDeepSeekCallClose, begin);
        const bool closed = end != std::string_view::npos;
        if (!closed) end = body.size();
        const std::string_view call = body.substr(begin, end - begin);
        const size_t sep = call.find(kDeepSeekSep);
        if (sep == std::string_view::npos) return {};
        std::string_view name = trim(call.substr(0, sep));
        std::string_view args = call.substr(sep + kDeepSeekSep.size());
        if (name == "function") {  // R1 and V3: function<sep>NAME\n```json\n{...}\n```
            const size_t line = args.find('\n');
            if (line == std::string_view::npos) return {};
            name = trim(args.substr(0, line));
            args = trim(args.substr(line));
            if (args.starts_with("```")) {
                args = args.substr(std::min(args.size(), args.find('\n')));
                if (const size_t fence = args.rfind("```"); fence != std::string_view::npos) args = args.substr(0, fence);
            }
        }
        auto j = parseJson(trim(args));
        std::optional<std::string> text = j ? argumentsText(*j) : std::nullopt;
        if (name.empty() || !text) return {};
        calls.push_back({{}, std::string(name), std::move(*text)});
        at = closed ? end + kDeepSeekCallClose.size() : end;
    }
    return calls;
}

// The markers that open a call, and the one that closes it ("" = the end of the reply).
struct Markers {
    std::vector<std::string_view> open;
    std::string_view close;
};

Markers markersOf(ToolSyntax syntax)
{
    switch (syntax) {
    case ToolSyntax::Tag: return {{kTagOpen}, kTagClose};
    case ToolSyntax::Mistral: return {{kMistralOpen}, {}};
    case ToolSyntax::DeepSeek: return {{kDeepSeekOpen, kDeepSeekCallOpen}, kDeepSeekClose};
    case ToolSyntax::Llama3Json: return {{}, {}};  // opens only at the start: see feed()
    case ToolSyntax::None:
    case ToolSyntax::Harmony: break;
    }
    return {};
}

}  // namespace

size_t partialMarker(std::string_view text, std::span<const std::string_view> markers)
{
    size_t keep = 0;
    for (std::string_view m : markers)
        for (size_t n = std::min(text.size(), m.size() - 1); n > keep; --n)
            if (text.substr(text.size() - n) == m.substr(0, n)) {
                keep = n;
                break;
            }
    return keep;
}

const char* toolSyntaxName(ToolSyntax syntax)
{
    switch (syntax) {
    case ToolSyntax::None: return "none";
    case ToolSyntax::Tag: return "tag";
    case ToolSyntax::Llama3Json: return "llama3-json";
    case ToolSyntax::Mistral: return "mistral";
    case ToolSyntax::DeepSeek: return "deepseek";
    case ToolSyntax::Harmony: return "harmony";
    }
    return "none";
}

ToolSyntax toolSyntaxOf(std::string_view source)
{
    if (source.find("<|channel|>") != std::string_view::npos && source.find("<|message|>") != std::string_view::npos)
        return ToolSyntax::Harmony;
    if (source.find("tool▁calls▁begin") != std::string_view::npos) return ToolSyntax::DeepSeek;
    if (source.find(kMistralOpen) != std::string_view::npos) return ToolSyntax::Mistral;
    if (source.find(kTagOpen) != std::string_view::npos) return ToolSyntax::Tag;
    if (source.find(kPythonTag) != std::string_view::npos ||
        (source.find("<|start_header_id|>") != std::string_view::npos && source.find("parameters") != std::string_view::npos &&
         templateKnowsTools(source)))
        return ToolSyntax::Llama3Json;
    return ToolSyntax::Tag;
}

bool isToolMarker(ToolSyntax syntax, std::string_view text)
{
    if (syntax == ToolSyntax::Llama3Json) return text == kPythonTag;
    if (syntax == ToolSyntax::Mistral) return text == kMistralOpen || text == kMistralArgs || text == kMistralCallId;
    if (syntax == ToolSyntax::Tag) return text == kTagOpen || text == kTagClose;
    if (syntax == ToolSyntax::DeepSeek)
        return text == kDeepSeekOpen || text == kDeepSeekClose || text == kDeepSeekCallOpen || text == kDeepSeekCallClose ||
               text == kDeepSeekSep;
    return false;
}

bool templateKnowsTools(std::string_view source) { return source.find("tools") != std::string_view::npos; }

ToolSet toolSetOf(ToolSyntax syntax, std::string_view toolsJson)
{
    ToolSet set;
    set.syntax = syntax;
    auto tools = parseJson(toolsJson);
    if (!tools || !tools->is_array()) return set;
    for (const json& tool : *tools) {
        const json* f = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
        if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) continue;
        std::set<std::string>& strings = set.stringParameters[(*f)["name"].get<std::string>()];
        const json* props = f->contains("parameters") && (*f)["parameters"].is_object() &&
                                    (*f)["parameters"].contains("properties")
                                ? &(*f)["parameters"]["properties"]
                                : nullptr;
        if (!props || !props->is_object()) continue;
        for (const auto& [key, schema] : props->items())
            if (schema.is_object() && schema.value("type", json()) == "string") strings.insert(key);
    }
    return set;
}

std::string toolInstructions(ToolSyntax syntax, std::string_view toolsJson)
{
    auto list = parseJson(toolsJson);
    if (!list || !list->is_array()) list = json::array();
    if (syntax == ToolSyntax::DeepSeek) {  // the format of DeepSeek-V3.1's model card
        std::string text = "## Tools\nYou have access to the following tools:\n";
        for (const json& t : *list) {
            const json f = t.is_object() ? t.value("function", json::object()) : json::object();
            text += "\n### " + f.value("name", std::string()) + "\nDescription: " + f.value("description", std::string()) +
                    "\n\nParameters: " + f.value("parameters", json::object()).dump() + "\n";
        }
        return text + "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
                      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments"
                      "<｜tool▁call▁end｜>{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n- `tool_call_name` must "
                      "be an exact match to one of the available tools\n- `tool_call_arguments` must be valid JSON that "
                      "strictly follows the tool's Parameters Schema\n- For multiple tool calls, chain them directly "
                      "without separators or spaces";
    }
    std::string tools;
    for (const json& t : *list) tools += t.dump() + "\n";
    return "You may call one or more functions to assist with the user query. The functions, as JSON "
           "Schema:\n<tools>\n" +
           tools +
           "</tools>\nTo call a function, reply with its name and arguments as a JSON object within "
           "<tool_call></tool_call> tags, and nothing after:\n<tool_call>\n{\"name\": <function-name>, "
           "\"arguments\": <args-json-object>}\n</tool_call>";
}

std::vector<ToolCall> parseToolCalls(const ToolSet& tools, std::string_view body)
{
    switch (tools.syntax) {
    case ToolSyntax::Tag: return parseTag(tools, body);
    case ToolSyntax::Llama3Json: return parseLlama3(body);
    case ToolSyntax::Mistral: return parseMistral(body);
    case ToolSyntax::DeepSeek: return parseDeepSeek(body);
    case ToolSyntax::None:
    case ToolSyntax::Harmony: break;
    }
    return {};
}

ToolCallScanner::ToolCallScanner(ToolSet tools) : m_tools(std::move(tools)) {}

bool ToolCallScanner::text(std::string_view t, const Sink& sink)
{
    if (t.empty()) return true;
    if (m_afterCall) {  // white space between calls, or after the last, is no answer
        m_held += t;
        if (blank(m_held)) return true;
        m_afterCall = false;
        const std::string held = std::move(m_held);
        m_held.clear();
        return sink(ReplyPart::Content, held);
    }
    return sink(ReplyPart::Content, t);
}

bool ToolCallScanner::emitCall(std::string_view raw, std::string_view body, const Sink& sink)
{
    std::vector<ToolCall> calls = parseToolCalls(m_tools, body);
    if (calls.empty()) {
        m_afterCall = false;
        const std::string held = std::move(m_held);
        m_held.clear();
        return text(held, sink) && text(raw, sink);  // not a call: the text it was
    }
    m_held.clear();
    m_afterCall = true;
    bool more = true;
    for (ToolCall& call : calls) {
        m_calls.push_back(std::move(call));
        more = more && sink(ReplyPart::ToolName, m_calls.back().name) && sink(ReplyPart::ToolCall, m_calls.back().arguments);
    }
    return more;
}

bool ToolCallScanner::feed(std::string_view t, const Sink& sink)
{
    m_pending += t;
    if (m_tools.syntax == ToolSyntax::None || m_tools.syntax == ToolSyntax::Harmony) {
        const std::string all = std::move(m_pending);
        m_pending.clear();
        return text(all, sink);
    }
    const Markers markers = markersOf(m_tools.syntax);
    for (;;) {
        if (!m_inCall) {
            if (m_tools.syntax == ToolSyntax::Llama3Json) {
                if (!m_atStart) {
                    const std::string all = std::move(m_pending);
                    m_pending.clear();
                    return text(all, sink);
                }
                const size_t first = m_pending.find_first_not_of(kSpace);
                if (first == std::string::npos) return true;
                const std::string_view rest = std::string_view(m_pending).substr(first);
                if (rest.starts_with('{') || rest.starts_with(kPythonTag)) {
                    m_pending.erase(0, first);
                    m_inCall = true;
                    m_atStart = false;
                    return true;  // the whole reply is the call: read at the end
                }
                if (kPythonTag.starts_with(rest)) return true;
                m_atStart = false;
                continue;
            }
            size_t at = std::string::npos;
            std::string_view marker;
            for (std::string_view m : markers.open)
                if (const size_t p = m_pending.find(m); p < at) {
                    at = p;
                    marker = m;
                }
            if (at == std::string::npos) {
                const size_t keep = partialMarker(m_pending, markers.open);
                const std::string ready = m_pending.substr(0, m_pending.size() - keep);
                m_pending.erase(0, ready.size());
                return text(ready, sink);
            }
            const std::string before = m_pending.substr(0, at);
            if (!text(before, sink)) return false;
            // A DeepSeek call that opens without the calls' marker keeps its own in the body.
            const bool keep = marker == kDeepSeekCallOpen;
            m_open = keep ? std::string() : std::string(marker);
            m_pending.erase(0, at + (keep ? 0 : marker.size()));
            m_inCall = true;
            continue;
        }
        if (markers.close.empty()) return true;  // the call runs to the end of the reply
        const size_t close = m_pending.find(markers.close);
        if (close == std::string::npos) return true;
        const std::string body = m_pending.substr(0, close);
        const std::string raw = m_open + body + std::string(markers.close);
        m_pending.erase(0, close + markers.close.size());
        m_inCall = false;
        if (!emitCall(raw, body, sink)) return false;
    }
}

bool ToolCallScanner::finish(const Sink& sink)
{
    std::string rest = std::move(m_pending);
    m_pending.clear();
    if (m_inCall) {
        m_inCall = false;
        return emitCall(m_open + rest, rest, sink);  // read as far as it goes, else the text it was
    }
    if (m_tools.syntax == ToolSyntax::Llama3Json && m_atStart && blank(rest)) return true;
    if (!text(rest, sink)) return false;
    m_held.clear();  // white space after the last call
    return true;
}

}  // namespace spillway::engine
