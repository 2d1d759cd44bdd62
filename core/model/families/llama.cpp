// llama and mistral: the reference layout (GGUF's interleaved RoPE pairs, SwiGLU, RMSNorm);
// Mixtral's experts as `llama` with expert tensors, their chosen probabilities renormalized.

#include "core/model/families/family.h"

namespace spillway {

Status readLlamaFamily(const gguf::Metadata&, const std::string&, LlamaConfig& c)
{
    c.expertWeightsNormalized = c.moe();  // Mixtral renormalizes its top two
    return {};
}

}  // namespace spillway
