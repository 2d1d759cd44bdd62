// json.dumps() as transformers' tojson filter calls it: ensure_ascii=False by default, Python's
// separators and indentation, floats as Python prints them.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/chat/jinja_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway::jinja::detail {

namespace {

class JsonWriter {
public:
    JsonWriter(const JsonStyle& style, size_t maxBytes) : m_style(style), m_maxBytes(maxBytes) {}

    void write(const Value& v, int level)
    {
        checkWalkDepth(level);
        switch (v.kind()) {
        case Value::Kind::None: append("null"); break;
        case Value::Kind::Bool: append(v.boolValue() ? "true" : "false"); break;
        case Value::Kind::Int: append(std::to_string(v.intValue())); break;
        case Value::Kind::Float: append(floatText(v.floatValue())); break;
        case Value::Kind::String: writeString(v.str()); break;
        case Value::Kind::List: {
            if (v.isGenerator()) runtimeError("Object of type generator is not JSON serializable");
            const auto& items = v.items();
            if (items.empty()) {
                append("[]");
                break;
            }
            append("[");
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) append(m_style.itemSeparator);
                newline(level + 1);
                write(items[i], level + 1);
            }
            newline(level);
            append("]");
            break;
        }
        case Value::Kind::Dict: writeObject(v, level); break;
        default: runtimeError("Object of type " + typeName(v) + " is not JSON serializable");
        }
    }

    std::string take() { return std::move(m_out); }

private:
    static std::string floatText(double f)
    {
        if (std::isnan(f)) return "NaN";
        if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
        return formatFloat(f);
    }

    static std::string keyText(const Value& key)
    {
        switch (key.kind()) {
        case Value::Kind::String: return key.str();
        case Value::Kind::None: return "null";
        case Value::Kind::Bool: return key.boolValue() ? "true" : "false";
        case Value::Kind::Int: return std::to_string(key.intValue());
        case Value::Kind::Float: return floatText(key.floatValue());
        default: runtimeError("keys must be str, int, float, bool or None, not " + typeName(key));
        }
    }

    void writeObject(const Value& v, int level)
    {
        std::vector<std::pair<std::string, const Value*>> members;
        for (const auto& [key, value] : v.entries()) members.emplace_back(keyText(key), &value);
        if (m_style.sortKeys)
            std::stable_sort(members.begin(), members.end(),
                             [](const auto& x, const auto& y) { return x.first < y.first; });
        if (members.empty()) {
            append("{}");
            return;
        }
        append("{");
        for (size_t i = 0; i < members.size(); ++i) {
            if (i) append(m_style.itemSeparator);
            newline(level + 1);
            writeString(members[i].first);
            append(m_style.keySeparator);
            write(*members[i].second, level + 1);
        }
        newline(level);
        append("}");
    }

    void newline(int level)
    {
        if (m_style.indent < 0 && m_style.indentText.empty()) return;
        append("\n");
        const std::string unit = m_style.indentText.empty()
                                     ? std::string(static_cast<size_t>(m_style.indent), ' ')
                                     : m_style.indentText;
        for (int i = 0; i < level; ++i) append(unit);
    }

    void writeString(std::string_view s)
    {
        std::string out = "\"";
        char buf[16];
        for (size_t pos = 0; pos < s.size();) {
            const unsigned char c = static_cast<unsigned char>(s[pos]);
            switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20 || (m_style.ensureAscii && c == 0x7f)) {
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else if (c >= 0x80 && m_style.ensureAscii) {
                    const size_t n = utf8::sequenceLength(s, pos);
                    const char32_t cp = n == 0 ? 0xfffd : utf8::decodeAt(s, pos, n);
                    if (cp >= 0x10000) {
                        const char32_t v = cp - 0x10000;
                        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                                      static_cast<unsigned>(0xd800 + (v >> 10)),
                                      static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
                    } else {
                        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
                    }
                    out += buf;
                    pos += n == 0 ? 1 : n;
                    continue;
                } else {
                    out += static_cast<char>(c);
                }
            }
            ++pos;
        }
        out += '"';
        append(out);
    }

    void append(std::string_view text)
    {
        if (m_out.size() + text.size() > m_maxBytes)
            fail(TemplateError::Kind::Limit, kNoOffset,
                 "tojson output is longer than the limit of " + std::to_string(m_maxBytes) +
                     " bytes");
        m_out.append(text);
    }

    const JsonStyle& m_style;
    size_t m_maxBytes;
    std::string m_out;
};

}  // namespace

std::string toJson(const Value& v, const JsonStyle& style, size_t maxBytes)
{
    JsonWriter writer(style, maxBytes);
    writer.write(v, 0);
    return writer.take();
}

}  // namespace spillway::jinja::detail
