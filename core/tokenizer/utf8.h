#pragma once
// UTF-8 helpers shared by the tokenizers. Text handed to encode() is untrusted: invalid
// sequences are never rejected, they are walked one byte at a time so every byte still reaches
// a token (byte fallback) and decode(encode(s)) == s holds for any bytes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway::utf8 {

// Length in bytes (1..4) of the well-formed UTF-8 sequence starting at text[pos], or 0 when the
// bytes there are not one (stray continuation byte, overlong form, surrogate, > U+10FFFF,
// truncated). The same rules as PCRE2's UTF check, so valid runs can be matched without it.
size_t sequenceLength(std::string_view text, size_t pos);

// Length of the next character for splitting: the sequence length, or 1 for an invalid byte.
inline size_t charLength(std::string_view text, size_t pos)
{
    const size_t n = sequenceLength(text, pos);
    return n == 0 ? 1 : n;
}

bool isValid(std::string_view text);

// The UTF-8 bytes of code point `cp` (which must be <= U+10FFFF and not a surrogate).
std::string encode(char32_t cp);

// The code point of the well-formed sequence at text[pos] (length from sequenceLength()).
char32_t decodeAt(std::string_view text, size_t pos, size_t length);

}  // namespace spillway::utf8
