// The lexer: template text to tokens, following jinja2/lexer.py rule by rule, including its
// whitespace control (`-` and `+` on tags, trim_blocks, lstrip_blocks), raw blocks, comments
// and string literals unescaped as Python's "unicode-escape" codec does.

#include <string>

#include "core/chat/jinja_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway::jinja::detail {

namespace {

bool isDigit(char c)
{
    return c >= '0' && c <= '9';
}
bool isNameStart(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isNameChar(char c)
{
    return isNameStart(c) || isDigit(c);
}

int hexValue(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Operators, longest first (as Jinja's operator regex is sorted).
constexpr std::string_view kOperators[] = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";",
};

class Lexer {
public:
    Lexer(std::string_view source, const Syntax& syntax) : m_src(source), m_syntax(syntax) {}

    std::vector<Token> run()
    {
        while (m_pos < m_src.size()) {
            const size_t tag = findTagStart(m_pos);
            if (tag == std::string_view::npos) {
                emitText(std::string(m_src.substr(m_pos)), m_pos);
                break;
            }
            lexTag(tag);
        }
        Token end;
        end.type = TokenType::End;
        end.offset = static_cast<uint32_t>(m_src.size());
        m_tokens.push_back(std::move(end));
        return std::move(m_tokens);
    }

private:
    [[noreturn]] void syntaxError(size_t offset, std::string message) const
    {
        fail(TemplateError::Kind::Syntax, static_cast<uint32_t>(offset), std::move(message));
    }

    size_t findTagStart(size_t from) const
    {
        for (size_t i = m_src.find('{', from); i != std::string_view::npos;
             i = m_src.find('{', i + 1)) {
            if (i + 1 < m_src.size() &&
                (m_src[i + 1] == '{' || m_src[i + 1] == '%' || m_src[i + 1] == '#'))
                return i;
        }
        return std::string_view::npos;
    }

    size_t skipSpaces(size_t pos) const
    {
        size_t length = 0;
        while (pos < m_src.size() && isSpaceChar(m_src, pos, &length)) pos += length;
        return pos;
    }

    bool startsWith(size_t pos, std::string_view s) const
    {
        return m_src.substr(pos, s.size()) == s;
    }

    // Jinja's OptionalLStrip: the text before a tag loses its trailing whitespace for `-`, or
    // for lstrip_blocks the spaces between the line start and a block or comment tag.
    std::string stripBefore(std::string text, char sign, bool lstripApplies) const
    {
        if (sign == '-') return pyStrip(text, nullptr, false, true);
        if (sign == '+' || !lstripApplies || !m_syntax.lstripBlocks) return text;
        const size_t newline = text.rfind('\n');
        const size_t lineStart = newline == std::string::npos ? 0 : newline + 1;
        if (lineStart == 0 && !m_lineStarting) return text;
        if (lineStart == text.size()) return text;
        size_t length = 0;
        for (size_t pos = lineStart; pos < text.size(); pos += length)
            if (!isSpaceChar(text, pos, &length)) return text;
        text.resize(lineStart);
        return text;
    }

    // After a block or comment end: `-` eats all whitespace, trim_blocks one newline.
    size_t consumeAfterEnd(size_t pos, char sign)
    {
        if (sign == '-') {
            pos = skipSpaces(pos);
        } else if (sign != '+' && m_syntax.trimBlocks && pos < m_src.size() && m_src[pos] == '\n') {
            ++pos;
        }
        m_lineStarting = pos > 0 && m_src[pos - 1] == '\n';
        return pos;
    }

    void emitText(std::string text, size_t offset)
    {
        if (text.empty()) return;
        Token t;
        t.type = TokenType::Text;
        t.offset = static_cast<uint32_t>(offset);
        t.text = std::move(text);
        m_tokens.push_back(std::move(t));
    }

    void emit(TokenType type, size_t offset, std::string text = {})
    {
        Token t;
        t.type = type;
        t.offset = static_cast<uint32_t>(offset);
        t.text = std::move(text);
        m_tokens.push_back(std::move(t));
    }

    // `{% raw %}` (any whitespace, optional signs) at `tag`: where it ends, or npos.
    size_t matchRawTag(size_t tag, std::string_view word, char* endSign) const
    {
        size_t p = tag + 2;
        if (p < m_src.size() && (m_src[p] == '-' || m_src[p] == '+')) ++p;
        p = skipSpaces(p);
        if (!startsWith(p, word)) return std::string_view::npos;
        p = skipSpaces(p + word.size());
        *endSign = 0;
        if (startsWith(p, "-%}") || startsWith(p, "+%}")) {
            *endSign = m_src[p];
            return p + 3;
        }
        if (startsWith(p, "%}")) return p + 2;
        return std::string_view::npos;
    }

    void lexTag(size_t tag)
    {
        const char kind = m_src[tag + 1];
        size_t pos = tag + 2;
        char sign = 0;
        if (pos < m_src.size() && (m_src[pos] == '-' || m_src[pos] == '+')) sign = m_src[pos++];
        std::string text(m_src.substr(m_pos, tag - m_pos));
        emitText(stripBefore(std::move(text), sign, kind != '{'), m_pos);

        char endSign = 0;
        if (kind == '%') {
            const size_t rawEnd = matchRawTag(tag, "raw", &endSign);
            if (rawEnd != std::string_view::npos) {
                // Jinja's raw_begin rule keeps the newline after the tag (no trim_blocks).
                size_t p = rawEnd;
                if (endSign == '-') p = skipSpaces(p);
                m_lineStarting = p > 0 && m_src[p - 1] == '\n';
                lexRaw(tag, p);
                return;
            }
        }
        if (kind == '#') {
            const size_t close = m_src.find("#}", pos);
            if (close == std::string_view::npos) syntaxError(tag, "missing end of comment tag");
            if (close > pos && (m_src[close - 1] == '-' || m_src[close - 1] == '+'))
                endSign = m_src[close - 1];
            m_pos = consumeAfterEnd(close + 2, endSign);
            return;
        }
        const bool block = kind == '%';
        emit(block ? TokenType::BlockBegin : TokenType::VariableBegin, tag);
        m_pos = lexExpressionTokens(tag, pos, block);
    }

    void lexRaw(size_t tag, size_t contentStart)
    {
        for (size_t p = m_src.find("{%", contentStart); p != std::string_view::npos;
             p = m_src.find("{%", p + 1)) {
            char endSign = 0;
            const size_t end = matchRawTag(p, "endraw", &endSign);
            if (end == std::string_view::npos) continue;
            const char sign = p + 2 < m_src.size() && (m_src[p + 2] == '-' || m_src[p + 2] == '+')
                                  ? m_src[p + 2]
                                  : 0;
            std::string content(m_src.substr(contentStart, p - contentStart));
            emitText(stripBefore(std::move(content), sign, true), contentStart);
            m_pos = consumeAfterEnd(end, endSign);
            return;
        }
        syntaxError(tag, "missing end of raw directive ({% endraw %})");
    }

    // Tokens of a {{ }} or {% %} tag from `pos`; returns the position after its end.
    size_t lexExpressionTokens(size_t tag, size_t pos, bool block)
    {
        std::string brackets;  // the closing brackets expected, innermost last
        while (true) {
            pos = skipSpaces(pos);
            if (pos >= m_src.size())
                syntaxError(tag, std::string("unexpected end of template: missing '") +
                                     (block ? "%}" : "}}") + "' for the tag opened here");
            if (brackets.empty()) {
                if (block) {
                    if (startsWith(pos, "-%}") || startsWith(pos, "+%}")) {
                        emit(TokenType::BlockEnd, pos);
                        return consumeAfterEnd(pos + 3, m_src[pos]);
                    }
                    if (startsWith(pos, "%}")) {
                        emit(TokenType::BlockEnd, pos);
                        return consumeAfterEnd(pos + 2, 0);
                    }
                } else {
                    if (startsWith(pos, "-}}")) {
                        emit(TokenType::VariableEnd, pos);
                        const size_t end = skipSpaces(pos + 3);
                        m_lineStarting = m_src[end - 1] == '\n';
                        return end;
                    }
                    if (startsWith(pos, "}}")) {
                        emit(TokenType::VariableEnd, pos);
                        m_lineStarting = false;
                        return pos + 2;
                    }
                }
            }
            pos = lexOne(pos, brackets);
        }
    }

    // (\d+_)*\d+ at pos: its end, or npos.
    size_t matchDigits(size_t pos) const
    {
        if (pos >= m_src.size() || !isDigit(m_src[pos])) return std::string_view::npos;
        while (true) {
            while (pos < m_src.size() && isDigit(m_src[pos])) ++pos;
            if (pos + 1 < m_src.size() && m_src[pos] == '_' && isDigit(m_src[pos + 1])) {
                ++pos;
                continue;
            }
            return pos;
        }
    }

    size_t matchFloat(size_t pos) const
    {
        if (pos > 0 && m_src[pos - 1] == '.') return std::string_view::npos;
        const size_t whole = matchDigits(pos);
        if (whole == std::string_view::npos) return whole;
        size_t fraction = std::string_view::npos;
        if (whole < m_src.size() && m_src[whole] == '.') fraction = matchDigits(whole + 1);
        const size_t mantissa = fraction != std::string_view::npos ? fraction : whole;
        if (mantissa < m_src.size() && (m_src[mantissa] == 'e' || m_src[mantissa] == 'E')) {
            size_t p = mantissa + 1;
            if (p < m_src.size() && (m_src[p] == '+' || m_src[p] == '-')) ++p;
            const size_t exponent = matchDigits(p);
            if (exponent != std::string_view::npos) return exponent;
        }
        return fraction;
    }

    // 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*: the end and the value.
    size_t matchInteger(size_t pos, int64_t* value) const
    {
        auto digitsIn = [&](size_t p, int base) {
            size_t end = p;
            uint64_t v = 0;
            bool overflow = false;
            while (end < m_src.size()) {
                size_t q = end;
                if (m_src[q] == '_') ++q;
                if (q >= m_src.size()) break;
                const int d = hexValue(m_src[q]);
                if (d < 0 || d >= base) break;
                if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
                    overflow = true;
                v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
                end = q + 1;
            }
            if (overflow || v > static_cast<uint64_t>(INT64_MAX))
                syntaxError(pos, "integer literal is too large");
            *value = static_cast<int64_t>(v);
            return end;
        };
        if (m_src[pos] == '0' && pos + 1 < m_src.size()) {
            const char p = static_cast<char>(m_src[pos + 1] | 0x20);
            const int base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 0;
            if (base) {
                // The prefix needs at least one digit, possibly after one '_'.
                size_t q = pos + 2;
                if (q < m_src.size() && m_src[q] == '_') ++q;
                if (q < m_src.size() && hexValue(m_src[q]) >= 0 && hexValue(m_src[q]) < base)
                    return digitsIn(pos + 2, base);
            }
        }
        if (m_src[pos] == '0') {
            size_t end = pos + 1;
            while (true) {
                if (end < m_src.size() && m_src[end] == '0') {
                    ++end;
                } else if (end + 1 < m_src.size() && m_src[end] == '_' && m_src[end + 1] == '0') {
                    end += 2;
                } else {
                    break;
                }
            }
            *value = 0;
            return end;
        }
        if (!isDigit(m_src[pos])) return std::string_view::npos;
        return digitsIn(pos, 10);
    }

    size_t lexOne(size_t pos, std::string& brackets)
    {
        const char c = m_src[pos];
        if (isDigit(c)) {
            const size_t floatEnd = matchFloat(pos);
            if (floatEnd != std::string_view::npos) {
                std::string digits;
                for (size_t i = pos; i < floatEnd; ++i)
                    if (m_src[i] != '_') digits += m_src[i];
                Token t;
                t.type = TokenType::Float;
                t.offset = static_cast<uint32_t>(pos);
                t.floatValue = std::strtod(digits.c_str(), nullptr);
                m_tokens.push_back(std::move(t));
                return floatEnd;
            }
            int64_t value = 0;
            const size_t end = matchInteger(pos, &value);
            Token t;
            t.type = TokenType::Integer;
            t.offset = static_cast<uint32_t>(pos);
            t.intValue = value;
            m_tokens.push_back(std::move(t));
            return end;
        }
        if (isNameStart(c)) {
            size_t end = pos + 1;
            while (end < m_src.size() && isNameChar(m_src[end])) ++end;
            emit(TokenType::Name, pos, std::string(m_src.substr(pos, end - pos)));
            return end;
        }
        if (c == '\'' || c == '"') {
            size_t end = pos + 1;
            while (end < m_src.size() && m_src[end] != c) end += m_src[end] == '\\' ? 2 : 1;
            if (end < m_src.size()) {
                emit(TokenType::String, pos, unescape(m_src.substr(pos + 1, end - pos - 1), pos));
                return end + 1;
            }
            // An unterminated string: Jinja reports the quote as an unexpected character.
        }
        for (std::string_view op : kOperators) {
            if (!startsWith(pos, op)) continue;
            if (op == "{" || op == "(" || op == "[") {
                brackets += op == "{" ? '}' : op == "(" ? ')' : ']';
            } else if (op == "}" || op == ")" || op == "]") {
                if (brackets.empty()) syntaxError(pos, "unexpected '" + std::string(op) + "'");
                if (brackets.back() != op[0])
                    syntaxError(pos, "unexpected '" + std::string(op) + "', expected '" +
                                         brackets.back() + "'");
                brackets.pop_back();
            }
            emit(TokenType::Operator, pos, std::string(op));
            return pos + op.size();
        }
        const size_t n = utf8::charLength(m_src, pos);
        syntaxError(pos, "unexpected character '" + std::string(m_src.substr(pos, n)) + "'");
    }

    // Python's unicode-escape decoding of a string literal's body.
    std::string unescape(std::string_view body, size_t offset)
    {
        std::string out;
        out.reserve(body.size());
        for (size_t i = 0; i < body.size(); ++i) {
            if (body[i] != '\\' || i + 1 >= body.size()) {
                out += body[i];
                continue;
            }
            const char e = body[++i];
            switch (e) {
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case '\n': break;  // line continuation
            case 'x':
            case 'u':
            case 'U': {
                const size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                char32_t cp = 0;
                for (size_t k = 0; k < width; ++k) {
                    const int d = i + 1 + k < body.size() ? hexValue(body[i + 1 + k]) : -1;
                    if (d < 0)
                        syntaxError(offset,
                                    std::string("truncated \\") + e + " escape in a string");
                    cp = cp * 16 + static_cast<char32_t>(d);
                }
                i += width;
                if (cp > 0x10ffff) syntaxError(offset, "illegal Unicode character in a string");
                if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
                out += utf8::encode(cp);
                break;
            }
            case 'N': syntaxError(offset, "\\N{...} escapes are not supported");
            default:
                if (e >= '0' && e <= '7') {
                    char32_t cp = static_cast<char32_t>(e - '0');
                    for (int k = 0;
                         k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
                         ++k)
                        cp = cp * 8 + static_cast<char32_t>(body[++i] - '0');
                    out += utf8::encode(cp);
                } else {
                    out += '\\';
                    out += e;
                }
            }
        }
        return out;
    }

    std::string_view m_src;
    const Syntax& m_syntax;
    size_t m_pos = 0;
    bool m_lineStarting = true;
    std::vector<Token> m_tokens;
};

}  // namespace

std::string normalizeSource(std::string_view source, bool keepTrailingNewline)
{
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!keepTrailingNewline && !out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::vector<Token> tokenize(std::string_view source, const Syntax& syntax)
{
    return Lexer(source, syntax).run();
}

}  // namespace spillway::jinja::detail
