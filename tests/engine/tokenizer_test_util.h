#pragma once
// Helpers shared by the tokenizer tests (test_tokenizer.cpp, test_tokenizer_bpe.cpp).

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/tokenizer/tokenizer.h"

namespace spillway::tokenizer_test {

inline const std::string kSpace = "\xE2\x96\x81";  // U+2581

inline std::string modelPath(const char* name)
{
    return std::string(SPILLWAY_TEST_DATA_DIR) + "/models/" + name;
}

inline std::unique_ptr<Tokenizer> makeTokenizer(Vocabulary vocab)
{
    auto tokenizer = Tokenizer::create(std::move(vocab));
    EXPECT_TRUE(tokenizer.ok()) << (tokenizer.ok() ? "" : tokenizer.error().message);
    return tokenizer.ok() ? std::move(tokenizer.value()) : nullptr;
}

inline std::string describe(const Tokenizer& t, const std::vector<int32_t>& ids)
{
    std::string out;
    for (int32_t id : ids) {
        const bool known = id >= 0 && id < t.size();
        out += std::to_string(id) + ":'" + (known ? t.vocabulary().tokens[size_t(id)] : "?") + "' ";
    }
    return out;
}

// 200 English-ish strings in the style of TinyStories, with digits, punctuation, odd spacing,
// accents, CJK and emoji (incl. a ZWJ family) mixed in. Fixed seed: failures reproduce.
inline std::vector<std::string> randomCorpus()
{
    const char* words[] = {"Once", "upon", "a", "time", "there", "was", "little", "girl", "named",
                           "Lily", "She", "loved", "to", "play", "outside", "in", "the", "park",
                           "big", "red", "ball", "happy", "dog", "said", "Tom", "Sue", "went",
                           "sky", "shiny", "don't", "it's", "Ben's", "THE", "tree", "jumped"};
    const char* extras[] = {"!", "?", ",", ".", "\"", "42", "2024", "3.14", "\n", "\t", "  ",
                            "caf\u00e9", "\u00fcber", "\u4e2d\u6587", "\u65e5\u672c\u8a9e",
                            "\xF0\x9F\x98\x80", "\xF0\x9F\x91\xA8\u200d\xF0\x9F\x91\xA9\u200d"
                            "\xF0\x9F\x91\xA7", "\u2014", "\u2026", "~", "<s>", "</s>", "<unk>"};
    std::mt19937 rng(1234);
    std::vector<std::string> corpus;
    for (int i = 0; i < 200; ++i) {
        std::string s;
        const int count = 1 + int(rng() % 25);
        for (int w = 0; w < count; ++w) {
            if (w > 0 && rng() % 5 != 0) s += ' ';
            if (rng() % 6 == 0)
                s += extras[rng() % std::size(extras)];
            else
                s += words[rng() % std::size(words)];
        }
        corpus.push_back(s);
    }
    return corpus;
}

// Writes the tokenizer keys of a small SentencePiece vocabulary to a GGUF file, leaving out
// `skip`; `edit` then adds or overrides keys. Returns what vocabularyFromGguf makes of it.
inline Result<Vocabulary> readWrittenVocabulary(const std::string& name, std::string_view skip,
                                         const std::function<void(gguf::Writer&)>& edit = {})
{
    gguf::Writer w;
    const auto want = [&](std::string_view key) { return key != skip; };
    w.setString("general.architecture", "llama");
    if (want("tokenizer.ggml.model")) w.setString("tokenizer.ggml.model", "llama");
    if (want("tokenizer.ggml.tokens"))
        w.setStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", kSpace + "a", "a"});
    if (want("tokenizer.ggml.scores"))
        w.setFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
    if (want("tokenizer.ggml.token_type"))
        w.setInt32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
    if (want("tokenizer.ggml.bos_token_id")) w.setUInt32("tokenizer.ggml.bos_token_id", 1);
    if (want("tokenizer.ggml.eos_token_id")) w.setUInt32("tokenizer.ggml.eos_token_id", 2);
    if (edit) edit(w);
    const std::string path = testing::TempDir() + "spillway_tokenizer_" + name + ".gguf";
    const Status written = w.write(path);
    if (!written.ok()) return written.error();
    auto file = gguf::File::open(path);
    std::filesystem::remove(path);  // the mapping stays valid on Linux
    if (!file.ok()) return file.error();
    return vocabularyFromGguf(*file.value());
}

}  // namespace spillway::tokenizer_test
