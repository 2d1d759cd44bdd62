// Letter case as Python's str methods change it: ASCII, Latin-1, Latin Extended-A (with the
// three-form digraphs), Greek and Cyrillic. Other scripts are left as they are (Python's full
// Unicode tables are not reproduced).

#include "core/chat/jinja_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway::jinja::detail {

// ---- letter case -------------------------------------------------------------------------------

namespace {

// Latin Extended-A (U+0100..U+017F) pairs its letters upper/lower, in two phases.
bool latinExtAUpper(char32_t c)
{
    if (c >= 0x100 && c <= 0x137) return c % 2 == 0;
    if (c >= 0x139 && c <= 0x148) return c % 2 == 1;
    if (c >= 0x14a && c <= 0x177) return c % 2 == 0;
    if (c >= 0x179 && c <= 0x17e) return c % 2 == 1;
    return false;
}
bool latinExtALower(char32_t c)
{
    if (c >= 0x101 && c <= 0x137) return c % 2 == 1;
    if (c >= 0x13a && c <= 0x148) return c % 2 == 0;
    if (c >= 0x14b && c <= 0x177) return c % 2 == 1;
    if (c >= 0x17a && c <= 0x17e) return c % 2 == 0;
    return false;
}

// The Latin digraphs with three forms: upper (DŽ), title (Dž), lower (dž).
char32_t digraphForm(char32_t c, int form)
{
    for (char32_t first : {char32_t{0x1c4}, char32_t{0x1c7}, char32_t{0x1ca}, char32_t{0x1f1}})
        if (c >= first && c < first + 3) return first + static_cast<char32_t>(form);
    return 0;
}

enum class CaseOp { Upper, Lower, Title };

// Applies `op` to the character at s[pos] (of `length` bytes), appending to `out`.
void mapChar(std::string_view s, size_t pos, size_t length, CaseOp op, std::string& out)
{
    const size_t n = utf8::sequenceLength(s, pos);
    if (n == 0) {
        out.append(s.substr(pos, length));
        return;
    }
    const char32_t c = utf8::decodeAt(s, pos, n);
    if (c == 0xdf && op != CaseOp::Lower) {  // ß
        out += op == CaseOp::Upper ? "SS" : "Ss";
        return;
    }
    char32_t mapped = op == CaseOp::Lower ? lowerOf(c) : upperOf(c);
    if (op == CaseOp::Title && digraphForm(c, 1)) mapped = digraphForm(c, 1);
    if (mapped == c) {
        out.append(s.substr(pos, n));
    } else {
        out += utf8::encode(mapped);
    }
}

std::string mapText(std::string_view s, CaseOp op)
{
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
        n = utf8::charLength(s, pos);
        mapChar(s, pos, n, op, out);
    }
    return out;
}

}  // namespace

char32_t upperOf(char32_t c)
{
    if (const char32_t d = digraphForm(c, 0)) return d;
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
    if (c == 0xff) return 0x178;
    if (c == 0xb5) return 0x39c;
    if (latinExtALower(c)) return c - 1;
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    if (c >= 0x3b1 && c <= 0x3c9) return c == 0x3c2 ? 0x3a3 : c - 32;
    if (c == 0x3ac) return 0x386;
    if (c >= 0x3ad && c <= 0x3af) return c - 37;
    if (c == 0x3cc) return 0x38c;
    if (c == 0x3cd || c == 0x3ce) return c - 63;
    if (c >= 0x430 && c <= 0x44f) return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    return c;
}

char32_t lowerOf(char32_t c)
{
    if (const char32_t d = digraphForm(c, 2)) return d;
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
    if (c == 0x178) return 0xff;
    if (latinExtAUpper(c)) return c + 1;
    if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
    if (c == 0x386) return 0x3ac;
    if (c >= 0x388 && c <= 0x38a) return c + 37;
    if (c == 0x38c) return 0x3cc;
    if (c == 0x38e || c == 0x38f) return c + 63;
    if (c >= 0x410 && c <= 0x42f) return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    return c;
}

char32_t decodeChar(std::string_view s, size_t pos, size_t* length)
{
    const size_t n = utf8::sequenceLength(s, pos);
    *length = n == 0 ? 1 : n;
    return n == 0 ? 0xfffd : utf8::decodeAt(s, pos, n);
}

bool isCased(char32_t c)
{
    return upperOf(c) != c || lowerOf(c) != c || c == 0xdf || c == 0x138;
}

std::string upperText(std::string_view s)
{
    return mapText(s, CaseOp::Upper);
}
std::string lowerText(std::string_view s)
{
    return mapText(s, CaseOp::Lower);
}

std::string capitalizeText(std::string_view s)
{
    std::string out;
    for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
        n = utf8::charLength(s, pos);
        mapChar(s, pos, n, pos == 0 ? CaseOp::Title : CaseOp::Lower, out);
    }
    return out;
}

std::string pyTitleText(std::string_view s)
{
    std::string out;
    bool previousCased = false;
    for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
        const char32_t c = decodeChar(s, pos, &n);
        mapChar(s, pos, n, previousCased ? CaseOp::Lower : CaseOp::Title, out);
        previousCased = isCased(c);
    }
    return out;
}

std::string jinjaTitleText(std::string_view s)
{
    std::string out;
    bool wordStart = true;
    for (size_t pos = 0, n = 0; pos < s.size(); pos += n) {
        size_t spaceLength = 0;
        const bool separator = isSpaceChar(s, pos, &spaceLength) || s[pos] == '-' ||
                               s[pos] == '(' || s[pos] == '{' || s[pos] == '[' || s[pos] == '<';
        n = utf8::charLength(s, pos);
        if (separator) {
            out.append(s.substr(pos, n));
            wordStart = true;
            continue;
        }
        mapChar(s, pos, n, wordStart ? CaseOp::Upper : CaseOp::Lower, out);
        wordStart = false;
    }
    return out;
}

}  // namespace spillway::jinja::detail
