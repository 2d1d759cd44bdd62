#include "core/plan/model_tensors.h"


namespace spillway::plan {

std::vector<TensorPlacement> modelTensors(const LlamaModel& model)
{
    const int layers = model.config().nLayers;
    const bool tied = model.tiedEmbeddings();
    std::vector<TensorPlacement> list;
    auto add = [&](const std::string& name, int unit) {
        const ModelTensor* t = model.tensor(name);
        TensorPlacement p;
        p.name = name;
        p.unit = unit;
        p.bytes = t ? t->bytes : 0;
        list.push_back(std::move(p));
    };
    add("token_embd.weight", tied ? layers : -1);
    // A layer's matrices (llama_model.h), the dense FFN's or a mixture of experts' (the others
    // absent: 0 bytes, as an ungated FFN's gate).
    const bool moe = model.config().moe();
    for (int l = 0; l < layers; ++l)
        for (const LayerMatrixMember& m : kLayerMatrices)
            if (moe || !m.moe) add(model.matrixName(l, m), l);
    if (!tied) add("output.weight", layers);
    return list;
}

Placement uniformPlacement(const LlamaModel& model, Tier tier)
{
    Placement p;
    p.tensors = modelTensors(model);
    for (auto& t : p.tensors) {
        t.tier = tier;
        t.reason = std::string("uniform placement: everything on ") + tierName(tier);
    }
    return p;
}

}  // namespace spillway::plan
