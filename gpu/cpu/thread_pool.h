#pragma once
// A persistent pool of (threads - 1) workers plus the calling thread, for the CPU device's ops.
//
// run() wakes the workers by bumping a generation counter. A worker that finished its last task
// spins on that counter for a short while (so the next op of the same token starts within a few
// microseconds), then sleeps on a futex so that idle workers burn no CPU between tokens.
// Nothing is allocated per dispatch. One thread at a time may call run().

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace spillway::gpu::cpu {

class ThreadPool {
public:
    // Called on every thread of the pool; thread 0 is the caller of run().
    using Task = void (*)(void* context, int thread, int threads);

    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return m_threads; }

    // Runs task(context, t, size()) on every thread t and returns when all have returned.
    void run(Task task, void* context);

    // Convenience for a lambda or functor: fn(int thread, int threads).
    template <class Fn>
    void run(Fn& fn)
    {
        run([](void* c, int t, int n) { (*static_cast<Fn*>(c))(t, n); }, &fn);
    }

private:
    void workerLoop(int thread);

    int m_threads = 1;
    std::vector<std::thread> m_workers;

    // The dispatch: written by run() before the generation bump (release), read by workers after
    // they observe it (acquire).
    Task m_task = nullptr;
    void* m_context = nullptr;

    alignas(64) std::atomic<uint32_t> m_generation{0};  // futex word; bumped once per run()
    alignas(64) std::atomic<int> m_pending{0};          // workers still busy with this run
    alignas(64) std::atomic<int> m_sleepers{0};         // workers in (or entering) futex wait
    std::atomic<bool> m_stop{false};
};

}  // namespace spillway::gpu::cpu
