#include "core/tokenizer/utf8.h"

namespace spillway::utf8 {

size_t sequenceLength(std::string_view text, size_t pos)
{
    if (pos >= text.size()) return 0;
    const auto byteAt = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
    const uint8_t lead = byteAt(pos);
    if (lead < 0x80) return 1;
    size_t length = 0;
    uint8_t low = 0x80, high = 0xBF;  // allowed range of the second byte (RFC 3629 table)
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;        // no overlong forms
        if (lead == 0xED) high = 0x9F;       // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;        // no overlong forms
        if (lead == 0xF4) high = 0x8F;       // nothing above U+10FFFF
    } else {
        return 0;  // continuation byte, 0xC0/0xC1 (overlong) or 0xF5..0xFF
    }
    if (pos + length > text.size()) return 0;
    const uint8_t second = byteAt(pos + 1);
    if (second < low || second > high) return 0;
    for (size_t i = 2; i < length; ++i)
        if ((byteAt(pos + i) & 0xC0) != 0x80) return 0;
    return length;
}

bool isValid(std::string_view text)
{
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t n = sequenceLength(text, pos);
        if (n == 0) return false;
        pos += n;
    }
    return true;
}

std::string encode(char32_t cp)
{
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

char32_t decodeAt(std::string_view text, size_t pos, size_t length)
{
    const auto byteAt = [&](size_t i) { return static_cast<uint8_t>(text[pos + i]); };
    switch (length) {
    case 1: return byteAt(0);
    case 2: return char32_t(byteAt(0) & 0x1F) << 6 | (byteAt(1) & 0x3F);
    case 3:
        return char32_t(byteAt(0) & 0x0F) << 12 | char32_t(byteAt(1) & 0x3F) << 6 |
               (byteAt(2) & 0x3F);
    case 4:
        return char32_t(byteAt(0) & 0x07) << 18 | char32_t(byteAt(1) & 0x3F) << 12 |
               char32_t(byteAt(2) & 0x3F) << 6 | (byteAt(3) & 0x3F);
    default: return 0xFFFD;
    }
}

}  // namespace spillway::utf8
