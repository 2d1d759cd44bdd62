#pragma once
// Tokenizers from GGUF metadata: SentencePiece-style (scores, byte-fallback tokens, dummy space
// prefix) and byte-level BPE (GPT-2 style, tokenizer.ggml.merges).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace spillway {

namespace gguf { class File; class Metadata; }

// Token types as GGUF/llama.cpp number them (values stored on disk: never reuse).
enum class TokenType : int32_t {
    Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

struct Vocabulary {
    enum class Kind { SentencePiece, ByteLevelBpe };
    Kind kind = Kind::SentencePiece;
    std::vector<std::string> tokens;   // piece text; SentencePiece uses U+2581 for spaces
    std::vector<float> scores;         // SentencePiece merge priority (higher merges first)
    std::vector<TokenType> types;
    std::vector<std::string> merges;   // byte-level BPE: "left right", in rank order
    // tokenizer.ggml.pre: picks the byte-level BPE regexes ("default"/"gpt2", "llama-bpe",
    // "qwen2", "smollm", ...; names we do not know get GPT-2's). Where the metadata holds
    // explicit regexes (spillway.tokenizer.pre_regexes, from a Hugging Face tokenizer.json no
    // name covers), a PreTokenizer::explicitName() that carries them instead.
    std::string preTokenizer = "default";
    int32_t bos = -1, eos = -1, unk = -1, pad = -1;
    bool addBos = true;
    bool addEos = false;               // for callers: encode() never appends EOS
    bool addSpacePrefix = true;        // SentencePiece dummy prefix (byte-level BPE ignores it)
    // Byte-level BPE: Control and UserDefined tokens written in the text ("<|im_start|>") are
    // taken as those tokens, as chat templates need. Turn off for text that must not be able
    // to inject them. SentencePiece matches UserDefined tokens always and Control ones never,
    // so "<s>" in a prompt stays text (as llama2.c and SentencePiece itself do).
    bool parseSpecial = true;
};

// Reads tokenizer.ggml.* keys. Missing or inconsistent keys give ModelFileInvalid naming them.
Result<Vocabulary> vocabularyFromGguf(const gguf::File& file);
// The same from metadata keyed like GGUF's (a model package's tokenizer JSON).
Result<Vocabulary> vocabularyFromMetadata(const gguf::Metadata& metadata);

class Tokenizer {
public:
    // Validates the vocabulary (array sizes, ids in range, merges well formed) and builds the
    // tokenizer its kind says. Missing types are filled in: bos/eos/pad become Control, unk
    // Unknown, SentencePiece "<0xAB>" pieces Byte, the rest Normal; missing scores become 0.
    // Bytes with no byte token fall back to unk, or are dropped where there is no unk.
    // The tokenizer is immutable: encode and decode may be called from several threads.
    static Result<std::unique_ptr<Tokenizer>> create(Vocabulary vocab);
    virtual ~Tokenizer() = default;

    // Text to token ids; BOS first when addBos (and the vocabulary has one). Any bytes are
    // accepted, invalid UTF-8 included: where the vocabulary has a token for every byte,
    // decode(encode(s, true)) == s (SentencePiece needs the BOS to drop its dummy space).
    virtual std::vector<int32_t> encode(std::string_view text, bool addBos) const = 0;
    // Text that goes on from text already encoded (a conversation's next turn): no BOS, and no
    // SentencePiece dummy prefix before its first piece, so encode(a) + encodeContinuation(b)
    // is what the model would see for a + b cut at that point.
    virtual std::vector<int32_t> encodeContinuation(std::string_view text) const { return encode(text, false); }
    // The bytes token `token` stands for when it follows `previous` (-1 at the start): byte
    // tokens give their byte, U+2581 becomes a space, and the leading space of the first piece
    // after BOS is dropped (as SentencePiece's decoder does). Control tokens give "".
    virtual std::string decodeToken(int32_t previous, int32_t token) const = 0;
    std::string decode(std::span<const int32_t> tokens) const;

    const Vocabulary& vocabulary() const { return m_vocab; }
    int32_t size() const { return static_cast<int32_t>(m_vocab.tokens.size()); }
    int32_t bos() const { return m_vocab.bos; }
    int32_t eos() const { return m_vocab.eos; }
    bool isEndOfGeneration(int32_t token) const { return token == m_vocab.eos; }

protected:
    explicit Tokenizer(Vocabulary vocab) : m_vocab(std::move(vocab)) {}
    Vocabulary m_vocab;
};

}  // namespace spillway
