// Hugging Face tokenizer.json <-> GGUF tokenizer metadata. See hf_tokenizer.h for the mapping.
// Format reference: the tokenizers library's serialization (tokenizers/src/**/serialization.rs).

#include "core/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/formats/gguf.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_internal.h"
#include "core/tokenizer/utf8.h"
#include "storage/mapped_file.h"

namespace spillway {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using tokenizer_detail::kSpaceMarker;

namespace {

constexpr uint64_t kMaxJsonBytes = 1ull << 30;  // the largest real tokenizer.json is ~35 MB
constexpr int64_t kMaxTokenId = (1 << 24) - 1;  // 16M tokens: far above any real vocabulary
constexpr const char* kPreRegexesKey = "spillway.tokenizer.pre_regexes";
constexpr const char* kIgnoreMergesKey = "spillway.tokenizer.ignore_merges";
// Our member of tokenizer_config.json. Not of tokenizer.json: the tokenizers library's
// hand-written readers do not skip members they do not know, so any there breaks loading.
constexpr const char* kExtension = "spillway";

// FNV-1a (64-bit) over the token texts, each followed by a NUL, as 16 hex digits: ties our
// member to the tokenizer.json it was written with.
std::string tokensFingerprint(const std::vector<std::string>& tokens)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const std::string& t : tokens) {
        for (char c : t) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
        h = h * 0x100000001b3ull;  // the NUL
    }
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
}

Result<std::string> readText(const std::string& path)
{
    auto mapping = storage::MappedFile::open(path);
    if (!mapping) return mapping.error();
    const uint64_t size = mapping.value()->size();
    if (size > kMaxJsonBytes)
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": " + std::to_string(size) + " bytes, too large for a tokenizer");
    const auto* data = reinterpret_cast<const char*>(mapping.value()->data());
    return data ? std::string(data, size) : std::string();
}

// j[key], or null when j is no object or has no such member.
const Json& member(const Json& j, const char* key)
{
    static const Json null;
    if (!j.is_object()) return null;
    const auto it = j.find(key);
    return it == j.end() ? null : *it;
}

// A normalizer / pre-tokenizer / post-processor with its Sequences flattened, in order.
void flatten(const Json& node, const char* listKey, std::vector<const Json*>& out)
{
    if (!node.is_object()) return;
    if (node.value("type", "") == "Sequence") {
        const auto list = node.find(listKey);
        if (list != node.end() && list->is_array())
            for (const Json& child : *list) flatten(child, listKey, out);
        return;
    }
    out.push_back(&node);
}

// Text of a token given as "text" or {"content": "text", ...} (tokenizer_config.json), or "".
std::string tokenText(const Json& j)
{
    if (j.is_string()) return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string())
        return j["content"].get<std::string>();
    return {};
}

// A literal string as a PCRE2 pattern.
std::string escapeRegex(const std::string& s)
{
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x80 && !std::isalnum(u) && c != ' ' && c != '_') out += '\\';
        out += c;
    }
    return out;
}

gguf::Value stringArray(const std::vector<std::string>& items)
{
    std::vector<gguf::Value> values;
    values.reserve(items.size());
    for (const std::string& s : items) values.push_back(gguf::Value::ofString(s));
    return gguf::Value::ofArray(gguf::ValueType::String, std::move(values));
}

// ---- tokenizer.json -> metadata -------------------------------------------------------------

class HfReader {
public:
    HfReader(const std::string& what, const Json& tokenizer, const std::string& configWhat,
             const Json& config)
        : m_what(what), m_configWhat(configWhat), m_json(tokenizer), m_config(config) {}

    Status read(gguf::Metadata& out);

private:
    Error invalid(const std::string& problem) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_what + ": " + problem);
    }
    Error unsupported(const std::string& problem) const
    {
        return makeError(ErrorCode::UnsupportedModel, m_what + ": " + problem);
    }

    Status readModelType();
    Status readVocab();
    Status readMerges();
    Status readNormalizerAndPre();
    Status readByteLevelPre();
    void deriveScores();
    Status readExtension();
    void readSpecialIds();
    int32_t idOf(const std::string& text) const;
    Status emit(gguf::Metadata& out) const;

    const std::string& m_what;
    const std::string& m_configWhat;
    const Json& m_json;
    const Json& m_config;  // null when there is none
    const Json* m_model = nullptr;

    bool m_spm = false;  // SentencePiece-style ("llama"), else byte-level ("gpt2")
    std::vector<std::string> m_tokens;
    std::vector<TokenType> m_types;
    std::vector<float> m_scores;
    std::unordered_map<std::string, int32_t> m_ids;  // text -> first id
    std::vector<std::pair<std::string, std::string>> m_merges;
    std::vector<std::string> m_prePatterns;
    std::string m_preName;  // the tokenizer.ggml.pre name for them, "" when none fits
    bool m_ignoreMerges = false;
    bool m_addSpacePrefix = false;
    int32_t m_bos = -1, m_eos = -1, m_unk = -1, m_pad = -1;
    std::optional<bool> m_addBos, m_addEos;
    bool m_extensionUsed = false;  // types (and scores) came from our member
};

Status HfReader::read(gguf::Metadata& out)
{
    if (!m_json.is_object()) return invalid("not a JSON object");
    const auto model = m_json.find("model");
    if (model == m_json.end() || !model->is_object()) return invalid("has no \"model\" object");
    m_model = &*model;
    SPILLWAY_TRY(readModelType());
    SPILLWAY_TRY(readNormalizerAndPre());
    SPILLWAY_TRY(readVocab());
    SPILLWAY_TRY(readMerges());
    if (m_spm) deriveScores();
    SPILLWAY_TRY(readExtension());
    readSpecialIds();
    return emit(out);
}

Status HfReader::readModelType()
{
    const Json& model = *m_model;
    std::string type = model.value("type", "");
    if (type.empty() && model.contains("merges")) type = "BPE";  // very old files
    if (type == "Unigram")
        return unsupported("Unigram tokenizer.json models are not supported (a folder's "
                           "SentencePiece tokenizer.model may be usable instead)");
    if (type != "BPE")
        return unsupported("tokenizer model '" + type + "' is not supported (supported: BPE, "
                           "byte-level or SentencePiece-style with byte fallback)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const auto it = model.find(key);
        if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
            return unsupported(std::string("BPE with a ") + key + " is not supported");
    }
    m_ignoreMerges = model.value("ignore_merges", false);
    return {};
}

Status HfReader::readNormalizerAndPre()
{
    std::vector<const Json*> normalizers, pres;
    flatten(member(m_json, "normalizer"), "normalizers", normalizers);
    flatten(member(m_json, "pre_tokenizer"), "pretokenizers", pres);
    bool byteLevel = false, metaspace = false, escapesSpaces = false, prepends = false;
    for (const Json* p : pres) {
        const std::string type = p->value("type", "");
        if (type == "ByteLevel") byteLevel = true;
        if (type == "Metaspace") metaspace = true;
    }
    for (const Json* n : normalizers) {
        const std::string type = n->value("type", "");
        if (type == "Prepend" && n->value("prepend", "") == kSpaceMarker) {
            prepends = true;
        } else if (type == "Replace" && n->value("content", "") == kSpaceMarker) {
            const Json pattern = n->value("pattern", Json());
            if (!pattern.is_object() || pattern.value("String", "") != " ")
                return unsupported("normalizer Replace of a pattern other than \" \" is not "
                                   "supported");
            escapesSpaces = true;
        } else if (type == "NFC") {
            // Accepted, not applied (see hf_tokenizer.h).
        } else {
            return unsupported("normalizer '" + type + "' is not supported");
        }
    }
    const bool byteFallback = m_model->value("byte_fallback", false);
    m_spm = byteFallback || metaspace || escapesSpaces || prepends;
    if (m_spm && byteLevel)
        return unsupported("a tokenizer with both ByteLevel and SentencePiece-style (byte "
                           "fallback, Metaspace) parts is not supported");
    if (!m_spm && !byteLevel)
        return unsupported("BPE without a ByteLevel pre-tokenizer or SentencePiece-style byte "
                           "fallback is not supported");
    if (!m_spm) return readByteLevelPre();

    m_addSpacePrefix = prepends;
    for (const Json* p : pres) {
        const std::string type = p->value("type", "");
        if (type != "Metaspace")
            return unsupported("pre-tokenizer '" + type + "' in a SentencePiece-style "
                               "tokenizer is not supported");
        if (p->value("replacement", kSpaceMarker) != kSpaceMarker)
            return unsupported("Metaspace with a replacement other than U+2581 is not "
                               "supported");
        escapesSpaces = true;
        if (p->contains("prepend_scheme"))
            m_addSpacePrefix = p->value("prepend_scheme", "always") != "never";
        else
            m_addSpacePrefix = p->value("add_prefix_space", true);
    }
    if (!escapesSpaces)
        return unsupported("SentencePiece-style tokenizer without a Metaspace pre-tokenizer or "
                           "a Replace(' ', U+2581) normalizer is not supported");
    return {};
}

Status HfReader::readByteLevelPre()
{
    std::vector<const Json*> pres;
    flatten(member(m_json, "pre_tokenizer"), "pretokenizers", pres);
    for (const Json* p : pres) {
        const std::string type = p->value("type", "");
        if (type == "ByteLevel") {
            if (p->value("add_prefix_space", false))
                return unsupported("ByteLevel with add_prefix_space is not supported");
            if (p->value("use_regex", true))
                m_prePatterns.emplace_back(PreTokenizer::byteLevelPattern());
        } else if (type == "Digits") {
            m_prePatterns.emplace_back(p->value("individual_digits", false) ? R"(\p{N})"
                                                                           : R"(\p{N}+)");
        } else if (type == "Split") {
            const Json pattern = p->value("pattern", Json());
            const std::string behavior = p->value("behavior", "");
            if (behavior != "Isolated" || p->value("invert", false))
                return unsupported("Split pre-tokenizer with behavior '" + behavior +
                                   "' or invert is not supported (only Isolated)");
            if (pattern.is_object() && pattern.contains("Regex"))
                m_prePatterns.push_back(pattern["Regex"].get<std::string>());
            else if (pattern.is_object() && pattern.contains("String"))
                m_prePatterns.push_back(escapeRegex(pattern["String"].get<std::string>()));
            else
                return invalid("Split pre-tokenizer has no Regex or String pattern");
        } else {
            return unsupported("pre-tokenizer '" + type + "' is not supported");
        }
    }
    if (m_prePatterns.empty())  // ByteLevel without regex only: the whole text is one word
        return unsupported("a byte-level tokenizer with no splitting regex is not supported");
    m_preName = PreTokenizer::nameForHfPatterns(m_prePatterns, m_ignoreMerges);
    if (m_preName.empty()) {
        auto compiled =
            PreTokenizer::create(PreTokenizer::explicitName(m_prePatterns, m_ignoreMerges));
        if (!compiled)
            return unsupported("pre-tokenizer regex cannot be used: " + compiled.error().message);
    }
    return {};
}

Status HfReader::readVocab()
{
    const auto vocab = m_model->find("vocab");
    if (vocab == m_model->end() || !vocab->is_object())
        return invalid("model has no \"vocab\" object");
    std::map<int64_t, std::string> byId;
    const auto checkId = [&](const Json& id, const std::string& text) -> Result<int64_t> {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
            return invalid("token " + gguf::detail::quoted(text) + " has id " + id.dump() +
                           ", not an integer from 0 to " + std::to_string(kMaxTokenId));
        return id.get<int64_t>();
    };
    for (const auto& [text, idJson] : vocab->items()) {
        auto id = checkId(idJson, text);
        if (!id) return id.error();
        const auto [it, inserted] = byId.emplace(*id, text);
        if (!inserted)
            return invalid("tokens " + gguf::detail::quoted(it->second) + " and " +
                           gguf::detail::quoted(text) + " both have id " + std::to_string(*id));
    }
    std::map<int64_t, bool> added;  // id -> special
    const Json addedTokens = m_json.value("added_tokens", Json::array());
    if (!addedTokens.is_array()) return invalid("added_tokens is not an array");
    for (const Json& token : addedTokens) {
        if (!token.is_object() || !token.contains("content") || !token["content"].is_string())
            return invalid("an added token has no content");
        const std::string text = token["content"].get<std::string>();
        auto id = checkId(token.value("id", Json()), text);
        if (!id) return id.error();
        byId[*id] = text;  // an added token's text wins over the model's at the same id
        added[*id] = token.value("special", false);
    }
    if (byId.empty()) return invalid("has no tokens");
    const auto n = size_t(byId.rbegin()->first + 1);
    m_tokens.resize(n);
    m_types.assign(n, TokenType::Normal);
    for (size_t id = 0; id < n; ++id) {
        const auto it = byId.find(int64_t(id));
        if (it == byId.end()) {  // a hole in the ids, as llama.cpp's converter fills them
            m_tokens[id] = "[PAD" + std::to_string(id) + "]";
            m_types[id] = TokenType::Unused;
            continue;
        }
        m_tokens[id] = it->second;
        if (m_spm && tokenizer_detail::parseByteToken(it->second) >= 0)
            m_types[id] = TokenType::Byte;
    }
    for (const auto& [id, special] : added)
        m_types[size_t(id)] = special ? TokenType::Control : TokenType::UserDefined;
    for (size_t id = n; id-- > 0;) m_ids[m_tokens[id]] = int32_t(id);  // first id wins
    return {};
}

Status HfReader::readMerges()
{
    const auto merges = m_model->find("merges");
    if (merges == m_model->end() || merges->is_null()) return {};
    if (!merges->is_array()) return invalid("model merges is not an array");
    m_merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const Json& m = (*merges)[i];
        std::string left, right;
        if (m.is_string()) {  // "left right": exactly one space, as the tokenizers library reads
            const std::string s = m.get<std::string>();
            const size_t space = s.find(' ');
            if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                return invalid("merge " + std::to_string(i) + " (" + gguf::detail::quoted(s) +
                               ") is not two pieces separated by one space");
            left = s.substr(0, space);
            right = s.substr(space + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            left = m[0].get<std::string>();
            right = m[1].get<std::string>();
        } else {
            return invalid("merge " + std::to_string(i) + " is neither \"a b\" nor [a, b]");
        }
        if (left.empty() || right.empty())
            return invalid("merge " + std::to_string(i) + " has an empty piece");
        // GGUF merges are "left right" cut at the first space after the first byte: a piece
        // with a space of its own (after its first byte) cannot be said that way.
        if (!m_spm &&
            (left.find(' ', 1) != std::string::npos || right.find(' ') != std::string::npos))
            return unsupported("merge " + std::to_string(i) + " has a piece containing a space, "
                               "which GGUF's \"left right\" merges cannot express");
        m_merges.emplace_back(std::move(left), std::move(right));
    }
    return {};
}

void HfReader::deriveScores()
{
    // Score -(rank) for the first merge that makes a piece, so the highest score is the merge
    // of lowest rank; pieces no merge makes get a score below them all (they are merged last).
    const float none = -float(m_merges.size()) - 1.0f;
    m_scores.assign(m_tokens.size(), 0.0f);
    std::vector<bool> made(m_tokens.size(), false);
    std::string joined;
    for (size_t rank = 0; rank < m_merges.size(); ++rank) {
        joined = m_merges[rank].first + m_merges[rank].second;
        const auto it = m_ids.find(joined);
        if (it == m_ids.end() || made[size_t(it->second)]) continue;
        made[size_t(it->second)] = true;
        m_scores[size_t(it->second)] = -float(rank);
    }
    for (size_t id = 0; id < m_tokens.size(); ++id) {
        // Only pieces of two or more characters can be the result of a merge.
        const std::string& t = m_tokens[id];
        if (!made[id] && m_types[id] == TokenType::Normal && utf8::charLength(t, 0) < t.size())
            m_scores[id] = none;
    }
}

Status HfReader::readExtension()
{
    const Json& ext = member(m_config, kExtension);
    if (ext.is_null()) return {};
    const auto invalidExtension = [&](const std::string& problem) {
        return makeError(ErrorCode::ModelFileInvalid, m_configWhat + ": spillway." + problem);
    };
    if (!ext.is_object()) return invalidExtension(" is not an object");
    const Json& dups = member(ext, "duplicate_tokens");
    if (!dups.is_null() && !dups.is_array())
        return invalidExtension("duplicate_tokens is not an array");
    const Json& dupList = dups.is_array() ? dups : Json::array();
    // The vocabulary's last ids may repeat earlier texts: tokenizer.json's vocab cannot hold
    // them, so they lie past its highest id, and every id from there on must be one of them.
    size_t n = m_tokens.size();
    std::map<size_t, std::string> repeated;
    for (const Json& d : dupList) {
        const int64_t id = d.at(0).get<int64_t>();
        if (id < 0 || id > kMaxTokenId) return invalidExtension("duplicate_tokens: bad id");
        repeated[size_t(id)] = d.at(1).get<std::string>();
    }
    while (repeated.count(n)) ++n;
    if (!repeated.empty() && repeated.rbegin()->first >= n) return invalidExtension("duplicate_tokens: bad id");
    std::vector<std::string> tokens = m_tokens;
    tokens.resize(n);
    for (auto& [id, text] : repeated) tokens[id] = std::move(text);
    // Written for exactly these tokens? A tokenizer.json another tool has changed since gets
    // the rules of hf_tokenizer.h instead.
    const Json& fingerprint = member(ext, "tokens_fnv1a");
    if (!fingerprint.is_string() || fingerprint.get<std::string>() != tokensFingerprint(tokens))
        return {};
    m_tokens = std::move(tokens);
    m_types.resize(n, TokenType::Normal);
    m_scores.resize(m_scores.empty() ? 0 : n, 0.0f);
    m_extensionUsed = true;
    const Json& types = member(ext, "token_types");
    if (!types.is_null()) {
        if (!types.is_array() || types.size() != n)
            return invalidExtension("token_types does not have one entry per token");
        for (size_t i = 0; i < n; ++i) {
            const int t = types[i].get<int>();
            if (t < 1 || t > 6) return invalidExtension("token_types has type " + std::to_string(t));
            m_types[i] = static_cast<TokenType>(t);
        }
    }
    const Json& scores = member(ext, "scores");
    if (!scores.is_null() && m_spm) {
        if (!scores.is_array() || scores.size() != n)
            return invalidExtension("scores does not have one entry per token");
        for (size_t i = 0; i < n; ++i) m_scores[i] = scores[i].get<float>();
    }
    return {};
}

int32_t HfReader::idOf(const std::string& text) const
{
    if (text.empty()) return -1;
    const auto it = m_ids.find(text);
    return it == m_ids.end() ? -1 : it->second;
}

void HfReader::readSpecialIds()
{
    const bool haveConfig = m_config.is_object();
    const auto configToken = [&](const char* key) -> std::optional<int32_t> {
        if (!haveConfig || !m_config.contains(key)) return std::nullopt;
        return idOf(tokenText(m_config[key]));  // null: no such token
    };
    if (const auto unk = m_model->find("unk_token"); unk != m_model->end() && unk->is_string())
        m_unk = idOf(unk->get<std::string>());
    if (auto id = configToken("unk_token"); id && *id >= 0) m_unk = *id;
    if (auto id = configToken("bos_token")) m_bos = *id;
    if (auto id = configToken("eos_token")) m_eos = *id;
    if (auto id = configToken("pad_token")) m_pad = *id;
    if (haveConfig && m_config.contains("add_bos_token") && m_config["add_bos_token"].is_boolean())
        m_addBos = m_config["add_bos_token"].get<bool>();
    if (haveConfig && m_config.contains("add_eos_token") && m_config["add_eos_token"].is_boolean())
        m_addEos = m_config["add_eos_token"].get<bool>();

    // The post-processor's template says which tokens encode() adds around the text.
    std::vector<const Json*> processors;
    flatten(member(m_json, "post_processor"), "processors", processors);
    for (const Json* p : processors) {
        if (p->value("type", "") != "TemplateProcessing") continue;
        const Json single = p->value("single", Json::array());
        if (!single.is_array() || single.empty()) continue;
        const auto special = [&](const Json& item) -> int32_t {
            if (!item.is_object() || !item.contains("SpecialToken")) return -1;
            const Json& s = item["SpecialToken"];
            return idOf(s.is_object() ? s.value("id", std::string()) : std::string());
        };
        const int32_t first = special(single.front());
        const int32_t last = single.size() > 1 ? special(single.back()) : -1;
        if (m_bos < 0 && first >= 0) m_bos = first;
        if (m_eos < 0 && last >= 0) m_eos = last;
        if (!m_addBos) m_addBos = first >= 0;
        if (!m_addEos) m_addEos = last >= 0;
    }
    if (m_spm) {
        if (m_bos < 0 && !configToken("bos_token")) m_bos = idOf("<s>");
        if (m_eos < 0 && !configToken("eos_token")) m_eos = idOf("</s>");
    } else if (m_eos < 0 && !configToken("eos_token")) {
        m_eos = idOf("<|endoftext|>");
    }
    if (!m_addBos) m_addBos = m_spm;
    if (!m_addEos) m_addEos = false;
    if (m_unk >= 0 && m_types[size_t(m_unk)] != TokenType::Unused &&
        !m_extensionUsed)
        m_types[size_t(m_unk)] = TokenType::Unknown;
}

Status HfReader::emit(gguf::Metadata& out) const
{
    using gguf::Value;
    using gguf::ValueType;
    std::vector<gguf::KeyValue> kvs;
    const auto add = [&](std::string key, Value v) {
        kvs.push_back({std::move(key), std::move(v)});
    };
    add("tokenizer.ggml.model", Value::ofString(m_spm ? "llama" : "gpt2"));
    if (!m_spm) {
        add("tokenizer.ggml.pre", Value::ofString(m_preName.empty() ? "default" : m_preName));
        if (m_preName.empty()) {
            add(kPreRegexesKey, stringArray(m_prePatterns));
            add(kIgnoreMergesKey, Value::ofBool(m_ignoreMerges));
        }
    }
    add("tokenizer.ggml.tokens", stringArray(m_tokens));
    std::vector<Value> types;
    types.reserve(m_types.size());
    for (TokenType t : m_types) types.push_back(Value::ofInt(ValueType::Int32, int32_t(t)));
    add("tokenizer.ggml.token_type", Value::ofArray(ValueType::Int32, std::move(types)));
    if (m_spm) {
        std::vector<Value> scores;
        scores.reserve(m_scores.size());
        for (float f : m_scores) scores.push_back(Value::ofFloat(ValueType::Float32, f));
        add("tokenizer.ggml.scores", Value::ofArray(ValueType::Float32, std::move(scores)));
    } else {
        std::vector<std::string> merges;
        merges.reserve(m_merges.size());
        for (const auto& [left, right] : m_merges) merges.push_back(left + " " + right);
        add("tokenizer.ggml.merges", stringArray(merges));
    }
    const std::pair<const char*, int32_t> ids[] = {
        {"tokenizer.ggml.bos_token_id", m_bos}, {"tokenizer.ggml.eos_token_id", m_eos},
        {"tokenizer.ggml.unknown_token_id", m_unk}, {"tokenizer.ggml.padding_token_id", m_pad}};
    for (const auto& [key, id] : ids) {
        // "llama" readers assume 0/1/2 for absent unk/bos/eos: say "none" explicitly.
        if (id >= 0 || m_spm)
            add(key, Value::ofUInt(ValueType::UInt32, id >= 0 ? uint64_t(id) : UINT32_MAX));
    }
    add("tokenizer.ggml.add_bos_token", Value::ofBool(m_addBos.value_or(m_spm)));
    add("tokenizer.ggml.add_eos_token", Value::ofBool(m_addEos.value_or(false)));
    if (m_spm) add("tokenizer.ggml.add_space_prefix", Value::ofBool(m_addSpacePrefix));

    if (m_config.is_object() && m_config.contains("chat_template")) {
        const Json& t = m_config["chat_template"];
        if (t.is_string()) {
            add("tokenizer.chat_template", Value::ofString(t.get<std::string>()));
        } else if (t.is_array()) {  // [{"name": ..., "template": ...}], as llama.cpp reads it
            for (const Json& named : t) {
                const std::string name = named.value("name", "");
                const std::string text = named.value("template", "");
                if (name.empty()) continue;
                add(name == "default" ? "tokenizer.chat_template"
                                      : "tokenizer.chat_template." + name,
                    Value::ofString(text));
            }
        }
    }

    for (const gguf::KeyValue& kv : kvs)
        if (out.indexOf(kv.key) != SIZE_MAX)
            return makeError(ErrorCode::InvalidArgument,
                             m_what + ": the metadata holds " + kv.key + " already");
    for (gguf::KeyValue& kv : kvs) out.add(std::move(kv));
    return {};
}

Status readHf(const std::string& jsonText, const std::string& what, const std::string& configText,
              const std::string& configWhat, gguf::Metadata& out)
{
    try {
        const Json tokenizer = Json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
        if (tokenizer.is_discarded())
            return makeError(ErrorCode::ModelFileInvalid, what + ": not valid JSON");
        Json config;
        if (!configText.empty()) {
            config = Json::parse(configText, nullptr, false);
            if (config.is_discarded() || !config.is_object())
                return makeError(ErrorCode::ModelFileInvalid,
                                 configWhat + ": not a valid JSON object");
        }
        return HfReader(what, tokenizer, configWhat, config).read(out);
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, what + ": out of memory reading the tokenizer");
    } catch (const std::exception& e) {  // nlohmann type errors: a member of the wrong type
        return makeError(ErrorCode::ModelFileInvalid,
                         what + ": unexpected tokenizer structure: " + e.what());
    }
}

// ---- metadata -> tokenizer.json -------------------------------------------------------------

OrderedJson addedToken(int32_t id, const std::string& text, bool special)
{
    return OrderedJson{{"id", id},          {"content", text},   {"single_word", false},
                       {"lstrip", false},   {"rstrip", false},   {"normalized", false},
                       {"special", special}};
}

// For "llama" vocabularies: every (left, right) of pieces that joins into a piece, ordered by
// that piece's score (highest first), then by its id, then by the left piece's length.
std::vector<std::pair<std::string, std::string>> sentencePieceMerges(const Vocabulary& v)
{
    std::unordered_map<std::string_view, int32_t> pieces;  // what our tokenizer may merge
    for (size_t id = 0; id < v.tokens.size(); ++id)
        if (v.types[id] == TokenType::Normal || v.types[id] == TokenType::UserDefined)
            pieces.emplace(v.tokens[id], int32_t(id));
    struct Merge {
        int32_t result;
        size_t split;  // bytes of the left piece
    };
    std::vector<Merge> merges;
    for (const auto& [text, id] : pieces) {
        // Only the first id of a text is a piece our tokenizer can produce.
        for (size_t pos = utf8::charLength(text, 0); pos < text.size();
             pos += utf8::charLength(text, pos)) {
            if (pieces.count(text.substr(0, pos)) && pieces.count(text.substr(pos)))
                merges.push_back({id, pos});
        }
    }
    std::sort(merges.begin(), merges.end(), [&](const Merge& a, const Merge& b) {
        const float sa = v.scores[size_t(a.result)], sb = v.scores[size_t(b.result)];
        if (sa != sb) return sa > sb;
        if (a.result != b.result) return a.result < b.result;
        return a.split < b.split;
    });
    std::vector<std::pair<std::string, std::string>> out;
    out.reserve(merges.size());
    for (const Merge& m : merges) {
        const std::string& text = v.tokens[size_t(m.result)];
        out.emplace_back(text.substr(0, m.split), text.substr(m.split));
    }
    return out;
}

// The pre-tokenizer node for Hugging Face patterns (the reverse of HfReader's reading).
OrderedJson byteLevelPreTokenizer(const std::vector<std::string>& patterns)
{
    const auto byteLevel = [](bool useRegex) {
        return OrderedJson{{"type", "ByteLevel"}, {"add_prefix_space", false},
                           {"trim_offsets", true}, {"use_regex", useRegex}};
    };
    const bool endsWithByteLevel =
        !patterns.empty() && patterns.back() == PreTokenizer::byteLevelPattern();
    const size_t splits = endsWithByteLevel ? patterns.size() - 1 : patterns.size();
    OrderedJson list = OrderedJson::array();
    for (size_t i = 0; i < splits; ++i) {
        const std::string& p = patterns[i];
        if (p == R"(\p{N})" || p == R"(\p{N}+)")
            list.push_back({{"type", "Digits"}, {"individual_digits", p == R"(\p{N})"}});
        else
            list.push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}},
                            {"behavior", "Isolated"}, {"invert", false}});
    }
    list.push_back(byteLevel(endsWithByteLevel));
    if (list.size() == 1) return list[0];
    return OrderedJson{{"type", "Sequence"}, {"pretokenizers", std::move(list)}};
}

OrderedJson specialTokenItem(const std::string& text)
{
    return {{"SpecialToken", {{"id", text}, {"type_id", 0}}}};
}

// Adds BOS / EOS around the text, as encode() does (and transformers' Llama converter writes).
OrderedJson templateProcessor(const Vocabulary& v)
{
    const bool bos = v.addBos && v.bos >= 0, eos = v.addEos && v.eos >= 0;
    if (!bos && !eos) return nullptr;
    const auto sequence = [](const char* id, int typeId) {
        return OrderedJson{{"Sequence", {{"id", id}, {"type_id", typeId}}}};
    };
    OrderedJson specials = OrderedJson::object();
    const auto around = [&](OrderedJson& list, const char* part, int typeId) {
        const auto special = [&](int32_t id) {
            const std::string& text = v.tokens[size_t(id)];
            specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
            list.push_back(specialTokenItem(text));
        };
        if (bos) special(v.bos);
        list.push_back(sequence(part, typeId));
        if (eos) special(v.eos);
    };
    OrderedJson single = OrderedJson::array(), pair = OrderedJson::array();
    around(single, "A", 0);
    around(pair, "A", 0);
    around(pair, "B", 1);
    return OrderedJson{{"type", "TemplateProcessing"}, {"single", std::move(single)},
                       {"pair", std::move(pair)}, {"special_tokens", std::move(specials)}};
}

Result<Vocabulary> checkedVocabulary(const gguf::Metadata& metadata)
{
    auto vocab = vocabularyFromMetadata(metadata);
    if (!vocab) return vocab.error();
    // Tokenizer::create validates and fills in types and scores.
    auto tokenizer = Tokenizer::create(std::move(vocab.value()));
    if (!tokenizer) return tokenizer.error();
    return tokenizer.value()->vocabulary();
}

std::string toText(const OrderedJson& j, int indent)
{
    // Token texts from a GGUF may hold invalid UTF-8: replaced rather than thrown on.
    return j.dump(indent, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

// What tokenizer.json cannot say: token types, SentencePiece scores, texts that occur twice.
OrderedJson extensionFor(const Vocabulary& v)
{
    OrderedJson duplicates = OrderedJson::array();
    std::set<std::string_view> seen;
    for (size_t id = 0; id < v.tokens.size(); ++id)
        if (!seen.insert(v.tokens[id]).second) duplicates.push_back({id, v.tokens[id]});
    OrderedJson types = OrderedJson::array();
    for (TokenType t : v.types) types.push_back(int32_t(t));
    OrderedJson extension = {{"version", 1}, {"tokens_fnv1a", tokensFingerprint(v.tokens)},
                             {"token_types", std::move(types)}};
    if (v.kind == Vocabulary::Kind::SentencePiece) extension["scores"] = v.scores;
    if (!duplicates.empty()) extension["duplicate_tokens"] = std::move(duplicates);
    return extension;
}

Result<std::string> writeTokenizerJson(const gguf::Metadata& metadata)
{
    auto checked = checkedVocabulary(metadata);
    if (!checked) return checked.error();
    const Vocabulary& v = checked.value();
    const bool spm = v.kind == Vocabulary::Kind::SentencePiece;
    const size_t n = v.tokens.size();

    // ordered_json's operator[] looks keys up one by one (quadratic for a 150k-token vocabulary:
    // minutes); the texts are made unique here, so they are appended to its vector directly.
    OrderedJson vocab = OrderedJson::object();
    auto& entries = vocab.get_ref<OrderedJson::object_t&>();
    entries.reserve(n);
    std::set<std::string_view> seen;
    for (size_t id = 0; id < n; ++id)  // a text seen before is in our member (extensionFor)
        if (seen.insert(v.tokens[id]).second) entries.emplace_back(v.tokens[id], OrderedJson(id));
    OrderedJson added = OrderedJson::array();
    for (size_t id = 0; id < n; ++id) {
        const TokenType t = v.types[id];
        if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
            added.push_back(addedToken(int32_t(id), v.tokens[id], t != TokenType::UserDefined));
    }

    std::vector<std::pair<std::string, std::string>> mergePairs;
    bool ignoreMerges = false;
    OrderedJson normalizer = nullptr, preTokenizer = nullptr, decoder;
    if (spm) {
        mergePairs = sentencePieceMerges(v);
        const OrderedJson replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}},
                                     {"content", kSpaceMarker}};
        if (v.addSpacePrefix)
            normalizer = {{"type", "Sequence"},
                          {"normalizers",
                           {{{"type", "Prepend"}, {"prepend", kSpaceMarker}}, replace}}};
        else
            normalizer = replace;
        OrderedJson decoders = {
            {{"type", "Replace"}, {"pattern", {{"String", kSpaceMarker}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}}};
        if (v.addSpacePrefix)
            decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
        decoder = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
    } else {
        for (const std::string& m : v.merges) {
            const size_t space = m.find(' ', 1);  // as the BPE tokenizer cuts them
            mergePairs.emplace_back(m.substr(0, space), m.substr(space + 1));
        }
        const auto patterns = PreTokenizer::hfPatternsFor(v.preTokenizer);
        if (!patterns)
            return makeError(ErrorCode::InvalidArgument,
                             metadata.source() + ": malformed pre-tokenizer regexes");
        ignoreMerges = patterns->ignoreMerges;
        preTokenizer = byteLevelPreTokenizer(patterns->patterns);
        decoder = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
                   {"use_regex", true}};
    }
    // "a b" strings where every merge can be said so (all tokenizers versions read them),
    // [a, b] pairs otherwise (tokenizers >= 0.20).
    const bool asPairs = std::any_of(mergePairs.begin(), mergePairs.end(), [](const auto& m) {
        return m.first.find(' ') != std::string::npos || m.second.find(' ') != std::string::npos;
    });
    OrderedJson merges = OrderedJson::array();
    for (const auto& [left, right] : mergePairs) {
        if (asPairs)
            merges.push_back({left, right});
        else
            merges.push_back(left + " " + right);
    }

    OrderedJson model = {
        {"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", v.unk >= 0 ? OrderedJson(v.tokens[size_t(v.unk)]) : OrderedJson(nullptr)},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", spm},
        {"byte_fallback", spm},
        {"ignore_merges", ignoreMerges},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merges)}};

    OrderedJson out = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"added_tokens", std::move(added)},
                       {"normalizer", std::move(normalizer)},
                       {"pre_tokenizer", std::move(preTokenizer)},
                       {"post_processor", templateProcessor(v)},
                       {"decoder", std::move(decoder)},
                       {"model", std::move(model)}};
    return toText(out, 2);
}

Result<std::string> writeTokenizerConfig(const gguf::Metadata& metadata)
{
    auto checked = checkedVocabulary(metadata);
    if (!checked) return checked.error();
    const Vocabulary& v = checked.value();
    const auto token = [&](int32_t id) {
        return id >= 0 ? OrderedJson(v.tokens[size_t(id)]) : OrderedJson(nullptr);
    };
    OrderedJson config = {
        {"add_bos_token", v.addBos},
        {"add_eos_token", v.addEos},
        {"bos_token", token(v.bos)},
        {"eos_token", token(v.eos)},
        {"unk_token", token(v.unk)},
        {"pad_token", token(v.pad)},
        {"clean_up_tokenization_spaces", false},
        {"tokenizer_class", v.kind == Vocabulary::Kind::SentencePiece
                                ? "LlamaTokenizerFast"
                                : "PreTrainedTokenizerFast"}};
    if (v.kind == Vocabulary::Kind::SentencePiece) config["legacy"] = true;
    if (auto chat = metadata.getString("tokenizer.chat_template")) config["chat_template"] = *chat;
    config[kExtension] = extensionFor(v);
    return toText(config, 2);
}

}  // namespace

Status tokenizerMetadataFromHfText(const std::string& tokenizerJsonText,
                                   const std::string& configText, const std::string& what,
                                   gguf::Metadata& out)
{
    return readHf(tokenizerJsonText, what, configText, "tokenizer_config.json", out);
}

Status tokenizerMetadataFromHf(const std::string& tokenizerJsonPath,
                               const std::string& tokenizerConfigPath, gguf::Metadata& out)
{
    auto text = readText(tokenizerJsonPath);
    if (!text) return text.error();
    std::string config;
    std::error_code ec;
    if (!tokenizerConfigPath.empty() && std::filesystem::exists(tokenizerConfigPath, ec)) {
        auto read = readText(tokenizerConfigPath);
        if (!read) return read.error();
        config = std::move(read.value());
    }
    return readHf(text.value(), tokenizerJsonPath, config, tokenizerConfigPath, out);
}

Result<std::string> hfTokenizerJsonFromMetadata(const gguf::Metadata& metadata)
{
    try {
        return writeTokenizerJson(metadata);
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, metadata.source() + ": out of memory");
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, metadata.source() + ": " + e.what());
    }
}

Result<std::string> hfTokenizerConfigFromMetadata(const gguf::Metadata& metadata)
{
    try {
        return writeTokenizerConfig(metadata);
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, metadata.source() + ": out of memory");
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, metadata.source() + ": " + e.what());
    }
}

}  // namespace spillway
