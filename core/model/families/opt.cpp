// OPT: LayerNorm with biases, learned positions (row pos + 2), an ungated ReLU FFN; opt-350m's
// post-norm blocks and its projections between the embedding width and the model's.

#include "core/model/families/family.h"

#include "core/formats/gguf.h"

namespace spillway {

Status readOptFamily(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    c.layerNorm = true;
    c.learnedPositions = true;
    c.positionOffset = 2;
    c.ffnGated = false;
    c.ffnRelu = true;
    c.ffnReluShift = 0.0f;
    if (!f.getFloat(p + "attention.layer_norm_epsilon")) c.normEps = 1e-5f;
    c.postNorm = f.getBool("spillway.post_norm").value_or(false);
    if (auto proj = f.getInt("spillway.word_embed_proj_dim"); proj && *proj != c.dim) {
        if (*proj < 1 || *proj > (1 << 16)) return familyKeyError(f, "spillway.word_embed_proj_dim out of range");
        c.embedDim = int(*proj);
    }
    return {};
}

}  // namespace spillway
