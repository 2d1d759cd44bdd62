// HF <-> GGUF tensor names for every supported architecture, and the RoPE row permutation
// against llama.cpp's convert_hf_to_gguf formula, worked out by hand.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/formats/hf_config.h"

namespace spillway {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs llamaNames(int layer)
{
    const std::string h = "model.layers." + std::to_string(layer) + ".";
    const std::string g = "blk." + std::to_string(layer) + ".";
    return {
        {h + "self_attn.q_proj.weight", g + "attn_q.weight"},
        {h + "self_attn.k_proj.weight", g + "attn_k.weight"},
        {h + "self_attn.v_proj.weight", g + "attn_v.weight"},
        {h + "self_attn.o_proj.weight", g + "attn_output.weight"},
        {h + "mlp.gate_proj.weight", g + "ffn_gate.weight"},
        {h + "mlp.up_proj.weight", g + "ffn_up.weight"},
        {h + "mlp.down_proj.weight", g + "ffn_down.weight"},
        {h + "input_layernorm.weight", g + "attn_norm.weight"},
        {h + "post_attention_layernorm.weight", g + "ffn_norm.weight"},
    };
}

Pairs namesOf(const std::string& arch)
{
    Pairs all;
    if (arch == "opt") {
        all = {{"model.decoder.embed_tokens.weight", "token_embd.weight"},
               {"model.decoder.embed_positions.weight", "position_embd.weight"},
               {"model.decoder.final_layer_norm.weight", "output_norm.weight"},
               {"model.decoder.final_layer_norm.bias", "output_norm.bias"},
               {"lm_head.weight", "output.weight"}};
        for (int layer : {0, 11}) {
            const std::string h = "model.decoder.layers." + std::to_string(layer) + ".";
            const std::string g = "blk." + std::to_string(layer) + ".";
            for (const char* wb : {"weight", "bias"}) {
                const std::string w = wb;
                all.push_back({h + "self_attn.q_proj." + w, g + "attn_q." + w});
                all.push_back({h + "self_attn.k_proj." + w, g + "attn_k." + w});
                all.push_back({h + "self_attn.v_proj." + w, g + "attn_v." + w});
                all.push_back({h + "self_attn.out_proj." + w, g + "attn_output." + w});
                all.push_back({h + "self_attn_layer_norm." + w, g + "attn_norm." + w});
                all.push_back({h + "fc1." + w, g + "ffn_up." + w});
                all.push_back({h + "fc2." + w, g + "ffn_down." + w});
                all.push_back({h + "final_layer_norm." + w, g + "ffn_norm." + w});
            }
        }
        return all;
    }
    all = {{"model.embed_tokens.weight", "token_embd.weight"},
           {"model.norm.weight", "output_norm.weight"},
           {"lm_head.weight", "output.weight"}};
    for (int layer : {0, 7, 123}) {
        for (auto& p : llamaNames(layer)) all.push_back(p);
        const std::string h = "model.layers." + std::to_string(layer) + ".";
        const std::string g = "blk." + std::to_string(layer) + ".";
        if (arch == "qwen2")
            for (const char* x : {"q", "k", "v"})
                all.push_back({h + "self_attn." + x + "_proj.bias", g + "attn_" + x + ".bias"});
        if (arch == "qwen3")
            for (const char* x : {"q", "k"})
                all.push_back(
                    {h + "self_attn." + x + "_norm.weight", g + "attn_" + x + "_norm.weight"});
    }
    return all;
}

TEST(HfTensorNames, EveryNameMapsAndMapsBack)
{
    for (const std::string arch : {"llama", "mistral", "qwen2", "qwen3", "opt"}) {
        SCOPED_TRACE(arch);
        for (const auto& [hf, gguf] : namesOf(arch)) {
            EXPECT_EQ(ggufTensorName(arch, hf).value_or("(none)"), gguf) << hf;
            EXPECT_EQ(hfTensorName(arch, gguf).value_or("(none)"), hf) << gguf;
            EXPECT_FALSE(hfTensorIsSkipped(arch, hf)) << hf;
        }
    }
}

// Mixtures of experts: the router and Qwen2-MoE's shared expert by name; each expert's matrices,
// tensors of their own in HF, as an expert of a GGUF stack (w1 the gate, w3 the up, w2 the down
// projection in Mixtral's naming).
TEST(HfTensorNames, ExpertsMapToTheirStacksAndBack)
{
    struct Expert {
        const char* arch;
        std::string hf, stack;
        int64_t expert;
    };
    const Expert experts[] = {
        {"llama", "model.layers.3.block_sparse_moe.experts.5.w1.weight", "blk.3.ffn_gate_exps.weight", 5},
        {"llama", "model.layers.3.block_sparse_moe.experts.5.w3.weight", "blk.3.ffn_up_exps.weight", 5},
        {"llama", "model.layers.31.block_sparse_moe.experts.7.w2.weight", "blk.31.ffn_down_exps.weight", 7},
        {"qwen3moe", "model.layers.0.mlp.experts.127.gate_proj.weight", "blk.0.ffn_gate_exps.weight", 127},
        {"qwen2moe", "model.layers.12.mlp.experts.0.up_proj.weight", "blk.12.ffn_up_exps.weight", 0},
        {"olmoe", "model.layers.15.mlp.experts.63.down_proj.weight", "blk.15.ffn_down_exps.weight", 63},
    };
    for (const Expert& e : experts) {
        SCOPED_TRACE(e.hf);
        const auto g = ggufExpertTensorName(e.arch, e.hf);
        ASSERT_TRUE(g);
        EXPECT_EQ(g->gguf, e.stack);
        EXPECT_EQ(g->expert, e.expert);
        EXPECT_FALSE(ggufTensorName(e.arch, e.hf));
        EXPECT_EQ(hfExpertTensorName(e.arch, e.stack, e.expert).value_or("(none)"), e.hf);
    }
    const Pairs named = {
        {"model.layers.2.block_sparse_moe.gate.weight", "blk.2.ffn_gate_inp.weight"},
    };
    for (const auto& [hf, gguf] : named) {
        EXPECT_EQ(ggufTensorName("llama", hf).value_or("(none)"), gguf);
        EXPECT_EQ(hfTensorName("llama", gguf).value_or("(none)"), hf);
    }
    const Pairs qwen2moe = {
        {"model.layers.1.mlp.gate.weight", "blk.1.ffn_gate_inp.weight"},
        {"model.layers.1.mlp.shared_expert.gate_proj.weight", "blk.1.ffn_gate_shexp.weight"},
        {"model.layers.1.mlp.shared_expert.up_proj.weight", "blk.1.ffn_up_shexp.weight"},
        {"model.layers.1.mlp.shared_expert.down_proj.weight", "blk.1.ffn_down_shexp.weight"},
        {"model.layers.1.mlp.shared_expert_gate.weight", "blk.1.ffn_gate_inp_shexp.weight"},
        {"model.layers.1.self_attn.q_proj.bias", "blk.1.attn_q.bias"},
    };
    for (const auto& [hf, gguf] : qwen2moe) {
        EXPECT_EQ(ggufTensorName("qwen2moe", hf).value_or("(none)"), gguf);
        EXPECT_EQ(hfTensorName("qwen2moe", gguf).value_or("(none)"), hf);
    }
    for (const char* arch : {"qwen3moe", "olmoe"}) {
        EXPECT_EQ(ggufTensorName(arch, "model.layers.4.self_attn.k_norm.weight").value_or("(none)"),
                  "blk.4.attn_k_norm.weight");
        EXPECT_EQ(ggufTensorName(arch, "model.layers.4.mlp.gate.weight").value_or("(none)"), "blk.4.ffn_gate_inp.weight");
        EXPECT_FALSE(ggufTensorName(arch, "model.layers.4.mlp.shared_expert.up_proj.weight"));
    }
    // Names that are not an expert's: the wrong family's spelling, malformed expert numbers, no
    // experts in a dense architecture.
    for (const char* bad : {"model.layers.3.mlp.experts.5.w1.weight", "model.layers.3.block_sparse_moe.experts.05.w1.weight",
                            "model.layers.3.block_sparse_moe.experts.x.w1.weight",
                            "model.layers.3.block_sparse_moe.experts.5.w4.weight", "model.layers.3.block_sparse_moe.experts.5"})
        EXPECT_FALSE(ggufExpertTensorName("llama", bad)) << bad;
    EXPECT_FALSE(ggufExpertTensorName("qwen2", "model.layers.3.mlp.experts.5.up_proj.weight"));
    EXPECT_FALSE(ggufExpertTensorName("qwen3moe", "model.layers.3.block_sparse_moe.experts.5.w1.weight"));
    EXPECT_FALSE(hfExpertTensorName("qwen3moe", "blk.3.ffn_up.weight", 0));
    EXPECT_FALSE(hfExpertTensorName("qwen3moe", "blk.3.ffn_up_exps.weight", -1));
}

TEST(HfTensorNames, NamesAnArchitectureDoesNotHave)
{
    // Biases only for Qwen2, Q/K norms only for Qwen3, gate only for the Llama family.
    EXPECT_FALSE(ggufTensorName("llama", "model.layers.0.self_attn.q_proj.bias"));
    EXPECT_FALSE(ggufTensorName("qwen3", "model.layers.0.self_attn.q_proj.bias"));
    EXPECT_FALSE(ggufTensorName("llama", "model.layers.0.self_attn.q_norm.weight"));
    EXPECT_FALSE(ggufTensorName("qwen2", "model.layers.0.self_attn.k_norm.weight"));
    EXPECT_FALSE(hfTensorName("llama", "blk.0.attn_q.bias"));
    EXPECT_FALSE(hfTensorName("opt", "blk.0.ffn_gate.weight"));
    EXPECT_FALSE(hfTensorName("llama", "rope_freqs.weight"));  // llama.cpp's Llama 3 factors
    EXPECT_FALSE(ggufTensorName("opt", "model.layers.0.mlp.up_proj.weight"));
    EXPECT_FALSE(ggufTensorName("llama", "model.decoder.layers.0.fc1.weight"));
    // Unknown architectures and malformed layer numbers.
    EXPECT_FALSE(ggufTensorName("gpt2", "model.embed_tokens.weight"));
    EXPECT_FALSE(hfTensorName("mamba", "token_embd.weight"));
    for (const char* bad : {"model.layers.01.mlp.up_proj.weight",
                            "model.layers.x.mlp.up_proj.weight",
                            "model.layers..mlp.up_proj.weight",
                            "model.layers.-1.mlp.up_proj.weight",
                            "model.layers.1234567.mlp.up_proj.weight", "model.layers.0.mlp.up_proj",
                            "model.layers.0.mlp.up_proj.weight.extra", "model.layers.0", ""})
        EXPECT_FALSE(ggufTensorName("llama", bad)) << bad;
    for (const char* bad : {"blk.01.attn_q.weight", "blk..attn_q.weight", "blk.0", "blk.0.",
                            "blk.0.attn_q", "token_embd", "output"})
        EXPECT_FALSE(hfTensorName("llama", bad)) << bad;
}

TEST(HfTensorNames, OptWithoutTheModelPrefixAndSkippedTensors)
{
    EXPECT_EQ(ggufTensorName("opt", "decoder.layers.3.fc1.weight"), "blk.3.ffn_up.weight");
    EXPECT_EQ(ggufTensorName("opt", "decoder.embed_tokens.weight"), "token_embd.weight");
    EXPECT_EQ(ggufTensorName("opt", "decoder.final_layer_norm.bias"), "output_norm.bias");
    EXPECT_EQ(hfTensorName("opt", "blk.3.ffn_up.weight"), "model.decoder.layers.3.fc1.weight");

    EXPECT_TRUE(hfTensorIsSkipped("llama", "model.layers.5.self_attn.rotary_emb.inv_freq"));
    EXPECT_TRUE(hfTensorIsSkipped("qwen2", "model.rotary_emb.inv_freq"));
    EXPECT_FALSE(ggufTensorName("llama", "model.layers.5.self_attn.rotary_emb.inv_freq"));
    EXPECT_FALSE(hfTensorIsSkipped("llama", "model.layers.05.self_attn.rotary_emb.inv_freq"));
    EXPECT_FALSE(hfTensorIsSkipped("opt", "model.decoder.layers.0.fc1.weight"));
}

TEST(HfTensorNames, WhichTensorsArePermuted)
{
    for (const char* arch : {"llama", "mistral"}) {
        EXPECT_TRUE(hfNeedsRopePermutation(arch, "blk.0.attn_q.weight"));
        EXPECT_TRUE(hfNeedsRopePermutation(arch, "blk.15.attn_k.weight"));
        EXPECT_TRUE(hfNeedsRopePermutation(arch, "blk.2.attn_q.bias"));
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "blk.0.attn_v.weight"));
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "blk.0.attn_output.weight"));
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "token_embd.weight"));
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "blk.x.attn_q.weight"));
    }
    for (const char* arch : {"qwen2", "qwen3", "opt"}) {  // NEOX RoPE, or none
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "blk.0.attn_q.weight"));
        EXPECT_FALSE(hfNeedsRopePermutation(arch, "blk.0.attn_k.weight"));
    }
}

// Rows of `rowBytes` bytes, row r filled with the byte r (r < 256).
std::vector<uint8_t> numberedRows(int rows, size_t rowBytes)
{
    std::vector<uint8_t> v(size_t(rows) * rowBytes);
    for (int r = 0; r < rows; ++r) std::memset(v.data() + size_t(r) * rowBytes, r, rowBytes);
    return v;
}

std::vector<int> rowOrder(const std::vector<uint8_t>& v, size_t rowBytes)
{
    std::vector<int> order;
    for (size_t at = 0; at < v.size(); at += rowBytes) order.push_back(v[at]);
    return order;
}

TEST(RopePermutation, TwoHeadsLandWhereLlamaCppPutsThem)
{
    // w.reshape(2 heads, 2, 2, cols).swapaxes(1, 2): per head of 4 rows [a0 a1 | b0 b1]
    // -> [a0 b0 a1 b1]: head 0 = rows 0 2 1 3, head 1 = rows 4 6 5 7.
    const size_t rowBytes = 3;
    const auto src = numberedRows(8, rowBytes);
    std::vector<uint8_t> dst(src.size(), 0xee);
    ASSERT_TRUE(permuteRopeRows(src.data(), dst.data(), 8, rowBytes, 2, /*toGguf=*/true));
    EXPECT_EQ(rowOrder(dst, rowBytes), (std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7}));
    for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], dst[i - i % rowBytes]) << "row torn";

    // Head size 6: [a0 a1 a2 | b0 b1 b2] -> [a0 b0 a1 b1 a2 b2].
    const auto src12 = numberedRows(12, 1);
    std::vector<uint8_t> dst12(12);
    ASSERT_TRUE(permuteRopeRows(src12.data(), dst12.data(), 12, 1, 2, true));
    EXPECT_EQ(rowOrder(dst12, 1), (std::vector<int>{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}));
    // And back: GGUF row 2i + s came from HF row s * 3 + i.
    std::vector<uint8_t> back12(12);
    ASSERT_TRUE(permuteRopeRows(dst12.data(), back12.data(), 12, 1, 2, false));
    EXPECT_EQ(back12, src12);
}

TEST(RopePermutation, ThereAndBackIsTheIdentity)
{
    std::mt19937 rng(7);
    for (auto [rows, heads, rowBytes] : {std::tuple{64, 4, size_t(34)}, {128, 8, size_t(2)},
                                         {16, 1, size_t(7)}, {256, 32, size_t(1)}}) {
        std::vector<uint8_t> src(size_t(rows) * rowBytes);
        for (auto& b : src) b = uint8_t(rng());
        std::vector<uint8_t> gguf(src.size()), back(src.size());
        ASSERT_TRUE(permuteRopeRows(src.data(), gguf.data(), rows, rowBytes, heads, true));
        ASSERT_TRUE(permuteRopeRows(gguf.data(), back.data(), rows, rowBytes, heads, false));
        EXPECT_EQ(back, src) << rows << " rows, " << heads << " heads";
        if (rows / heads > 2) {
            EXPECT_NE(gguf, src);  // it did move rows
        }
    }
}

TEST(RopePermutation, RefusesRowCountsThatDoNotSplitIntoHeadPairs)
{
    std::vector<uint8_t> src(12, 1), dst(12, 9);
    EXPECT_FALSE(permuteRopeRows(src.data(), dst.data(), 12, 1, 4, true));  // 3 rows per head
    EXPECT_FALSE(permuteRopeRows(src.data(), dst.data(), 12, 1, 0, true));
    EXPECT_FALSE(permuteRopeRows(src.data(), dst.data(), 0, 1, 1, true));
    EXPECT_EQ(dst, std::vector<uint8_t>(12, 9));
}

}  // namespace
}  // namespace spillway
