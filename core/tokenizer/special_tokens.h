#pragma once
// Finds special tokens written literally in the text ("<|im_start|>") before the text is
// tokenized, as llama.cpp's "parse special" does: the text becomes a list of fragments, each
// either plain text or one special token.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace spillway {

struct TextFragment {
    std::string_view text;  // plain text to tokenize (empty when `token` is set)
    int32_t token = -1;     // >= 0: a special token matched in the text
};

class SpecialTokenMatcher {
public:
    SpecialTokenMatcher() = default;
    // Matches the non-empty tokens whose type is one of `types`.
    SpecialTokenMatcher(const Vocabulary& vocab, std::initializer_list<TokenType> types);

    bool empty() const { return m_count == 0; }
    // At each position the longest special token starting there wins; the rest is text.
    std::vector<TextFragment> split(std::string_view text) const;

private:
    struct Candidate {
        std::string_view text;  // a view into the vocabulary, which outlives this object
        int32_t token;
    };
    std::array<std::vector<Candidate>, 256> m_byFirstByte;  // each sorted longest first
    size_t m_count = 0;
};

}  // namespace spillway
