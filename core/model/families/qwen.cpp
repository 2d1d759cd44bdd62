// qwen2, qwen3 and their mixtures (qwen2moe, qwen3moe): GGUF keeps Qwen's Q/K rows in their
// Hugging Face order, so RoPE rotates halves (NeoX style). Qwen3-MoE renormalizes the chosen
// experts' probabilities (norm_topk_prob); Qwen2-MoE uses them as they are, plus its shared
// expert. Qwen3's per-head Q/K norms are tensors (bound where present).

#include "core/model/families/family.h"

namespace spillway {

Status readQwenFamily(const gguf::Metadata&, const std::string&, LlamaConfig& c)
{
    c.ropeNeox = true;
    c.expertWeightsNormalized = false;
    return {};
}

Status readQwen3MoeFamily(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    if (Status s = readQwenFamily(f, p, c); !s) return s;
    c.expertWeightsNormalized = true;  // norm_topk_prob
    return {};
}

}  // namespace spillway
