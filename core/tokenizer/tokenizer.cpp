#include "core/tokenizer/tokenizer.h"

#include <cstdint>
#include <cstdio>

#include "core/tokenizer/bpe_tokenizer.h"
#include "core/tokenizer/sentencepiece_tokenizer.h"
#include "core/tokenizer/tokenizer_internal.h"

namespace spillway {

namespace tokenizer_detail {

int parseByteToken(std::string_view text)
{
    // Exactly "<0x" two hex digits ">"; either case is accepted on reading.
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    int value = 0;
    for (size_t i = 3; i < 5; ++i) {
        const char c = text[i];
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

std::string byteTokenText(unsigned char byte)
{
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", byte);
    return text;
}

}  // namespace tokenizer_detail

namespace {

Error invalid(std::string message)
{
    return makeError(ErrorCode::InvalidArgument, "tokenizer: " + std::move(message));
}

// Checks sizes and ids, and fills in what a vocabulary may leave out (types, scores).
Status normalize(Vocabulary& vocab)
{
    const size_t n = vocab.tokens.size();
    if (n == 0) return invalid("the vocabulary has no tokens");
    if (n > size_t(INT32_MAX)) return invalid("the vocabulary has too many tokens");
    if (!vocab.scores.empty() && vocab.scores.size() != n)
        return invalid(std::to_string(vocab.scores.size()) + " scores for " + std::to_string(n) +
                       " tokens");
    if (!vocab.types.empty() && vocab.types.size() != n)
        return invalid(std::to_string(vocab.types.size()) + " token types for " +
                       std::to_string(n) + " tokens");
    const std::pair<const char*, int32_t> ids[] = {
        {"bos", vocab.bos}, {"eos", vocab.eos}, {"unk", vocab.unk}, {"pad", vocab.pad}};
    for (const auto& [name, id] : ids) {
        if (id < -1 || id >= static_cast<int64_t>(n))
            return invalid(std::string(name) + " token " + std::to_string(id) +
                           " is outside the vocabulary of " + std::to_string(n));
    }
    if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
    if (vocab.types.empty()) {
        vocab.types.assign(n, TokenType::Normal);
        if (vocab.kind == Vocabulary::Kind::SentencePiece) {
            for (size_t id = 0; id < n; ++id)
                if (tokenizer_detail::parseByteToken(vocab.tokens[id]) >= 0)
                    vocab.types[id] = TokenType::Byte;
        }
        for (int32_t id : {vocab.bos, vocab.eos, vocab.pad})
            if (id >= 0) vocab.types[size_t(id)] = TokenType::Control;
        if (vocab.unk >= 0) vocab.types[size_t(vocab.unk)] = TokenType::Unknown;
    }
    for (size_t id = 0; id < n; ++id) {
        const auto type = static_cast<int32_t>(vocab.types[id]);
        if (type == 0) {  // llama.cpp's "undefined": treat as an ordinary piece
            vocab.types[id] = TokenType::Normal;
        } else if (type < 1 || type > 6) {
            return invalid("token " + std::to_string(id) + " has type " + std::to_string(type) +
                           " (known: 1 to 6)");
        }
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocabulary vocab)
{
    SPILLWAY_TRY(normalize(vocab));
    switch (vocab.kind) {
    case Vocabulary::Kind::SentencePiece:
        return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(vocab)));
    case Vocabulary::Kind::ByteLevelBpe:
        return BpeTokenizer::create(std::move(vocab));
    }
    return invalid("unknown vocabulary kind");
}

std::string Tokenizer::decode(std::span<const int32_t> tokens) const
{
    std::string text;
    int32_t previous = -1;
    for (int32_t token : tokens) {
        text += decodeToken(previous, token);
        previous = token;
    }
    return text;
}

}  // namespace spillway
