#pragma once
// Row-column bundles of a ReLU FFN (llama_model.h, FfnBundles) made from a model's own FFN
// matrices: what `compress --bundles` stores, and what the neuron cache builds in RAM for a model
// that stores none. The rows are copied as they are; the down columns too (f32/f16/bf16 values,
// or the int8 quants of q8_0 / q8_g64 with their scales in a table); other down types become f32
// columns.

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "core/model/llama_model.h"

namespace spillway::compress {

// The layout bundles of `model` take (data, scales and file fields left empty). UnsupportedModel
// when its gate and up differ in type.
Result<FfnBundles> ffnBundleLayout(const LlamaModel& model);

// Floats in one layer's scale table: (neurons / group) * dim for int8 columns, else 0.
size_t ffnBundleScaleCount(const FfnBundles& layout);

// Fills `bundles` (neurons * stride bytes) with layer `layer`'s bundles and, for int8 columns,
// `scales` (ffnBundleScaleCount floats: scales[g * dim + r] of block g of down row r).
Status buildFfnBundles(const LlamaModel& model, int layer, uint8_t* bundles, float* scales);

}  // namespace spillway::compress
