#include "core/compress/ffn_bundles.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/compress/half.h"
#include "core/compress/prune.h"

namespace spillway::compress {

Result<FfnBundles> ffnBundleLayout(const LlamaModel& model)
{
    const LlamaConfig& c = model.config();
    FfnBundles b;
    if (model.weights().layers.empty()) return makeError(ErrorCode::UnsupportedModel, model.path() + ": no layers");
    for (const LlamaLayerWeights& L : model.weights().layers) {
        if ((c.ffnGated && L.gate.type != L.up.type) || L.up.type != model.weights().layers.front().up.type ||
            L.down.type != model.weights().layers.front().down.type)
            return makeError(ErrorCode::UnsupportedModel,
                             model.path() + ": FFN bundles need one type for every layer's gate and up rows, and "
                                            "one for the down matrices");
    }
    const LlamaLayerWeights& L = model.weights().layers.front();
    b.rowType = L.up.type;
    b.column = bundleColumnFor(L.down.type);
    if (b.column.group > 0 && c.ffnDim % b.column.group != 0) b.column = {gpu::DType::F32, 0};
    b.parts = c.ffnGated ? 3 : 2;
    b.neurons = c.ffnDim;
    b.dim = c.dim;
    b.rowBytes = gpu::rowBytes(b.rowType, c.dim);
    b.downBytes = b.column.bytes(c.dim);
    b.stride = size_t(b.parts - 1) * b.rowBytes + b.downBytes;
    return b;
}

size_t ffnBundleScaleCount(const FfnBundles& b)
{
    return b.column.group > 0 ? size_t(b.neurons / b.column.group) * size_t(b.dim) : 0;
}

Status buildFfnBundles(const LlamaModel& model, int layer, uint8_t* bundles, float* scales)
{
    auto layout = ffnBundleLayout(model);
    if (!layout) return layout.error();
    const FfnBundles& b = *layout;
    const LlamaLayerWeights& L = model.weights().layers[size_t(layer)];
    const size_t dim = size_t(b.dim), neurons = size_t(b.neurons);
    const auto* gate = static_cast<const uint8_t*>(L.gate.data);
    const auto* up = static_cast<const uint8_t*>(L.up.data);
    const auto* down = static_cast<const uint8_t*>(L.down.data);
    for (size_t j = 0; j < neurons; ++j) {
        uint8_t* n = bundles + j * b.stride;
        if (b.parts == 3) std::memcpy(n, gate + j * L.gate.rowStride, b.rowBytes);
        std::memcpy(n + b.upOffset(), up + j * L.up.rowStride, b.rowBytes);
    }
    const BundleColumn& column = b.column;
    if (column.group > 0) {
        // Int8 quants of q8_0 / q8_g64 blocks (the scale leads each block), scales to the table.
        const auto& traits = gpu::dtypeTraits(L.down.type);
        const size_t block = size_t(traits.blockBytes), values = size_t(traits.blockSize), header = block - values;
        for (size_t r = 0; r < dim; ++r) {
            const uint8_t* row = down + r * L.down.rowStride;
            for (size_t j = 0; j < neurons; ++j)
                bundles[j * b.stride + b.downOffset() + r] = row[j / values * block + header + j % values];
            for (size_t g = 0; g < neurons / values; ++g) {
                float v;
                if (L.down.type == gpu::DType::Q8_0) v = detail::halfToFloat(detail::load16(row + g * block));
                else std::memcpy(&v, row + g * block, sizeof v);
                scales[g * dim + r] = v;
            }
        }
    } else if (column.type == L.down.type) {
        const size_t elem = column.type == gpu::DType::F32 ? 4 : 2;
        for (size_t r = 0; r < dim; ++r) {
            const uint8_t* row = down + r * L.down.rowStride;
            for (size_t j = 0; j < neurons; ++j)
                std::memcpy(bundles + j * b.stride + b.downOffset() + r * elem, row + j * elem, elem);
        }
    } else {
        auto dense = denseRowsF32(L.down);  // (dim, neurons)
        if (!dense) return dense.error();
        for (size_t r = 0; r < dim; ++r)
            for (size_t j = 0; j < neurons; ++j)
                std::memcpy(bundles + j * b.stride + b.downOffset() + r * 4, &(*dense)[r * neurons + j], 4);
    }
    return {};
}

}  // namespace spillway::compress
