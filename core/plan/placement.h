#pragma once
// A placement: for every weight tensor of a model, where it lives while the model runs (device
// memory, pinned host RAM, or the SSD), and the runtime settings that go with it. The planner
// (planner.h) makes one from measured hardware figures; the runtime executes any placement.

#include <cstdint>
#include <string>
#include <vector>

namespace spillway::plan {

enum class Tier : uint8_t {
    Device,  // resident in device memory for the whole session
    Host,    // resident in pinned host RAM; copied to a device slot each time it is used
    Ssd,     // read from the model file (direct I/O) each time it is used
};
const char* tierName(Tier tier);  // "device", "ram", "ssd"

struct TensorPlacement {
    std::string name;       // GGUF tensor name
    int unit = 0;           // streaming unit: layer index, or nLayers for the output head,
                            // -1 for the token embedding
    uint64_t bytes = 0;     // stored size
    Tier tier = Tier::Device;
    // HeteGen's α: the fraction of the tensor's rows the device computes; the CPU computes the
    // rest straight from host RAM. 1 = all on the device.
    double deviceFraction = 1.0;
    std::string reason;     // why the planner chose this
};

// A mixture of experts' layer whose expert stacks lie on the SSD (the expert cache serves it):
// which of its experts fill the device's expert slots at start (the hottest by the routing
// profile; none without one), and which are kept in pinned RAM (a miss on one of those is a copy,
// not an SSD read).
struct ExpertPlacement {
    int layer = 0;
    std::vector<int> device;  // the experts the device's slots start with
    std::vector<int> host;    // the experts kept in (pinned) RAM
    int slotCount = 0;        // the layer's expert slots on the device (0: the session's count)
};

struct Placement {
    std::vector<TensorPlacement> tensors;  // every weight matrix of the model
    std::vector<ExpertPlacement> experts;  // per layer the expert cache serves, where it has any
    // Units loaded ahead of the one computing. 0 = the naive baseline: each unit is loaded
    // synchronously right before use (as Accelerate's disk offload does).
    int prefetchDepth = 2;
    // Device-resident tensors of a device that computes on host pointers (the CPU device) may be
    // used straight from the memory-mapped file instead of being copied into device buffers.
    // Off whenever device memory is budgeted, so that every byte is accounted for.
    bool mapInPlace = false;
    // SSD reads go straight into device memory where the device can take them (the CPU device;
    // cuFile on CUDA); otherwise through a pinned staging buffer and a host→device copy.
    bool directToDevice = true;

    const TensorPlacement* find(const std::string& name) const;
    const ExpertPlacement* expertsOf(int layer) const;  // nullptr: none set for it
    uint64_t bytesOn(Tier tier) const;
};

}  // namespace spillway::plan
