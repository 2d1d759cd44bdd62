// HostReadProbe and measureHostReadBandwidth: the ceiling the matvec kernels are compared with.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "gpu/cpu/cpu_device.h"
#include "gpu/cpu/cpu_kernels.h"
#include "gpu/cpu/cpu_memory.h"
#include "gpu/cpu/thread_pool.h"

namespace spillway::gpu {

struct HostReadProbe::Pool {
    explicit Pool(int threads) : pool(threads), readAll(cpu::kernelsFor(cpu::detectKernelSet()).readAll) {}
    cpu::ThreadPool pool;
    cpu::ReadAllFn readAll;  // the widest loads this CPU has
};

namespace {

alignas(64) std::atomic<uint64_t> g_sink{0};  // keeps the reads from being optimized away

// Thread t's share of a range: [offset, offset + bytes) with bytes a multiple of 256 (the read
// loops' unroll), so that the shares of all threads start 256-byte aligned.
size_t shareBytes(size_t rangeBytes, int threads) { return rangeBytes / size_t(threads) / 256 * 256; }

}  // namespace

HostReadProbe::HostReadProbe(int threads, size_t bytes)
    : m_pool(std::make_unique<Pool>(threads > 0 ? threads : cpu::onlineCores())),
      m_threads(m_pool->pool.size())
{
    // Equal slices, each a multiple of 4 KiB.
    const size_t slice = bytes / size_t(m_threads) / 4096 * 4096;
    if (slice == 0) return;
    // Same allocator as Device::allocate (huge pages for big blocks), so the ceiling and the
    // matvec kernels read the same kind of memory.
    const size_t total = slice * size_t(m_threads);
    m_owned = static_cast<uint8_t*>(cpu::allocateHostMemory(total));
    if (!m_owned) return;
    // Touch every page from the thread that will read it, so no page fault is timed.
    uint8_t* data = m_owned;
    auto touch = [data, slice](int t, int) { std::memset(data + slice * size_t(t), t + 1, slice); };
    m_pool->pool.run(touch);
    m_ranges.push_back({m_owned, total});
    m_bytes = total;
    read();  // untimed: it also writes back the fill's dirty lines
}

HostReadProbe::HostReadProbe(int threads, std::vector<Range> ranges)
    : m_pool(std::make_unique<Pool>(threads > 0 ? threads : cpu::onlineCores())),
      m_threads(m_pool->pool.size())
{
    for (const Range& r : ranges) {
        const size_t share = shareBytes(r.bytes, m_threads);
        if (!r.data || share == 0 || reinterpret_cast<uintptr_t>(r.data) % 64 != 0) continue;
        m_ranges.push_back(r);
        m_bytes += share * size_t(m_threads);
    }
    if (m_bytes) read();  // untimed: the pool's first dispatch, and the same start as above
}

HostReadProbe::~HostReadProbe()
{
    if (m_owned) cpu::freeHostMemory(m_owned);
}

double HostReadProbe::read()
{
    if (!m_bytes) return 0.0;
    const cpu::ReadAllFn readAll = m_pool->readAll;
    const Range* ranges = m_ranges.data();
    const size_t count = m_ranges.size();
    auto pass = [readAll, ranges, count](int t, int threads) {
        uint64_t sum = 0;
        for (size_t i = 0; i < count; ++i) {
            const size_t share = shareBytes(ranges[i].bytes, threads);
            sum += readAll(static_cast<const uint8_t*>(ranges[i].data) + share * size_t(t), share);
        }
        g_sink.fetch_xor(sum, std::memory_order_relaxed);
    };
    const auto t0 = std::chrono::steady_clock::now();
    m_pool->pool.run(pass);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return seconds > 0 ? static_cast<double>(m_bytes) / seconds : 0.0;
}

double measureHostReadBandwidth(int threads, size_t bytes, int repeats, std::vector<double>* passes)
{
    HostReadProbe probe(threads, bytes);
    double best = 0.0;
    for (int r = 0; r < std::max(1, repeats); ++r) {
        const double rate = probe.read();
        if (passes) passes->push_back(rate);
        best = std::max(best, rate);
    }
    return best;
}

}  // namespace spillway::gpu
