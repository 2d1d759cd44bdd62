// OLMoE: NeoX RoPE, Q and K RMS-normed over the whole projection (not per head), the chosen
// experts' probabilities used as they are.

#include "core/model/families/family.h"

namespace spillway {

Status readOlmoeFamily(const gguf::Metadata&, const std::string&, LlamaConfig& c)
{
    c.ropeNeox = true;
    c.qkNormWhole = true;
    c.expertWeightsNormalized = false;
    return {};
}

}  // namespace spillway
