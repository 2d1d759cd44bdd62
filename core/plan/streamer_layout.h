#pragma once
// What the weight streamer (core/runtime/weight_streamer.h) reads and allocates, computed here so
// that the planner sizes slots, staging and the SSD lane with the very layout the streamer uses:
// a plan that fits its budgets fits at run time.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/llama_model.h"

namespace spillway {

// How the streamer reads one unit's SSD-tier matrices (`pieces`: where each lies in the model's
// files): sorted by file and offset, pieces less than 256 KiB apart read as one range (a gap
// costs less than another request), each range aligned for direct I/O and given its own
// 4 KiB-aligned place in the unit's slot. The planner sizes slots, staging and the SSD lane
// with this same layout, so a plan that fits its budgets fits at run time.
struct SsdPiece {
    uint32_t file = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
};
struct SsdRead {
    uint32_t file = 0;
    uint64_t fileOffset = 0;  // aligned
    size_t bytes = 0;         // aligned
    size_t slotOffset = 0;
    uint64_t needEnd = 0;     // the file must be this long (the last piece's end)
};
struct SsdLayout {
    std::vector<SsdRead> reads;
    std::vector<size_t> pieceSlotOffsets;  // where each piece (in the given order) starts in the slot
    size_t slotBytes = 0;                  // the slot bytes the reads take
    uint64_t readBytes = 0;                // read from the SSD
};
SsdLayout layOutSsdReads(std::span<const SsdPiece> pieces);

namespace plan {

// Floats between the starts of the resident vectors (norms, biases): 64 bytes.
inline constexpr size_t kResidentVectorAlign = 16;

// The device allocations every placement makes besides the weight matrices (unless the weights
// are used in place): the buffer of norms, biases and other vectors, and OPT's learned positions
// and embedding projections.
std::vector<uint64_t> residentExtraAllocations(const LlamaModel& model);

}  // namespace plan

}  // namespace spillway
