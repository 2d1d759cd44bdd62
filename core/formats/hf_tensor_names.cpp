// Hugging Face <-> GGUF tensor names (hf_config.h): the per-architecture tables, a mixture of
// experts' per-expert tensors and their GGUF stacks, and the RoPE row permutation that tells
// the two layouts of a Llama's Q and K apart.

#include "core/formats/hf_config.h"

#include <cstring>
#include <span>
#include <string>

namespace spillway {

namespace {

struct NamePair {
    std::string_view hf;
    std::string_view gguf;
};

// Whole-model tensors, and per-layer ones after "<layer prefix>N." / "blk.N.".
constexpr NamePair kLlamaGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
constexpr NamePair kLlamaLayer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
};
constexpr NamePair kQwen2Layer[] = {  // Q/K/V biases
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
};
constexpr NamePair kQwen3Layer[] = {  // RMSNorm of each head's Q and K
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};
// Mixtures of experts: the router, Qwen2-MoE's shared expert and its gate; each expert's
// matrices are tensors of their own in HF and one stack in GGUF (kMixtralExperts, kMoeExperts).
constexpr NamePair kMixtralLayer[] = {{"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}};
constexpr NamePair kMoeLayer[] = {{"mlp.gate.weight", "ffn_gate_inp.weight"}};
constexpr NamePair kQwen2MoeLayer[] = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};
// "<prefix>E.<suffix>" (expert E) <-> the stack.
struct ExpertPair {
    std::string_view hfPrefix;
    std::string_view hfSuffix;
    std::string_view gguf;
};
constexpr ExpertPair kMixtralExperts[] = {
    {"block_sparse_moe.experts.", "w1.weight", "ffn_gate_exps.weight"},
    {"block_sparse_moe.experts.", "w3.weight", "ffn_up_exps.weight"},
    {"block_sparse_moe.experts.", "w2.weight", "ffn_down_exps.weight"},
};
constexpr ExpertPair kMoeExperts[] = {
    {"mlp.experts.", "gate_proj.weight", "ffn_gate_exps.weight"},
    {"mlp.experts.", "up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.experts.", "down_proj.weight", "ffn_down_exps.weight"},
};
constexpr NamePair kOptGlobal[] = {
    {"model.decoder.embed_tokens.weight", "token_embd.weight"},
    {"model.decoder.embed_positions.weight", "position_embd.weight"},
    {"model.decoder.final_layer_norm.weight", "output_norm.weight"},
    {"model.decoder.final_layer_norm.bias", "output_norm.bias"},
    {"model.decoder.project_in.weight", "proj_in.weight"},
    {"model.decoder.project_out.weight", "proj_out.weight"},
    {"lm_head.weight", "output.weight"},
};
constexpr NamePair kOptLayer[] = {
    {"self_attn.q_proj.weight", "attn_q.weight"},     {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},     {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},     {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.out_proj.weight", "attn_output.weight"},
    {"self_attn.out_proj.bias", "attn_output.bias"},
    {"self_attn_layer_norm.weight", "attn_norm.weight"},
    {"self_attn_layer_norm.bias", "attn_norm.bias"},
    {"fc1.weight", "ffn_up.weight"},                  {"fc1.bias", "ffn_up.bias"},
    {"fc2.weight", "ffn_down.weight"},                {"fc2.bias", "ffn_down.bias"},
    {"final_layer_norm.weight", "ffn_norm.weight"},   {"final_layer_norm.bias", "ffn_norm.bias"},
};

struct NameScheme {
    std::string_view hfLayerPrefix;
    std::span<const NamePair> global;
    std::span<const NamePair> layer[3];  // the family's tables, then the architecture's extras
    std::span<const ExpertPair> experts = {};
};

std::optional<NameScheme> schemeFor(std::string_view arch)
{
    constexpr std::string_view layers = "model.layers.";
    if (arch == "llama" || arch == "mistral")  // Mixtral's experts included
        return NameScheme{layers, kLlamaGlobal, {kLlamaLayer, kMixtralLayer, {}}, kMixtralExperts};
    if (arch == "qwen2") return NameScheme{layers, kLlamaGlobal, {kLlamaLayer, kQwen2Layer, {}}};
    if (arch == "qwen3") return NameScheme{layers, kLlamaGlobal, {kLlamaLayer, kQwen3Layer, {}}};
    if (arch == "qwen2moe")
        return NameScheme{layers, kLlamaGlobal, {kLlamaLayer, kQwen2Layer, kQwen2MoeLayer}, kMoeExperts};
    if (arch == "qwen3moe" || arch == "olmoe")  // both RMS-norm Q and K (per head, or whole)
        return NameScheme{layers, kLlamaGlobal, {kLlamaLayer, kQwen3Layer, kMoeLayer}, kMoeExperts};
    if (arch == "opt") return NameScheme{"model.decoder.layers.", kOptGlobal, {kOptLayer, {}, {}}};
    return std::nullopt;
}

// "12.rest" after a layer prefix: the layer number (plain decimal, no leading zeros, < 10^6)
// and the rest; nullopt if `s` does not look so.
std::optional<std::pair<std::string_view, std::string_view>> splitLayer(std::string_view s)
{
    const size_t dot = s.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 6) return std::nullopt;
    const std::string_view number = s.substr(0, dot);
    for (char c : number)
        if (c < '0' || c > '9') return std::nullopt;
    if (number.size() > 1 && number[0] == '0') return std::nullopt;
    return std::pair{number, s.substr(dot + 1)};
}

bool startsWith(std::string_view s, std::string_view prefix)
{
    return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::optional<std::string> ggufTensorName(std::string_view arch, std::string_view hfName)
{
    const auto scheme = schemeFor(arch);
    if (!scheme) return std::nullopt;
    std::string withPrefix;
    if (arch == "opt" && startsWith(hfName, "decoder.")) {  // checkpoints saved from OPTModel
        withPrefix = "model." + std::string(hfName);
        hfName = withPrefix;
    }
    for (const NamePair& n : scheme->global)
        if (hfName == n.hf) return std::string(n.gguf);
    if (!startsWith(hfName, scheme->hfLayerPrefix)) return std::nullopt;
    const auto layer = splitLayer(hfName.substr(scheme->hfLayerPrefix.size()));
    if (!layer) return std::nullopt;
    for (const auto& table : scheme->layer)
        for (const NamePair& n : table)
            if (layer->second == n.hf)
                return "blk." + std::string(layer->first) + "." + std::string(n.gguf);
    return std::nullopt;
}

std::optional<std::string> hfTensorName(std::string_view arch, std::string_view ggufName)
{
    const auto scheme = schemeFor(arch);
    if (!scheme) return std::nullopt;
    for (const NamePair& n : scheme->global)
        if (ggufName == n.gguf) return std::string(n.hf);
    if (!startsWith(ggufName, "blk.")) return std::nullopt;
    const auto layer = splitLayer(ggufName.substr(4));
    if (!layer) return std::nullopt;
    for (const auto& table : scheme->layer)
        for (const NamePair& n : table)
            if (layer->second == n.gguf)
                return std::string(scheme->hfLayerPrefix) + std::string(layer->first) + "." +
                       std::string(n.hf);
    return std::nullopt;
}

std::optional<ExpertTensorName> ggufExpertTensorName(std::string_view arch, std::string_view hfName)
{
    const auto scheme = schemeFor(arch);
    if (!scheme || !startsWith(hfName, scheme->hfLayerPrefix)) return std::nullopt;
    const auto layer = splitLayer(hfName.substr(scheme->hfLayerPrefix.size()));
    if (!layer) return std::nullopt;
    for (const ExpertPair& e : scheme->experts) {
        if (!startsWith(layer->second, e.hfPrefix)) continue;
        const auto expert = splitLayer(layer->second.substr(e.hfPrefix.size()));  // "5.w1.weight"
        if (!expert || expert->second != e.hfSuffix) continue;
        return ExpertTensorName{"blk." + std::string(layer->first) + "." + std::string(e.gguf),
                                std::stoll(std::string(expert->first))};
    }
    return std::nullopt;
}

std::optional<std::string> hfExpertTensorName(std::string_view arch, std::string_view ggufName, int64_t expert)
{
    const auto scheme = schemeFor(arch);
    if (!scheme || expert < 0 || !startsWith(ggufName, "blk.")) return std::nullopt;
    const auto layer = splitLayer(ggufName.substr(4));
    if (!layer) return std::nullopt;
    for (const ExpertPair& e : scheme->experts)
        if (layer->second == e.gguf)
            return std::string(scheme->hfLayerPrefix) + std::string(layer->first) + "." + std::string(e.hfPrefix) +
                   std::to_string(expert) + "." + std::string(e.hfSuffix);
    return std::nullopt;
}

bool hfTensorIsSkipped(std::string_view arch, std::string_view hfName)
{
    const auto scheme = schemeFor(arch);
    if (!scheme || arch == "opt") return false;
    if (hfName == "model.rotary_emb.inv_freq") return true;
    if (!startsWith(hfName, scheme->hfLayerPrefix)) return false;
    const auto layer = splitLayer(hfName.substr(scheme->hfLayerPrefix.size()));
    return layer && layer->second == "self_attn.rotary_emb.inv_freq";
}

bool hfNeedsRopePermutation(std::string_view arch, std::string_view ggufName)
{
    if (arch != "llama" && arch != "mistral") return false;
    if (!startsWith(ggufName, "blk.")) return false;
    const auto layer = splitLayer(ggufName.substr(4));
    if (!layer) return false;
    const std::string_view t = layer->second;
    return t == "attn_q.weight" || t == "attn_k.weight" || t == "attn_q.bias" || t == "attn_k.bias";
}

bool permuteRopeRows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t rowBytes, int nHeads,
                     bool toGguf)
{
    if (nHeads < 1 || rows < 1 || rows % (2 * int64_t(nHeads)) != 0) return false;
    const int64_t perHead = rows / nHeads, half = perHead / 2;
    for (int64_t h = 0; h < nHeads; ++h) {
        for (int64_t s = 0; s < 2; ++s) {
            for (int64_t i = 0; i < half; ++i) {
                const int64_t hfRow = h * perHead + s * half + i;  // HF: halves of the head
                const int64_t ggufRow = h * perHead + 2 * i + s;   // GGUF: adjacent pairs
                const int64_t from = toGguf ? hfRow : ggufRow, to = toGguf ? ggufRow : hfRow;
                std::memcpy(dst + size_t(to) * rowBytes, src + size_t(from) * rowBytes, rowBytes);
            }
        }
    }
    return true;
}

}  // namespace spillway
