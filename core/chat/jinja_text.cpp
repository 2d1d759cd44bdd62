// Python's str on UTF-8 text (characters, whitespace, strip), and str()/repr() of values as
// Python prints them (float repr, quoted strings, lists, dicts).

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/chat/jinja_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway::jinja::detail {

// ---- text ----------------------------------------------------------------------------------

size_t charCount(std::string_view s)
{
    size_t n = 0;
    for (size_t pos = 0; pos < s.size(); pos += utf8::charLength(s, pos)) ++n;
    return n;
}

std::vector<std::string_view> splitChars(std::string_view s)
{
    std::vector<std::string_view> chars;
    for (size_t pos = 0; pos < s.size();) {
        const size_t n = utf8::charLength(s, pos);
        chars.push_back(s.substr(pos, n));
        pos += n;
    }
    return chars;
}

bool isSpaceChar(std::string_view s, size_t pos, size_t* length)
{
    const unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
        *length = 1;
        return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
    }
    const size_t n = utf8::sequenceLength(s, pos);
    *length = n == 0 ? 1 : n;
    if (n == 0) return false;
    const char32_t cp = utf8::decodeAt(s, pos, n);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string pyStrip(std::string_view s, const Value* chars, bool left, bool right)
{
    std::vector<std::string_view> set;
    const bool whitespace = chars == nullptr || chars->isNone() || chars->isUndefined();
    if (!whitespace) {
        if (!chars->isString()) runtimeError("strip arg must be None or str");
        set = splitChars(chars->str());
    }
    auto stripHere = [&](size_t pos, size_t* length) {
        if (whitespace) return isSpaceChar(s, pos, length);
        *length = utf8::charLength(s, pos);
        const std::string_view ch = s.substr(pos, *length);
        return std::find(set.begin(), set.end(), ch) != set.end();
    };
    size_t begin = 0;
    size_t length = 0;
    if (left) {
        while (begin < s.size() && stripHere(begin, &length)) begin += length;
    }
    size_t end = s.size();
    if (right) {
        // Walk the characters from `begin`, remembering where the last non-stripped one ends.
        size_t keepEnd = begin;
        for (size_t pos = begin; pos < s.size(); pos += length) {
            if (!stripHere(pos, &length)) keepEnd = pos + length;
        }
        end = keepEnd;
    }
    return std::string(s.substr(begin, end - begin));
}

// ---- str() and repr() --------------------------------------------------------------------------

std::string formatFloat(double v)
{
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
    std::string sign;
    if (!sci.empty() && sci[0] == '-') {
        sign = "-";
        sci.remove_prefix(1);
    }
    const size_t e = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e))
        if (c != '.') digits += c;
    int exponent = 0;
    std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                    exponent);
    // Python's repr: scientific notation below 1e-4 and from 1e16 up.
    if (exponent < -4 || exponent >= 16) {
        std::string out = sign + digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char exp[16];
        std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + exp;
    }
    const int point = exponent + 1;  // digits before the decimal point
    const int ndigits = static_cast<int>(digits.size());
    if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    if (point >= ndigits)
        return sign + digits + std::string(static_cast<size_t>(point - ndigits), '0') + ".0";
    return sign + digits.substr(0, static_cast<size_t>(point)) + "." +
           digits.substr(static_cast<size_t>(point));
}

namespace {

std::string reprString(std::string_view s)
{
    const bool hasSingle = s.find('\'') != std::string_view::npos;
    const bool hasDouble = s.find('"') != std::string_view::npos;
    const char quote = hasSingle && !hasDouble ? '"' : '\'';
    std::string out(1, quote);
    char buf[16];
    for (size_t pos = 0; pos < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[pos]);
        if (c < 0x80) {
            if (c == static_cast<unsigned char>(quote) || c == '\\') {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c == '\t') {
                out += "\\t";
            } else if (c == '\n') {
                out += "\\n";
            } else if (c == '\r') {
                out += "\\r";
            } else if (c < 0x20 || c == 0x7f) {
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
            ++pos;
            continue;
        }
        const size_t n = utf8::sequenceLength(s, pos);
        if (n == 0) {  // not UTF-8: show the byte
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
            ++pos;
            continue;
        }
        const char32_t cp = utf8::decodeAt(s, pos, n);
        // Python escapes the characters it does not call printable (controls, format
        // characters, separators other than the space).
        const bool hidden = cp <= 0xa0 || cp == 0xad || (cp >= 0x2000 && cp <= 0x200f) ||
                            (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) ||
                            cp == 0x3000 || cp == 0xfeff || cp == 0x1680;
        if (!hidden) {
            out.append(s.substr(pos, n));
        } else if (cp <= 0xff) {
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
            out += buf;
        } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            out += buf;
        }
        pos += n;
    }
    out += quote;
    return out;
}

class StrWriter {
public:
    explicit StrWriter(size_t maxBytes) : m_maxBytes(maxBytes) {}

    void write(const Value& v, bool quoted, int depth)
    {
        checkWalkDepth(depth);
        switch (v.kind()) {
        case Value::Kind::Undefined: append(quoted ? "Undefined" : ""); break;
        case Value::Kind::None: append("None"); break;
        case Value::Kind::Bool: append(v.boolValue() ? "True" : "False"); break;
        case Value::Kind::Int: append(std::to_string(v.intValue())); break;
        case Value::Kind::Float: append(formatFloat(v.floatValue())); break;
        case Value::Kind::String: append(quoted ? reprString(v.str()) : v.str()); break;
        case Value::Kind::List:
            if (v.isGenerator())
                append("<generator object>");
            else
                writeSequence(v, depth);
            break;
        case Value::Kind::Dict: writeMapping(v, depth); break;
        case Value::Kind::Namespace:
            append("<Namespace ");
            writeMapping(v, depth);
            append(">");
            break;
        case Value::Kind::Function:
            append("<function " + static_cast<const Function*>(v.object().get())->name + ">");
            break;
        }
    }

    std::string take() { return std::move(m_out); }

private:
    void writeSequence(const Value& v, int depth)
    {
        const bool tuple = v.isTuple();
        append(tuple ? "(" : "[");
        const auto& items = v.items();
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) append(", ");
            write(items[i], true, depth + 1);
        }
        if (tuple && items.size() == 1) append(",");
        append(tuple ? ")" : "]");
    }

    void writeMapping(const Value& v, int depth)
    {
        append("{");
        bool first = true;
        for (const auto& [key, value] : v.entries()) {
            if (!first) append(", ");
            first = false;
            write(key, true, depth + 1);
            append(": ");
            write(value, true, depth + 1);
        }
        append("}");
    }

    void append(std::string_view text)
    {
        if (m_out.size() + text.size() > m_maxBytes)
            fail(TemplateError::Kind::Limit, kNoOffset,
                 "a value prints to more than the limit of " + std::to_string(m_maxBytes) +
                     " bytes");
        m_out.append(text);
    }

    size_t m_maxBytes;
    std::string m_out;
};

}  // namespace

std::string toStr(const Value& v, size_t maxBytes)
{
    StrWriter writer(maxBytes);
    writer.write(v, false, 0);
    return writer.take();
}

std::string repr(const Value& v, size_t maxBytes)
{
    StrWriter writer(maxBytes);
    writer.write(v, true, 0);
    return writer.take();
}

}  // namespace spillway::jinja::detail
