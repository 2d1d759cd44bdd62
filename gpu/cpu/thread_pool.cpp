#include "gpu/cpu/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPILLWAY_CPU_RELAX() _mm_pause()
#else
#define SPILLWAY_CPU_RELAX() ((void)0)
#endif

namespace spillway::gpu::cpu {

namespace {

// How long a worker spins for the next dispatch before it sleeps, and how long the caller spins
// for stragglers before it starts yielding the core (2 cores are often shared with other work).
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr int kCallerSpinRounds = 4096;

void futexWait(std::atomic<uint32_t>* word, uint32_t expected)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
            nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

}  // namespace

ThreadPool::ThreadPool(int threads) : m_threads(threads < 1 ? 1 : threads)
{
    m_workers.reserve(static_cast<size_t>(m_threads - 1));
    for (int t = 1; t < m_threads; ++t)
        m_workers.emplace_back([this, t] { workerLoop(t); });
}

ThreadPool::~ThreadPool()
{
    m_stop.store(true, std::memory_order_seq_cst);
    m_generation.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&m_generation);
    for (auto& w : m_workers) w.join();
}

void ThreadPool::run(Task task, void* context)
{
    if (m_threads == 1) {
        task(context, 0, 1);
        return;
    }
    m_task = task;
    m_context = context;
    m_pending.store(m_threads - 1, std::memory_order_relaxed);
    // seq_cst pairs with the sleepers' increment in workerLoop: either the worker sees the new
    // generation before it sleeps, or we see it counted and wake it.
    m_generation.fetch_add(1, std::memory_order_seq_cst);
    if (m_sleepers.load(std::memory_order_seq_cst) > 0) futexWakeAll(&m_generation);

    task(context, 0, m_threads);

    for (int spins = 0; m_pending.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < kCallerSpinRounds)
            SPILLWAY_CPU_RELAX();
        else
            std::this_thread::yield();
    }
}

void ThreadPool::workerLoop(int thread)
{
    // The generation the pool was built with: a run() may bump it before this thread starts.
    uint32_t seen = 0;
    for (;;) {
        // Wait for the next generation: spin briefly, then sleep on the futex.
        uint32_t now = m_generation.load(std::memory_order_acquire);
        if (now == seen) {
            const auto spinUntil = std::chrono::steady_clock::now() + kWorkerSpin;
            for (int i = 0;; ++i) {
                SPILLWAY_CPU_RELAX();
                now = m_generation.load(std::memory_order_acquire);
                if (now != seen) break;
                if ((i & 63) == 63 && std::chrono::steady_clock::now() > spinUntil) break;
            }
            while (now == seen) {
                m_sleepers.fetch_add(1, std::memory_order_seq_cst);
                now = m_generation.load(std::memory_order_seq_cst);
                if (now == seen) futexWait(&m_generation, seen);
                m_sleepers.fetch_sub(1, std::memory_order_seq_cst);
                now = m_generation.load(std::memory_order_acquire);
            }
        }
        seen = now;
        if (m_stop.load(std::memory_order_acquire)) return;
        m_task(m_context, thread, m_threads);
        m_pending.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace spillway::gpu::cpu
