#pragma once
// The host CPU as the rest of the program sees it: its device (the CPU backend, the reference
// every other backend is compared with), the kernel sets it runs, what the machine says about
// its CPU and memory, its measured read bandwidth, and the int8 grouping the activation-sparse FFN
// shares with the CPU kernels. gpu/cpu/ is the backend's inside: core/ includes this header, not
// that folder (its headers are not on core's include path).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu/sparse_format.h"

namespace spillway::gpu {

// threads <= 0: one per online core. The kernel set is the widest the CPU runs, or a lower one
// named by the environment variable SPILLWAY_CPU_KERNELS=scalar|avx2|avx512 (for comparisons).
// memoryLimit > 0 makes the device behave like a card with that much memory: allocate() fails
// past it (the runtime's placements are tested against such budgets).
std::unique_ptr<Device> createCpuDevice(int threads, uint64_t memoryLimit = 0);

// n values (a multiple of the type's block size) of one row stored as `type` (any dense type of
// gpu/dtype.h, not BitmapSparse) to floats: the values the CPU device's getRow gives, which for
// ggml's block types are the values ggml's dequantize_row_* gives, bit for bit.
void decodeRow(DType type, const void* row, int64_t n, float* out);

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

// Repeated timed reads of host memory with `threads` threads and the widest loads the CPU has:
// the ceiling a memory-bound loop is compared with. A benchmark can interleave read() with its
// own work, so each piece of work is compared with the bandwidth of its own moment (a shared
// machine's moves by 10-20% within a second).
class HostReadProbe {
public:
    struct Range {
        const void* data;  // 64-byte aligned
        size_t bytes;
    };

    // Reads a buffer of its own of about `bytes` (far larger than the caches). The constructor
    // fills it (every page faulted in by the thread that will read it) and reads it once untimed:
    // the first pass after the fill also writes the fill's dirty lines back and comes out ~10%
    // slow, which would flatter whatever is compared with it.
    HostReadProbe(int threads, size_t bytes);
    // Reads memory that someone else owns and keeps alive and mapped while the probe is used
    // (a session's weights: a VM's guest pages are not all equally fast, so the fairest ceiling
    // for reading some bytes is reading those same bytes). Each thread reads its share of every
    // range, each share a multiple of 256 bytes (a few bytes at the ends are left out).
    HostReadProbe(int threads, std::vector<Range> ranges);
    ~HostReadProbe();
    HostReadProbe(const HostReadProbe&) = delete;
    HostReadProbe& operator=(const HostReadProbe&) = delete;

    // False when the buffer could not be allocated or there is nothing to read.
    bool valid() const { return m_bytes > 0; }
    size_t bytes() const { return m_bytes; }  // read by each pass
    // One timed pass over everything: bytes per second (0 when !valid()).
    double read();

private:
    struct Pool;
    std::unique_ptr<Pool> m_pool;
    int m_threads = 1;
    std::vector<Range> m_ranges;
    size_t m_bytes = 0;
    uint8_t* m_owned = nullptr;
};

// Measured sustained read bandwidth of host memory in bytes/s: a HostReadProbe's best of
// `repeats` timed passes (each pass's figure into `passes` when given: their spread).
double measureHostReadBandwidth(int threads, size_t bytes, int repeats, std::vector<double>* passes = nullptr);

}  // namespace spillway::gpu

namespace spillway::gpu::cpu {

struct HostMemoryInfo {
    uint64_t total = 0;      // bytes, MemTotal of /proc/meminfo
    uint64_t available = 0;  // bytes, MemAvailable of /proc/meminfo
};
HostMemoryInfo readHostMemoryInfo();

// "model name" of /proc/cpuinfo, or "x86-64 CPU" when there is none.
std::string cpuModelName();

// Online cores this process may run on (at least 1).
int onlineCores();

// x (n a multiple of 64) as int8 values with one float scale per 64: what Q8_G64 weights are
// multiplied with (the CPU kernels' own x quantization, so every user sees the same bits).
void quantizeG64(const float* x, int64_t n, int8_t* qs, float* s);

}  // namespace spillway::gpu::cpu
