// SentencePiece tokenizer against an independent reference (a naive llama2.c merge loop) on
// stories260K's real vocabulary, and vocabularyFromGguf on real and hand-made GGUF files.
// The byte-level BPE tests are in test_tokenizer_bpe.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/formats/gguf.h"
#include "core/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

using namespace spillway;
using namespace spillway::tokenizer_test;

namespace {

// ---- SentencePiece ----------------------------------------------------------------------------

// tok512.bin (llama2.c layout) as the Vocabulary llama.cpp would read from stories260K.gguf.
// A file that cannot be read is a test failure and gives an empty vocabulary, which callers
// refuse (its size is checked, or makeTokenizer gives nullptr).
Vocabulary loadTok512()
{
    Vocabulary v;
    std::ifstream in(modelPath("tok512.bin"), std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << modelPath("tok512.bin");
        return v;
    }
    float score = 0;
    int32_t length = 0;
    const auto readValue = [&](auto& value) {
        return bool(in.read(reinterpret_cast<char*>(&value), sizeof value));
    };
    int32_t maxLength = 0;  // longest piece in bytes: not needed here
    readValue(maxLength);
    while (readValue(score) && readValue(length)) {
        std::string text(size_t(length), '\0');
        in.read(text.data(), length);
        const size_t id = v.tokens.size();
        TokenType type = TokenType::Normal;
        if (id == 0) type = TokenType::Unknown;
        if (id == 1 || id == 2) type = TokenType::Control;
        if (id >= 3 && id <= 258) type = TokenType::Byte;
        if (id == 1) text = "<s>";  // llama2.c writes "\n<s>\n"
        if (id == 2) text = "</s>";
        if (type == TokenType::Normal) {  // llama2.c turned U+2581 into ' '
            std::string escaped;
            for (char c : text) escaped += c == ' ' ? kSpace : std::string(1, c);
            text = escaped;
        }
        v.tokens.push_back(text);
        v.scores.push_back(score);
        v.types.push_back(type);
    }
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    return v;
}

// llama2.c's encode(): the O(n^2) loop, merging the best-scoring pair (leftmost on ties) until
// none is a piece. Written independently of the tokenizer under test.
std::vector<int32_t> llama2cEncode(const Vocabulary& v, const std::string& text, bool bos = true)
{
    std::map<std::string, int32_t> lookup;
    for (size_t i = 0; i < v.tokens.size(); ++i)
        if (v.types[i] == TokenType::Normal) lookup.emplace(v.tokens[i], int32_t(i));
    std::vector<int32_t> ids;
    if (bos) ids.push_back(v.bos);
    if (text.empty()) return ids;
    std::string s = kSpace;
    for (char c : text) s += c == ' ' ? kSpace : std::string(1, c);
    std::vector<int32_t> work;
    for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        while (i + n < s.size() && (uint8_t(s[i + n]) & 0xC0) == 0x80 && n < 4) ++n;
        const auto it = lookup.find(s.substr(i, n));
        if (it != lookup.end()) {
            work.push_back(it->second);
        } else {
            for (size_t k = 0; k < n; ++k) work.push_back(int32_t(uint8_t(s[i + k])) + 3);
        }
        i += n;
    }
    while (true) {
        float best = -1e10f;
        int bestId = -1, bestIndex = -1;
        for (size_t i = 0; i + 1 < work.size(); ++i) {
            const auto it = lookup.find(v.tokens[size_t(work[i])] + v.tokens[size_t(work[i + 1])]);
            if (it != lookup.end() && v.scores[size_t(it->second)] > best) {
                best = v.scores[size_t(it->second)];
                bestId = it->second;
                bestIndex = int(i);
            }
        }
        if (bestIndex < 0) break;
        work[size_t(bestIndex)] = bestId;
        work.erase(work.begin() + bestIndex + 1);
    }
    ids.insert(ids.end(), work.begin(), work.end());
    return ids;
}

TEST(SentencePieceTokenizer, MatchesLlama2cReferenceOnCorpus)
{
    const Vocabulary vocab = loadTok512();
    ASSERT_EQ(vocab.tokens.size(), 512u);
    auto tokenizer = makeTokenizer(vocab);
    ASSERT_TRUE(tokenizer);
    auto corpus = randomCorpus();
    corpus.push_back("Once upon a time, there was a little girl named Lily.");
    corpus.push_back("   leading and trailing spaces   ");
    for (const std::string& text : corpus) {
        const auto expected = llama2cEncode(vocab, text);
        const auto ids = tokenizer->encode(text, true);
        EXPECT_EQ(ids, expected) << "text: " << text << "\n ours: " << describe(*tokenizer, ids)
                                 << "\n ref:  " << describe(*tokenizer, expected);
    }
}

TEST(SentencePieceTokenizer, RoundTripsAndDropsOnlyTheDummySpace)
{
    auto tokenizer = makeTokenizer(loadTok512());
    ASSERT_TRUE(tokenizer);
    for (const std::string& text : randomCorpus()) {
        const auto ids = tokenizer->encode(text, true);
        ASSERT_FALSE(ids.empty());
        EXPECT_EQ(ids[0], 1);
        EXPECT_EQ(tokenizer->decode(ids), text);
        // Without BOS nothing says where the text began: the dummy space stays.
        EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false)), " " + text);
    }
    EXPECT_EQ(tokenizer->encode("", true), std::vector<int32_t>{1});
    EXPECT_TRUE(tokenizer->encode("", false).empty());
}

TEST(SentencePieceTokenizer, EmojiAndCjkUseByteFallback)
{
    auto tokenizer = makeTokenizer(loadTok512());
    ASSERT_TRUE(tokenizer);
    const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, not a piece of this vocabulary
    const auto ids = tokenizer->encode("a" + emoji, true);
    ASSERT_GE(ids.size(), 5u);
    const std::vector<int32_t> tail(ids.end() - 4, ids.end());
    EXPECT_EQ(tail, (std::vector<int32_t>{0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3}));
    EXPECT_EQ(tokenizer->decode(ids), "a" + emoji);
    const std::string cjk = "\u4e2d\u6587 \u65e5\u672c\u8a9e\u3002";
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(cjk, true)), cjk);
    const std::string invalid = "\xFF\xFE ok \xE2\x96 \xC0\xAF end\xF0";  // not UTF-8
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(invalid, true)), invalid);
}

TEST(SentencePieceTokenizer, ControlTokensComeFromNoText)
{
    auto tokenizer = makeTokenizer(loadTok512());
    ASSERT_TRUE(tokenizer);
    const auto ids = tokenizer->encode("<s> hi </s> <unk>", true);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 1) << describe(*tokenizer, ids);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 0);
    EXPECT_EQ(tokenizer->decode(ids), "<s> hi </s> <unk>");
}

TEST(SentencePieceTokenizer, DecodeToken)
{
    auto tokenizer = makeTokenizer(loadTok512());
    ASSERT_TRUE(tokenizer);
    const Vocabulary& v = tokenizer->vocabulary();
    const auto theId = int32_t(std::find(v.tokens.begin(), v.tokens.end(), kSpace + "the") -
                               v.tokens.begin());
    ASSERT_LT(theId, tokenizer->size());
    EXPECT_EQ(tokenizer->decodeToken(1, theId), "the");   // after BOS: dummy space dropped
    EXPECT_EQ(tokenizer->decodeToken(-1, theId), " the");
    EXPECT_EQ(tokenizer->decodeToken(theId, theId), " the");
    EXPECT_EQ(tokenizer->decodeToken(-1, 1), "");         // control
    EXPECT_EQ(tokenizer->decodeToken(-1, 2), "");
    EXPECT_EQ(tokenizer->decodeToken(-1, 0), "");         // unknown
    EXPECT_EQ(tokenizer->decodeToken(-1, 3 + 0x0A), "\n");  // <0x0A>
    EXPECT_EQ(tokenizer->decodeToken(-1, 9999), "");
    EXPECT_TRUE(tokenizer->isEndOfGeneration(2));
}

TEST(SentencePieceTokenizer, UnknownCharactersWithoutByteTokensGiveUnk)
{
    Vocabulary v;
    v.tokens = {"<unk>", "<s>", "</s>", kSpace, "a", "b", kSpace + "a", "ab"};
    v.scores = {0, 0, 0, -1, -2, -3, -4, -5};
    v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal,
               TokenType::Normal, TokenType::Normal, TokenType::Normal, TokenType::Normal};
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    auto tokenizer = makeTokenizer(v);
    ASSERT_TRUE(tokenizer);
    // " ab" + "\u00e9" (2 bytes, one character) + "b": "▁a" outranks "ab"; é becomes one <unk>.
    EXPECT_EQ(tokenizer->encode("ab\u00e9b", true), (std::vector<int32_t>{1, 6, 5, 0, 5}));
}

TEST(SentencePieceTokenizer, EqualScoresMergeLeftmostFirst)
{
    Vocabulary v;
    v.tokens = {"<unk>", "<s>", "</s>", kSpace, "a", "aa"};
    v.scores = {0, 0, 0, -1, -2, -3};
    v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal,
               TokenType::Normal, TokenType::Normal};
    v.bos = 1;
    v.unk = 0;
    auto tokenizer = makeTokenizer(v);
    ASSERT_TRUE(tokenizer);
    // "▁aaa": both "aa" pairs score the same; the left one merges, as llama.cpp and llama2.c do.
    EXPECT_EQ(tokenizer->encode("aaa", false), (std::vector<int32_t>{3, 5, 4}));
    EXPECT_EQ(tokenizer->encode("aaa", false), llama2cEncode(v, "aaa", false));
    EXPECT_EQ(tokenizer->encode("aaaaa", false), (std::vector<int32_t>{3, 5, 5, 4}));
}

// A long prompt round-trips and matches the reference on its start. Its speed is not asserted
// here (a loaded CI machine is no clock); the figure is printed, and an encoder gone quadratic
// would run into the test's CTest timeout.
TEST(SentencePieceTokenizer, LongPromptRoundTrips)
{
    auto tokenizer = makeTokenizer(loadTok512());
    ASSERT_TRUE(tokenizer);
    std::string text;
    for (const std::string& s : randomCorpus()) text += s + " ";
    while (text.size() < 20000) text += text;
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tokenizer->encode(text, true);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("SentencePiece: %zu bytes -> %zu tokens in %.1f ms\n", text.size(), ids.size(),
                seconds * 1e3);
    EXPECT_EQ(tokenizer->decode(ids), text);
    const std::string sample = text.substr(0, 600);  // the naive reference is O(n^2)
    EXPECT_EQ(tokenizer->encode(sample, true), llama2cEncode(tokenizer->vocabulary(), sample));
}

TEST(GgufVocabulary, Stories260KMatchesTok512)
{
    auto file = gguf::File::open(modelPath("stories260K.gguf"));
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto vocab = vocabularyFromGguf(*file.value());
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    const Vocabulary reference = loadTok512();
    EXPECT_EQ(vocab->kind, Vocabulary::Kind::SentencePiece);
    EXPECT_EQ(vocab->tokens, reference.tokens);
    EXPECT_EQ(vocab->scores, reference.scores);
    EXPECT_EQ(vocab->types, reference.types);
    EXPECT_EQ(vocab->bos, 1);
    EXPECT_EQ(vocab->eos, 2);
    EXPECT_TRUE(vocab->addSpacePrefix);
    auto fromGguf = makeTokenizer(std::move(vocab.value()));
    auto fromBin = makeTokenizer(reference);
    ASSERT_TRUE(fromGguf && fromBin);
    for (const std::string& text : randomCorpus())
        EXPECT_EQ(fromGguf->encode(text, true), fromBin->encode(text, true)) << text;
}


TEST(GgufVocabulary, SmallSentencePieceVocabulary)
{
    auto vocab = readWrittenVocabulary("ok", "");
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    EXPECT_EQ(vocab->tokens.size(), 5u);
    EXPECT_EQ(vocab->types[3], TokenType::Normal);
    EXPECT_EQ(vocab->unk, 0);  // llama.cpp's default where the file does not say
    EXPECT_TRUE(vocab->addBos);
    EXPECT_TRUE(vocab->addSpacePrefix);
    auto tokenizer = makeTokenizer(std::move(vocab.value()));
    ASSERT_TRUE(tokenizer);
    EXPECT_EQ(tokenizer->encode("a a", true), (std::vector<int32_t>{1, 3, 3}));
}

TEST(GgufVocabulary, ErrorsNameTheFileAndKey)
{
    struct Case {
        const char* name;
        const char* skip;
        std::function<void(gguf::Writer&)> edit;
        ErrorCode code;
        const char* key;  // expected in the message
    };
    const std::vector<std::string> twoTokens = {"a", "b"};
    const Case cases[] = {
        {"no_tokens", "tokenizer.ggml.tokens", {}, ErrorCode::ModelFileInvalid,
         "tokenizer.ggml.tokens"},
        {"no_model", "tokenizer.ggml.model", {}, ErrorCode::ModelFileInvalid,
         "tokenizer.ggml.model"},
        {"no_scores", "tokenizer.ggml.scores", {}, ErrorCode::ModelFileInvalid,
         "tokenizer.ggml.scores"},
        {"short_scores", "", [](gguf::Writer& w) {
             w.setFloat32Array("tokenizer.ggml.scores", {0, 0, 0}); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.scores"},
        {"long_types", "", [](gguf::Writer& w) {
             w.setInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1}); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.token_type"},
        {"bad_type", "", [](gguf::Writer& w) {
             w.setInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 42}); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.token_type"},
        {"tokens_not_strings", "", [](gguf::Writer& w) {
             w.setInt32Array("tokenizer.ggml.tokens", {1, 2, 3, 4, 5}); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.tokens"},
        {"bos_out_of_range", "", [](gguf::Writer& w) {
             w.setUInt32("tokenizer.ggml.bos_token_id", 5); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.bos_token_id"},
        {"bert", "", [](gguf::Writer& w) { w.setString("tokenizer.ggml.model", "bert"); },
         ErrorCode::UnsupportedModel, "bert"},
        {"gpt2_no_merges", "", [](gguf::Writer& w) {
             w.setString("tokenizer.ggml.model", "gpt2"); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.merges"},
        {"bad_merge", "", [&](gguf::Writer& w) {
             w.setString("tokenizer.ggml.model", "gpt2");
             w.setStringArray("tokenizer.ggml.merges", {"ab"}); },
         ErrorCode::ModelFileInvalid, "tokenizer.ggml.merges"},
    };
    for (const Case& c : cases) {
        auto vocab = readWrittenVocabulary(c.name, c.skip, c.edit);
        ASSERT_FALSE(vocab.ok()) << c.name;
        const Error& e = vocab.error();
        EXPECT_EQ(e.code, c.code) << c.name << ": " << e.message;
        EXPECT_NE(e.message.find(c.key), std::string::npos) << c.name << ": " << e.message;
        EXPECT_NE(e.message.find(c.name), std::string::npos) << "names the file: " << e.message;
        EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    }
}

}  // namespace
