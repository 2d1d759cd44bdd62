#include "core/tokenizer/sentencepiece_tokenizer.h"

#include <queue>

#include "core/tokenizer/tokenizer_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway {

using tokenizer_detail::kSpaceMarker;

namespace {

// One character, or a run of merged characters, in the text being encoded. Symbols are kept in
// a doubly linked list over a vector; merged-away symbols get length 0.
struct Symbol {
    int prev;
    int next;
    const char* text;  // into the escaped text, so neighbours are contiguous in memory
    size_t length;     // bytes
};

// A candidate merge of symbols `left` and `right` (= the next of `left` when it was queued).
struct Bigram {
    int left;
    int right;
    float score;
    size_t length;  // bytes of the merged piece; a mismatch later means the entry is stale
};

// Highest score first; among equal scores the leftmost pair (what llama.cpp and llama2.c do).
struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const
    {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(Vocabulary vocab) : Tokenizer(std::move(vocab))
{
    m_byteTokens.fill(-1);
    const auto& tokens = m_vocab.tokens;
    for (size_t id = 0; id < tokens.size(); ++id) {
        const TokenType type = m_vocab.types[id];
        // Byte tokens are found by their text, spelled "<0xAB>" as SentencePiece writes them,
        // whatever their type says (as llama.cpp's byte_to_token does).
        const int byte = tokenizer_detail::parseByteToken(tokens[id]);
        if (byte >= 0 && m_byteTokens[size_t(byte)] < 0 &&
            tokens[id] == tokenizer_detail::byteTokenText(static_cast<unsigned char>(byte)))
            m_byteTokens[size_t(byte)] = static_cast<int32_t>(id);
        if (type == TokenType::Normal || type == TokenType::UserDefined)
            m_pieces.emplace(tokens[id], static_cast<int32_t>(id));  // first one wins
    }
    m_userDefined = SpecialTokenMatcher(m_vocab, {TokenType::UserDefined});
}

int32_t SentencePieceTokenizer::pieceId(std::string_view text) const
{
    const auto it = m_pieces.find(text);
    return it == m_pieces.end() ? -1 : it->second;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool addBos) const
{
    return encodeText(text, addBos, true);
}

std::vector<int32_t> SentencePieceTokenizer::encodeContinuation(std::string_view text) const
{
    return encodeText(text, false, false);
}

std::vector<int32_t> SentencePieceTokenizer::encodeText(std::string_view text, bool addBos, bool prefixFirst) const
{
    std::vector<int32_t> out;
    if (addBos && m_vocab.bos >= 0) out.push_back(m_vocab.bos);

    std::vector<TextFragment> fragments;
    if (m_userDefined.empty()) {
        if (!text.empty()) fragments.push_back({text, -1});
    } else {
        fragments = m_userDefined.split(text);
    }

    // As llama.cpp: the dummy prefix goes before the first text and before text that follows a
    // special token.
    bool afterSpecial = prefixFirst;
    std::string escaped;
    for (const TextFragment& fragment : fragments) {
        if (fragment.token >= 0) {
            out.push_back(fragment.token);
            afterSpecial = true;
            continue;
        }
        escaped.clear();
        if (m_vocab.addSpacePrefix && afterSpecial) escaped += kSpaceMarker;
        for (char c : fragment.text) {
            if (c == ' ')
                escaped += kSpaceMarker;
            else
                escaped += c;
        }
        encodeEscaped(escaped, out);
        afterSpecial = false;
    }
    return out;
}

void SentencePieceTokenizer::encodeEscaped(std::string_view text, std::vector<int32_t>& out) const
{
    // Hot spot of prompt encoding: O(n log n) in the characters of the text.
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8::charLength(text, pos);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back(Symbol{index - 1, index + 1, text.data() + pos, n});
        pos += n;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto tryAddBigram = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const size_t length = symbols[size_t(left)].length + symbols[size_t(right)].length;
        const int32_t id = pieceId(std::string_view(symbols[size_t(left)].text, length));
        if (id < 0) return;
        queue.push(Bigram{left, right, m_vocab.scores[size_t(id)], length});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) tryAddBigram(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[size_t(bigram.left)];
        Symbol& right = symbols[size_t(bigram.right)];
        // Stale: one side was merged into something else since this entry was queued.
        if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length)
            continue;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[size_t(right.next)].prev = bigram.left;
        tryAddBigram(left.prev, bigram.left);
        tryAddBigram(bigram.left, left.next);
    }

    for (int i = 0; i >= 0; i = symbols[size_t(i)].next) {
        const std::string_view piece(symbols[size_t(i)].text, symbols[size_t(i)].length);
        const int32_t id = pieceId(piece);
        if (id >= 0)
            out.push_back(id);
        else
            appendBytes(piece, out);
    }
}

void SentencePieceTokenizer::appendBytes(std::string_view symbol, std::vector<int32_t>& out) const
{
    bool unkAdded = false;
    for (char c : symbol) {
        const int32_t id = m_byteTokens[static_cast<uint8_t>(c)];
        if (id >= 0) {
            out.push_back(id);
        } else if (m_vocab.unk >= 0 && !unkAdded) {
            out.push_back(m_vocab.unk);  // one <unk> per character, as SentencePiece does
            unkAdded = true;
        }
    }
}

std::string SentencePieceTokenizer::decodeToken(int32_t previous, int32_t token) const
{
    if (token < 0 || token >= size()) return {};
    const std::string& text = m_vocab.tokens[size_t(token)];
    std::string piece;
    switch (m_vocab.types[size_t(token)]) {
    case TokenType::Byte: {
        const int byte = tokenizer_detail::parseByteToken(text);
        if (byte >= 0) piece += static_cast<char>(byte);
        return piece;
    }
    case TokenType::UserDefined:
        return text;  // verbatim, as llama.cpp prints user-defined pieces
    case TokenType::Normal:
        break;
    default:
        return {};  // Control, Unknown, Unused
    }
    piece.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
            piece += ' ';
            pos += kSpaceMarker.size();
        } else {
            piece += text[pos++];
        }
    }
    // SentencePiece's decoder drops the dummy prefix: the leading space of the first piece.
    if (m_vocab.addSpacePrefix && previous >= 0 && previous == m_vocab.bos && !piece.empty() &&
        piece[0] == ' ')
        piece.erase(0, 1);
    return piece;
}

}  // namespace spillway
