#include "core/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "core/tokenizer/tokenizer_internal.h"
#include "core/tokenizer/utf8.h"

namespace spillway {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen ...) for U+0100 onwards, in byte order.
std::array<char32_t, 256> byteLevelCodePoints()
{
    std::array<char32_t, 256> table{};
    const auto printable = [](int b) {
        return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) table[size_t(b)] = printable(b) ? char32_t(b) : next++;
    return table;
}

struct Symbol {
    int prev;
    int next;
    int32_t token;  // -1: a byte whose character is not in the vocabulary
    bool alive;
};

struct Bigram {
    int left;
    int right;
    int32_t leftToken;   // the tokens when queued; a change later means the entry is stale
    int32_t rightToken;
    int32_t rank;
    int32_t result;
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const
    {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

BpeTokenizer::BpeTokenizer(Vocabulary vocab, PreTokenizer pre)
    : Tokenizer(std::move(vocab)), m_pre(std::move(pre))
{
    const auto& tokens = m_vocab.tokens;
    m_ids.reserve(tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id)
        m_ids.emplace(tokens[id], static_cast<int32_t>(id));  // first one wins

    const auto codePoints = byteLevelCodePoints();
    for (size_t b = 0; b < 256; ++b) {
        m_byteChars[b] = utf8::encode(codePoints[b]);
        m_charBytes.emplace(codePoints[b], static_cast<uint8_t>(b));
        m_byteCharTokens[b] = tokenId(m_byteChars[b]);
    }
    if (m_vocab.parseSpecial)
        m_special = SpecialTokenMatcher(m_vocab, {TokenType::Control, TokenType::UserDefined});
}

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::create(Vocabulary vocab)
{
    auto pre = PreTokenizer::create(vocab.preTokenizer);
    if (!pre) return pre.error();
    std::unique_ptr<BpeTokenizer> tokenizer(
        new BpeTokenizer(std::move(vocab), std::move(pre.value())));
    SPILLWAY_TRY(tokenizer->buildMergeRanks());
    return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

Status BpeTokenizer::buildMergeRanks()
{
    m_merges.reserve(m_vocab.merges.size());
    std::string joined;
    for (size_t rank = 0; rank < m_vocab.merges.size(); ++rank) {
        const std::string& merge = m_vocab.merges[rank];
        // "left right"; the left piece may itself start with a space, so search from 1 on
        // (as llama.cpp does).
        const size_t space = merge.find(' ', 1);
        if (space == std::string::npos)
            return makeError(ErrorCode::InvalidArgument,
                             "tokenizer: merge " + std::to_string(rank) + " ('" + merge +
                                 "') is not two pieces separated by a space");
        const std::string_view left = std::string_view(merge).substr(0, space);
        const std::string_view right = std::string_view(merge).substr(space + 1);
        joined.assign(left);
        joined += right;
        const int32_t leftId = tokenId(left), rightId = tokenId(right);
        const int32_t result = tokenId(joined);
        // A merge that cannot produce a token could never be used on token symbols: skip it.
        if (leftId < 0 || rightId < 0 || result < 0) continue;
        m_merges.emplace(pairKey(leftId, rightId), Merge{static_cast<int32_t>(rank), result});
    }
    return {};
}

int32_t BpeTokenizer::tokenId(std::string_view text) const
{
    const auto it = m_ids.find(text);
    return it == m_ids.end() ? -1 : it->second;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool addBos) const
{
    std::vector<int32_t> out;
    if (addBos && m_vocab.bos >= 0) out.push_back(m_vocab.bos);
    std::vector<TextFragment> fragments;
    if (m_special.empty())
        fragments.push_back({text, -1});
    else
        fragments = m_special.split(text);

    std::string mapped;
    for (const TextFragment& fragment : fragments) {
        if (fragment.token >= 0) {
            out.push_back(fragment.token);
            continue;
        }
        for (std::string_view word : m_pre.split(fragment.text)) encodeWord(word, mapped, out);
    }
    return out;
}

void BpeTokenizer::encodeWord(std::string_view word, std::string& mapped,
                              std::vector<int32_t>& out) const
{
    if (m_pre.ignoresMerges()) {
        mapped.clear();
        for (char c : word) mapped += m_byteChars[static_cast<uint8_t>(c)];
        const int32_t whole = tokenId(mapped);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }

    // Hot spot of prompt encoding: O(n log n) in the bytes of the word.
    std::vector<Symbol> symbols(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
        const int index = static_cast<int>(i);
        symbols[i] = Symbol{index - 1, index + 1, m_byteCharTokens[static_cast<uint8_t>(word[i])],
                            true};
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto tryAddBigram = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const int32_t leftToken = symbols[size_t(left)].token;
        const int32_t rightToken = symbols[size_t(right)].token;
        if (leftToken < 0 || rightToken < 0) return;
        const auto it = m_merges.find(pairKey(leftToken, rightToken));
        if (it == m_merges.end()) return;
        queue.push(Bigram{left, right, leftToken, rightToken, it->second.rank, it->second.result});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) tryAddBigram(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[size_t(bigram.left)];
        Symbol& right = symbols[size_t(bigram.right)];
        if (!left.alive || !right.alive || left.next != bigram.right ||
            left.token != bigram.leftToken || right.token != bigram.rightToken)
            continue;  // stale
        left.token = bigram.result;
        left.next = right.next;
        right.alive = false;
        if (right.next >= 0) symbols[size_t(right.next)].prev = bigram.left;
        tryAddBigram(left.prev, bigram.left);
        tryAddBigram(bigram.left, left.next);
    }

    for (int i = 0; i >= 0; i = symbols[size_t(i)].next) {
        const int32_t token = symbols[size_t(i)].token;
        if (token >= 0)
            out.push_back(token);
        else if (m_vocab.unk >= 0)
            out.push_back(m_vocab.unk);  // a vocabulary without all 256 byte characters
    }
}

std::string BpeTokenizer::decodeToken(int32_t previous, int32_t token) const
{
    if (token < 0 || token >= size()) return {};
    const std::string& text = m_vocab.tokens[size_t(token)];
    switch (m_vocab.types[size_t(token)]) {
    case TokenType::Normal:
        break;
    case TokenType::UserDefined:
        return text;  // stored as written, not byte-level mapped
    case TokenType::Byte: {
        const int byte = tokenizer_detail::parseByteToken(text);
        return byte >= 0 ? std::string(1, static_cast<char>(byte)) : std::string();
    }
    default:
        return {};  // Control, Unknown, Unused
    }
    std::string bytes;
    bytes.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8::sequenceLength(text, pos);
        if (n == 0) {  // not UTF-8: a broken vocabulary entry; pass the byte on
            bytes += text[pos++];
            continue;
        }
        const auto it = m_charBytes.find(utf8::decodeAt(text, pos, n));
        if (it != m_charBytes.end())
            bytes += static_cast<char>(it->second);
        else
            bytes.append(text, pos, n);  // not a byte-level character: keep it as it is
        pos += n;
    }
    return bytes;
}

}  // namespace spillway
