#include "core/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/formats/gguf.h"
#include "core/model/families/family.h"

namespace spillway {

const char* supportedArchitectures()
{
    static const std::string names = [] {
        std::string list;
        for (const Family& f : families()) {
            if (!list.empty()) list += ", ";
            list += f.architecture;
            if (f.note) list += std::string(" (") + f.note + ")";
        }
        return list;
    }();
    return names.c_str();
}

int LlamaConfig::expertSlots(int requested) const
{
    return std::clamp(requested > 0 ? requested : 2 * nExpertsUsed, nExpertsUsed, nExperts);
}

int LlamaConfig::hiddenFloats() const
{
    // A linear-attention layer's mixer works in hb and hb2 too (layer_step.cpp): hb holds the
    // convolution's input (and, fused, z), hb2 z (unfused), beta, alpha and the mixer's output.
    // A gated attention's q projection ([q_h | gate_h] per head) lands in hb before its halves
    // are parted (the gates to hb2).
    const int linear = std::max(hybrid() ? std::max(ssmConvDim() + ssmValueDim(), 2 * ssmValueDim() + 2 * ssmVHeads) : 0,
                                attentionOutputGate ? 2 * qDim() : 0);
    if (!moe()) return std::max(ffnDim, linear);
    // hb2: the up values, then (past them: an expert cache's groups fill both in turns) the outputs.
    const int routed = nExpertsUsed * expertFfnDim + sharedExpertFfnDim;
    const int outputs = (nExpertsUsed + 1) * dim;
    return std::max({ffnDim, routed + outputs, nExperts + 1, linear});
}

namespace {

Error invalid(const gguf::Metadata& f, const std::string& what)
{
    return makeError(ErrorCode::ModelFileInvalid, f.source() + ": " + what);
}


}  // namespace

Result<LlamaConfig> llamaConfigFromMetadata(const gguf::Metadata& f)
{
    LlamaConfig c;
    const auto arch = f.getString("general.architecture");
    if (!arch) return invalid(f, "missing metadata key 'general.architecture'");
    c.architecture = *arch;
    const Family* family = familyOf(c.architecture);
    if (!family) {
        return makeError(ErrorCode::UnsupportedModel,
                         f.source() + ": architecture '" + c.architecture +
                             "' is not supported (supported: " + supportedArchitectures() + ")");
    }
    if (auto n = f.getString("general.name")) c.name = *n;
    if (auto s = f.getBool("spillway.synthetic")) c.synthetic = *s;
    const std::string p = c.architecture + ".";

    auto dim = positiveKey(f, p + "embedding_length", 1 << 16);
    if (!dim) return dim.error();
    auto layers = positiveKey(f, p + "block_count", 1024);
    if (!layers) return layers.error();
    auto heads = positiveKey(f, p + "attention.head_count", 1024);
    if (!heads) return heads.error();
    auto ffn = positiveKey(f, p + "feed_forward_length", 1 << 20);
    if (!ffn) return ffn.error();
    c.dim = *dim;
    c.nLayers = *layers;
    c.nHeads = *heads;
    c.ffnDim = *ffn;
    c.nKvHeads = c.nHeads;
    if (f.find(p + "attention.head_count_kv")) {
        auto kv = positiveKey(f, p + "attention.head_count_kv", 1024);
        if (!kv) return kv.error();
        c.nKvHeads = *kv;
    }
    if (c.nHeads % c.nKvHeads != 0)
        return invalid(f, "head_count " + std::to_string(c.nHeads) +
                              " is not a multiple of head_count_kv " + std::to_string(c.nKvHeads));
    if (c.dim % c.nHeads != 0 && !f.find(p + "attention.key_length"))
        return invalid(f, "embedding_length is not a multiple of head_count");
    c.headDim = c.dim / c.nHeads;
    if (f.find(p + "attention.key_length")) {
        auto kl = positiveKey(f, p + "attention.key_length", 1 << 12);
        if (!kl) return kl.error();
        c.headDim = *kl;
    }
    if (c.headDim % 2 != 0) return invalid(f, "head dimension must be even for RoPE");
    c.trainedContext = 2048;
    if (f.find(p + "context_length")) {
        auto ctx = positiveKey(f, p + "context_length", 1 << 24);
        if (!ctx) return ctx.error();
        c.trainedContext = *ctx;
    }
    if (auto eps = f.getFloat(p + "attention.layer_norm_rms_epsilon")) c.normEps = float(*eps);
    if (auto eps = f.getFloat(p + "attention.layer_norm_epsilon")) c.normEps = float(*eps);
    if (!(c.normEps > 0.0f && c.normEps < 1.0f)) return invalid(f, "RMSNorm epsilon out of range");
    if (auto base = f.getFloat(p + "rope.freq_base")) c.ropeBase = float(*base);
    if (!(c.ropeBase > 1.0f && std::isfinite(c.ropeBase))) return invalid(f, "rope.freq_base out of range");
    c.ropeDims = c.headDim;
    if (f.find(p + "rope.dimension_count")) {
        auto rd = positiveKey(f, p + "rope.dimension_count", c.headDim);
        if (!rd) return rd.error();
        c.ropeDims = *rd & ~1;
    }
    const auto scaling = f.getString(p + "rope.scaling.type");
    if (scaling && *scaling == "llama3") {
        const auto factor = f.getFloat(p + "rope.scaling.factor");
        if (!factor || !(*factor >= 1.0 && *factor <= 1024.0))
            return invalid(f, "rope.scaling.factor missing or out of range");
        c.ropeFactor = float(*factor);
        c.ropeLowFreqFactor = float(f.getFloat(p + "rope.scaling.low_freq_factor").value_or(1.0));
        c.ropeHighFreqFactor = float(f.getFloat(p + "rope.scaling.high_freq_factor").value_or(4.0));
        c.ropeOriginalContext = int(f.getInt(p + "rope.scaling.original_context_length").value_or(8192));
        if (!(c.ropeLowFreqFactor > 0.0f && c.ropeHighFreqFactor > c.ropeLowFreqFactor) || c.ropeOriginalContext < 1)
            return invalid(f, "Llama 3 RoPE scaling factors out of range");
    } else if (scaling && *scaling == "yarn") {
        // YaRN (gpt-oss; as ggml's rope with ext_factor 1): the factor extends the original
        // context; the magnitude correction 1 + 0.1 ln(factor), times rope.scaling.attn_factor.
        const auto factor = f.getFloat(p + "rope.scaling.factor");
        if (!factor || !(*factor >= 1.0 && *factor <= 1024.0))
            return invalid(f, "rope.scaling.factor missing or out of range");
        c.yarn = true;
        c.ropeFactor = float(*factor);
        c.ropeOriginalContext = int(f.getInt(p + "rope.scaling.original_context_length").value_or(c.trainedContext));
        c.yarnBetaFast = float(f.getFloat(p + "rope.scaling.yarn_beta_fast").value_or(32.0));
        c.yarnBetaSlow = float(f.getFloat(p + "rope.scaling.yarn_beta_slow").value_or(1.0));
        const double attn = f.getFloat(p + "rope.scaling.attn_factor").value_or(1.0);
        c.yarnAttnFactor = float(attn * (1.0 + 0.1 * std::log(double(c.ropeFactor))));
        if (c.ropeOriginalContext < 1 || !(c.yarnBetaFast > 0.0f && c.yarnBetaSlow > 0.0f) ||
            !(c.yarnAttnFactor > 0.0f && c.yarnAttnFactor < 100.0f))
            return invalid(f, "YaRN RoPE scaling parameters out of range");
    } else if (scaling && *scaling != "none") {
        if (*scaling != "linear")
            return makeError(ErrorCode::UnsupportedModel,
                             f.source() + ": RoPE scaling '" + *scaling + "' is not supported yet "
                                        "(supported: none, linear, llama3, yarn)");
        const auto factor = f.getFloat(p + "rope.scaling.factor");
        if (!factor || !(*factor >= 1.0 && *factor <= 1024.0))
            return invalid(f, "rope.scaling.factor missing or out of range");
        c.ropeFreqScale = float(1.0 / *factor);
    } else if (auto factor = f.getFloat(p + "rope.scale_linear")) {  // older GGUF key
        if (!(*factor >= 1.0 && *factor <= 1024.0)) return invalid(f, "rope.scale_linear out of range");
        c.ropeFreqScale = float(1.0 / *factor);
    }
    if (f.find(p + "expert_count")) {
        // Mixture of experts: the experts' FFN width is expert_feed_forward_length where the
        // file has it (qwen2moe, qwen3moe: feed_forward_length is then a dense width the experts
        // do not use), feed_forward_length otherwise (Mixtral, OLMoE).
        auto experts = positiveKey(f, p + "expert_count", 4096);
        if (!experts) return experts.error();
        auto used = positiveKey(f, p + "expert_used_count", *experts);
        if (!used) return used.error();
        c.nExperts = *experts;
        c.nExpertsUsed = *used;
        c.expertFfnDim = c.ffnDim;
        if (f.find(p + "expert_feed_forward_length")) {
            auto width = positiveKey(f, p + "expert_feed_forward_length", 1 << 20);
            if (!width) return width.error();
            c.expertFfnDim = *width;
        }
        if (f.find(p + "expert_shared_feed_forward_length")) {
            auto width = positiveKey(f, p + "expert_shared_feed_forward_length", 1 << 20);
            if (!width) return width.error();
            c.sharedExpertFfnDim = *width;
        }
    } else if (family->requiresExperts) {
        return invalid(f, "missing metadata key '" + p + "expert_count' (a mixture-of-experts architecture)");
    }
    // The family's own rules and keys, then what a file may say against its defaults.
    if (Status read = family->read(f, p, c); !read) return read.error();
    // A Hugging Face Llama imported as it is: Q/K rows in rotate-half order (core/model/hf_model.h).
    if (auto neox = f.getBool("spillway.rope.neox")) c.ropeNeox = *neox;
    if (c.moe())
        if (auto norm = f.getBool(p + "expert_weights_norm")) c.expertWeightsNormalized = *norm;
    return c;
}

Result<LlamaConfig> llamaConfigFromGguf(const gguf::File& file) { return llamaConfigFromMetadata(file.meta()); }

}  // namespace spillway
