#pragma once
// SentencePiece-style tokenizer (GGUF tokenizer.ggml.model "llama"), as llama.cpp's
// llm_tokenizer_spm runs it: the text (with a dummy " " prefix) has its spaces replaced by
// U+2581, is split into characters, and the adjacent pair whose concatenation is a piece with
// the highest score is merged until none is left; characters with no piece become byte tokens
// "<0xAB>" (or <unk> where the vocabulary has none).

#include <array>
#include <string_view>
#include <unordered_map>

#include "core/tokenizer/special_tokens.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway {

class SentencePieceTokenizer final : public Tokenizer {
public:
    // `vocab` has been checked by Tokenizer::create (sizes, ids in range, types filled in).
    explicit SentencePieceTokenizer(Vocabulary vocab);

    std::vector<int32_t> encode(std::string_view text, bool addBos) const override;
    std::vector<int32_t> encodeContinuation(std::string_view text) const override;
    std::string decodeToken(int32_t previous, int32_t token) const override;

private:
    // Appends the pieces of `text` (spaces already replaced by U+2581).
    void encodeEscaped(std::string_view text, std::vector<int32_t>& out) const;
    // encode's work: `prefixFirst` puts the dummy prefix before the first text (a continuation
    // has none there; text after a special token still gets one).
    std::vector<int32_t> encodeText(std::string_view text, bool addBos, bool prefixFirst) const;
    void appendBytes(std::string_view symbol, std::vector<int32_t>& out) const;
    int32_t pieceId(std::string_view text) const;

    // Pieces that merges may produce (Normal and UserDefined), keyed by views into m_vocab.
    std::unordered_map<std::string_view, int32_t> m_pieces;
    std::array<int32_t, 256> m_byteTokens;  // "<0xAB>" token per byte value, -1 if absent
    SpecialTokenMatcher m_userDefined;      // matched in text always, as llama.cpp does
};

}  // namespace spillway
