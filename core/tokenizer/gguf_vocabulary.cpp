// vocabularyFromGguf: the tokenizer.ggml.* keys of a GGUF file, checked, as a Vocabulary.
// Key meanings: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md#tokenizer

#include <cstdint>
#include <optional>

#include "core/formats/gguf.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway {

namespace {

constexpr std::string_view kPreRegexesKey = "spillway.tokenizer.pre_regexes";
constexpr std::string_view kIgnoreMergesKey = "spillway.tokenizer.ignore_merges";

class VocabularyReader {
public:
    explicit VocabularyReader(const gguf::Metadata& file) : m_file(file) {}

    Result<Vocabulary> read();

private:
    Error invalid(std::string_view key, const std::string& what) const
    {
        return makeError(ErrorCode::ModelFileInvalid,
                         m_file.source() + ": " + std::string(key) + " " + what);
    }
    // The array under `key`, nullptr with `error` set when it is not an array (or is absent and
    // `required`), nullptr with no error when absent and optional.
    const gguf::Array* array(std::string_view key, bool required, std::optional<Error>& error,
                             size_t expectedSize) const;
    Status readStrings(std::string_view key, bool required, size_t expectedSize,
                       std::vector<std::string>& out) const;
    Status readTokenId(std::string_view key, int32_t& id, bool optionalId) const;
    Status readBool(std::string_view key, bool& value) const;

    const gguf::Metadata& m_file;
};

const gguf::Array* VocabularyReader::array(std::string_view key, bool required,
                                           std::optional<Error>& error,
                                           size_t expectedSize) const
{
    const gguf::Value* value = m_file.find(key);
    if (!value) {
        if (required) error = invalid(key, "is missing");
        return nullptr;
    }
    const gguf::Array* items = value->asArray();
    if (!items) {
        error = invalid(key, "is not an array");
        return nullptr;
    }
    if (expectedSize != 0 && items->values.size() != expectedSize) {
        error = invalid(key, "has " + std::to_string(items->values.size()) +
                                 " entries, expected " + std::to_string(expectedSize) +
                                 " (one per token)");
        return nullptr;
    }
    return items;
}

Status VocabularyReader::readStrings(std::string_view key, bool required, size_t expectedSize,
                                     std::vector<std::string>& out) const
{
    std::optional<Error> error;
    const gguf::Array* items = array(key, required, error, expectedSize);
    if (error) return *error;
    if (!items) return {};
    out.reserve(items->values.size());
    for (size_t i = 0; i < items->values.size(); ++i) {
        const std::string* text = items->values[i].asString();
        if (!text) return invalid(key, "entry " + std::to_string(i) + " is not a string");
        out.push_back(*text);
    }
    return {};
}

Status VocabularyReader::readTokenId(std::string_view key, int32_t& id, bool optionalId) const
{
    const gguf::Value* value = m_file.find(key);
    if (!value) return {};  // keep the default
    const std::optional<int64_t> number = value->asInt();
    if (!number) return invalid(key, "is not an integer");
    // -1 (or its uint32 form) is how some converters write "no such token".
    if (*number == -1 || *number == int64_t(UINT32_MAX)) {
        id = -1;
        return {};
    }
    // Vocabulary size is checked by the caller before ids are read.
    if (*number < 0 || *number > int64_t(INT32_MAX)) {
        if (optionalId) {
            id = -1;
            return {};
        }
        return invalid(key, "is " + std::to_string(*number) + ", not a token id");
    }
    id = static_cast<int32_t>(*number);
    return {};
}

Status VocabularyReader::readBool(std::string_view key, bool& value) const
{
    const gguf::Value* found = m_file.find(key);
    if (!found) return {};
    if (const bool* flag = std::get_if<bool>(&found->v)) {
        value = *flag;
        return {};
    }
    const std::optional<int64_t> number = found->asInt();  // some writers use integers
    if (!number) return invalid(key, "is not a bool");
    value = *number != 0;
    return {};
}

Result<Vocabulary> VocabularyReader::read()
{
    Vocabulary vocab;
    const std::string modelKey = "tokenizer.ggml.model";
    const gguf::Value* model = m_file.find(modelKey);
    if (!model) return invalid(modelKey, "is missing");
    const std::string* modelName = model->asString();
    if (!modelName) return invalid(modelKey, "is not a string");
    if (*modelName == "llama") {
        vocab.kind = Vocabulary::Kind::SentencePiece;
    } else if (*modelName == "gpt2") {
        vocab.kind = Vocabulary::Kind::ByteLevelBpe;
    } else {
        return makeError(ErrorCode::UnsupportedModel,
                         m_file.source() + ": tokenizer '" + *modelName + "' (" + modelKey +
                             ") is not supported; known: llama (SentencePiece), gpt2 (BPE)");
    }
    const bool spm = vocab.kind == Vocabulary::Kind::SentencePiece;

    SPILLWAY_TRY(readStrings("tokenizer.ggml.tokens", true, 0, vocab.tokens));
    const size_t n = vocab.tokens.size();
    if (n == 0) return invalid("tokenizer.ggml.tokens", "is empty");
    if (n > size_t(INT32_MAX)) return invalid("tokenizer.ggml.tokens", "has too many entries");

    std::optional<Error> error;
    if (const gguf::Array* scores = array("tokenizer.ggml.scores", spm, error, n)) {
        vocab.scores.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            const std::optional<double> score = scores->values[i].asFloat();
            if (!score)
                return invalid("tokenizer.ggml.scores", "entry " + std::to_string(i) +
                                                           " is not a number");
            vocab.scores.push_back(static_cast<float>(*score));
        }
    }
    if (error) return *error;

    if (const gguf::Array* types = array("tokenizer.ggml.token_type", false, error, n)) {
        vocab.types.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            const std::optional<int64_t> type = types->values[i].asInt();
            if (!type || *type < 0 || *type > 6)
                return invalid("tokenizer.ggml.token_type",
                               "entry " + std::to_string(i) + " is not a token type (0 to 6)");
            // 0 is llama.cpp's "undefined": an ordinary piece.
            vocab.types.push_back(*type == 0 ? TokenType::Normal : static_cast<TokenType>(*type));
        }
    }
    if (error) return *error;

    if (!spm) {
        SPILLWAY_TRY(readStrings("tokenizer.ggml.merges", true, 0, vocab.merges));
        for (size_t i = 0; i < vocab.merges.size(); ++i) {
            if (vocab.merges[i].find(' ', 1) == std::string::npos)
                return invalid("tokenizer.ggml.merges",
                               "entry " + std::to_string(i) + " ('" + vocab.merges[i] +
                                   "') is not two pieces separated by a space");
        }
    }

    if (spm && n > 2) {  // llama.cpp's defaults for SentencePiece files that do not say
        vocab.unk = 0;
        vocab.bos = 1;
        vocab.eos = 2;
    }
    struct IdKey {
        const char* key;
        int32_t* id;
        bool optionalId;  // out of range: ignored (as llama.cpp does) rather than an error
    };
    const IdKey idKeys[] = {
        {"tokenizer.ggml.bos_token_id", &vocab.bos, false},
        {"tokenizer.ggml.eos_token_id", &vocab.eos, false},
        {"tokenizer.ggml.unknown_token_id", &vocab.unk, false},
        {"tokenizer.ggml.padding_token_id", &vocab.pad, true},
    };
    for (const IdKey& k : idKeys) {
        SPILLWAY_TRY(readTokenId(k.key, *k.id, k.optionalId));
        if (*k.id >= static_cast<int64_t>(n)) {
            if (!k.optionalId)
                return invalid(k.key, "is " + std::to_string(*k.id) +
                                          ", outside the vocabulary of " + std::to_string(n));
            *k.id = -1;
        }
    }

    vocab.addBos = spm;
    vocab.addEos = false;
    vocab.addSpacePrefix = spm;
    SPILLWAY_TRY(readBool("tokenizer.ggml.add_bos_token", vocab.addBos));
    SPILLWAY_TRY(readBool("tokenizer.ggml.add_eos_token", vocab.addEos));
    SPILLWAY_TRY(readBool("tokenizer.ggml.add_space_prefix", vocab.addSpacePrefix));

    if (const gguf::Value* pre = m_file.find("tokenizer.ggml.pre")) {
        const std::string* name = pre->asString();
        if (!name) return invalid("tokenizer.ggml.pre", "is not a string");
        vocab.preTokenizer = name->empty() ? "default" : *name;
    }
    // Explicit regexes (from a Hugging Face tokenizer.json that no tokenizer.ggml.pre name
    // covers) take precedence over the name, which stays for llama.cpp.
    if (m_file.find(kPreRegexesKey)) {
        std::vector<std::string> patterns;
        SPILLWAY_TRY(readStrings(kPreRegexesKey, true, 0, patterns));
        if (patterns.empty()) return invalid(kPreRegexesKey, "is empty");
        bool ignoreMerges = false;
        SPILLWAY_TRY(readBool(kIgnoreMergesKey, ignoreMerges));
        vocab.preTokenizer = PreTokenizer::explicitName(patterns, ignoreMerges);
        auto compiled = PreTokenizer::create(vocab.preTokenizer);
        if (!compiled)
            return invalid(kPreRegexesKey, "cannot be used: " + compiled.error().message);
    }
    return vocab;
}

}  // namespace

Result<Vocabulary> vocabularyFromMetadata(const gguf::Metadata& file)
{
    return VocabularyReader(file).read();
}

Result<Vocabulary> vocabularyFromGguf(const gguf::File& file) { return vocabularyFromMetadata(file.meta()); }

}  // namespace spillway
