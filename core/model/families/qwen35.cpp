// The hybrid Qwens: qwen35 (Qwen3.5 dense), qwen35moe (Qwen3.5/3.6 mixtures) and qwen3next
// (Qwen3-Next, Qwen3-Coder-Next). Most layers are Gated DeltaNet mixers (linear attention with a
// recurrent state, LlamaConfig's ssm* fields); every full_attention_interval-th layer (every 4th
// in qwen3next, which has no key for it) attends over the whole context with per-head QK norms
// and an output gate carried in its q projection. The experts are softmax-routed, renormalized,
// with a shared expert behind a sigmoid gate; the FFN's norm is post_attention_norm. Qwen3.5
// rotates its pairs by interleaved multi-section RoPE (for text: NeoX RoPE, see ropeSections);
// Qwen3-Next by NeoX RoPE. Qwen3.5's multi-token-prediction layers (nextn_predict_layers) close
// the file and are not run. As ik_llama.cpp's build_qwen35moe / build_qwen35 / build_qwen3next and
// delta_net compute them.

#include "core/model/families/family.h"

#include "core/formats/gguf.h"

namespace spillway {

namespace {

// What the three share: the delta net's shapes, the layer kinds, attention's gate and norms.
Status readHybridQwen(const gguf::Metadata& f, const std::string& p, LlamaConfig& c, int interval)
{
    auto kernel = positiveKey(f, p + "ssm.conv_kernel", 64);
    if (!kernel) return kernel.error();
    auto inner = positiveKey(f, p + "ssm.inner_size", 1 << 20);
    if (!inner) return inner.error();
    auto state = positiveKey(f, p + "ssm.state_size", 1024);
    if (!state) return state.error();
    auto vHeads = positiveKey(f, p + "ssm.time_step_rank", 4096);
    if (!vHeads) return vHeads.error();
    auto kHeads = positiveKey(f, p + "ssm.group_count", 4096);
    if (!kHeads) return kHeads.error();
    if (*inner % *vHeads != 0 || *vHeads % *kHeads != 0 || *inner / *vHeads != *state)
        return familyKeyError(f, "ssm.inner_size " + std::to_string(*inner) + ", ssm.time_step_rank " +
                                     std::to_string(*vHeads) + " and ssm.group_count " + std::to_string(*kHeads) +
                                     " do not make value heads of ssm.state_size " + std::to_string(*state) +
                                     " shared evenly by the key heads");
    c.ssmConvKernel = *kernel;
    c.ssmStateDim = *state;
    c.ssmVHeads = *vHeads;
    c.ssmKHeads = *kHeads;
    c.ssmHeadVDim = *inner / *vHeads;
    if (c.nLayers < 1) return familyKeyError(f, "block_count leaves no layer besides the prediction layers");
    c.attentionKinds.assign(size_t(c.nLayers), LlamaConfig::AttentionKind::Linear);
    for (int l = 0; l < c.nLayers; ++l)
        if ((l + 1) % interval == 0) c.attentionKinds[size_t(l)] = LlamaConfig::AttentionKind::Full;
    c.attentionOutputGate = true;
    c.ropeNeox = true;
    c.expertWeightsNormalized = true;
    return {};
}

}  // namespace

Status readQwen35Family(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    int interval = 4;
    if (f.find(p + "full_attention_interval")) {
        auto v = positiveKey(f, p + "full_attention_interval", 1024);
        if (!v) return v.error();
        interval = *v;
    }
    if (auto nextn = f.getInt(p + "nextn_predict_layers")) {
        if (*nextn < 0 || *nextn >= c.nLayers) return familyKeyError(f, "metadata '" + p + "nextn_predict_layers' is out of range");
        c.nextnLayers = int(*nextn);
        c.nLayers -= c.nextnLayers;
    }
    // Multi-section RoPE: four section sizes (in rotated pairs) that together cover at most the
    // rotated pairs.
    const gguf::Value* sections = f.find(p + "rope.dimension_sections");
    const gguf::Array* a = sections ? sections->asArray() : nullptr;
    if (!a || a->values.size() < 3 || a->values.size() > 4)
        return familyKeyError(f, "missing metadata array '" + p + "rope.dimension_sections' (4 integers)");
    int total = 0;
    for (size_t i = 0; i < a->values.size(); ++i) {
        const auto v = a->values[i].asInt();
        if (!v || *v < 0 || *v > 4096) return familyKeyError(f, "metadata '" + p + "rope.dimension_sections' is out of range");
        c.ropeSections[i] = int(*v);
        total += int(*v);
    }
    if (total < 1 || total > c.ropeDims / 2)
        return familyKeyError(f, "metadata '" + p + "rope.dimension_sections' does not fit the " +
                                     std::to_string(c.ropeDims / 2) + " rotated pairs");
    c.ssmTiledHeads = true;
    return readHybridQwen(f, p, c, interval);
}

Status readQwen3NextFamily(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    c.ssmFusedInput = true;
    return readHybridQwen(f, p, c, 4);
}

}  // namespace spillway
