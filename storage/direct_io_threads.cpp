// The pread engine: `queueDepth` threads, each taking the stream's next chunk and reading it
// with blocking preads. Used where io_uring is unavailable, and in tests and comparisons.

#include <cerrno>
#include <condition_variable>
#include <thread>
#include <unistd.h>
#include <vector>

#include "storage/direct_io_engine.h"

namespace spillway::storage::detail {

namespace {

class ThreadPoolReader final : public DirectReader {
public:
    explicit ThreadPoolReader(const DirectReaderOptions& o) : DirectReader(o)
    {
        for (int i = 0; i < o.queueDepth; ++i) m_threads.emplace_back([this] { workerLoop(); });
    }
    ~ThreadPoolReader() override
    {
        stopStream();  // workers finish the chunk they hold, then leave
        for (auto& t : m_threads) t.join();
    }

protected:
    bool usesIoUring() const override { return false; }
    void wakeEngine() override { m_work.notify_all(); }

private:
    void workerLoop()
    {
        std::unique_lock lock(m_mutex);
        for (;;) {
            Chunk c;
            while (!takeChunk(c)) {
                if (m_stopping) return;
                m_work.wait(lock);
            }
            lock.unlock();
            Error error;
            const bool ok = readOne(c, error);
            lock.lock();
            finishChunk(c.ticket, ok ? nullptr : &error);
        }
    }

    static bool readOne(const Chunk& c, Error& error)
    {
        const DirectFile& f = *c.file;
        ChunkState s{c.offset, c.bytes, c.dst, 0, 0};
        for (;;) {
            const ssize_t n = ::pread(f.fd(), s.dst + s.done, s.bytes - s.done, off_t(s.offset + s.done));
            const Step step = advance(s, n < 0 ? -(long long)errno : (long long)n, f, error);
            if (step == Step::Done) {
                dropFromPageCache(f, s);
                return true;
            }
            if (step == Step::Failed) return false;
        }
    }

    std::vector<std::thread> m_threads;
    std::condition_variable m_work;  // with m_mutex: a chunk may be ready, or stopping
};

}  // namespace

std::unique_ptr<DirectReader> createThreadPoolReader(const DirectReaderOptions& o)
{
    return std::make_unique<ThreadPoolReader>(o);
}

}  // namespace spillway::storage::detail
