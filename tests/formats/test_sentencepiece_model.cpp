// tokenizer.model -> GGUF tokenizer metadata, checked against SentencePiece itself: a small BPE
// model with byte fallback is trained here with libsentencepiece's trainer (no real
// tokenizer.model is kept in tests/data), and our tokenizer built from the metadata must encode
// a corpus to the same ids as SentencePieceProcessor::Encode.

#include <gtest/gtest.h>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/formats/gguf.h"
#include "core/tokenizer/sentencepiece_model.h"
#include "core/tokenizer/tokenizer.h"

using namespace spillway;
namespace fs = std::filesystem;

namespace {

const char* const kTrainingText[] = {
    "Once upon a time, there was a little girl named Lily.",
    "She loved to play outside in the park with her big red ball.",
    "One day, Tom saw a shiny stone under the old tree and said: \"Look!\"",
    "They were happy and played together until the sun went down.",
    "The dog jumped over the fence, and the cat ran after it.",
    "Mom said, \"Don't forget your hat, it's cold outside.\"",
    "In 2024 they counted 1, 2, 3 birds and 42 ants.",
    "Ben's friends liked to read books about dragons and kings.",
};

const std::string& folder()
{
    static const std::string dir = [] {
        const fs::path d = fs::path(testing::TempDir()) /
                           ("spillway_spm_" + std::to_string(::getpid()));
        fs::remove_all(d);
        fs::create_directories(d);
        return d.string();
    }();
    return dir;
}

// Removes folder() when the run ends.
class RemoveFolder : public testing::Environment {
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(folder(), ec);
    }
};
[[maybe_unused]] testing::Environment* const kRemoveFolder =
    testing::AddGlobalTestEnvironment(new RemoveFolder);

// Trains a model like Llama's (BPE, byte fallback, identity normalization, whitespace kept,
// digits split) and returns its path, or "" with a test failure.
std::string trainModel(const std::string& name, const std::string& extraArgs)
{
    const std::string input = folder() + "/" + name + ".txt";
    {
        std::ofstream out(input);
        for (int repeat = 0; repeat < 20; ++repeat)
            for (const char* line : kTrainingText) out << line << "\n";
    }
    const std::string prefix = folder() + "/" + name;
    const std::string args = "--input=" + input + " --model_prefix=" + prefix +
                             " --minloglevel=2 --normalization_rule_name=identity"
                             " --remove_extra_whitespaces=false --add_dummy_prefix=true " +
                             extraArgs;
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return status.ok() ? prefix + ".model" : std::string();
}

const std::string& bpeModel()
{
    static const std::string path =
        trainModel("bpe", "--model_type=bpe --vocab_size=400 --byte_fallback=true"
                          " --character_coverage=1.0 --split_digits=true"
                          " --allow_whitespace_only_pieces=true"
                          " --user_defined_symbols=<tool> --control_symbols=<ctrl>");
    return path;
}

std::vector<std::string> corpus()
{
    return {
        "Once upon a time, there was a little girl named Lily.",
        "Hello world",
        "the the the  the   the",
        "   leading spaces",
        "trailing spaces   ",
        "Numbers 12345 and 3.14 and 2024",
        "unseen words: quixotic zephyr jukebox",
        "\u00dcber caf\u00e9 na\u00efve",
        "\u4e2d\u6587\u65e5\u672c\u8a9e",
        "emoji \U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467",
        "tabs\tand\nnewlines\r\n",
        "Tom said, \"Don't go!\" and Lily's dog ran.",
        "x",
        "a b c d e f g",
        "they played with the ball <tool>",
        "<ctrl> is not matched in text",
        "",
    };
}

TEST(SentencePieceModel, MetadataFromTrainedBpeModel)
{
    const std::string& path = bpeModel();
    ASSERT_FALSE(path.empty());
    sentencepiece::SentencePieceProcessor sp;
    ASSERT_TRUE(sp.Load(path).ok()) << path;

    gguf::Metadata meta(path);
    const Status status = tokenizerMetadataFromSentencePiece(path, meta);
    ASSERT_TRUE(status.ok()) << status.error().message;
    EXPECT_EQ(meta.getString("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(meta.getInt("tokenizer.ggml.unknown_token_id"), sp.unk_id());
    EXPECT_EQ(meta.getInt("tokenizer.ggml.bos_token_id"), sp.bos_id());
    EXPECT_EQ(meta.getInt("tokenizer.ggml.eos_token_id"), sp.eos_id());
    EXPECT_EQ(meta.getInt("tokenizer.ggml.padding_token_id"), int64_t(UINT32_MAX));  // none
    EXPECT_EQ(meta.getBool("tokenizer.ggml.add_space_prefix"), true);

    auto vocab = vocabularyFromMetadata(meta);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    ASSERT_EQ(vocab->tokens.size(), size_t(sp.GetPieceSize()));
    EXPECT_EQ(vocab->tokens.size(), 400u);
    EXPECT_EQ(vocab->pad, -1);
    int bytes = 0, userDefined = 0, control = 0;
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
        EXPECT_EQ(vocab->tokens[size_t(id)], sp.IdToPiece(id));
        EXPECT_EQ(vocab->scores[size_t(id)], sp.GetScore(id));
        const TokenType type = vocab->types[size_t(id)];
        EXPECT_EQ(type == TokenType::Unknown, sp.IsUnknown(id)) << id;
        EXPECT_EQ(type == TokenType::Control, sp.IsControl(id)) << id;
        EXPECT_EQ(type == TokenType::Byte, sp.IsByte(id)) << id;
        EXPECT_EQ(type == TokenType::Unused, sp.IsUnused(id)) << id;
        bytes += type == TokenType::Byte;
        userDefined += type == TokenType::UserDefined;
        control += type == TokenType::Control;
    }
    EXPECT_EQ(bytes, 256);
    EXPECT_EQ(userDefined, 1);                // <tool>
    EXPECT_EQ(control, 3);                    // <s>, </s>, <ctrl>
    EXPECT_EQ(vocab->tokens[size_t(sp.PieceToId("<tool>"))], "<tool>");
    EXPECT_EQ(vocab->types[size_t(sp.PieceToId("<tool>"))], TokenType::UserDefined);
}

TEST(SentencePieceModel, EncodesLikeSentencePiece)
{
    const std::string& path = bpeModel();
    ASSERT_FALSE(path.empty());
    sentencepiece::SentencePieceProcessor sp;
    ASSERT_TRUE(sp.Load(path).ok()) << path;
    gguf::Metadata meta(path);
    const Status converted = tokenizerMetadataFromSentencePiece(path, meta);
    ASSERT_TRUE(converted.ok()) << converted.error().message;
    auto vocab = vocabularyFromMetadata(meta);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    auto tokenizer = Tokenizer::create(std::move(vocab.value()));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    const Tokenizer& ours = *tokenizer.value();

    for (const std::string& text : corpus()) {
        std::vector<int> expected;
        ASSERT_TRUE(sp.Encode(text, &expected).ok());
        const std::vector<int32_t> reference(expected.begin(), expected.end());
        EXPECT_EQ(ours.encode(text, false), reference) << text;
        // With BOS, as llama.cpp and Spillway prompt the model.
        std::vector<int32_t> withBos = {sp.bos_id()};
        withBos.insert(withBos.end(), reference.begin(), reference.end());
        EXPECT_EQ(ours.encode(text, true), withBos) << text;
        std::string decoded;
        ASSERT_TRUE(sp.Decode(expected, &decoded).ok());
        EXPECT_EQ(ours.decode(withBos), decoded) << text;
    }
}

TEST(SentencePieceModel, RefusesUnigramAndBadFiles)
{
    const std::string unigram =
        trainModel("unigram", "--model_type=unigram --vocab_size=60 --hard_vocab_limit=false");
    ASSERT_FALSE(unigram.empty());
    gguf::Metadata meta("unigram");
    Status status = tokenizerMetadataFromSentencePiece(unigram, meta);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(status.error().message.find("Unigram"), std::string::npos) << status.error().message;
    EXPECT_TRUE(meta.entries().empty());

    const std::string garbage = folder() + "/garbage.model";
    std::ofstream(garbage, std::ios::binary) << "this is not a protobuf \x01\x02\xff\xff\xff";
    status = tokenizerMetadataFromSentencePiece(garbage, meta);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_EQ(status.error().message.rfind(garbage + ": ", 0), 0u) << status.error().message;

    const std::string empty = folder() + "/empty.model";
    std::ofstream(empty, std::ios::binary).flush();
    status = tokenizerMetadataFromSentencePiece(empty, meta);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::ModelFileInvalid);

    // A real model cut short.
    ASSERT_FALSE(bpeModel().empty());
    std::ifstream in(bpeModel(), std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << bpeModel();
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    ASSERT_GT(bytes.size(), 10u) << bpeModel();  // cut at 1, 10, half and all but one byte
    const std::string cut = folder() + "/cut.model";
    for (size_t n : {size_t(1), size_t(10), bytes.size() / 2, bytes.size() - 1}) {
        std::ofstream(cut, std::ios::binary | std::ios::trunc).write(bytes.data(), long(n));
        status = tokenizerMetadataFromSentencePiece(cut, meta);
        EXPECT_FALSE(status.ok()) << n;
    }

    status = tokenizerMetadataFromSentencePiece(folder() + "/missing.model", meta);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::Io);

    gguf::Metadata taken("taken");
    taken.add({"tokenizer.ggml.model", gguf::Value::ofString("gpt2")});
    status = tokenizerMetadataFromSentencePiece(bpeModel(), taken);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(taken.entries().size(), 1u);
}

}  // namespace
