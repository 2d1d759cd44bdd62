// metadataFromHfConfig on the config.json files of real checkpoints (hf_configs.h): the GGUF keys
// and types llama.cpp's converter would write, as the engine's llamaConfigFromMetadata reads
// them; and clear errors for missing, ill-typed and out-of-range fields and unknown
// architectures.

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "hf_configs.h"
#include "hf_test_util.h"

namespace spillway::hf_test {
namespace {

using gguf::ValueType;

void expectType(const Loaded& m, const std::string& key, ValueType t)
{
    const gguf::Value* v = m.meta.find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type, t) << key;
}

TEST(HfConfig, Llama32_1B)
{
    Loaded m(kLlama32_1B);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "llama");
    EXPECT_FALSE(m.has("general.name"));  // no _name_or_path in the published file
    EXPECT_EQ(m.i("llama.vocab_size"), 128256);
    EXPECT_EQ(m.i("llama.context_length"), 131072);
    EXPECT_EQ(m.i("llama.embedding_length"), 2048);
    EXPECT_EQ(m.i("llama.block_count"), 16);
    EXPECT_EQ(m.i("llama.feed_forward_length"), 8192);
    EXPECT_EQ(m.i("llama.attention.head_count"), 32);
    EXPECT_EQ(m.i("llama.attention.head_count_kv"), 8);
    EXPECT_EQ(m.i("llama.attention.key_length"), 64);
    EXPECT_EQ(m.i("llama.attention.value_length"), 64);
    EXPECT_EQ(m.i("llama.rope.dimension_count"), 64);
    EXPECT_FLOAT_EQ(float(m.f("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_FLOAT_EQ(float(m.f("llama.rope.freq_base")), 500000.0f);
    EXPECT_EQ(m.s("llama.rope.scaling.type"), "llama3");
    EXPECT_FLOAT_EQ(float(m.f("llama.rope.scaling.factor")), 32.0f);
    EXPECT_EQ(m.i("llama.rope.scaling.original_context_length"), 8192);
    EXPECT_FLOAT_EQ(float(m.f("llama.rope.scaling.low_freq_factor")), 1.0f);
    EXPECT_FLOAT_EQ(float(m.f("llama.rope.scaling.high_freq_factor")), 4.0f);
    EXPECT_EQ(m.i("tokenizer.ggml.bos_token_id"), 128000);
    EXPECT_EQ(m.i("tokenizer.ggml.eos_token_id"), 128001);
    EXPECT_EQ(m.meta.getBool("spillway.tied_embeddings"), true);
    EXPECT_EQ(m.s("spillway.hf_architecture"), "LlamaForCausalLM");
    EXPECT_EQ(m.s("spillway.torch_dtype"), "bfloat16");
    // llama.cpp's value types: counts uint32, floats float32.
    expectType(m, "llama.block_count", ValueType::UInt32);
    expectType(m, "llama.rope.freq_base", ValueType::Float32);
    expectType(m, "tokenizer.ggml.eos_token_id", ValueType::UInt32);
    expectType(m, "spillway.tied_embeddings", ValueType::Bool);
    // The engine reads the Llama 3 RoPE scaling under these keys.
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->headDim, 64);
    EXPECT_EQ(c->nKvHeads, 8);
    EXPECT_EQ(c->trainedContext, 131072);
    EXPECT_FLOAT_EQ(c->ropeBase, 500000.0f);
    EXPECT_FLOAT_EQ(c->ropeFactor, 32.0f);
    EXPECT_FLOAT_EQ(c->ropeLowFreqFactor, 1.0f);
    EXPECT_FLOAT_EQ(c->ropeHighFreqFactor, 4.0f);
    EXPECT_EQ(c->ropeOriginalContext, 8192);
}

TEST(HfConfig, GenerationConfigWinsAndListsEveryEos)
{
    Loaded m(kLlama32_1B, kLlama32_1B_InstructGeneration);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.i("tokenizer.ggml.bos_token_id"), 128000);
    EXPECT_EQ(m.i("tokenizer.ggml.eos_token_id"), 128001);
    const gguf::Value* all = m.meta.find("spillway.eos_token_ids");
    ASSERT_NE(all, nullptr);
    ASSERT_NE(all->asArray(), nullptr);
    EXPECT_EQ(all->asArray()->elementType, ValueType::UInt32);
    std::vector<int64_t> ids;
    for (const auto& v : all->asArray()->values) ids.push_back(v.asInt().value_or(-1));
    EXPECT_EQ(ids, (std::vector<int64_t>{128001, 128008, 128009}));

    // generation_config.json beats config.json; an absent one is no error.
    Loaded q(kQwen3_06B, kQwen3_06B_Generation);
    ASSERT_TRUE(q.status.ok()) << q.status.error().message;
    EXPECT_EQ(q.i("tokenizer.ggml.eos_token_id"), 151645);
    EXPECT_EQ(q.i("tokenizer.ggml.padding_token_id"), 151643);
    ASSERT_NE(q.meta.find("spillway.eos_token_ids"), nullptr);
    ASSERT_NE(q.meta.find("spillway.eos_token_ids")->asArray(), nullptr);
    EXPECT_EQ(q.meta.find("spillway.eos_token_ids")->asArray()->values.size(), 2u);
    Loaded none(kQwen3_06B);
    ASSERT_TRUE(none.status.ok()) << none.status.error().message;
    EXPECT_FALSE(none.has("tokenizer.ggml.padding_token_id"));
    ASSERT_NE(none.meta.find("spillway.eos_token_ids"), nullptr);
    ASSERT_NE(none.meta.find("spillway.eos_token_ids")->asArray(), nullptr);
    EXPECT_EQ(none.meta.find("spillway.eos_token_ids")->asArray()->values.size(), 1u);
}

TEST(HfConfig, Mistral7BIsALlamaWithASlidingWindow)
{
    Loaded m(kMistral7B);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "llama");  // as llama.cpp converts it
    EXPECT_EQ(m.s("spillway.hf_architecture"), "MistralForCausalLM");
    EXPECT_EQ(m.i("llama.attention.sliding_window"), 4096);
    EXPECT_EQ(m.i("llama.feed_forward_length"), 14336);
    EXPECT_EQ(m.i("llama.rope.dimension_count"), 128);
    EXPECT_FALSE(m.has("llama.attention.key_length"));  // no head_dim in the file
    EXPECT_FALSE(m.has("llama.rope.scaling.type"));
    EXPECT_EQ(m.meta.getBool("spillway.tied_embeddings"), false);

    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->dim, 4096);
    EXPECT_EQ(c->nLayers, 32);
    EXPECT_EQ(c->nHeads, 32);
    EXPECT_EQ(c->nKvHeads, 8);
    EXPECT_EQ(c->headDim, 128);
    EXPECT_EQ(c->ffnDim, 14336);
    EXPECT_EQ(c->trainedContext, 32768);
    EXPECT_FLOAT_EQ(c->normEps, 1e-5f);
    EXPECT_FLOAT_EQ(c->ropeBase, 10000.0f);
}

TEST(HfConfig, SmolLM2IsALlamaTheEngineReads)
{
    Loaded m(kSmolLM2_135M);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "llama");
    EXPECT_EQ(m.i("tokenizer.ggml.bos_token_id"), 0);
    EXPECT_EQ(m.i("tokenizer.ggml.eos_token_id"), 0);
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->dim, 576);
    EXPECT_EQ(c->nLayers, 30);
    EXPECT_EQ(c->nHeads, 9);
    EXPECT_EQ(c->nKvHeads, 3);
    EXPECT_EQ(c->headDim, 64);
    EXPECT_EQ(c->ropeDims, 64);
    EXPECT_EQ(c->ffnDim, 1536);
    EXPECT_EQ(c->trainedContext, 8192);
    EXPECT_FLOAT_EQ(c->ropeBase, 100000.0f);  // an integer in the file
    EXPECT_FLOAT_EQ(c->ropeFreqScale, 1.0f);
}

TEST(HfConfig, Qwen25HasNoExtraKeysForItsBiases)
{
    Loaded m(kQwen25_05B);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "qwen2");
    EXPECT_EQ(m.i("qwen2.embedding_length"), 896);
    EXPECT_EQ(m.i("qwen2.attention.head_count"), 14);
    EXPECT_EQ(m.i("qwen2.attention.head_count_kv"), 2);
    EXPECT_EQ(m.i("qwen2.rope.dimension_count"), 64);
    EXPECT_FLOAT_EQ(float(m.f("qwen2.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_FLOAT_EQ(float(m.f("qwen2.rope.freq_base")), 1e6f);
    EXPECT_FALSE(m.has("qwen2.attention.sliding_window"));  // use_sliding_window: false
    EXPECT_EQ(m.i("tokenizer.ggml.bos_token_id"), 151643);
    EXPECT_EQ(m.meta.getBool("spillway.tied_embeddings"), true);
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->nKvHeads, 2);
    EXPECT_EQ(c->headDim, 64);
    EXPECT_EQ(c->trainedContext, 32768);
}

TEST(HfConfig, Qwen3TakesItsHeadDimFromTheFile)
{
    Loaded m(kQwen3_06B);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "qwen3");
    EXPECT_EQ(m.i("qwen3.embedding_length"), 1024);
    EXPECT_EQ(m.i("qwen3.attention.head_count"), 16);
    EXPECT_EQ(m.i("qwen3.attention.key_length"), 128);  // not 1024 / 16
    EXPECT_EQ(m.i("qwen3.attention.value_length"), 128);
    EXPECT_EQ(m.i("qwen3.rope.dimension_count"), 128);
    EXPECT_EQ(m.i("qwen3.context_length"), 40960);
    EXPECT_FLOAT_EQ(float(m.f("qwen3.rope.freq_base")), 1e6f);
    EXPECT_FALSE(m.has("qwen3.rope.scaling.type"));  // "rope_scaling": null
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->dim, 1024);
    EXPECT_EQ(c->headDim, 128);
    EXPECT_EQ(c->qDim(), 2048);
    EXPECT_EQ(c->kvDim(), 1024);
    EXPECT_FLOAT_EQ(c->normEps, 1e-6f);
    // Without head_dim, Qwen3Config's default (128) applies.
    std::string noHeadDim = kQwen3_06B;
    noHeadDim.replace(noHeadDim.find("\"head_dim\": 128,"), 16, "");
    Loaded d(noHeadDim);
    ASSERT_TRUE(d.status.ok()) << d.status.error().message;
    EXPECT_EQ(d.i("qwen3.attention.key_length"), 128);
}

// The four mixture-of-experts classes: llama.cpp's expert keys, and the engine's config from them.
TEST(HfConfig, MixturesOfExpertsWithLlamaCppsKeys)
{
    struct Case {
        const char* name;
        const char* text;
        const char* arch;
        int experts, used, expertFfn, sharedFfn;
        bool normalized, qkNormWhole;
    };
    const Case cases[] = {
        {"Mixtral-8x7B", kMixtral8x7B, "llama", 8, 2, 14336, 0, true, false},
        {"Qwen1.5-MoE-A2.7B", kQwen15MoeA27B, "qwen2moe", 60, 4, 1408, 5632, false, false},
        {"Qwen3-30B-A3B", kQwen3_30B_A3B, "qwen3moe", 128, 8, 768, 0, true, false},
        {"OLMoE-1B-7B", kOlmoe1B7B, "olmoe", 64, 8, 1024, 0, false, true},
    };
    for (const Case& k : cases) {
        SCOPED_TRACE(k.name);
        Loaded m(k.text);
        ASSERT_TRUE(m.status.ok()) << m.status.error().message;
        const std::string p = std::string(k.arch) + ".";
        EXPECT_EQ(m.s("general.architecture"), k.arch);
        EXPECT_EQ(m.i(p + "expert_count"), k.experts);
        EXPECT_EQ(m.i(p + "expert_used_count"), k.used);
        expectType(m, p + "expert_count", ValueType::UInt32);
        EXPECT_EQ(m.has(p + "expert_weights_norm"), std::string(k.arch) != "llama");  // Mixtral: always
        EXPECT_EQ(m.has(p + "expert_shared_feed_forward_length"), k.sharedFfn > 0);
        const auto c = llamaConfigFromMetadata(m.meta);
        ASSERT_TRUE(c.ok()) << c.error().message;
        EXPECT_TRUE(c->moe());
        EXPECT_EQ(c->nExperts, k.experts);
        EXPECT_EQ(c->nExpertsUsed, k.used);
        EXPECT_EQ(c->expertFfnDim, k.expertFfn);
        EXPECT_EQ(c->sharedExpertFfnDim, k.sharedFfn);
        EXPECT_EQ(c->expertWeightsNormalized, k.normalized);
        EXPECT_EQ(c->qkNormWhole, k.qkNormWhole);
    }
    // Qwen3-30B-A3B: head_dim 128 (not 2048 / 32), its dense width kept beside the experts'.
    Loaded q(kQwen3_30B_A3B);
    EXPECT_EQ(q.i("qwen3moe.attention.key_length"), 128);
    EXPECT_EQ(q.i("qwen3moe.feed_forward_length"), 6144);
    EXPECT_EQ(q.i("qwen3moe.expert_feed_forward_length"), 768);
}

TEST(HfConfig, Opt125m)
{
    Loaded m(kOpt125m);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("general.architecture"), "opt");
    EXPECT_EQ(m.s("general.name"), "facebook/opt-125m");
    EXPECT_EQ(m.i("opt.vocab_size"), 50272);
    EXPECT_EQ(m.i("opt.context_length"), 2048);
    EXPECT_EQ(m.i("opt.embedding_length"), 768);
    EXPECT_EQ(m.i("opt.feed_forward_length"), 3072);
    EXPECT_EQ(m.i("opt.block_count"), 12);
    EXPECT_EQ(m.i("opt.attention.head_count"), 12);
    EXPECT_FLOAT_EQ(float(m.f("opt.attention.layer_norm_epsilon")), 1e-5f);
    EXPECT_FALSE(m.has("opt.attention.layer_norm_rms_epsilon"));
    EXPECT_FALSE(m.has("opt.rope.freq_base"));
    EXPECT_EQ(m.i("tokenizer.ggml.bos_token_id"), 2);
    EXPECT_EQ(m.i("tokenizer.ggml.eos_token_id"), 2);
    EXPECT_EQ(m.i("tokenizer.ggml.padding_token_id"), 1);
    EXPECT_EQ(m.meta.getBool("spillway.tied_embeddings"), true);  // OPT's default
    EXPECT_EQ(m.s("spillway.torch_dtype"), "float16");
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->dim, 768);
    EXPECT_EQ(c->nHeads, 12);
    EXPECT_EQ(c->headDim, 64);
    EXPECT_EQ(c->ffnDim, 3072);
    EXPECT_EQ(c->trainedContext, 2048);
    EXPECT_FLOAT_EQ(c->normEps, 1e-5f);
}

// opt-350m: post-LayerNorm blocks and 512-wide embeddings around 1024-wide blocks.
TEST(HfConfig, Opt350mPostNormAndProjections)
{
    Loaded m(kOpt350m);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.i("opt.embedding_length"), 1024);
    EXPECT_EQ(m.meta.getBool("spillway.post_norm"), true);
    EXPECT_EQ(m.i("spillway.word_embed_proj_dim"), 512);
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_TRUE(c->postNorm);
    EXPECT_EQ(c->dim, 1024);
    EXPECT_EQ(c->embedDim, 512);
    EXPECT_EQ(c->embeddingDim(), 512);
    auto back = hfConfigFromMetadata(m.meta, true);
    ASSERT_TRUE(back.ok()) << back.error().message;
    const auto j = nlohmann::json::parse(*back);
    EXPECT_EQ(j["do_layer_norm_before"], false);
    EXPECT_EQ(j["word_embed_proj_dim"], 512);
    // opt-125m says nothing of either.
    Loaded small(kOpt125m);
    ASSERT_TRUE(small.status.ok()) << small.status.error().message;
    EXPECT_FALSE(small.has("spillway.post_norm"));
    EXPECT_FALSE(small.has("spillway.word_embed_proj_dim"));
    EXPECT_EQ(ggufTensorName("opt", "model.decoder.project_in.weight"), "proj_in.weight");
    EXPECT_EQ(hfTensorName("opt", "proj_out.weight"), "model.decoder.project_out.weight");
}

TEST(HfConfig, LinearRopeScalingReachesTheEngine)
{
    std::string text = kSmolLM2_135M;
    text.replace(text.find("\"rope_scaling\": null"), 20,
                 R"("rope_scaling": {"type": "linear", "factor": 4.0})");
    Loaded m(text);
    ASSERT_TRUE(m.status.ok()) << m.status.error().message;
    EXPECT_EQ(m.s("llama.rope.scaling.type"), "linear");
    const auto c = llamaConfigFromMetadata(m.meta);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_FLOAT_EQ(c->ropeFreqScale, 0.25f);
}

// ---- errors ----------------------------------------------------------------------------------

constexpr ErrorCode kInvalid = ErrorCode::ModelFileInvalid;
constexpr ErrorCode kUnsupported = ErrorCode::UnsupportedModel;

// Replaces the first `"key": <value>` line's value, or removes the line if `value` is empty.
std::string withField(std::string text, const std::string& key, const std::string& value)
{
    const size_t at = text.find("\"" + key + "\":");
    EXPECT_NE(at, std::string::npos) << key;
    if (at == std::string::npos) return text;
    size_t end = text.find('\n', at);
    if (value.empty()) {
        text.erase(at, end + 1 - at);
        // The last member went: drop the comma before it.
        const size_t next = text.find_first_not_of(" \n", at);
        const size_t comma = text.find_last_of(',', at);
        if (next != std::string::npos && text[next] == '}' && comma != std::string::npos &&
            text.find_first_not_of(" \n", comma + 1) == next)
            text.erase(comma, 1);
        return text;
    }
    const bool comma = text[end - 1] == ',';
    return text.replace(at, end - at, "\"" + key + "\": " + value + (comma ? "," : ""));
}

// The load fails with `code`; the message is one line that starts with the file and holds every
// piece of `pieces`.
void expectFailure(const Loaded& m, ErrorCode code, std::initializer_list<std::string> pieces,
                   const std::string* path = nullptr)
{
    ASSERT_FALSE(m.status.ok());
    const Error& e = m.status.error();
    EXPECT_EQ(e.code, code) << e.message;
    EXPECT_EQ(e.message.rfind((path ? *path : m.configPath) + ": ", 0), 0u) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    for (const std::string& piece : pieces)
        EXPECT_NE(e.message.find(piece), std::string::npos)
            << "'" << piece << "' not in: " << e.message;
    EXPECT_TRUE(m.meta.entries().empty()) << "metadata added despite the error";
}

TEST(HfConfigErrors, MissingFields)
{
    for (const char* key : {"hidden_size", "intermediate_size", "num_attention_heads",
                            "num_hidden_layers", "vocab_size"}) {
        Loaded m(withField(kSmolLM2_135M, key, ""));
        expectFailure(m, kInvalid, {std::string("'") + key + "' is missing"});
    }
    Loaded opt(withField(kOpt125m, "ffn_dim", ""));
    expectFailure(opt, kInvalid, {"'ffn_dim' is missing"});
    Loaded llama3(withField(kLlama32_1B, "low_freq_factor", ""));
    expectFailure(llama3, kInvalid, {"'rope_scaling.low_freq_factor' is missing"});
    Loaded noArch(withField(withField(kSmolLM2_135M, "architectures", ""), "model_type", ""));
    expectFailure(noArch, kInvalid, {"'architectures' is missing"});
}

TEST(HfConfigErrors, IllTypedFields)
{
    Loaded str(withField(kSmolLM2_135M, "hidden_size", "\"576\""));
    expectFailure(str, kInvalid, {"'hidden_size' must be an integer, not string"});
    Loaded flt(withField(kSmolLM2_135M, "num_hidden_layers", "30.5"));
    expectFailure(flt, kInvalid, {"'num_hidden_layers' must be an integer, not number"});
    Loaded eps(withField(kSmolLM2_135M, "rms_norm_eps", "[1e-5]"));
    expectFailure(eps, kInvalid, {"'rms_norm_eps' must be a number, not array"});
    Loaded tie(withField(kSmolLM2_135M, "tie_word_embeddings", "\"yes\""));
    expectFailure(tie, kInvalid, {"'tie_word_embeddings' must be true or false"});
    Loaded archs(withField(kSmolLM2_135M, "architectures", "\"LlamaForCausalLM\""));
    expectFailure(archs, kInvalid, {"'architectures' must be a non-empty list"});
    Loaded eos(withField(kSmolLM2_135M, "eos_token_id", "[0, \"</s>\"]"));
    expectFailure(eos, kInvalid, {"'eos_token_id' must be an integer, not string"});
    Loaded scaling(withField(kSmolLM2_135M, "rope_scaling", "\"linear\""));
    expectFailure(scaling, kInvalid, {"'rope_scaling' must be an object or null"});
}

TEST(HfConfigErrors, OutOfRangeAndInconsistentFields)
{
    Loaded zero(withField(kSmolLM2_135M, "num_attention_heads", "0"));
    expectFailure(zero, kInvalid, {"'num_attention_heads' = 0 is out of range"});
    Loaded huge(withField(kSmolLM2_135M, "hidden_size", "18446744073709551615"));
    expectFailure(huge, kInvalid, {"'hidden_size'", "out of range"});
    Loaded negEos(withField(kSmolLM2_135M, "eos_token_id", "-1"));
    expectFailure(negEos, kInvalid, {"'eos_token_id' = -1 is out of range"});
    Loaded gqa(withField(kSmolLM2_135M, "num_key_value_heads", "4"));
    expectFailure(gqa, kInvalid, {"not a multiple of num_key_value_heads 4"});
    Loaded split(withField(kSmolLM2_135M, "hidden_size", "577"));
    expectFailure(split, kInvalid, {"'hidden_size' = 577 is not a multiple"});
    Loaded eps(withField(kSmolLM2_135M, "rms_norm_eps", "0"));
    expectFailure(eps, kInvalid, {"'rms_norm_eps' = 0 is out of range"});
    // Positive as a double, 0 as the float32 GGUF stores (found by fuzz_hf_config).
    Loaded tiny(withField(kSmolLM2_135M, "rms_norm_eps", "1e-50"));
    expectFailure(tiny, kInvalid, {"'rms_norm_eps' = 1e-50 is out of range"});
    Loaded theta(withField(kSmolLM2_135M, "rope_theta", "1e13"));
    expectFailure(theta, kInvalid, {"'rope_theta' = 1e+13 is out of range"});
    Loaded overflow(withField(kSmolLM2_135M, "rope_theta", "1e999"));  // nlohmann refuses it
    expectFailure(overflow, kInvalid, {"not valid JSON"});
    Loaded factor(withField(kLlama32_1B, "factor", "0.5"));
    expectFailure(factor, kInvalid, {"'rope_scaling.factor' must be at least 1"});
}

TEST(HfConfigErrors, UnknownArchitectureListsTheSupportedOnes)
{
    std::string mamba = withField(kSmolLM2_135M, "architectures", "[\"MambaForCausalLM\"]");
    Loaded m(mamba);
    ASSERT_NO_FATAL_FAILURE(expectFailure(m, kUnsupported, {}));
    EXPECT_EQ(m.status.error().message,
              m.configPath + ": architecture 'MambaForCausalLM' is not supported; supported: " +
                  supportedHfArchitectures());
    const std::string supported = supportedHfArchitectures();
    EXPECT_EQ(supported.rfind("llama, mistral, qwen2, qwen3, opt, mixtral, qwen2_moe, qwen3_moe, olmoe (", 0), 0u) << supported;
    // Without architectures, model_type decides.
    const std::string noArchitectures = withField(kSmolLM2_135M, "architectures", "");
    Loaded byType(withField(noArchitectures, "model_type", "\"mamba\""));
    expectFailure(byType, kUnsupported, {"architecture 'mamba' is not supported"});
    Loaded llamaByType(withField(kSmolLM2_135M, "architectures", ""));
    ASSERT_TRUE(llamaByType.status.ok()) << llamaByType.status.error().message;
    EXPECT_EQ(llamaByType.s("general.architecture"), "llama");
}

TEST(HfConfigErrors, UnsupportedOptions)
{
    Loaded gelu(withField(kOpt125m, "activation_function", "\"gelu\""));
    expectFailure(gelu, kUnsupported, {"activation_function 'gelu'", "'relu'"});
    Loaded noBias(withField(kOpt125m, "prefix", "\"</s>\", \"enable_bias\": false"));
    expectFailure(noBias, kUnsupported, {"enable_bias = false"});
    Loaded yarn(withField(kSmolLM2_135M, "rope_scaling",
                          R"({"rope_type": "yarn", "factor": 4.0,
                              "original_max_position_embeddings": 32768})"));
    expectFailure(yarn, ErrorCode::UnsupportedModel,
                  {"rope_scaling type 'yarn' is not supported (supported: linear, llama3)"});
    Loaded act(withField(kSmolLM2_135M, "hidden_act", "\"gelu_pytorch_tanh\""));
    expectFailure(act, kUnsupported, {"hidden_act 'gelu_pytorch_tanh'"});
    Loaded bias(withField(kSmolLM2_135M, "attention_bias", "true"));
    expectFailure(bias, kUnsupported, {"attention_bias = true"});
    Loaded swa(withField(kQwen25_05B, "use_sliding_window", "true"));
    expectFailure(swa, kUnsupported, {"use_sliding_window = true"});
}

TEST(HfConfig, NormTopkProbDefaultsToHuggingFaces)
{
    // A config without norm_topk_prob takes HF's default (false), even for Qwen3-MoE.
    Loaded unsaid(withField(kQwen3_30B_A3B, "norm_topk_prob", ""));
    ASSERT_TRUE(unsaid.status.ok()) << unsaid.status.error().message;
    EXPECT_EQ(unsaid.meta.getBool("qwen3moe.expert_weights_norm"), false);
}

TEST(HfConfigErrors, MixturesOfExpertsTheEngineDoesNotRun)
{
    Loaded step(withField(kQwen3_30B_A3B, "decoder_sparse_step", "2"));
    expectFailure(step, kUnsupported, {"decoder_sparse_step = 2", "dense layers"});
    Loaded dense(withField(kQwen3_30B_A3B, "mlp_only_layers", "[0, 5]"));
    expectFailure(dense, kUnsupported, {"mlp_only_layers"});
    Loaded clip(withField(kOlmoe1B7B, "clip_qkv", "8.0"));
    expectFailure(clip, kUnsupported, {"clip_qkv"});
    Loaded tooMany(withField(kMixtral8x7B, "num_experts_per_tok", "9"));
    expectFailure(tooMany, ErrorCode::ModelFileInvalid, {"num_experts_per_tok"});
    Loaded none(withField(kOlmoe1B7B, "num_experts", ""));
    expectFailure(none, ErrorCode::ModelFileInvalid, {"num_experts"});
    Loaded noShared(withField(kQwen15MoeA27B, "shared_expert_intermediate_size", ""));
    expectFailure(noShared, ErrorCode::ModelFileInvalid, {"shared_expert_intermediate_size"});
}

TEST(HfConfigErrors, BadFiles)
{
    Loaded notJson("{\"hidden_size\": 5,");
    expectFailure(notJson, kInvalid, {"not valid JSON"});
    Loaded array("[1, 2]");
    expectFailure(array, kInvalid, {"not a JSON object"});
    Loaded badGeneration(kSmolLM2_135M, "{\"eos_token_id\": [1, 2.5]}");
    expectFailure(badGeneration, kInvalid, {"'eos_token_id' must be an integer"},
                  &badGeneration.generationPath);
    Loaded truncatedGeneration(kSmolLM2_135M, "{\"eos_token_id\": ");
    expectFailure(truncatedGeneration, kInvalid, {"not valid JSON"},
                  &truncatedGeneration.generationPath);

    testing_support::TempDir dir("spillway-hfcfg");
    gguf::Metadata meta;
    const Status missing = metadataFromHfConfig(dir / "nope.json", "", meta);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::Io);
    EXPECT_EQ(missing.error().message.rfind(dir / "nope.json: ", 0), 0u) << missing.error().message;
    const Status directory = metadataFromHfConfig(dir.path(), "", meta);
    EXPECT_FALSE(directory.ok());
    EXPECT_TRUE(meta.entries().empty());
}

TEST(HfConfigErrors, KeysAlreadyPresentAreNotOverwritten)
{
    gguf::Metadata meta("model");
    ASSERT_TRUE(meta.add({"llama.block_count", gguf::Value::ofUInt(ValueType::UInt32, 7)}));
    const Status s = metadataFromHfConfigText(kSmolLM2_135M, "config.json", "", "", meta);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(s.error().message.find("'llama.block_count' is set already"), std::string::npos);
    EXPECT_EQ(meta.entries().size(), 1u);
    EXPECT_EQ(meta.getInt("llama.block_count"), 7);
}

}  // namespace
}  // namespace spillway::hf_test
