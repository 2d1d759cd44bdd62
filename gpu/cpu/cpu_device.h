#pragma once
// The CPU backend: always built, the reference every other backend is compared with.
// Multi-threaded (a persistent worker pool) and vectorized (AVX2/FMA/F16C kernels chosen at run
// time; the binary still runs on any x86-64).

#include <cstdint>
#include <memory>

#include "gpu/device.h"
#include "gpu/sparse_format.h"

namespace spillway::gpu {

// threads <= 0: one per online core. The kernel set is the widest the CPU runs, or a lower one
// named by the environment variable SPILLWAY_CPU_KERNELS=scalar|avx2|avx512 (for comparisons).
// memoryLimit > 0 makes the device behave like a card with that much memory: allocate() fails
// past it (the runtime's placements are tested against such budgets).
std::unique_ptr<Device> createCpuDevice(int threads, uint64_t memoryLimit = 0);

// Instruction-set levels of the CPU kernels, lowest first.
enum class CpuKernelSet {
    Scalar = 0,  // baseline x86-64: runs anywhere
    Avx2 = 1,    // AVX2 + FMA + F16C
    Avx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI
};

const char* cpuKernelSetName(CpuKernelSet set);  // "scalar", "avx2", "avx512"
// The widest set this CPU supports.
CpuKernelSet bestCpuKernelSet();

// A device running exactly `set`, or the widest set below it that this CPU supports (tests
// compare the sets against each other; SPILLWAY_CPU_KERNELS is not consulted).
// info().kernels names the set that runs.
std::unique_ptr<Device> createCpuDevice(int threads, CpuKernelSet set, uint64_t memoryLimit = 0);

// y[r] = W[r, :] . x for r in [rowBegin, rowEnd) straight from a bitmap sparse blob's view (the
// CPU device's BitmapSparse matvec), with `set` or the widest set below it this CPU runs. F16 /
// BF16 values have AVX2 and AVX-512 kernels, Int8 an AVX-512 one; the rest run the scalar
// kernel, whose float sums are the dense scalar kernel's (a pruned dense matrix gives the same
// bits). No allocation, no threads.
void gemvBitmapSparse(const BitmapSparseView& w, const float* x, float* y, int64_t rowBegin, int64_t rowEnd,
                      CpuKernelSet set);

// Measured sustained read bandwidth of host memory in bytes/s, reading `bytes` (far larger than
// the caches) with `threads` threads and the widest loads the CPU has; best of `repeats` passes.
double measureHostReadBandwidth(int threads, size_t bytes, int repeats);

}  // namespace spillway::gpu
