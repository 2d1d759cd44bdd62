#include "core/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "core/tokenizer/utf8.h"

namespace spillway {

struct PreTokenizer::Pattern {
    pcre2_code* code = nullptr;
    ~Pattern() { pcre2_code_free(code); }
};

namespace {

// GPT-2 (and the Hugging Face ByteLevel pre-tokenizer with use_regex).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3. Its tokenizer.json writes the contractions as (?i:'s|...); llama.cpp spells them
// out with ASCII classes, which keeps Unicode case folding ("'ſ") out of it: we follow llama.cpp.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2: as Llama 3 but every digit on its own.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o's o200k (gpt-oss, Llama 4): words split at case changes, a contraction kept on its word,
// digits in threes. llama.cpp spells the letter classes with lookaheads (a letter not a-z, a
// letter not A-Z) where tokenizer.json has \p{Lu}... and \p{Ll}...: we follow llama.cpp in
// GGUF and take tokenizer.json's own for the Hugging Face form.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|)"
    R"('[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|)"
    R"('[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4oHf =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Hugging Face's Digits pre-tokenizer with individual_digits, run before the GPT-2 pattern.
constexpr const char* kEachDigit = R"(\p{N})";
// Llama 3 and Qwen 2 as their tokenizer.json files spell them (Split, Isolated).
constexpr const char* kLlama3Hf =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Hf =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A name carrying its own patterns: this prefix, then JSON {"ignore_merges": b, "patterns": [..]}.
constexpr std::string_view kExplicitPrefix = "spillway-regex:";

struct PreTokenizerSpec {
    std::vector<const char*> patterns;
    bool ignoreMerges = false;
    std::vector<const char*> hfPatterns;  // the same as tokenizer.json spells them
};

// Names as llama.cpp's convert_hf_to_gguf.py writes tokenizer.ggml.pre, grouped as
// llama-vocab.cpp groups them. Only families whose patterns we are sure of are listed.
PreTokenizerSpec specFor(std::string_view name)
{
    const auto in = [&](std::initializer_list<std::string_view> names) {
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    if (in({"llama3", "llama-v3", "llama-bpe", "falcon3"})) return {{kLlama3}, true, {kLlama3Hf}};
    if (in({"smaug-bpe", "dbrx"})) return {{kLlama3}, false, {kLlama3Hf}};
    if (in({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}))
        return {{kQwen2}, false, {kQwen2Hf}};
    if (in({"gpt-4o", "llama4", "kanana2", "minimax-m2"})) return {{kGpt4o}, false, {kGpt4oHf}};
    if (in({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}))
        return {{kEachDigit, kGpt2}, false, {kEachDigit, kGpt2}};
    // "default", "gpt2", "gpt-2", "mpt", "olmo", ... and every name we do not know.
    return {{kGpt2}, false, {kGpt2}};
}

// The patterns of an explicit name, nullopt when it does not parse.
std::optional<PreTokenizer::HfPatterns> parseExplicit(std::string_view name)
{
    if (name.substr(0, kExplicitPrefix.size()) != kExplicitPrefix) return std::nullopt;
    const auto json = nlohmann::json::parse(name.substr(kExplicitPrefix.size()), nullptr, false);
    if (!json.is_object()) return std::nullopt;
    const auto patterns = json.find("patterns");
    const auto ignore = json.find("ignore_merges");
    if (patterns == json.end() || !patterns->is_array() || patterns->empty()) return std::nullopt;
    PreTokenizer::HfPatterns out;
    for (const auto& p : *patterns) {
        if (!p.is_string()) return std::nullopt;
        out.patterns.push_back(p.get<std::string>());
    }
    if (ignore != json.end()) {
        if (!ignore->is_boolean()) return std::nullopt;
        out.ignoreMerges = ignore->get<bool>();
    }
    return out;
}

}  // namespace

std::string PreTokenizer::explicitName(const std::vector<std::string>& patterns,
                                       bool ignoreMerges)
{
    // Patterns are text from a model file: replace invalid UTF-8 rather than throw (they would
    // not compile anyway, and create() says so).
    const nlohmann::json json = {{"ignore_merges", ignoreMerges}, {"patterns", patterns}};
    return std::string(kExplicitPrefix) +
           json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool PreTokenizer::isExplicitName(std::string_view name)
{
    return name.substr(0, kExplicitPrefix.size()) == kExplicitPrefix;
}

std::string_view PreTokenizer::byteLevelPattern() { return kGpt2; }

std::string PreTokenizer::nameForHfPatterns(const std::vector<std::string>& patterns,
                                            bool ignoreMerges)
{
    // One representative name per family, as llama.cpp's converter would write it.
    for (const char* name : {"gpt2", "smollm", "llama-bpe", "smaug-bpe", "qwen2", "gpt-4o"}) {
        const PreTokenizerSpec spec = specFor(name);
        if (spec.ignoreMerges == ignoreMerges &&
            std::equal(patterns.begin(), patterns.end(), spec.hfPatterns.begin(),
                       spec.hfPatterns.end()))
            return name;
    }
    return {};
}

std::optional<PreTokenizer::HfPatterns> PreTokenizer::hfPatternsFor(std::string_view name)
{
    if (isExplicitName(name)) return parseExplicit(name);
    const PreTokenizerSpec spec = specFor(name);
    return HfPatterns{{spec.hfPatterns.begin(), spec.hfPatterns.end()}, spec.ignoreMerges};
}

Result<PreTokenizer> PreTokenizer::create(std::string_view name)
{
    std::vector<std::string> texts;
    PreTokenizer pre;
    if (isExplicitName(name)) {
        std::optional<HfPatterns> given;
        try {
            given = parseExplicit(name);
        } catch (const std::exception&) {  // nlohmann: e.g. bad UTF-8 in a string
        }
        if (!given)
            return makeError(ErrorCode::InvalidArgument,
                             "tokenizer: malformed explicit pre-tokenizer '" +
                                 std::string(name.substr(0, 200)) + "'");
        texts = std::move(given->patterns);
        pre.m_ignoreMerges = given->ignoreMerges;
    } else {
        const PreTokenizerSpec spec = specFor(name);
        texts.assign(spec.patterns.begin(), spec.patterns.end());
        pre.m_ignoreMerges = spec.ignoreMerges;
    }
    for (const std::string& text : texts) {
        int errorCode = 0;
        PCRE2_SIZE errorOffset = 0;
        pcre2_code* code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                          PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
        if (!code) {
            std::array<PCRE2_UCHAR, 256> message{};
            pcre2_get_error_message(errorCode, message.data(), message.size());
            const bool given = isExplicitName(name);
            return makeError(given ? ErrorCode::InvalidArgument : ErrorCode::Internal,
                             "tokenizer: pre-tokenizer pattern '" + text.substr(0, 200) +
                                 (given ? "'" : "' for '" + std::string(name) + "'") +
                                 " does not compile at offset " + std::to_string(errorOffset) +
                                 ": " + reinterpret_cast<const char*>(message.data()));
        }
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: matching works without JIT
        auto pattern = std::make_shared<Pattern>();
        pattern->code = code;
        pre.m_patterns.push_back(std::move(pattern));
        pre.m_patternTexts.push_back(text);
    }
    return pre;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const
{
    // Valid UTF-8 runs go to the patterns; each run of invalid bytes is a piece of its own, so
    // a token that is part of a character ("\xE2\x80") still encodes to itself.
    std::vector<std::string_view> pieces;
    std::vector<bool> valid;
    size_t runStart = 0;
    bool runValid = true;
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8::sequenceLength(text, pos);
        const bool isValid = n > 0;
        if (isValid != runValid && pos > runStart) {
            pieces.push_back(text.substr(runStart, pos - runStart));
            valid.push_back(runValid);
            runStart = pos;
        }
        runValid = isValid;
        pos += isValid ? n : 1;
    }
    if (runStart < text.size()) {
        pieces.push_back(text.substr(runStart));
        valid.push_back(runValid);
    }

    std::vector<std::string_view> next;
    std::vector<bool> nextValid;
    for (const auto& pattern : m_patterns) {
        next.clear();
        nextValid.clear();
        for (size_t i = 0; i < pieces.size(); ++i) {
            if (valid[i])
                splitWith(*pattern, pieces[i], next);
            else
                next.push_back(pieces[i]);
            nextValid.resize(next.size(), valid[i]);
        }
        pieces.swap(next);
        valid.swap(nextValid);
    }
    return pieces;
}

void PreTokenizer::splitWith(const Pattern& pattern, std::string_view piece,
                             std::vector<std::string_view>& out) const
{
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(pattern.code, nullptr);
    if (!match) {  // out of memory: keep the piece whole rather than lose text
        out.push_back(piece);
        return;
    }
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t emitted = 0;  // end of the last piece pushed
    size_t offset = 0;
    while (offset < piece.size()) {
        // The caller checked the UTF-8; lookaheads see the end of `piece`, not of the text.
        const int rc = pcre2_match(pattern.code, subject, piece.size(), offset,
                                   PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc < 0) break;  // no further match: the rest is one piece
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const size_t start = ovector[0], end = ovector[1];
        if (end == start) {  // an empty match (none of our patterns make one): step one char
            offset = start + utf8::charLength(piece, start);
            continue;
        }
        if (start > emitted) out.push_back(piece.substr(emitted, start - emitted));
        out.push_back(piece.substr(start, end - start));
        emitted = offset = end;
    }
    if (emitted < piece.size()) out.push_back(piece.substr(emitted));
    pcre2_match_data_free(match);
}

}  // namespace spillway
