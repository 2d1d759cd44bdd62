#pragma once
// Byte-level BPE pre-tokenization: the regular expressions that cut text into words before BPE
// merges run inside each word, chosen by GGUF's tokenizer.ggml.pre. Runs on PCRE2 with Unicode
// properties (\p{L}, \p{N}, Unicode \s), like the Hugging Face and llama.cpp tokenizers.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace spillway {

class PreTokenizer {
public:
    // Patterns for a tokenizer.ggml.pre name; unknown names get GPT-2's pattern. A name made by
    // explicitName() gives the patterns it carries (InvalidArgument when they do not compile).
    static Result<PreTokenizer> create(std::string_view name);

    // A name that carries explicit patterns (PCRE2 syntax, applied in order) and Hugging Face's
    // ignore_merges flag, for tokenizer.json pre-tokenizers no family name covers exactly.
    // It lives in Vocabulary::preTokenizer only; GGUF metadata holds the patterns under
    // spillway.tokenizer.pre_regexes (see vocabularyFromMetadata), so the GGUF key
    // tokenizer.ggml.pre keeps a name llama.cpp knows.
    static std::string explicitName(const std::vector<std::string>& patterns, bool ignoreMerges);
    static bool isExplicitName(std::string_view name);

    // Hugging Face tokenizer.json equivalents. Patterns are spelled as tokenizer.json spells
    // them; the ByteLevel pre-tokenizer's own regex (use_regex) is byteLevelPattern() and the
    // Digits pre-tokenizer's is "\p{N}" (individual_digits) or "\p{N}+".
    struct HfPatterns {
        std::vector<std::string> patterns;
        bool ignoreMerges = false;
    };
    static std::string_view byteLevelPattern();
    // The family name whose Hugging Face patterns are exactly these, or "" when none is.
    static std::string nameForHfPatterns(const std::vector<std::string>& patterns,
                                         bool ignoreMerges);
    // The patterns a family or explicit name stands for (unknown names: GPT-2's);
    // nullopt for an explicit name that does not parse.
    static std::optional<HfPatterns> hfPatternsFor(std::string_view name);

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
