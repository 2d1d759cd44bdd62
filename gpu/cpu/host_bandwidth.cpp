// measureHostReadBandwidth: the ceiling the matvec kernels are compared with.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "gpu/cpu/cpu_device.h"
#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/cpu_memory.h"
#include "gpu/cpu/thread_pool.h"

namespace spillway::gpu {

double measureHostReadBandwidth(int threads, size_t bytes, int repeats)
{
    cpu::ThreadPool pool(threads > 0 ? threads : cpu::onlineCores());
    const size_t n = static_cast<size_t>(pool.size());
    // Equal slices, each a multiple of 4 KiB (so of the 256-byte unroll of the read loops).
    const size_t slice = bytes / n / 4096 * 4096;
    if (slice == 0) return 0.0;
    const size_t total = slice * n;
    // Same allocator as Device::allocate (huge pages for big blocks), so the ceiling and the
    // matvec benchmark read the same kind of memory.
    auto* data = static_cast<uint8_t*>(cpu::allocateHostMemory(total));
    if (!data) return 0.0;

    // Touch every page first (from the thread that will read it), so no page fault is timed.
    auto touch = [&](int t, int) { std::memset(data + slice * t, t + 1, slice); };
    pool.run(touch);

    const cpu::ReadAllFn readAll = cpu::kernelsFor(cpu::detectKernelSet()).readAll;
    alignas(64) static std::atomic<uint64_t> sink{0};
    auto read = [&](int t, int) {
        sink.fetch_xor(readAll(data + slice * t, slice), std::memory_order_relaxed);
    };

    double best = 0.0;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.run(read);
        const auto t1 = std::chrono::steady_clock::now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        if (seconds > 0) best = std::max(best, static_cast<double>(total) / seconds);
    }
    cpu::freeHostMemory(data);
    return best;
}

}  // namespace spillway::gpu
