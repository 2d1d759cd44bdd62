// relu-llama: the thesis' shifted-ReLU models (activation sparsity by design). Each in-layer
// norm's output becomes max(0, h - norm_relu_shift), the FFN gate max(0, gate - ffn_relu_shift),
// and K and V are rounded to an int8 grid of kv_cache_step. Defaults are the thesis' values
// (tests/data/README.md); files may say otherwise.

#include "core/model/families/family.h"

#include "core/formats/gguf.h"

namespace spillway {

Status readReluLlamaFamily(const gguf::Metadata& f, const std::string& p, LlamaConfig& c)
{
    auto shift = [&](const std::string& key, double fallback, double hi) -> Result<float> {
        const double v = f.getFloat(p + key).value_or(fallback);
        if (!(v >= 0.0 && v <= hi)) return familyKeyError(f, key + " out of range");
        return float(v);
    };
    auto norm = shift("norm_relu_shift", 1.0, 1e3);
    if (!norm) return norm.error();
    auto ffn = shift("ffn_relu_shift", 0.25, 1e3);
    if (!ffn) return ffn.error();
    auto step = shift("kv_cache_step", 8.0 / 127.0, 1e3);
    if (!step) return step.error();
    c.normReluShift = *norm;
    c.ffnRelu = true;
    c.ffnReluShift = *ffn;
    c.kvCacheStep = *step;
    return {};
}

}  // namespace spillway
