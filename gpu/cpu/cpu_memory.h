#pragma once
// Host memory for the CPU device, and what the machine says about its memory and CPU.

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/host.h"  // HostMemoryInfo, cpuModelName, onlineCores

namespace spillway::gpu::cpu {

// 4096-byte aligned (direct I/O can read into it). Blocks of 4 MiB and more are 2 MiB aligned and advised to use
// transparent huge pages (fewer TLB misses when streaming weights). Returns nullptr when the
// request exceeds the machine's memory or the allocator fails; never throws or aborts.
void* allocateHostMemory(size_t bytes);
void freeHostMemory(void* p);

}  // namespace spillway::gpu::cpu
