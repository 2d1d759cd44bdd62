// GGUF -> HF: hfConfigFromMetadata's config.json reads back (metadataFromHfConfig) to the same
// metadata, key for key and type for type; a real GGUF's hyper-parameters survive the trip as
// the engine reads them; and what config.json cannot express is refused.

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "hf_configs.h"
#include "hf_test_util.h"

namespace spillway::hf_test {
namespace {

using gguf::Value;
using gguf::ValueType;

std::string describe(const Value& v)
{
    std::string s = gguf::valueTypeName(v.type);
    if (auto i = v.asInt()) return s + " " + std::to_string(*i);
    if (auto f = v.asFloat()) return s + " " + std::to_string(*f);
    if (auto t = v.asString()) return s + " '" + *t + "'";
    return s;
}

// Every key of `a` is in `b` with an equal value (same type), and the other way round.
void expectSameMetadata(const gguf::Metadata& a, const gguf::Metadata& b, const std::string& what)
{
    for (const auto& kv : a.entries()) {
        const Value* other = b.find(kv.key);
        if (!other) {
            ADD_FAILURE() << what << ": '" << kv.key << "' lost in the round trip";
            continue;
        }
        EXPECT_TRUE(*other == kv.value)
            << what << ": '" << kv.key << "' was " << describe(kv.value) << ", came back "
            << describe(*other);
    }
    for (const auto& kv : b.entries())
        EXPECT_NE(a.find(kv.key), nullptr)
            << what << ": '" << kv.key << "' appeared in the round trip";
}

struct RoundTrip {
    gguf::Metadata first, second;
};

// config.json (+ generation) -> metadata -> config.json + generation_config.json -> metadata.
RoundTrip roundTrip(const std::string& config, const std::string& generation = "")
{
    RoundTrip r;
    Loaded m(config, generation);
    EXPECT_TRUE(m.status.ok()) << m.status.error().message;
    r.first = m.meta;
    const bool tied = m.meta.getBool("spillway.tied_embeddings").value_or(false);
    auto text = hfConfigFromMetadata(m.meta, tied);
    EXPECT_TRUE(text.ok()) << text.error().message;
    auto gen = hfGenerationConfigFromMetadata(m.meta);
    EXPECT_TRUE(gen.ok()) << gen.error().message;
    if (!text.ok() || !gen.ok()) return r;
    EXPECT_TRUE(nlohmann::json::accept(*text)) << *text;
    Loaded back(*text, *gen);
    EXPECT_TRUE(back.status.ok()) << back.status.error().message << "\n" << *text;
    r.second = back.meta;
    // config.json alone carries the token ids as well.
    Loaded alone(*text);
    EXPECT_TRUE(alone.status.ok()) << alone.status.error().message;
    expectSameMetadata(r.first, alone.meta, "config.json alone");
    return r;
}

TEST(HfConfigRoundTrip, RealConfigsComeBackKeyForKey)
{
    const std::pair<const char*, const char*> cases[] = {
        {"Llama-3.2-1B", kLlama32_1B},   {"Mistral-7B-v0.1", kMistral7B},
        {"Qwen2.5-0.5B", kQwen25_05B},   {"Qwen3-0.6B", kQwen3_06B},
        {"SmolLM2-135M", kSmolLM2_135M}, {"OPT-125m", kOpt125m},
        {"Mixtral-8x7B", kMixtral8x7B},  {"Qwen1.5-MoE-A2.7B", kQwen15MoeA27B},
        {"Qwen3-30B-A3B", kQwen3_30B_A3B}, {"OLMoE-1B-7B", kOlmoe1B7B},
    };
    for (const auto& [name, config] : cases) {
        SCOPED_TRACE(name);
        const RoundTrip r = roundTrip(config);
        EXPECT_GT(r.first.entries().size(), 10u);
        expectSameMetadata(r.first, r.second, name);
    }
    const RoundTrip eos = roundTrip(kLlama32_1B, kLlama32_1B_InstructGeneration);
    expectSameMetadata(eos.first, eos.second, "Llama-3.2-1B-Instruct eos list");
    const RoundTrip qwen = roundTrip(kQwen3_06B, kQwen3_06B_Generation);
    expectSameMetadata(qwen.first, qwen.second, "Qwen3 generation config");
}

TEST(HfConfigRoundTrip, WrittenConfigLooksLikeHuggingFaces)
{
    Loaded m(kMistral7B);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    auto text = hfConfigFromMetadata(m.meta, false);
    ASSERT_TRUE(text.ok()) << text.error().message;
    const auto j = nlohmann::json::parse(*text);
    EXPECT_EQ(j["architectures"][0], "MistralForCausalLM");
    EXPECT_EQ(j["model_type"], "mistral");
    EXPECT_EQ(j["sliding_window"], 4096);
    EXPECT_EQ(j["rms_norm_eps"].get<double>(), 1e-5);  // the short decimal, not float noise
    EXPECT_EQ(j["tie_word_embeddings"], false);
    EXPECT_TRUE(j["rope_scaling"].is_null());

    Loaded llama3(kLlama32_1B);
    ASSERT_TRUE(llama3.status.ok()) << llama3.status.error().message;
    auto t3 = hfConfigFromMetadata(llama3.meta, true);
    ASSERT_TRUE(t3.ok()) << t3.error().message;
    const auto s = nlohmann::json::parse(*t3)["rope_scaling"];
    EXPECT_EQ(s["rope_type"], "llama3");
    EXPECT_EQ(s["factor"].get<double>(), 32.0);
    EXPECT_EQ(s["original_max_position_embeddings"], 8192);
    EXPECT_EQ(nlohmann::json::parse(*t3)["head_dim"], 64);

    auto gen = hfGenerationConfigFromMetadata(llama3.meta);
    ASSERT_TRUE(gen.ok()) << gen.error().message;
    EXPECT_EQ(nlohmann::json::parse(*gen),
              nlohmann::json::parse(R"({"bos_token_id": 128000, "eos_token_id": 128001})"));
}

TEST(HfConfigRoundTrip, RealGgufThroughConfigJsonGivesTheSameEngineConfig)
{
    const std::string path = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto before = llamaConfigFromMetadata((*file)->meta());
    ASSERT_TRUE(before.ok()) << before.error().message;

    auto text = hfConfigFromMetadata((*file)->meta(), (*file)->tensor("output.weight") == nullptr);
    ASSERT_TRUE(text.ok()) << text.error().message;
    auto gen = hfGenerationConfigFromMetadata((*file)->meta());
    ASSERT_TRUE(gen.ok()) << gen.error().message;
    Loaded m(*text, *gen);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message << "\n" << *text;
    auto after = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(after.ok()) << after.error().message;
    EXPECT_EQ(after->architecture, before->architecture);
    EXPECT_EQ(after->dim, before->dim);
    EXPECT_EQ(after->nLayers, before->nLayers);
    EXPECT_EQ(after->nHeads, before->nHeads);
    EXPECT_EQ(after->nKvHeads, before->nKvHeads);
    EXPECT_EQ(after->headDim, before->headDim);
    EXPECT_EQ(after->ffnDim, before->ffnDim);
    EXPECT_EQ(after->trainedContext, before->trainedContext);
    EXPECT_EQ(after->normEps, before->normEps);
    EXPECT_EQ(after->ropeBase, before->ropeBase);
    EXPECT_EQ(after->ropeFreqScale, before->ropeFreqScale);
    EXPECT_EQ(after->ropeDims, before->ropeDims);
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
        EXPECT_EQ(m.meta.getInt(key), (*file)->getInt(key)) << key;
    // The vocabulary size comes from the token list when the file has no llama.vocab_size.
    const gguf::Value* tokens = (*file)->find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_NE(tokens->asArray(), nullptr);
    EXPECT_EQ(m.i("llama.vocab_size"), int64_t(tokens->asArray()->values.size()));
}

TEST(HfConfigRoundTrip, RefusesWhatConfigJsonCannotSay)
{
    auto base = [] {
        gguf::Metadata m("test.gguf");
        m.add({"general.architecture", Value::ofString("llama")});
        m.add({"llama.embedding_length", Value::ofUInt(ValueType::UInt32, 64)});
        m.add({"llama.block_count", Value::ofUInt(ValueType::UInt32, 2)});
        m.add({"llama.attention.head_count", Value::ofUInt(ValueType::UInt32, 8)});
        m.add({"llama.feed_forward_length", Value::ofUInt(ValueType::UInt32, 172)});
        m.add({"llama.vocab_size", Value::ofUInt(ValueType::UInt32, 512)});
        return m;
    };
    EXPECT_TRUE(hfConfigFromMetadata(base(), false).ok());

    gguf::Metadata noArch("test.gguf");
    auto r = hfConfigFromMetadata(noArch, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "test.gguf: missing metadata key 'general.architecture'");

    gguf::Metadata gpt2("test.gguf");
    gpt2.add({"general.architecture", Value::ofString("gpt2")});
    r = hfConfigFromMetadata(gpt2, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(r.error().message.find("'gpt2'"), std::string::npos);

    gguf::Metadata partial = base();
    partial.add({"llama.rope.dimension_count", Value::ofUInt(ValueType::UInt32, 4)});
    r = hfConfigFromMetadata(partial, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(r.error().message.find("rope.dimension_count 4 differs from the head size 8"),
              std::string::npos) << r.error().message;

    gguf::Metadata yarn = base();
    yarn.add({"llama.rope.scaling.type", Value::ofString("yarn")});
    r = hfConfigFromMetadata(yarn, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);

    gguf::Metadata noLayers = base();
    gguf::Metadata missing("test.gguf");
    for (const auto& kv : noLayers.entries())
        if (kv.key != "llama.block_count") missing.add(kv);
    r = hfConfigFromMetadata(missing, false);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(r.error().message.find("'llama.block_count'"), std::string::npos);

    // An absent epsilon is the engine's 1e-5, written out (HF would assume 1e-6).
    auto text = hfConfigFromMetadata(base(), false);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(nlohmann::json::parse(*text)["rms_norm_eps"].get<double>(), 1e-5);
    EXPECT_EQ(nlohmann::json::parse(*text)["max_position_embeddings"], 2048);
}

}  // namespace
}  // namespace spillway::hf_test
