// The io_uring engine: one thread keeps up to `queueDepth` reads in flight, refilling the ring
// from the stream as reads complete. New work wakes it through an eventfd whose read is itself
// a request in the ring, so it sleeps in one place (io_uring_submit_and_wait) whether it waits
// for the disk or for work.

#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "storage/direct_io_engine.h"

namespace spillway::storage::detail {

namespace {

constexpr uint64_t kWakeTag = ~uint64_t{0};  // user_data of the eventfd read

class IoUringReader final : public DirectReader {
public:
    static std::unique_ptr<IoUringReader> tryCreate(const DirectReaderOptions& o)
    {
        auto r = std::unique_ptr<IoUringReader>(new IoUringReader(o));
        r->m_wakeFd = ::eventfd(0, EFD_CLOEXEC);
        if (r->m_wakeFd < 0) return nullptr;
        // One entry more than the queue depth: the eventfd read is always pending.
        if (io_uring_queue_init(unsigned(o.queueDepth) + 1, &r->m_ring, 0) < 0) return nullptr;
        r->m_ringOpen = true;
        io_uring_probe* probe = io_uring_get_probe_ring(&r->m_ring);
        const bool canRead = probe && io_uring_opcode_supported(probe, IORING_OP_READ);
        if (probe) io_uring_free_probe(probe);
        if (!canRead) return nullptr;
        r->m_slots.resize(size_t(o.queueDepth));
        for (int i = o.queueDepth - 1; i >= 0; --i) r->m_freeSlots.push_back(i);
        r->m_finished.reserve(size_t(o.queueDepth));
        r->m_thread = std::thread([p = r.get()] { p->run(); });
        return r;
    }
    ~IoUringReader() override
    {
        stopStream();  // in-flight reads complete; the thread then leaves
        if (m_thread.joinable()) m_thread.join();
        if (m_ringOpen) io_uring_queue_exit(&m_ring);
        if (m_wakeFd >= 0) ::close(m_wakeFd);
    }

protected:
    bool usesIoUring() const override { return true; }
    void wakeEngine() override
    {
        const uint64_t one = 1;
        ssize_t n;
        do n = ::write(m_wakeFd, &one, sizeof one);
        while (n < 0 && errno == EINTR);
    }

private:
    struct Slot {
        Chunk chunk;
        ChunkState state;
    };
    struct Finished {
        Ticket ticket;
        bool failed;
        Error error;
    };

    explicit IoUringReader(const DirectReaderOptions& o) : DirectReader(o) {}

    void issue(int slot)
    {
        ChunkState& s = m_slots[size_t(slot)].state;
        io_uring_sqe* sqe = io_uring_get_sqe(&m_ring);  // never null: in flight <= entries
        io_uring_prep_read(sqe, m_slots[size_t(slot)].chunk.file->fd(), s.dst + s.done,
                           unsigned(s.bytes - s.done), s.offset + s.done);
        io_uring_sqe_set_data64(sqe, uint64_t(slot));
        ++m_inflight;
    }

    void armWake()
    {
        io_uring_sqe* sqe = io_uring_get_sqe(&m_ring);
        io_uring_prep_read(sqe, m_wakeFd, &m_wakeValue, sizeof m_wakeValue, 0);
        io_uring_sqe_set_data64(sqe, kWakeTag);
        m_wakeArmed = true;
    }

    // The engine thread. Under m_mutex: report finished chunks, take new ones; outside it:
    // submit and wait for at least one completion.
    void run()
    {
        std::unique_lock lock(m_mutex);
        bool broken = false;
        for (;;) {
            for (Finished& f : m_finished) finishChunk(f.ticket, f.failed ? &f.error : nullptr);
            m_finished.clear();
            if (!m_wakeArmed && !m_stopping && !broken) armWake();
            Chunk c;
            while (!broken && !m_freeSlots.empty() && takeChunk(c)) {
                const int slot = m_freeSlots.back();
                m_freeSlots.pop_back();
                m_slots[size_t(slot)] = Slot{c, ChunkState{c.offset, c.bytes, c.dst, 0, 0}};
                issue(slot);
            }
            lock.unlock();
            if (m_inflight == 0 && !m_wakeArmed) return;  // stopping (or broken) and drained

            const int r = io_uring_submit_and_wait(&m_ring, 1);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
                // The ring itself failed. Reads already submitted may still land in memory, so
                // their tickets finish only once they complete (or the ring cannot say).
                const Error error = makeError(ErrorCode::Io, std::string("io_uring submit failed: ") +
                                                                 std::strerror(-r));
                if (!broken) {
                    broken = true;
                    lock.lock();
                    failStream(error);
                    lock.unlock();
                }
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe(&m_ring, &cqe) < 0) {
                    abandonInflight(error);
                    lock.lock();
                    continue;
                }
            }
            reap(broken);
            lock.lock();
        }
    }

    // Applies every completion: a chunk done, failed or to be resumed; the eventfd read.
    void reap(bool broken)
    {
        unsigned head = 0, seen = 0;
        io_uring_cqe* cqe = nullptr;
        io_uring_for_each_cqe(&m_ring, head, cqe)
        {
            ++seen;
            if (cqe->user_data == kWakeTag) {
                m_wakeArmed = false;  // re-armed, unless stopping, before the next wait
                continue;
            }
            --m_inflight;
            const int slot = int(cqe->user_data);
            Slot& s = m_slots[size_t(slot)];
            Error error;
            const Step step = advance(s.state, cqe->res, *s.chunk.file, error);
            if (step == Step::Again && !broken) {
                issue(slot);
                continue;
            }
            if (step == Step::Again) error = makeError(ErrorCode::Io, "io_uring failed");
            if (step == Step::Done) dropFromPageCache(*s.chunk.file, s.state);
            m_finished.push_back(Finished{s.chunk.ticket, step != Step::Done, std::move(error)});
            m_freeSlots.push_back(slot);
        }
        io_uring_cq_advance(&m_ring, seen);
    }

    // The ring cannot even wait: give up on the reads it holds (their tickets fail).
    void abandonInflight(const Error& error)
    {
        std::vector<bool> free(m_slots.size(), false);
        for (int s : m_freeSlots) free[size_t(s)] = true;
        for (size_t s = 0; s < m_slots.size(); ++s)
            if (!free[s]) {
                m_finished.push_back(Finished{m_slots[s].chunk.ticket, true, error});
                m_freeSlots.push_back(int(s));
            }
        m_inflight = 0;
        m_wakeArmed = false;
    }

    io_uring m_ring{};
    bool m_ringOpen = false;
    int m_wakeFd = -1;
    uint64_t m_wakeValue = 0;  // the eventfd read's destination
    std::thread m_thread;
    // Engine thread only:
    std::vector<Slot> m_slots;        // queueDepth chunks in flight at most
    std::vector<int> m_freeSlots;
    std::vector<Finished> m_finished; // completed, not yet reported to the stream
    int m_inflight = 0;               // chunk reads in the ring (the eventfd read not counted)
    bool m_wakeArmed = false;
};

}  // namespace

std::unique_ptr<DirectReader> createIoUringReader(const DirectReaderOptions& o)
{
    return IoUringReader::tryCreate(o);
}

}  // namespace spillway::storage::detail
