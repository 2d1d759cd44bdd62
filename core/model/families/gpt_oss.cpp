// gpt-oss (OpenAI's open-weight mixtures, 20b and 120b): every layer attends with a learned sink
// per head, the even layers over a sliding window of attention.sliding_window positions and the
// odd ones over everything; NeoX RoPE with YaRN scaling on both kinds; q/k/v/o biases; a router
// with a bias whose top k logits are softmaxed into the weights; experts with biases and the
// clamped SwiGLU (alpha 1.702, limit 7, fixed by the architecture, not stored in the file); the
// FFN's norm is named post_attention_norm. As ik_llama.cpp's build_openai_moe computes it.

#include "core/model/families/family.h"

#include "core/formats/gguf.h"

namespace spillway {

Status readGptOssFamily(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    const auto window = f.getInt(p + "attention.sliding_window");
    if (!window) return familyKeyError(f, "missing or non-integer metadata key '" + p + "attention.sliding_window'");
    if (*window < 1 || *window > (1 << 24)) return familyKeyError(f, "metadata '" + p + "attention.sliding_window' is out of range");
    c.slidingWindow = int(*window);
    c.attentionKinds.assign(size_t(c.nLayers), LlamaConfig::AttentionKind::Full);
    for (int l = 0; l < c.nLayers; l += 2) c.attentionKinds[size_t(l)] = LlamaConfig::AttentionKind::SlidingWindow;
    c.attentionSinks = true;
    c.ropeNeox = true;
    c.routerWeights = LlamaConfig::RouterWeights::SoftmaxOfChosen;
    c.expertWeightsNormalized = false;
    c.clampedSwiglu = true;
    c.swigluAlpha = 1.702f;
    c.swigluLimit = 7.0f;
    return {};
}

}  // namespace spillway
