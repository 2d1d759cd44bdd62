#include "core/plan/streamer_layout.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "storage/direct_io.h"

namespace spillway {

namespace {

constexpr size_t kAlign = 4096;               // direct I/O granularity and slot alignment
constexpr uint64_t kMergeGap = 256 << 10;     // SSD pieces closer than this are read as one range
size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

SsdLayout layOutSsdReads(std::span<const SsdPiece> pieces)
{
    SsdLayout out;
    out.pieceSlotOffsets.assign(pieces.size(), 0);
    std::vector<size_t> order(pieces.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::pair(pieces[a].file, pieces[a].offset) < std::pair(pieces[b].file, pieces[b].offset);
    });
    size_t cursor = 0;
    for (size_t i = 0; i < order.size();) {
        const SsdPiece& first = pieces[order[i]];
        uint64_t end = first.offset + first.bytes;
        size_t j = i + 1;
        for (; j < order.size(); ++j) {
            const SsdPiece& next = pieces[order[j]];
            if (next.file != first.file || next.offset > end + kMergeGap) break;
            end = std::max(end, next.offset + next.bytes);
        }
        const storage::AlignedRange r = storage::alignRange(first.offset, size_t(end - first.offset), kAlign);
        out.reads.push_back({first.file, r.offset, r.bytes, cursor, end});
        for (size_t k = i; k < j; ++k) out.pieceSlotOffsets[order[k]] = cursor + size_t(pieces[order[k]].offset - r.offset);
        cursor += alignUp(r.bytes, kAlign);
        out.readBytes += r.bytes;
        i = j;
    }
    out.slotBytes = cursor;
    return out;
}

std::vector<uint64_t> plan::residentExtraAllocations(const LlamaModel& model)
{
    const LlamaConfig& c = model.config();
    const LlamaWeights& w = model.weights();
    size_t floats = 0;
    auto add = [&](int n) { floats = alignUp(floats + size_t(n), plan::kResidentVectorAlign); };
    for (const LlamaLayerWeights& layer : w.layers)
        for (const LayerVectorMember& v : kLayerVectors)
            if (layer.*(v.member)) add(v.length(c));
    if (w.outputNorm) add(c.dim);
    if (w.outputNormBias) add(c.dim);
    std::vector<uint64_t> out = {uint64_t(floats) * sizeof(float)};
    for (const gpu::MatrixView* m : {&w.positionEmbedding, &w.projectIn, &w.projectOut})
        if (m->data) out.push_back(matrixBytes(*m));
    return out;
}

}  // namespace spillway
