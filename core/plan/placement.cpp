#include "core/plan/placement.h"

namespace spillway::plan {

const char* tierName(Tier tier)
{
    switch (tier) {
    case Tier::Device: return "device";
    case Tier::Host: return "ram";
    case Tier::Ssd: return "ssd";
    }
    return "?";
}

const TensorPlacement* Placement::find(const std::string& name) const
{
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

const ExpertPlacement* Placement::expertsOf(int layer) const
{
    for (const auto& e : experts)
        if (e.layer == layer) return &e;
    return nullptr;
}

uint64_t Placement::bytesOn(Tier tier) const
{
    uint64_t total = 0;
    for (const auto& t : tensors)
        if (t.tier == tier) total += t.bytes;
    return total;
}

}  // namespace spillway::plan
