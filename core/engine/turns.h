#pragma once
// Turns at one engine for several front ends on their own threads (the server's slots, the
// desktop app's chat beside the server it starts): an Engine and its Conversations are used from
// one thread at a time, so each reply holds a turn while it computes. First come, first served;
// a reply hands the turn on between tokens (yield) once it has held it for a time slice (every
// token of a large model; a few of a tiny one, where a hand-over per token would cost more than
// the token), so concurrent replies advance together.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace spillway::engine {

class Turns {
public:
    // Waits for this caller's turn.
    void lock()
    {
        std::unique_lock l(m_mutex);
        const uint64_t ticket = m_next++;
        m_cv.wait(l, [&] { return m_serving == ticket; });
        m_since = Clock::now();
    }
    void unlock()
    {
        {
            std::lock_guard l(m_mutex);
            ++m_serving;
        }
        m_cv.notify_all();
    }
    // Between tokens, with the turn held: lets whoever waits go first, once the slice is used.
    void yield()
    {
        {
            std::lock_guard l(m_mutex);
            if (m_next == m_serving + 1) return;  // nobody waits
            if (Clock::now() - m_since < kSlice) return;
        }
        unlock();
        lock();
    }

    // A turn held for a scope (handed on when the engine throws too).
    class Held {
    public:
        explicit Held(Turns& turns) : m_turns(turns) { m_turns.lock(); }
        ~Held() { m_turns.unlock(); }
        Held(const Held&) = delete;
        Held& operator=(const Held&) = delete;

    private:
        Turns& m_turns;
    };

private:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds kSlice{5};
    std::mutex m_mutex;
    std::condition_variable m_cv;
    uint64_t m_next = 0, m_serving = 0;
    Clock::time_point m_since;
};

}  // namespace spillway::engine
