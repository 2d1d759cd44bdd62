// GGUF tokenizer metadata -> tokenizer.json (+ tokenizer_config.json) -> metadata again must
// give the same Vocabulary and the same encodings: stories260K.gguf's SentencePiece vocabulary
// (with our "spillway" member, and without it through the merge-rank scores alone, in both
// Llama 2 and Metaspace spellings), SmolLM2's byte-level BPE vocabulary, and small hand-made
// vocabularies with what tokenizer.json cannot say by itself.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../engine/tokenizer_test_util.h"
#include "core/formats/gguf.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/tokenizer.h"

using namespace spillway;
using namespace spillway::tokenizer_test;
using Json = nlohmann::json;

namespace {

std::vector<std::string> corpus()
{
    std::vector<std::string> texts = randomCorpus();
    const char* more[] = {
        "Once upon a time, there was a little girl named Lily. She loved to play outside.",
        "   leading and trailing spaces   ",
        "Tom said, \"Let's go to the park!\" and they ran. 123 + 456 = 579",
        "\u00dcber caf\u00e9 na\u00efve \u4e2d\u6587 \U0001F600\U0001F44D\U0001F3FD \u2014 \u2026",
        "tabs\tnew\nlines\r\nCRLF",
        "<s> and </s> and <unk> written in the text",
        "x",
        "",
    };
    texts.insert(texts.end(), std::begin(more), std::end(more));
    return texts;
}

struct Files {
    std::string json;
    std::string config;
};

// The two files' texts; empty ones (and a test failure) on an error, which callers check.
Files writeHf(const gguf::Metadata& meta)
{
    auto json = hfTokenizerJsonFromMetadata(meta);
    auto config = hfTokenizerConfigFromMetadata(meta);
    EXPECT_TRUE(json.ok()) << json.error().message;
    EXPECT_TRUE(config.ok()) << config.error().message;
    if (!json.ok() || !config.ok()) return {};
    return {json.value(), config.value()};
}

Result<Vocabulary> readHf(const Files& files, const std::string& name)
{
    const std::string dir = testing::TempDir() + "spillway_hf_roundtrip_" + name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/tokenizer.json", std::ios::binary) << files.json;
    std::ofstream(dir + "/tokenizer_config.json", std::ios::binary) << files.config;
    gguf::Metadata meta(dir);
    const Status status =
        tokenizerMetadataFromHf(dir + "/tokenizer.json", dir + "/tokenizer_config.json", meta);
    std::filesystem::remove_all(dir);
    if (!status.ok()) return status.error();
    return vocabularyFromMetadata(meta);
}

void expectSameEncodings(const Vocabulary& expected, const Vocabulary& actual)
{
    auto a = makeTokenizer(expected);
    auto b = makeTokenizer(actual);
    ASSERT_TRUE(a && b);
    int differences = 0;
    for (const std::string& text : corpus()) {
        for (bool bos : {false, true}) {
            const auto ids = b->encode(text, bos);
            EXPECT_EQ(ids, a->encode(text, bos)) << text << "\n ours: " << describe(*b, ids);
            differences += ids != a->encode(text, bos);
            EXPECT_EQ(b->decode(ids), a->decode(ids));
        }
    }
    EXPECT_EQ(differences, 0);
}

// stories260K.gguf, opened once; nullptr (and a failure of each test that asks) when it cannot be.
const gguf::File* stories()
{
    static std::string error;
    static const std::unique_ptr<gguf::File> file = [] {
        auto opened = gguf::File::open(modelPath("stories260K.gguf"));
        if (!opened.ok()) error = opened.error().message;
        return opened.ok() ? std::move(opened.value()) : nullptr;
    }();
    if (!file) ADD_FAILURE() << error;
    return file.get();
}

TEST(HfTokenizerRoundTrip, Stories260kSentencePieceVocabulary)
{
    const gguf::File* file = stories();
    ASSERT_NE(file, nullptr);
    auto original = vocabularyFromGguf(*file);
    ASSERT_TRUE(original.ok()) << original.error().message;
    const Files files = writeHf(file->meta());
    ASSERT_FALSE(files.json.empty());

    const Json json = Json::parse(files.json);
    EXPECT_EQ(json["model"]["type"], "BPE");
    EXPECT_EQ(json["model"]["byte_fallback"], true);
    EXPECT_EQ(json["model"]["unk_token"], "<unk>");
    EXPECT_EQ(json["model"]["vocab"].size(), 512u);
    EXPECT_EQ(json["model"]["merges"][0], "\u2581 t");  // "▁t" has the highest score
    // One merge per piece of two or more characters here (each has one split into pieces).
    EXPECT_EQ(json["model"]["merges"].size(), 165u);
    EXPECT_EQ(json["normalizer"]["type"], "Sequence");  // Prepend ▁, Replace " " -> ▁
    EXPECT_EQ(json["post_processor"]["single"][0]["SpecialToken"]["id"], "<s>");
    EXPECT_EQ(json["added_tokens"].size(), 3u);  // <unk>, <s>, </s>
    const Json config = Json::parse(files.config);
    EXPECT_EQ(config["bos_token"], "<s>");
    EXPECT_EQ(config["eos_token"], "</s>");
    EXPECT_EQ(config["add_bos_token"], true);

    auto back = readHf(files, "stories");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->kind, Vocabulary::Kind::SentencePiece);
    EXPECT_EQ(back->tokens, original->tokens);
    EXPECT_EQ(back->scores, original->scores);  // exact, from the "spillway" member
    EXPECT_EQ(back->types, original->types);
    EXPECT_EQ(back->bos, 1);
    EXPECT_EQ(back->eos, 2);
    EXPECT_EQ(back->unk, 0);
    EXPECT_EQ(back->pad, -1);
    EXPECT_TRUE(back->addBos);
    EXPECT_TRUE(back->addSpacePrefix);
    expectSameEncodings(original.value(), back.value());
}

TEST(HfTokenizerRoundTrip, Stories260kWithoutOurExtension)
{
    // As another tool would leave the file: scores then come from the merge ranks alone.
    const gguf::File* file = stories();
    ASSERT_NE(file, nullptr);
    auto original = vocabularyFromGguf(*file);
    ASSERT_TRUE(original.ok()) << original.error().message;
    Files files = writeHf(file->meta());
    ASSERT_FALSE(files.json.empty());
    Json config = Json::parse(files.config);
    ASSERT_TRUE(config.contains("spillway"));
    config.erase("spillway");
    files.config = config.dump();
    Json json = Json::parse(files.json);
    auto plain = readHf(files, "stories_plain");
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    EXPECT_EQ(plain->tokens, original->tokens);
    EXPECT_EQ(plain->types, original->types);  // Unknown, Control, Byte, Normal all derived
    EXPECT_NE(plain->scores, original->scores);
    expectSameEncodings(original.value(), plain.value());

    // Newer spelling: a Metaspace pre-tokenizer instead of the normalizers (Mistral style).
    json["normalizer"] = nullptr;
    json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"},
                             {"prepend_scheme", "first"}, {"split", false}};
    files.json = json.dump();
    auto metaspace = readHf(files, "stories_metaspace");
    ASSERT_TRUE(metaspace.ok()) << metaspace.error().message;
    EXPECT_TRUE(metaspace->addSpacePrefix);
    expectSameEncodings(original.value(), metaspace.value());

    json["pre_tokenizer"]["prepend_scheme"] = "never";
    files.json = json.dump();
    auto noPrefix = readHf(files, "stories_never");
    ASSERT_TRUE(noPrefix.ok()) << noPrefix.error().message;
    EXPECT_FALSE(noPrefix->addSpacePrefix);
}

TEST(HfTokenizerRoundTrip, ByteLevelBpeVocabulary)
{
    gguf::Metadata meta("smollm2");
    const Status read = tokenizerMetadataFromHf(modelPath("smollm2-tokenizer.json"), "", meta);
    ASSERT_TRUE(read.ok()) << read.error().message;
    meta.add({"tokenizer.chat_template",
              gguf::Value::ofString("{{ bos_token }}{% for m in messages %}{{ m }}{% endfor %}")});
    auto original = vocabularyFromMetadata(meta);
    ASSERT_TRUE(original.ok()) << original.error().message;
    const Files files = writeHf(meta);
    ASSERT_FALSE(files.json.empty());
    const Json json = Json::parse(files.json);
    EXPECT_EQ(json["pre_tokenizer"]["type"], "Sequence");  // Digits, ByteLevel
    EXPECT_EQ(json["pre_tokenizer"]["pretokenizers"][0]["type"], "Digits");
    EXPECT_EQ(json["model"]["merges"].size(), 48900u);
    EXPECT_EQ(json["model"]["merges"][0], "\u0120 t");
    EXPECT_EQ(json["added_tokens"].size(), 17u);
    EXPECT_EQ(Json::parse(files.config)["chat_template"],
              "{{ bos_token }}{% for m in messages %}{{ m }}{% endfor %}");

    auto back = readHf(files, "smollm2");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->kind, Vocabulary::Kind::ByteLevelBpe);
    EXPECT_EQ(back->tokens, original->tokens);
    EXPECT_EQ(back->merges, original->merges);
    EXPECT_EQ(back->types, original->types);
    EXPECT_EQ(back->preTokenizer, "smollm");
    EXPECT_EQ(back->eos, original->eos);
    EXPECT_EQ(back->addBos, original->addBos);
    expectSameEncodings(original.value(), back.value());

    // Without our member the types still come back (added tokens are all special).
    Json plainConfig = Json::parse(files.config);
    plainConfig.erase("spillway");
    auto plain = readHf({files.json, plainConfig.dump()}, "smollm2_plain");
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    EXPECT_EQ(plain->types, original->types);
}

// A small "gpt2" vocabulary written as GGUF metadata.
gguf::Metadata byteLevelMetadata(const std::string& pre, const std::vector<std::string>& regexes)
{
    gguf::Metadata meta("hand-made");
    auto strings = [](const std::vector<std::string>& items) {
        std::vector<gguf::Value> values;
        for (const std::string& s : items) values.push_back(gguf::Value::ofString(s));
        return gguf::Value::ofArray(gguf::ValueType::String, std::move(values));
    };
    std::vector<std::string> tokens = {"<|end|>", "<tool>"};
    for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c));
    for (const char* t : {"\u0120", "\u0120a", "ab", "abc", "\u0120ab", "0", "1", "2", "01"})
        tokens.push_back(t);
    meta.add({"tokenizer.ggml.model", gguf::Value::ofString("gpt2")});
    meta.add({"tokenizer.ggml.pre", gguf::Value::ofString(pre)});
    meta.add({"tokenizer.ggml.tokens", strings(tokens)});
    std::vector<gguf::Value> types(tokens.size(), gguf::Value::ofInt(gguf::ValueType::Int32, 1));
    types[0] = gguf::Value::ofInt(gguf::ValueType::Int32, 3);
    types[1] = gguf::Value::ofInt(gguf::ValueType::Int32, 4);
    meta.add({"tokenizer.ggml.token_type",
              gguf::Value::ofArray(gguf::ValueType::Int32, std::move(types))});
    meta.add({"tokenizer.ggml.merges",
              strings({"a b", "\u0120 a", "ab c", "\u0120a b", "0 1"})});
    meta.add({"tokenizer.ggml.eos_token_id", gguf::Value::ofUInt(gguf::ValueType::UInt32, 0)});
    if (!regexes.empty()) {
        meta.add({"spillway.tokenizer.pre_regexes", strings(regexes)});
        meta.add({"spillway.tokenizer.ignore_merges", gguf::Value::ofBool(true)});
    }
    return meta;
}

TEST(HfTokenizerRoundTrip, HandMadeByteLevelVocabularies)
{
    const std::vector<std::string> texts = {"abc ab a", "0120 01 abcab", "x<tool>ab<|end|>",
                                            " ab  abc\n"};
    for (const auto& [pre, regexes] :
         std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"gpt2", {}}, {"llama-bpe", {}}, {"qwen2", {}}, {"smollm", {}},
             {"default", {R"(\p{N}{1,2}|\p{L}{1,2}|\s+|<[a-z|]+>)"}}}) {
        const gguf::Metadata meta = byteLevelMetadata(pre, regexes);
        auto original = vocabularyFromMetadata(meta);
        ASSERT_TRUE(original.ok()) << original.error().message;
        const Files files = writeHf(meta);
        ASSERT_FALSE(files.json.empty()) << pre;
        auto back = readHf(files, "hand_" + pre);
        ASSERT_TRUE(back.ok()) << pre << ": " << back.error().message;
        EXPECT_EQ(back->preTokenizer, original->preTokenizer) << pre;
        EXPECT_EQ(back->types, original->types) << pre;
        EXPECT_EQ(back->merges, original->merges) << pre;
        auto a = makeTokenizer(original.value());
        auto b = makeTokenizer(back.value());
        ASSERT_TRUE(a && b);
        for (const std::string& text : texts)
            EXPECT_EQ(b->encode(text, false), a->encode(text, false)) << pre << ": " << text;
    }
}

TEST(HfTokenizerRoundTrip, WhatTokenizerJsonCannotSayComesBackExactly)
{
    // Duplicate texts, an Unused token, equal scores and a user-defined piece: only our member
    // keeps them.
    gguf::Metadata meta("spm hand-made");
    const std::vector<std::string> tokens = {
        "<unk>", "<s>", "</s>", "<0x41>", "[PAD]", "[PAD]", "<tool>", "\u2581", "a", "b",
        "\u2581a", "ab", "\u2581ab", "ba"};
    std::vector<gguf::Value> tokenValues, scores, types;
    const float scoreOf[] = {0, 0, 0, 0, 0, 0, 0, -10, -11, -12, -1, -1, -2, -1};
    const int typeOf[] = {2, 3, 3, 6, 5, 5, 4, 1, 1, 1, 1, 1, 1, 1};
    for (size_t i = 0; i < tokens.size(); ++i) {
        tokenValues.push_back(gguf::Value::ofString(tokens[i]));
        scores.push_back(gguf::Value::ofFloat(gguf::ValueType::Float32, scoreOf[i]));
        types.push_back(gguf::Value::ofInt(gguf::ValueType::Int32, typeOf[i]));
    }
    meta.add({"tokenizer.ggml.model", gguf::Value::ofString("llama")});
    meta.add({"tokenizer.ggml.tokens",
              gguf::Value::ofArray(gguf::ValueType::String, std::move(tokenValues))});
    meta.add({"tokenizer.ggml.scores",
              gguf::Value::ofArray(gguf::ValueType::Float32, std::move(scores))});
    meta.add({"tokenizer.ggml.token_type",
              gguf::Value::ofArray(gguf::ValueType::Int32, std::move(types))});
    meta.add({"tokenizer.ggml.add_space_prefix", gguf::Value::ofBool(false)});
    auto original = vocabularyFromMetadata(meta);
    ASSERT_TRUE(original.ok()) << original.error().message;
    const Files files = writeHf(meta);
    ASSERT_FALSE(files.json.empty());
    EXPECT_TRUE(Json::parse(files.config)["spillway"].contains("duplicate_tokens"));
    auto back = readHf(files, "spm_hand");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->tokens, original->tokens);
    EXPECT_EQ(back->scores, original->scores);
    EXPECT_EQ(back->types, original->types);
    EXPECT_FALSE(back->addSpacePrefix);
    auto a = makeTokenizer(original.value());
    auto b = makeTokenizer(back.value());
    ASSERT_TRUE(a && b);
    for (const char* text : {"abab a", "aba<tool>b", "Ab ba", " a  b"})
        EXPECT_EQ(b->encode(text, true), a->encode(text, true)) << text;

    // A tokenizer.json changed since (another tool renamed a token): our member no longer
    // matches it and is left out, rather than mislabel tokens.
    Json json = Json::parse(files.json);
    json["model"]["vocab"].erase("ba");
    json["model"]["vocab"]["BA"] = 13;
    auto changed = readHf({json.dump(), files.config}, "spm_hand_changed");
    ASSERT_TRUE(changed.ok()) << changed.error().message;
    ASSERT_GT(changed->tokens.size(), 13u);
    ASSERT_GT(changed->types.size(), 4u);
    EXPECT_EQ(changed->tokens[13], "BA");
    EXPECT_EQ(changed->tokens[5], "[PAD5]");  // the duplicate's text is gone with the member
    EXPECT_EQ(changed->types[4], TokenType::Normal);
    EXPECT_NE(changed->scores, original->scores);
}

TEST(HfTokenizerRoundTrip, RefusesMetadataWithoutATokenizer)
{
    gguf::Metadata empty("empty");
    auto json = hfTokenizerJsonFromMetadata(empty);
    ASSERT_FALSE(json.ok());
    EXPECT_NE(json.error().message.find("tokenizer.ggml.model"), std::string::npos);
    gguf::Metadata bert("bert");
    bert.add({"tokenizer.ggml.model", gguf::Value::ofString("bert")});
    auto config = hfTokenizerConfigFromMetadata(bert);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().code, ErrorCode::UnsupportedModel);
}

}  // namespace

// The vocabulary's last ids repeat earlier texts (fuzz_hf_tokenizer found it): tokenizer.json's
// vocab cannot hold them, so its highest id is lower than the vocabulary's; our member brings
// them back and the vocabulary keeps its size.
TEST(HfTokenizerRoundTrip, DuplicatesAtTheEndKeepTheVocabularysSize)
{
    gguf::Metadata meta("spm duplicates at the end");
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "a", "b"};
    std::vector<gguf::Value> tokenValues, scores, types;
    for (size_t i = 0; i < tokens.size(); ++i) {
        tokenValues.push_back(gguf::Value::ofString(tokens[i]));
        scores.push_back(gguf::Value::ofFloat(gguf::ValueType::Float32, -float(i)));
        types.push_back(gguf::Value::ofInt(gguf::ValueType::Int32, i == 0 ? 2 : i < 3 ? 3 : 1));
    }
    meta.add({"tokenizer.ggml.model", gguf::Value::ofString("llama")});
    meta.add({"tokenizer.ggml.tokens", gguf::Value::ofArray(gguf::ValueType::String, std::move(tokenValues))});
    meta.add({"tokenizer.ggml.scores", gguf::Value::ofArray(gguf::ValueType::Float32, std::move(scores))});
    meta.add({"tokenizer.ggml.token_type", gguf::Value::ofArray(gguf::ValueType::Int32, std::move(types))});
    auto original = vocabularyFromMetadata(meta);
    ASSERT_TRUE(original.ok()) << original.error().message;
    const Files files = writeHf(meta);
    ASSERT_FALSE(files.json.empty());
    auto back = readHf(files, "spm_dup_end");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->tokens, original->tokens);
    EXPECT_EQ(back->types, original->types);
    EXPECT_EQ(back->scores, original->scores);

    // Ids past the vocab's that are not all in the member: refused, not guessed.
    Json config = Json::parse(files.config);
    config["spillway"]["duplicate_tokens"] = Json::array({Json::array({12, "a"})});
    auto gap = readHf({files.json, config.dump()}, "spm_dup_gap");
    ASSERT_FALSE(gap.ok());
    EXPECT_NE(gap.error().message.find("duplicate_tokens"), std::string::npos) << gap.error().message;
}
