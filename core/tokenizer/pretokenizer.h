#pragma once
// Byte-level BPE pre-tokenization: the regular expressions that cut text into words before BPE
// merges run inside each word, chosen by GGUF's tokenizer.ggml.pre. Runs on PCRE2 with Unicode
// properties (\p{L}, \p{N}, Unicode \s), like the Hugging Face and llama.cpp tokenizers.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spillway {

class PreTokenizer {
public:
    // Patterns for a tokenizer.ggml.pre name; unknown names get GPT-2's pattern.
    static Result<PreTokenizer> create(std::string_view name);

    // Cuts `text` into consecutive, non-empty pieces (views into `text`) that cover all of it.
    // Each pattern is applied in turn to every piece the previous one left, text between
    // matches staying a piece of its own (llama.cpp's unicode_regex_split). Runs of bytes that
    // are not valid UTF-8 become pieces of their own and are never given to the patterns.
    std::vector<std::string_view> split(std::string_view text) const;

    // True where the vocabulary takes a word that is a whole token as it is, without merges
    // (Hugging Face's ignore_merges; Llama 3).
    bool ignoresMerges() const { return m_ignoreMerges; }
    // The patterns, for tests and error messages.
    const std::vector<std::string>& patterns() const { return m_patternTexts; }

private:
    struct Pattern;  // a compiled PCRE2 pattern; defined in pretokenizer.cpp
    void splitWith(const Pattern& pattern, std::string_view piece,
                   std::vector<std::string_view>& out) const;

    std::vector<std::shared_ptr<const Pattern>> m_patterns;
    std::vector<std::string> m_patternTexts;
    bool m_ignoreMerges = false;
};

}  // namespace spillway
