#pragma once
// Counts heap allocations, so a test can check that a hot path (decoding, a warm stream of reads)
// allocates nothing: replaces the global operator new and delete. Include it in exactly one
// source file of a test binary.

#include <atomic>
#include <cstdlib>
#include <new>

namespace spillway::testing_support {
inline std::atomic<long> g_allocations{0};
}  // namespace spillway::testing_support

void* operator new(size_t n)
{
    spillway::testing_support::g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
// GCC cannot see that these replace the global operator new above (whose memory is malloc's).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
