#pragma once
// The device-memory budget and the counters behind Device::memoryStats(), shared by every
// backend: reserve() before allocating (fails past the budget), release() when a buffer goes.

#include <atomic>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "gpu/device.h"

namespace spillway::gpu {

class MemoryAccounting {
public:
    explicit MemoryAccounting(uint64_t limit = 0) : m_limit(limit) {}
    void setLimit(uint64_t limit) { m_limit = limit; }
    uint64_t limit() const { return m_limit; }

    // Counts `bytes` of device memory, or says why they do not fit the budget. `who` names the
    // device in the message ("cpu device").
    Status reserve(uint64_t bytes, const char* who)
    {
        uint64_t used = m_used.load(std::memory_order_relaxed);
        do {
            if (m_limit && (bytes > m_limit || used > m_limit - bytes))
                return makeError(ErrorCode::OutOfDeviceMemory,
                                 std::string(who) + ": " + std::to_string(bytes) + " bytes do not fit the " +
                                     std::to_string(m_limit) + "-byte device budget (" + std::to_string(used) +
                                     " in use)");
        } while (!m_used.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
        raise(m_peak, used + bytes);
        return {};
    }
    void release(uint64_t bytes) { m_used.fetch_sub(bytes, std::memory_order_relaxed); }
    uint64_t used() const { return m_used.load(std::memory_order_relaxed); }

    void addHost(uint64_t bytes) { raise(m_hostPeak, m_hostUsed.fetch_add(bytes, std::memory_order_relaxed) + bytes); }
    void releaseHost(uint64_t bytes) { m_hostUsed.fetch_sub(bytes, std::memory_order_relaxed); }

    MemoryStats stats() const
    {
        MemoryStats s;
        s.used = m_used.load(std::memory_order_relaxed);
        s.peak = m_peak.load(std::memory_order_relaxed);
        s.limit = m_limit;
        s.hostUsed = m_hostUsed.load(std::memory_order_relaxed);
        s.hostPeak = m_hostPeak.load(std::memory_order_relaxed);
        return s;
    }
    void resetPeak()
    {
        m_peak.store(m_used.load(std::memory_order_relaxed), std::memory_order_relaxed);
        m_hostPeak.store(m_hostUsed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }

private:
    static void raise(std::atomic<uint64_t>& peak, uint64_t value)
    {
        uint64_t seen = peak.load(std::memory_order_relaxed);
        while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {}
    }
    uint64_t m_limit;
    std::atomic<uint64_t> m_used{0}, m_peak{0}, m_hostUsed{0}, m_hostPeak{0};
};

}  // namespace spillway::gpu
