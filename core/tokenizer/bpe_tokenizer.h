#pragma once
// Byte-level BPE tokenizer (GGUF tokenizer.ggml.model "gpt2"), as GPT-2, Llama 3, Qwen and
// SmolLM use it: special tokens written in the text are matched first; the rest is cut into
// words by the pre-tokenizer's regexes; each word's bytes are mapped to GPT-2's printable
// "byte-level" characters, and the ranked merges ("Ġ t" before "Ġ a" ...) are applied, lowest
// rank first, leftmost among equals.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/special_tokens.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway {

class BpeTokenizer final : public Tokenizer {
public:
    // `vocab` has been checked by Tokenizer::create (sizes, ids in range, types filled in).
    static Result<std::unique_ptr<Tokenizer>> create(Vocabulary vocab);

    std::vector<int32_t> encode(std::string_view text, bool addBos) const override;
    std::string decodeToken(int32_t previous, int32_t token) const override;

private:
    BpeTokenizer(Vocabulary vocab, PreTokenizer pre);
    Status buildMergeRanks();
    // Appends the tokens of one pre-tokenized word (raw bytes).
    void encodeWord(std::string_view word, std::string& mapped, std::vector<int32_t>& out) const;
    int32_t tokenId(std::string_view text) const;

    struct Merge {
        int32_t rank;    // position in tokenizer.ggml.merges: lower merges first
        int32_t result;  // the token of the two pieces joined
    };
    static uint64_t pairKey(int32_t left, int32_t right)
    {
        return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
    }

    PreTokenizer m_pre;
    std::unordered_map<std::string_view, int32_t> m_ids;  // views into m_vocab.tokens
    std::unordered_map<uint64_t, Merge> m_merges;         // key: pairKey(left id, right id)
    std::array<std::string, 256> m_byteChars;   // byte -> its byte-level character (UTF-8)
    std::array<int32_t, 256> m_byteCharTokens;  // byte -> token of that character, -1 if none
    std::unordered_map<char32_t, uint8_t> m_charBytes;  // byte-level character -> byte
    SpecialTokenMatcher m_special;  // Control and UserDefined tokens, when vocab.parseSpecial
};

}  // namespace spillway
