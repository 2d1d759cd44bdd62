#pragma once
// The CPU device's Gated DeltaNet step (Device::deltaNet, gpu/device.h's DeltaNetArgs).

#include <vector>

#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/thread_pool.h"
#include "gpu/device.h"

namespace spillway::gpu::cpu {

// One token; value heads split across the pool. scratch: reused between calls.
void deltaNetOp(const DeltaNetArgs& a, ThreadPool& pool, const Kernels& k, std::vector<float>& scratch);

}  // namespace spillway::gpu::cpu
