// Hugging Face config.json <-> GGUF-keyed metadata (tensor names and the RoPE row order: hf_tensor_names.cpp).
// config.json is untrusted input like any model file: every field is type- and range-checked,
// and nlohmann is used only through its non-throwing calls (a last catch turns anything else,
// such as bad_alloc, into an Error).

#include "core/formats/hf_config.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace spillway {

namespace {

using json = nlohmann::json;
using gguf::KeyValue;
using gguf::Value;
using gguf::ValueType;

constexpr uint64_t kMaxConfigBytes = 16u << 20;  // real config.json files are a few KiB
constexpr int64_t kMaxDim = 1 << 20;             // hidden, FFN and head sizes
constexpr int64_t kMaxCount = 1 << 16;           // layers, heads
constexpr int64_t kMaxTokens = int64_t(1) << 31; // vocabulary sizes, token ids, context lengths

enum class Family { Llama, Qwen2, Qwen3, Opt };
// Mixtures of experts, by how config.json describes them (readExperts).
enum class Moe { None, Mixtral, Qwen2Moe, Qwen3Moe, Olmoe };

struct HfArch {
    const char* hfClass;    // architectures[0]
    const char* modelType;  // model_type
    const char* ggufArch;   // general.architecture we write
    Family family;
    int64_t defaultContext;  // max_position_embeddings when config.json has none (HF's default)
    Moe moe = Moe::None;
};

// Mistral is a Llama to GGUF (as llama.cpp converts it); SmolLM is a LlamaForCausalLM.
constexpr HfArch kArchs[] = {
    {"LlamaForCausalLM", "llama", "llama", Family::Llama, 2048},
    {"MistralForCausalLM", "mistral", "llama", Family::Llama, 4096 * 32},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", Family::Qwen2, 32768},
    {"Qwen3ForCausalLM", "qwen3", "qwen3", Family::Qwen3, 32768},
    {"OPTForCausalLM", "opt", "opt", Family::Opt, 2048},
    // Mixtures of experts. Mixtral is a Llama with experts to GGUF (as llama.cpp converts it);
    // OLMoE is a Llama whose Q and K are RMS-normed over the whole projection.
    {"MixtralForCausalLM", "mixtral", "llama", Family::Llama, 4096 * 32, Moe::Mixtral},
    {"Qwen2MoeForCausalLM", "qwen2_moe", "qwen2moe", Family::Qwen2, 32768, Moe::Qwen2Moe},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe", Family::Qwen3, 32768, Moe::Qwen3Moe},
    {"OlmoeForCausalLM", "olmoe", "olmoe", Family::Llama, 4096, Moe::Olmoe},
};
const HfArch& kMistral = kArchs[1];
const HfArch& kMixtral = kArchs[5];

const HfArch* archByClass(std::string_view hfClass)
{
    for (const HfArch& a : kArchs)
        if (hfClass == a.hfClass) return &a;
    return nullptr;
}

const HfArch* archByModelType(std::string_view modelType)
{
    for (const HfArch& a : kArchs)
        if (modelType == a.modelType) return &a;
    return nullptr;
}

// A float32 key's value as the GGUF writer will store it (rounded to float).
Value f32(double x) { return Value::ofFloat(ValueType::Float32, double(float(x))); }
Value u32(int64_t x) { return Value::ofUInt(ValueType::UInt32, uint64_t(x)); }

// The shortest decimal that reads back as the same float (1e-05, not 9.99999974737875e-06).
double jsonFloat(double x)
{
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf - 1, float(x));
    *r.ptr = '\0';
    return std::strtod(buf, nullptr);
}

// ---- reading config.json ---------------------------------------------------------------------

// Typed, range-checked access to the members of one JSON object. Optional getters leave `out`
// empty for an absent or null member; every problem names the file and the key.
class Fields {
public:
    Fields(const json& obj, std::string what, std::string prefix = "")
        : m_obj(obj), m_what(std::move(what)), m_prefix(std::move(prefix)) {}

    Error invalid(std::string_view key, const std::string& why) const
    {
        return makeError(ErrorCode::ModelFileInvalid,
                         m_what + ": '" + m_prefix + std::string(key) + "' " + why);
    }
    Error unsupported(const std::string& why) const
    {
        return makeError(ErrorCode::UnsupportedModel, m_what + ": " + why);
    }
    const json* member(std::string_view key) const
    {
        const auto it = m_obj.find(key);
        if (it == m_obj.end() || it->is_null()) return nullptr;
        return &*it;
    }

    Status integer(std::string_view key, int64_t lo, int64_t hi, std::optional<int64_t>& out) const
    {
        out.reset();
        const json* j = member(key);
        if (!j) return {};
        return integerValue(*j, key, lo, hi, out);
    }
    Status integerValue(const json& j, std::string_view key, int64_t lo, int64_t hi,
                        std::optional<int64_t>& out) const
    {
        if (!j.is_number_integer())
            return invalid(key, "must be an integer, not " + typeName(j));
        int64_t v = 0;
        if (j.is_number_unsigned()) {
            const uint64_t u = j.get<uint64_t>();
            v = u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
        } else {
            v = j.get<int64_t>();
        }
        if (v < lo || v > hi)
            return invalid(key, "= " + std::to_string(v) + " is out of range [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
        out = v;
        return {};
    }
    Status required(std::string_view key, int64_t lo, int64_t hi, int64_t& out) const
    {
        std::optional<int64_t> v;
        SPILLWAY_TRY(integer(key, lo, hi, v));
        if (!v) return invalid(key, "is missing");
        out = *v;
        return {};
    }
    // A finite number (integers too: "rope_theta": 1000000).
    Status number(std::string_view key, std::optional<double>& out) const
    {
        out.reset();
        const json* j = member(key);
        if (!j) return {};
        if (!j->is_number()) return invalid(key, "must be a number, not " + typeName(*j));
        const double v = j->get<double>();
        if (!std::isfinite(v)) return invalid(key, "is not a finite number");
        out = v;
        return {};
    }
    // A number in (lo, hi], or `fallback` when absent (no fallback: required). It is stored as
    // float32, so it must still exceed lo as a float (1e-50 would become 0).
    Status positive(std::string_view key, double lo, double hi, std::optional<double> fallback,
                    double& out) const
    {
        std::optional<double> v;
        SPILLWAY_TRY(number(key, v));
        if (!v && !fallback) return invalid(key, "is missing");
        out = v ? *v : *fallback;
        if (!(out > lo && out <= hi && double(float(out)) > lo))
            return invalid(key, "= " + shortNumber(out) + " is out of range (" + shortNumber(lo) +
                                    ", " + shortNumber(hi) + "]");
        return {};
    }
    Status boolean(std::string_view key, bool fallback, bool& out) const
    {
        out = fallback;
        const json* j = member(key);
        if (!j) return {};
        if (!j->is_boolean()) return invalid(key, "must be true or false, not " + typeName(*j));
        out = j->get<bool>();
        return {};
    }
    Status string(std::string_view key, std::optional<std::string>& out) const
    {
        out.reset();
        const json* j = member(key);
        if (!j) return {};
        if (!j->is_string()) return invalid(key, "must be a string, not " + typeName(*j));
        out = j->get<std::string>();
        return {};
    }
    // A token id, or a non-empty list of them (eos_token_id).
    Status tokenIds(std::string_view key, std::vector<int64_t>& out) const
    {
        out.clear();
        const json* j = member(key);
        if (!j) return {};
        std::optional<int64_t> id;
        if (!j->is_array()) {
            SPILLWAY_TRY(integerValue(*j, key, 0, kMaxTokens - 1, id));
            out.push_back(*id);
            return {};
        }
        if (j->size() > 1024) return invalid(key, "lists more than 1024 token ids");
        for (const json& e : *j) {
            SPILLWAY_TRY(integerValue(e, key, 0, kMaxTokens - 1, id));
            out.push_back(*id);
        }
        return {};
    }

    const std::string& what() const { return m_what; }

private:
    static std::string shortNumber(double x)
    {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", x);
        return buf;
    }
    static std::string typeName(const json& j) { return j.type_name(); }

    const json& m_obj;
    std::string m_what;
    std::string m_prefix;  // "rope_scaling." inside nested objects
};

// Collects the keys in order; Metadata::add is done at the end so that `out` is unchanged on error.
struct KeyList {
    std::vector<KeyValue> kv;
    void add(std::string key, Value v) { kv.push_back({std::move(key), std::move(v)}); }
};

Status readRopeScaling(const Fields& f, const std::string& p, KeyList& keys)
{
    const json* rs = f.member("rope_scaling");
    if (!rs) return {};
    if (!rs->is_object()) return f.invalid("rope_scaling", "must be an object or null");
    const Fields s(*rs, f.what(), "rope_scaling.");
    std::optional<std::string> type;
    SPILLWAY_TRY(s.string("rope_type", type));
    if (!type) SPILLWAY_TRY(s.string("type", type));  // the older spelling
    if (!type) return s.invalid("rope_type", "is missing");
    if (*type == "default") return {};
    if (*type != "linear" && *type != "llama3")
        return f.unsupported("rope_scaling type " + gguf::detail::quoted(*type) +
                             " is not supported (supported: linear, llama3)");
    double factor = 1.0;
    SPILLWAY_TRY(s.positive("factor", 0.0, 1024.0, std::nullopt, factor));
    if (factor < 1.0) return s.invalid("factor", "must be at least 1");
    keys.add(p + "rope.scaling.type", Value::ofString(*type));
    keys.add(p + "rope.scaling.factor", f32(factor));
    if (*type == "llama3") {
        int64_t original = 0;
        double low = 0, high = 0;
        SPILLWAY_TRY(s.required("original_max_position_embeddings", 1, kMaxTokens, original));
        SPILLWAY_TRY(s.positive("low_freq_factor", 0.0, 1e6, std::nullopt, low));
        SPILLWAY_TRY(s.positive("high_freq_factor", 0.0, 1e6, std::nullopt, high));
        if (!(float(high) > float(low)))  // as stored
            return s.invalid("high_freq_factor", "must exceed low_freq_factor");
        keys.add(p + "rope.scaling.original_context_length", u32(original));
        keys.add(p + "rope.scaling.low_freq_factor", f32(low));
        keys.add(p + "rope.scaling.high_freq_factor", f32(high));
    }
    return {};
}

// A mixture of experts' keys (llama.cpp's): {arch}.expert_count, .expert_used_count,
// .expert_feed_forward_length (Qwen-MoE's moe_intermediate_size; Mixtral's and OLMoE's experts
// are intermediate_size wide, feed_forward_length), .expert_shared_feed_forward_length
// (Qwen2-MoE's shared expert) and .expert_weights_norm (norm_topk_prob; Mixtral always
// renormalizes). Layouts the engine does not run (dense layers between sparse ones, clipped QKV)
// are refused with the reason.
Status readExperts(const Fields& f, const HfArch& a, KeyList& keys)
{
    const std::string p = std::string(a.ggufArch) + ".";
    int64_t experts = 0, used = 0;
    SPILLWAY_TRY(f.required(a.moe == Moe::Mixtral ? "num_local_experts" : "num_experts", 1, 4096, experts));
    SPILLWAY_TRY(f.required("num_experts_per_tok", 1, experts, used));
    keys.add(p + "expert_count", u32(experts));
    keys.add(p + "expert_used_count", u32(used));
    if (a.moe == Moe::Qwen2Moe || a.moe == Moe::Qwen3Moe) {
        int64_t width = 0;
        SPILLWAY_TRY(f.required("moe_intermediate_size", 1, kMaxDim, width));
        keys.add(p + "expert_feed_forward_length", u32(width));
        std::optional<int64_t> step;
        SPILLWAY_TRY(f.integer("decoder_sparse_step", 1, kMaxCount, step));
        if (step && *step != 1)
            return f.unsupported("decoder_sparse_step = " + std::to_string(*step) +
                                 " is not supported (dense layers between the sparse ones)");
        const json* dense = f.member("mlp_only_layers");
        if (dense && !dense->is_null() && !(dense->is_array() && dense->empty()))
            return f.unsupported("mlp_only_layers is not supported (dense layers among the sparse ones)");
    }
    if (a.moe == Moe::Qwen2Moe) {
        int64_t shared = 0;
        SPILLWAY_TRY(f.required("shared_expert_intermediate_size", 1, kMaxDim, shared));
        keys.add(p + "expert_shared_feed_forward_length", u32(shared));
    }
    if (a.moe != Moe::Mixtral) {
        bool norm = false;  // the default of all three HF classes
        SPILLWAY_TRY(f.boolean("norm_topk_prob", false, norm));
        keys.add(p + "expert_weights_norm", Value::ofBool(norm));
    }
    if (a.moe == Moe::Olmoe) {
        const json* clip = f.member("clip_qkv");
        if (clip && !clip->is_null()) return f.unsupported("clip_qkv is not supported (Q, K and V are not clipped)");
    }
    return {};
}

// Llama, Mistral, SmolLM, Qwen2, Qwen3 and their mixtures of experts (Mixtral, Qwen2-MoE,
// Qwen3-MoE, OLMoE): RMSNorm, SwiGLU, RoPE, grouped-query attention.
Status readLlamaFamily(const Fields& f, const HfArch& a, KeyList& keys, bool& tied)
{
    int64_t hidden = 0, ffn = 0, heads = 0, layers = 0, vocab = 0;
    SPILLWAY_TRY(f.required("hidden_size", 1, kMaxDim, hidden));
    SPILLWAY_TRY(f.required("intermediate_size", 1, kMaxDim, ffn));
    SPILLWAY_TRY(f.required("num_attention_heads", 1, kMaxCount, heads));
    SPILLWAY_TRY(f.required("num_hidden_layers", 1, kMaxCount, layers));
    SPILLWAY_TRY(f.required("vocab_size", 1, kMaxTokens, vocab));
    std::optional<int64_t> kvHeads, headDim, context, window;
    SPILLWAY_TRY(f.integer("num_key_value_heads", 1, kMaxCount, kvHeads));
    if (heads % kvHeads.value_or(heads) != 0)
        return f.invalid("num_attention_heads", "= " + std::to_string(heads) +
                                                    " is not a multiple of num_key_value_heads " +
                                                    std::to_string(*kvHeads));
    SPILLWAY_TRY(f.integer("head_dim", 1, kMaxDim, headDim));
    if (!headDim && a.family == Family::Qwen3) headDim = 128;  // Qwen3Config's default
    if (!headDim && hidden % heads != 0)
        return f.invalid("hidden_size", "= " + std::to_string(hidden) +
                                            " is not a multiple of num_attention_heads " +
                                            std::to_string(heads) + " (and there is no head_dim)");
    const int64_t headSize = headDim.value_or(hidden / heads);
    if (headSize % 2 != 0)
        return f.invalid(headDim ? "head_dim" : "hidden_size", "gives an odd head size " +
                                                                    std::to_string(headSize) +
                                                                    " (RoPE needs pairs)");
    SPILLWAY_TRY(f.integer("max_position_embeddings", 1, kMaxTokens, context));
    double eps = 0, theta = 0;
    SPILLWAY_TRY(f.positive("rms_norm_eps", 0.0, 0.5, 1e-6, eps));  // HF's default 1e-6
    SPILLWAY_TRY(f.positive("rope_theta", 1.0, 1e12, 10000.0, theta));

    std::optional<std::string> act;
    SPILLWAY_TRY(f.string("hidden_act", act));
    if (act && *act != "silu")
        return f.unsupported("hidden_act " + gguf::detail::quoted(*act) +
                             " is not supported (the Llama family needs 'silu')");
    bool attentionBias = false, mlpBias = false, slidingWindows = false;
    SPILLWAY_TRY(f.boolean("attention_bias", false, attentionBias));
    SPILLWAY_TRY(f.boolean("mlp_bias", false, mlpBias));
    if (attentionBias && a.family != Family::Qwen2)  // Qwen2 always has Q/K/V biases
        return f.unsupported("attention_bias = true is not supported for " +
                             std::string(a.hfClass));
    if (mlpBias) return f.unsupported("mlp_bias = true is not supported");
    if (a.family == Family::Qwen2 || a.family == Family::Qwen3) {
        SPILLWAY_TRY(f.boolean("use_sliding_window", false, slidingWindows));
        if (slidingWindows)
            return f.unsupported("use_sliding_window = true is not supported for " +
                                 std::string(a.hfClass));
    }
    if (&a == &kMistral) SPILLWAY_TRY(f.integer("sliding_window", 1, kMaxTokens, window));
    SPILLWAY_TRY(f.boolean("tie_word_embeddings", false, tied));  // false in all these classes

    const std::string p = std::string(a.ggufArch) + ".";
    keys.add(p + "vocab_size", u32(vocab));
    keys.add(p + "context_length", u32(context.value_or(a.defaultContext)));
    keys.add(p + "embedding_length", u32(hidden));
    keys.add(p + "block_count", u32(layers));
    keys.add(p + "feed_forward_length", u32(ffn));
    keys.add(p + "attention.head_count", u32(heads));
    keys.add(p + "attention.head_count_kv", u32(kvHeads.value_or(heads)));
    if (headDim) {
        keys.add(p + "attention.key_length", u32(*headDim));
        keys.add(p + "attention.value_length", u32(*headDim));
    }
    keys.add(p + "attention.layer_norm_rms_epsilon", f32(eps));
    keys.add(p + "rope.freq_base", f32(theta));
    keys.add(p + "rope.dimension_count", u32(headSize));
    if (window) keys.add(p + "attention.sliding_window", u32(*window));
    if (a.moe != Moe::None) SPILLWAY_TRY(readExperts(f, a, keys));
    return readRopeScaling(f, p, keys);
}

// OPT: learned positions, pre-LayerNorm with biases, ReLU FFN (fc1, fc2).
Status readOpt(const Fields& f, KeyList& keys, bool& tied)
{
    int64_t hidden = 0, ffn = 0, heads = 0, layers = 0, vocab = 0;
    SPILLWAY_TRY(f.required("hidden_size", 1, kMaxDim, hidden));
    SPILLWAY_TRY(f.required("ffn_dim", 1, kMaxDim, ffn));
    SPILLWAY_TRY(f.required("num_attention_heads", 1, kMaxCount, heads));
    SPILLWAY_TRY(f.required("num_hidden_layers", 1, kMaxCount, layers));
    SPILLWAY_TRY(f.required("vocab_size", 1, kMaxTokens, vocab));
    if (hidden % heads != 0)
        return f.invalid("hidden_size", "= " + std::to_string(hidden) +
                                            " is not a multiple of num_attention_heads " +
                                            std::to_string(heads));
    std::optional<int64_t> context, projDim;
    SPILLWAY_TRY(f.integer("max_position_embeddings", 1, kMaxTokens, context));
    SPILLWAY_TRY(f.integer("word_embed_proj_dim", 1, kMaxDim, projDim));
    std::optional<std::string> act;
    SPILLWAY_TRY(f.string("activation_function", act));
    if (act && *act != "relu")
        return f.unsupported("activation_function " + gguf::detail::quoted(*act) +
                             " is not supported (OPT needs 'relu')");
    bool preNorm = true, bias = true, affine = true;
    SPILLWAY_TRY(f.boolean("do_layer_norm_before", true, preNorm));
    SPILLWAY_TRY(f.boolean("enable_bias", true, bias));
    SPILLWAY_TRY(f.boolean("layer_norm_elementwise_affine", true, affine));
    if (!bias) return f.unsupported("enable_bias = false is not supported");
    if (!affine) return f.unsupported("layer_norm_elementwise_affine = false is not supported");
    SPILLWAY_TRY(f.boolean("tie_word_embeddings", true, tied));  // OPT ties by default

    keys.add("opt.vocab_size", u32(vocab));
    keys.add("opt.context_length", u32(context.value_or(2048)));  // OPTConfig's default (as kArchs)
    keys.add("opt.embedding_length", u32(hidden));
    keys.add("opt.block_count", u32(layers));
    keys.add("opt.feed_forward_length", u32(ffn));
    keys.add("opt.attention.head_count", u32(heads));
    keys.add("opt.attention.layer_norm_epsilon", f32(1e-5));  // torch LayerNorm's default
    // opt-350m: post-LayerNorm blocks (no final norm), and 512-wide embeddings lifted to the
    // 1024-wide blocks by project_in and brought back by project_out.
    if (!preNorm) keys.add("spillway.post_norm", Value::ofBool(true));
    if (projDim && *projDim != hidden) keys.add("spillway.word_embed_proj_dim", u32(*projDim));
    return {};
}

// bos/eos/pad ids: generation_config.json's when it has them, else config.json's.
Status readTokenIds(const Fields& config, const Fields* generation, KeyList& keys)
{
    const char* names[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    const char* ggufKeys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                              "tokenizer.ggml.padding_token_id"};
    for (int i = 0; i < 3; ++i) {
        std::vector<int64_t> ids;
        const Fields* from = generation;
        if (from) SPILLWAY_TRY(from->tokenIds(names[i], ids));
        if (ids.empty()) {
            from = &config;
            SPILLWAY_TRY(from->tokenIds(names[i], ids));
        }
        if (ids.empty()) continue;
        if (i != 1 && ids.size() > 1) return from->invalid(names[i], "must be one token id");
        keys.add(ggufKeys[i], u32(ids[0]));
        if (i == 1) {
            std::vector<Value> all;
            for (int64_t id : ids) all.push_back(u32(id));
            keys.add("spillway.eos_token_ids", Value::ofArray(ValueType::UInt32, std::move(all)));
        }
    }
    return {};
}

Status readJsonObject(const std::string& text, const std::string& what, json& out)
{
    out = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded())
        return makeError(ErrorCode::ModelFileInvalid, what + ": not valid JSON");
    if (!out.is_object())
        return makeError(ErrorCode::ModelFileInvalid, what + ": not a JSON object");
    return {};
}

Status readSmallFile(const std::string& path, std::string& out)
{
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (!file) return makeError(ErrorCode::Io, path + ": cannot open: " + std::strerror(errno));
    out.clear();
    char buf[1 << 16];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) {
        if (out.size() + n > kMaxConfigBytes) {
            std::fclose(file);
            return makeError(ErrorCode::ModelFileInvalid,
                             path + ": larger than " + std::to_string(kMaxConfigBytes >> 20) +
                                 " MiB; not a config file");
        }
        out.append(buf, n);
    }
    const bool failed = std::ferror(file);
    std::fclose(file);
    if (failed) return makeError(ErrorCode::Io, path + ": read error");
    return {};
}

Status metadataFromTexts(const std::string& configText, const std::string& configWhat,
                         const std::string& generationText, const std::string& generationWhat,
                         gguf::Metadata& out)
{
    json config, generation;
    SPILLWAY_TRY(readJsonObject(configText, configWhat, config));
    const bool haveGeneration = !generationText.empty();
    if (haveGeneration) SPILLWAY_TRY(readJsonObject(generationText, generationWhat, generation));
    const Fields f(config, configWhat);

    // The architecture: architectures[0] when given, else model_type.
    std::optional<std::string> name;
    const json* archs = f.member("architectures");
    if (archs) {
        if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string())
            return f.invalid("architectures", "must be a non-empty list of strings");
        name = (*archs)[0].get<std::string>();
    }
    const HfArch* arch = nullptr;
    if (name) {
        arch = archByClass(*name);
    } else {
        SPILLWAY_TRY(f.string("model_type", name));
        if (!name) return f.invalid("architectures", "is missing (and so is 'model_type')");
        arch = archByModelType(*name);
    }
    if (!arch)
        return f.unsupported("architecture " + gguf::detail::quoted(*name) +
                             " is not supported; supported: " + supportedHfArchitectures());

    KeyList keys;
    keys.add("general.architecture", Value::ofString(arch->ggufArch));
    std::optional<std::string> modelName, dtype;
    SPILLWAY_TRY(f.string("_name_or_path", modelName));
    if (modelName && !modelName->empty()) keys.add("general.name", Value::ofString(*modelName));
    bool tied = false;
    if (arch->family == Family::Opt) SPILLWAY_TRY(readOpt(f, keys, tied));
    else SPILLWAY_TRY(readLlamaFamily(f, *arch, keys, tied));
    const Fields g(generation, generationWhat);
    SPILLWAY_TRY(readTokenIds(f, haveGeneration ? &g : nullptr, keys));
    keys.add("spillway.tied_embeddings", Value::ofBool(tied));
    keys.add("spillway.hf_architecture", Value::ofString(arch->hfClass));
    SPILLWAY_TRY(f.string("torch_dtype", dtype));
    if (!dtype) SPILLWAY_TRY(f.string("dtype", dtype));  // transformers >= 4.56 spells it so
    if (dtype) keys.add("spillway.torch_dtype", Value::ofString(*dtype));

    for (const KeyValue& kv : keys.kv)
        if (out.find(kv.key))
            return makeError(ErrorCode::InvalidArgument,
                             configWhat + ": metadata key '" + kv.key + "' is set already");
    out.reserve(out.entries().size() + keys.kv.size());
    for (KeyValue& kv : keys.kv) out.add(std::move(kv));
    return {};
}

// ---- writing config.json ---------------------------------------------------------------------

class MetadataReader {
public:
    explicit MetadataReader(const gguf::Metadata& m) : m_m(m) {}
    Error invalid(const std::string& why) const
    {
        return makeError(ErrorCode::ModelFileInvalid, m_m.source() + ": " + why);
    }
    Status required(const std::string& key, int64_t& out) const
    {
        const auto v = m_m.getInt(key);
        if (!v || *v < 1)
            return invalid("missing or non-positive integer metadata key '" + key + "'");
        out = *v;
        return {};
    }
    int64_t integer(const std::string& key, int64_t fallback) const
    {
        return m_m.getInt(key).value_or(fallback);
    }
    double number(const std::string& key, double fallback) const
    {
        return m_m.getFloat(key).value_or(fallback);
    }

private:
    const gguf::Metadata& m_m;
};

using ojson = nlohmann::ordered_json;

// rope_scaling: null, or the object HF reads for linear and Llama 3 scaling.
Status writeRopeScaling(const gguf::Metadata& m, const MetadataReader& r, const std::string& p,
                        ojson& out)
{
    std::string type = m.getString(p + "rope.scaling.type").value_or("none");
    double factor = r.number(p + "rope.scaling.factor", 1.0);
    if (type == "none" && m.find(p + "rope.scale_linear")) {  // older GGUF key
        type = "linear";
        factor = r.number(p + "rope.scale_linear", 1.0);
    }
    out = nullptr;
    if (type == "none") return {};
    if (type != "linear" && type != "llama3")
        return makeError(ErrorCode::UnsupportedModel,
                         m.source() + ": RoPE scaling " + gguf::detail::quoted(type) +
                             " cannot be written to config.json (supported: linear, llama3)");
    ojson s = ojson::object();
    s["rope_type"] = type;
    s["type"] = type;  // transformers before 4.43 read this spelling
    s["factor"] = jsonFloat(factor);
    if (type == "llama3") {
        int64_t original = 0;
        SPILLWAY_TRY(r.required(p + "rope.scaling.original_context_length", original));
        if (!m.find(p + "rope.scaling.low_freq_factor") ||
            !m.find(p + "rope.scaling.high_freq_factor"))
            return r.invalid("llama3 RoPE scaling without low_freq_factor/high_freq_factor keys");
        s["original_max_position_embeddings"] = original;
        s["low_freq_factor"] = jsonFloat(r.number(p + "rope.scaling.low_freq_factor", 1.0));
        s["high_freq_factor"] = jsonFloat(r.number(p + "rope.scaling.high_freq_factor", 4.0));
    }
    out = std::move(s);
    return {};
}

// Token ids from metadata into a config object (config.json and generation_config.json alike).
// Ids outside [0, 2^31) are "none" (llama2.c exports write pad -1 as uint32 0xffffffff).
void writeTokenIds(const gguf::Metadata& m, ojson& j)
{
    auto id = [&](const char* key) -> std::optional<int64_t> {
        const auto v = m.getInt(key);
        if (v && *v >= 0 && *v < kMaxTokens) return v;
        return std::nullopt;
    };
    if (auto bos = id("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
    const gguf::Value* all = m.find("spillway.eos_token_ids");
    const gguf::Array* list = all ? all->asArray() : nullptr;
    if (list && list->values.size() > 1) {
        ojson ids = ojson::array();
        for (const Value& v : list->values)
            if (auto x = v.asInt(); x && *x >= 0 && *x < kMaxTokens) ids.push_back(*x);
        j["eos_token_id"] = std::move(ids);
    } else if (auto eos = id("tokenizer.ggml.eos_token_id")) {
        j["eos_token_id"] = *eos;
    }
    if (auto pad = id("tokenizer.ggml.padding_token_id")) j["pad_token_id"] = *pad;
}

// A mixture of experts' config.json members (readExperts backwards). The engine's defaults for
// what the file does not say: the experts as wide as feed_forward_length, no shared expert,
// renormalized weights for Mixtral and Qwen3-MoE only (as llama.cpp weighs them).
Status writeExperts(const gguf::Metadata& m, const MetadataReader& r, const std::string& p, const HfArch& arch,
                    ojson& j)
{
    int64_t experts = 0, used = 0;
    SPILLWAY_TRY(r.required(p + "expert_count", experts));
    SPILLWAY_TRY(r.required(p + "expert_used_count", used));
    const bool norm = m.getBool(p + "expert_weights_norm")
                          .value_or(arch.moe == Moe::Mixtral || arch.moe == Moe::Qwen3Moe);
    j[arch.moe == Moe::Mixtral ? "num_local_experts" : "num_experts"] = experts;
    j["num_experts_per_tok"] = used;
    if (arch.moe == Moe::Mixtral) {
        if (!norm)
            return makeError(ErrorCode::UnsupportedModel,
                             m.source() + ": the experts' weights are not renormalized, which "
                                          "MixtralForCausalLM always does");
        j["sliding_window"] = nullptr;
        return {};
    }
    j["norm_topk_prob"] = norm;
    const int64_t ffn = r.integer(p + "feed_forward_length", 0);
    if (arch.moe == Moe::Olmoe) {
        if (r.integer(p + "expert_feed_forward_length", ffn) != ffn)
            return makeError(ErrorCode::UnsupportedModel,
                             m.source() + ": OlmoeForCausalLM's experts are intermediate_size wide, not " +
                                 std::to_string(r.integer(p + "expert_feed_forward_length", ffn)));
        j["clip_qkv"] = nullptr;
        return {};
    }
    j["moe_intermediate_size"] = r.integer(p + "expert_feed_forward_length", ffn);
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = ojson::array();
    if (arch.moe == Moe::Qwen2Moe) {
        const int64_t shared = r.integer(p + "expert_shared_feed_forward_length", 0);
        if (shared < 1)
            return makeError(ErrorCode::UnsupportedModel,
                             m.source() + ": Qwen2MoeForCausalLM has a shared expert, and this model has none");
        j["shared_expert_intermediate_size"] = shared;
    }
    return {};
}

Result<std::string> configFromMetadata(const gguf::Metadata& m, bool tied)
{
    const MetadataReader r(m);
    const auto archName = m.getString("general.architecture");
    if (!archName) return r.invalid("missing metadata key 'general.architecture'");
    const auto hfClass = m.getString("spillway.hf_architecture");
    const HfArch* arch = nullptr;  // the first with this GGUF name: Llama for "llama"
    for (const HfArch& a : kArchs)
        if (!arch && *archName == a.ggufArch) arch = &a;
    if (*archName == "mistral" || (*archName == "llama" && hfClass == kMistral.hfClass))
        arch = &kMistral;
    if (!arch)
        return makeError(ErrorCode::UnsupportedModel,
                         m.source() + ": architecture " + gguf::detail::quoted(*archName) +
                             " has no config.json form here (supported: llama, mistral, qwen2, "
                             "qwen3, opt, and the mixtures of experts llama (Mixtral), qwen2moe, qwen3moe, olmoe)");
    const std::string p = *archName + ".";
    if ((*archName == "llama" || *archName == "mistral") && m.find(p + "expert_count")) arch = &kMixtral;

    int64_t hidden = 0, layers = 0, heads = 0, ffn = 0;
    SPILLWAY_TRY(r.required(p + "embedding_length", hidden));
    SPILLWAY_TRY(r.required(p + "block_count", layers));
    SPILLWAY_TRY(r.required(p + "attention.head_count", heads));
    SPILLWAY_TRY(r.required(p + "feed_forward_length", ffn));
    int64_t vocab = r.integer(p + "vocab_size", 0);
    if (vocab < 1) {
        const gguf::Value* tokens = m.find("tokenizer.ggml.tokens");
        if (tokens && tokens->asArray()) vocab = int64_t(tokens->asArray()->values.size());
    }
    if (vocab < 1)
        return r.invalid("vocabulary size unknown: neither '" + p +
                         "vocab_size' nor 'tokenizer.ggml.tokens' is there");

    // Values the engine would use when a key is absent are written out, since HF's defaults
    // differ (rms_norm_eps 1e-6 in HF, 1e-5 in llamaConfigFromMetadata).
    ojson j;
    j["architectures"] = ojson::array({arch->hfClass});
    j["model_type"] = arch->modelType;
    if (auto name = m.getString("general.name")) j["_name_or_path"] = *name;
    j["vocab_size"] = vocab;
    j["hidden_size"] = hidden;
    j["num_hidden_layers"] = layers;
    j["num_attention_heads"] = heads;
    j["max_position_embeddings"] = r.integer(p + "context_length", 2048);
    if (arch->family == Family::Opt) {
        const double eps = r.number(p + "attention.layer_norm_epsilon", 1e-5);
        if (std::fabs(eps - 1e-5) > 1e-9)
            return makeError(ErrorCode::UnsupportedModel,
                             m.source() + ": OPT LayerNorm epsilon " + std::to_string(eps) +
                                 " cannot be written to config.json (HF's OPT uses 1e-5)");
        j["ffn_dim"] = ffn;
        j["word_embed_proj_dim"] = r.integer("spillway.word_embed_proj_dim", hidden);
        j["activation_function"] = "relu";
        j["do_layer_norm_before"] = !m.getBool("spillway.post_norm").value_or(false);
        j["enable_bias"] = true;
        j["layer_norm_elementwise_affine"] = true;
    } else {
        const int64_t kvHeads = r.integer(p + "attention.head_count_kv", heads);
        const int64_t keyLength = r.integer(p + "attention.key_length", 0);
        const int64_t headSize = keyLength > 0 ? keyLength : hidden / heads;
        const int64_t ropeDims = r.integer(p + "rope.dimension_count", headSize);
        if (ropeDims != headSize)
            return makeError(ErrorCode::UnsupportedModel,
                             m.source() + ": rope.dimension_count " + std::to_string(ropeDims) +
                                 " differs from the head size " + std::to_string(headSize) +
                                 " (partial RoPE has no config.json form for " +
                                 arch->hfClass + ")");
        j["intermediate_size"] = ffn;
        j["num_key_value_heads"] = kvHeads;
        if (keyLength > 0 || arch->family == Family::Qwen3) j["head_dim"] = headSize;
        j["hidden_act"] = "silu";
        j["rms_norm_eps"] = jsonFloat(r.number(p + "attention.layer_norm_rms_epsilon", 1e-5));
        j["rope_theta"] = jsonFloat(r.number(p + "rope.freq_base", 10000.0));
        ojson scaling;
        SPILLWAY_TRY(writeRopeScaling(m, r, p, scaling));
        j["rope_scaling"] = std::move(scaling);
        if (arch->family != Family::Qwen2) j["attention_bias"] = false;
        if (arch == &kMistral) {
            const int64_t window = r.integer(p + "attention.sliding_window", 0);
            j["sliding_window"] = window > 0 ? ojson(window) : ojson(nullptr);  // HF default 4096
        }
        if (arch->family == Family::Qwen2 || arch->family == Family::Qwen3)
            j["use_sliding_window"] = false;
        if (arch->moe != Moe::None) SPILLWAY_TRY(writeExperts(m, r, p, *arch, j));
    }
    writeTokenIds(m, j);
    j["tie_word_embeddings"] = tied;
    if (auto dtype = m.getString("spillway.torch_dtype")) j["torch_dtype"] = *dtype;
    return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace

const char* supportedHfArchitectures()
{
    return "llama, mistral, qwen2, qwen3, opt, mixtral, qwen2_moe, qwen3_moe, olmoe (LlamaForCausalLM, "
           "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, OPTForCausalLM, MixtralForCausalLM, "
           "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM)";
}

Status metadataFromHfConfigText(const std::string& configJson, const std::string& configWhat,
                                const std::string& generationJson,
                                const std::string& generationWhat, gguf::Metadata& out)
{
    try {
        return metadataFromTexts(configJson, configWhat, generationJson, generationWhat, out);
    } catch (const std::exception& e) {  // bad_alloc; nlohmann is used without throwing calls
        return makeError(ErrorCode::Internal, configWhat + ": " + e.what());
    }
}

Status metadataFromHfConfig(const std::string& configJsonPath,
                            const std::string& generationConfigPath, gguf::Metadata& out)
{
    try {
        std::string config, generation;
        SPILLWAY_TRY(readSmallFile(configJsonPath, config));
        std::error_code ec;
        if (!generationConfigPath.empty() && std::filesystem::exists(generationConfigPath, ec)) {
            SPILLWAY_TRY(readSmallFile(generationConfigPath, generation));
            if (generation.empty())
                return makeError(ErrorCode::ModelFileInvalid,
                                 generationConfigPath + ": empty file");
        }
        return metadataFromTexts(config, configJsonPath, generation, generationConfigPath, out);
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, configJsonPath + ": " + e.what());
    }
}

Result<std::string> hfConfigFromMetadata(const gguf::Metadata& metadata, bool tiedEmbeddings)
{
    try {
        return configFromMetadata(metadata, tiedEmbeddings);
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, metadata.source() + ": " + e.what());
    }
}

Result<std::string> hfGenerationConfigFromMetadata(const gguf::Metadata& metadata)
{
    try {
        ojson j = ojson::object();
        writeTokenIds(metadata, j);
        return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
    } catch (const std::exception& e) {
        return makeError(ErrorCode::Internal, metadata.source() + ": " + e.what());
    }
}

}  // namespace spillway
