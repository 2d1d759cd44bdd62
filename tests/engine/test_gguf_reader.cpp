// GGUF reader on the real stories260K.gguf, and the type tables and Value helpers it uses.
// (Writer round trips: test_gguf_writer.cpp; corrupt files: test_gguf_corrupt.cpp; truncations
// and fuzzing: test_gguf_fuzz.cpp; shared helpers: gguf_test_util.h.)

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "gguf_test_util.h"

using namespace spillway;
using namespace spillway::gguf;
using namespace spillway::gguf_test;

// ---- the real model ----------------------------------------------------------------------------

TEST(GgufReal, Stories260KOpens)
{
    auto r = File::open(kStories);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.dataOffset(), 14176u);
    EXPECT_EQ(f.metadata().size(), 19u);
    ASSERT_EQ(f.tensors().size(), 48u);
    EXPECT_EQ(f.getString("general.architecture"), "llama");
    EXPECT_EQ(f.getInt("llama.embedding_length"), 64);
    EXPECT_EQ(f.getInt("llama.block_count"), 5);
    EXPECT_EQ(f.getInt("tokenizer.ggml.padding_token_id"), 4294967295);
    const auto eps = f.getFloat("llama.attention.layer_norm_rms_epsilon");
    ASSERT_TRUE(eps.has_value()) << "no llama.attention.layer_norm_rms_epsilon";
    EXPECT_NEAR(*eps, 1e-5, 1e-9);
    EXPECT_FALSE(f.getInt("general.architecture").has_value());
    EXPECT_FALSE(f.getString("no.such.key").has_value());
    EXPECT_FALSE(f.getBool("llama.block_count").has_value());

    const TensorInfo* embd = f.tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->dims, (std::vector<int64_t>{64, 512}));
    EXPECT_EQ(embd->type, gpu::DType::F32);
    EXPECT_EQ(embd->cols(), 64);
    EXPECT_EQ(embd->rows(), 512);
    EXPECT_EQ(embd->elements(), 64 * 512);
    EXPECT_EQ(embd->bytes, 64u * 512 * 4);
    EXPECT_EQ(f.tensor("no.such.tensor"), nullptr);
    // output.weight is a separate copy of token_embd.weight (see models/README.md).
    const TensorInfo* out = f.tensor("output.weight");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(std::memcmp(out->data, embd->data, embd->bytes), 0);
    EXPECT_EQ(f.tensors().back().name, "blk.4.ffn_norm.weight");
    EXPECT_EQ(f.dataOffset() + f.tensors().back().offset + 256, f.fileSize());

    const Value* tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_NE(tokens->asArray(), nullptr);
    EXPECT_EQ(tokens->asArray()->elementType, ValueType::String);
    ASSERT_EQ(tokens->asArray()->values.size(), 512u);
    ASSERT_NE(tokens->asArray()->values[1].asString(), nullptr);
    ASSERT_NE(tokens->asArray()->values[2].asString(), nullptr);
    EXPECT_EQ(*tokens->asArray()->values[1].asString(), "<s>");
    EXPECT_EQ(*tokens->asArray()->values[2].asString(), "</s>");
    const Value* types = f.find("tokenizer.ggml.token_type");
    ASSERT_NE(types, nullptr);
    ASSERT_NE(types->asArray(), nullptr);
    ASSERT_FALSE(types->asArray()->values.empty());
    EXPECT_EQ(types->asArray()->elementType, ValueType::Int32);
    EXPECT_EQ(types->asArray()->values[0].asInt(), 2);
    checkInvariants(f);
}

TEST(GgufTypes, Names)
{
    EXPECT_STREQ(ggmlTypeName(12), "Q4_K");
    EXPECT_STREQ(ggmlTypeName(39), "MXFP4");
    EXPECT_EQ(ggmlTypeName(4), nullptr);
    EXPECT_EQ(ggmlTypeName(77), nullptr);
    EXPECT_EQ(ggmlTypeInfo(8)->blockBytes, 34);
    for (auto t : {gpu::DType::F32, gpu::DType::F16, gpu::DType::BF16, gpu::DType::Q8_0,
                   gpu::DType::Q4_0, gpu::DType::Q4_1, gpu::DType::Q5_0, gpu::DType::Q4_K,
                   gpu::DType::Q5_K, gpu::DType::Q6_K}) {
        EXPECT_EQ(dtypeFromGgml(ggmlFromDtype(t)), t);
        const GgmlTypeInfo* info = ggmlTypeInfo(ggmlFromDtype(t));
        EXPECT_STREQ(info->name, gpu::dtypeName(t));
        EXPECT_EQ(info->blockSize, gpu::dtypeTraits(t).blockSize);
        EXPECT_EQ(info->blockBytes, gpu::dtypeTraits(t).blockBytes);
    }
    EXPECT_FALSE(dtypeFromGgml(34).has_value());  // TQ1_0: not run
    EXPECT_EQ(detail::quoted("a'\n\x01z"), "'a\\x27\\x0a\\x01z'");
    using VT = ValueType;
    EXPECT_TRUE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt8, 1));
    EXPECT_FALSE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt16, 1));
    EXPECT_FALSE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt8, 2));
    const auto arr = [](int64_t last) {
        const Value inner =
            Value::ofArray(VT::Int8, {Value::ofInt(VT::Int8, 3), Value::ofInt(VT::Int8, last)});
        return Value::ofArray(VT::Array, {inner});
    };
    EXPECT_TRUE(arr(4) == arr(4));
    EXPECT_FALSE(arr(4) == arr(5));
    EXPECT_EQ(Value::ofUInt(VT::UInt64, UINT64_MAX).asInt(), std::nullopt);
    EXPECT_EQ(Value::ofBool(true).asInt(), 1);
    EXPECT_EQ(Value::ofString("7").asInt(), std::nullopt);
}
