#include "storage/direct_io.h"

#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway::storage {

namespace {

constexpr uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
bool aligned(uint64_t v) { return v % kDirectIoAlignment == 0; }

// A request that keeps failing with EINTR/EAGAIN, or returning nothing but partial blocks, is
// given up after this many attempts rather than spinning for ever.
constexpr int kMaxRetries = 1000;

Error openError(const std::string& path, const char* what, int err)
{
    return makeError(ErrorCode::Io, path + ": " + what + ": " + std::strerror(err));
}

// Progress of one chunk across (possibly several) read calls.
struct ChunkState {
    uint64_t offset = 0;
    size_t bytes = 0;
    uint8_t* dst = nullptr;
    size_t done = 0;
    int retries = 0;
};

enum class Step { Done, Again, Failed };

// Applies one read result (bytes read, or -errno) to a chunk: finished, issue the rest, or failed.
Step advance(ChunkState& s, long long res, const DirectFile& f, Error& error)
{
    if (res < 0) {
        const int err = int(-res);
        if ((err == EINTR || err == EAGAIN) && ++s.retries < kMaxRetries) return Step::Again;
        error = makeError(ErrorCode::Io, f.path() + ": read failed at offset " +
                                             std::to_string(s.offset + s.done) + ": " +
                                             std::strerror(err));
        return Step::Failed;
    }
    s.done += size_t(res);
    const bool atEof = res == 0 || s.offset + s.done >= f.size();
    if (s.done >= s.bytes) return Step::Done;
    if (atEof) {  // the aligned tail past the end of the file reads as zeros
        std::memset(s.dst + s.done, 0, s.bytes - s.done);
        s.done = s.bytes;
        return Step::Done;
    }
    // A short read inside the file: resume. A direct read must restart on a block boundary, so
    // the partly read block is read again.
    if (f.direct()) s.done -= s.done % kDirectIoAlignment;
    if (++s.retries >= kMaxRetries) {
        error = makeError(ErrorCode::Io, f.path() + ": reads at offset " +
                                             std::to_string(s.offset + s.done) + " keep coming back short");
        return Step::Failed;
    }
    return Step::Again;
}

// A buffered file is being streamed into our own memory: the page cache need not keep it.
void dropFromPageCache(const DirectFile& f, const ChunkState& s)
{
    if (!f.direct()) ::posix_fadvise(f.fd(), off_t(s.offset), off_t(s.bytes), POSIX_FADV_DONTNEED);
}

// ---- io_uring: one thread, up to queueDepth reads in flight -----------------------------------
class IoUringReader final : public DirectReader {
public:
    static std::unique_ptr<IoUringReader> tryCreate(const DirectReaderOptions& o)
    {
        auto r = std::unique_ptr<IoUringReader>(new IoUringReader(o));
        if (io_uring_queue_init(unsigned(o.queueDepth), &r->m_ring, 0) < 0) return nullptr;
        r->m_ringOpen = true;
        io_uring_probe* probe = io_uring_get_probe_ring(&r->m_ring);
        const bool canRead = probe && io_uring_opcode_supported(probe, IORING_OP_READ);
        if (probe) io_uring_free_probe(probe);
        if (!canRead) return nullptr;
        return r;
    }
    ~IoUringReader() override
    {
        stopAsync();
        if (m_ringOpen) io_uring_queue_exit(&m_ring);
    }

protected:
    bool usesIoUring() const override { return true; }

    Status readChunks(const DirectFile& f, std::span<const Chunk> chunks) override
    {
        const int depth = m_options.queueDepth;
        std::vector<ChunkState> slots(static_cast<size_t>(depth));
        std::vector<int> freeSlots;
        for (int i = depth - 1; i >= 0; --i) freeSlots.push_back(i);
        size_t next = 0;
        int inflight = 0;
        bool failed = false;
        Error error;

        auto issue = [&](int slot) {
            ChunkState& s = slots[size_t(slot)];
            io_uring_sqe* sqe = io_uring_get_sqe(&m_ring);  // never null: inflight <= entries
            io_uring_prep_read(sqe, f.fd(), s.dst + s.done, unsigned(s.bytes - s.done),
                               s.offset + s.done);
            io_uring_sqe_set_data64(sqe, uint64_t(slot));
            ++inflight;
        };

        for (;;) {
            while (!failed && inflight < depth && next < chunks.size()) {
                const int slot = freeSlots.back();
                freeSlots.pop_back();
                const Chunk& c = chunks[next++];
                slots[size_t(slot)] = ChunkState{c.offset, c.bytes, c.dst, 0, 0};
                issue(slot);
            }
            if (inflight == 0) break;
            const int r = io_uring_submit_and_wait(&m_ring, 1);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
                // The ring itself failed; reads already submitted may still land in memory, so
                // wait for them before giving the buffers back.
                if (!failed) {
                    failed = true;
                    error = makeError(ErrorCode::Io, f.path() + ": io_uring submit failed: " +
                                                         std::strerror(-r));
                }
                io_uring_cqe* cqe = nullptr;
                if (io_uring_wait_cqe(&m_ring, &cqe) < 0) return error;
            }
            unsigned head = 0, seen = 0;
            io_uring_cqe* cqe = nullptr;
            io_uring_for_each_cqe(&m_ring, head, cqe)
            {
                ++seen;
                --inflight;
                const int slot = int(cqe->user_data);
                ChunkState& s = slots[size_t(slot)];
                Error e;
                const Step step = advance(s, cqe->res, f, e);
                if (step == Step::Again && !failed) {
                    issue(slot);
                    continue;
                }
                if (step == Step::Failed && !failed) {
                    failed = true;
                    error = std::move(e);
                }
                if (step == Step::Done) dropFromPageCache(f, s);
                freeSlots.push_back(slot);
            }
            io_uring_cq_advance(&m_ring, seen);
        }
        if (failed) return error;
        return {};
    }

private:
    explicit IoUringReader(const DirectReaderOptions& o) : DirectReader(o) {}
    io_uring m_ring{};
    bool m_ringOpen = false;
};

// ---- a pool of queueDepth threads, each doing blocking preads ---------------------------------
class ThreadPoolReader final : public DirectReader {
public:
    explicit ThreadPoolReader(const DirectReaderOptions& o) : DirectReader(o)
    {
        for (int i = 0; i < o.queueDepth; ++i) m_threads.emplace_back([this] { workerLoop(); });
    }
    ~ThreadPoolReader() override
    {
        stopAsync();
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        for (auto& t : m_threads) t.join();
    }

protected:
    bool usesIoUring() const override { return false; }

    Status readChunks(const DirectFile& f, std::span<const Chunk> chunks) override
    {
        std::unique_lock lock(m_mutex);
        m_file = &f;
        m_chunks = chunks;
        m_next.store(0);
        m_finished = 0;
        m_failed.store(false);
        ++m_generation;
        m_wake.notify_all();
        // Done when every chunk is finished and no worker still looks at this job.
        m_done.wait(lock, [&] { return m_finished == chunks.size() && m_active == 0; });
        m_file = nullptr;
        m_chunks = {};
        if (m_failed.load()) return m_error;
        return {};
    }

private:
    void workerLoop()
    {
        uint64_t seen = 0;
        std::unique_lock lock(m_mutex);
        for (;;) {
            m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
            if (m_stop) return;
            seen = m_generation;
            ++m_active;
            const DirectFile& f = *m_file;
            const std::span<const Chunk> chunks = m_chunks;
            lock.unlock();
            for (;;) {
                const size_t i = m_next.fetch_add(1);
                if (i >= chunks.size()) break;
                Error error;
                const bool ok = m_failed.load() || readOne(f, chunks[i], error);
                lock.lock();
                if (!ok && !m_failed.load()) {
                    m_error = std::move(error);
                    m_failed.store(true);
                }
                ++m_finished;
                lock.unlock();
            }
            lock.lock();
            --m_active;
            if (m_active == 0 && m_finished == chunks.size()) m_done.notify_all();
        }
    }

    static bool readOne(const DirectFile& f, const Chunk& c, Error& error)
    {
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
    std::mutex m_mutex;
    std::condition_variable m_wake, m_done;
    bool m_stop = false;
    uint64_t m_generation = 0;
    int m_active = 0;  // workers inside the current job
    const DirectFile* m_file = nullptr;
    std::span<const Chunk> m_chunks;
    std::atomic<size_t> m_next{0};
    size_t m_finished = 0;
    std::atomic<bool> m_failed{false};
    Error m_error;
};

}  // namespace

AlignedRange alignRange(uint64_t offset, size_t bytes, size_t alignment)
{
    if (alignment == 0) alignment = 1;
    const uint64_t start = offset / alignment * alignment;
    const uint64_t end = alignUp(offset + bytes, alignment);
    return AlignedRange{start, size_t(end - start), size_t(offset - start)};
}

// ---- DirectFile -------------------------------------------------------------------------------
Result<DirectFile> DirectFile::open(const std::string& path) { return openImpl(path, true); }

Result<DirectFile> DirectFile::openBuffered(const std::string& path) { return openImpl(path, false); }

Result<DirectFile> DirectFile::openImpl(const std::string& path, bool tryDirect)
{
    bool direct = tryDirect;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (tryDirect ? O_DIRECT : 0));
    if (fd < 0 && tryDirect && errno == EINVAL) {  // the filesystem refuses O_DIRECT
        direct = false;
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) return openError(path, "cannot open", errno);
    DirectFile file(path, fd, direct, 0);  // closes fd on every return below
    struct stat st {};
    if (::fstat(fd, &st) != 0) return openError(path, "cannot stat", errno);
    if (S_ISDIR(st.st_mode)) return openError(path, "cannot read", EISDIR);
    file.m_size = uint64_t(st.st_size);

    // Some filesystems (FUSE, some network ones) accept O_DIRECT at open and refuse the reads.
    if (direct && file.m_size > 0) {
        void* probe = std::aligned_alloc(kDirectIoAlignment, kDirectIoAlignment);
        if (!probe) return makeError(ErrorCode::OutOfMemory, path + ": out of memory");
        ssize_t n;
        do n = ::pread(fd, probe, kDirectIoAlignment, 0);
        while (n < 0 && errno == EINTR);
        const int e = errno;
        std::free(probe);
        if (n < 0 && e == EINVAL) {
            const int buffered = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (buffered < 0) return openError(path, "cannot open", errno);
            file.close();
            file.m_fd = buffered;
            file.m_direct = false;
        } else if (n < 0) {
            return openError(path, "cannot read", e);
        }
    }
    if (!file.m_direct) ::posix_fadvise(file.m_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return file;
}

DirectFile::DirectFile(DirectFile&& o) noexcept { *this = std::move(o); }

DirectFile& DirectFile::operator=(DirectFile&& o) noexcept
{
    if (this != &o) {
        close();
        m_path = std::move(o.m_path);
        m_fd = o.m_fd;
        m_direct = o.m_direct;
        m_size = o.m_size;
        o.m_fd = -1;
    }
    return *this;
}

DirectFile::~DirectFile() { close(); }

void DirectFile::close()
{
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
}

// ---- DirectReader -----------------------------------------------------------------------------
Result<std::unique_ptr<DirectReader>> DirectReader::create(const DirectReaderOptions& o)
{
    if (o.queueDepth < 1 || o.queueDepth > 1024)
        return makeError(ErrorCode::InvalidArgument,
                         "direct reader: queue depth must be 1..1024, not " + std::to_string(o.queueDepth));
    if (o.chunkBytes == 0 || o.chunkBytes % kDirectIoAlignment != 0 || o.chunkBytes > (size_t{1} << 30))
        return makeError(ErrorCode::InvalidArgument, "direct reader: chunk size must be a multiple "
                                                     "of 4096 bytes in (0, 1 GiB], not " +
                                                         std::to_string(o.chunkBytes));
    if (!o.forceThreadPool) {
        if (auto ring = IoUringReader::tryCreate(o)) return std::unique_ptr<DirectReader>(std::move(ring));
    }
    return std::unique_ptr<DirectReader>(std::make_unique<ThreadPoolReader>(o));
}

const char* DirectReader::engine() const { return usesIoUring() ? "io_uring" : "pread threads"; }

Status DirectReader::read(const DirectFile& file, uint64_t offset, size_t bytes, void* dst)
{
    const ReadRequest r{offset, bytes, dst};
    return readBatch(file, {&r, 1});
}

Status DirectReader::readBatch(const DirectFile& file, std::span<const ReadRequest> requests)
{
    if (file.fd() < 0) return makeError(ErrorCode::InvalidArgument, "direct reader: file is not open");
    std::vector<Chunk> chunks;
    const uint64_t size = file.size();
    // Requests end at the file's end (its aligned end for a direct file); the rest is zeros.
    const uint64_t readableEnd = file.direct() ? alignUp(size, kDirectIoAlignment) : size;
    for (const ReadRequest& r : requests) {
        if (r.bytes == 0) continue;
        if (!r.dst) return makeError(ErrorCode::InvalidArgument, file.path() + ": read into a null buffer");
        if (file.direct() && !(aligned(r.offset) && aligned(r.bytes) && aligned(uintptr_t(r.dst))))
            return makeError(ErrorCode::InvalidArgument,
                             file.path() + ": direct read at offset " + std::to_string(r.offset) +
                                 " of " + std::to_string(r.bytes) +
                                 " bytes: offset, length and buffer must be 4096-byte aligned");
        auto* dst = static_cast<uint8_t*>(r.dst);
        const uint64_t end = r.offset + r.bytes;
        const uint64_t inFileEnd = std::clamp(readableEnd, r.offset, end);
        if (inFileEnd < end) std::memset(dst + (inFileEnd - r.offset), 0, size_t(end - inFileEnd));
        for (uint64_t at = r.offset; at < inFileEnd; at += m_options.chunkBytes) {
            const size_t n = size_t(std::min<uint64_t>(m_options.chunkBytes, inFileEnd - at));
            chunks.push_back(Chunk{at, n, dst + (at - r.offset)});
        }
    }
    if (chunks.empty()) return {};
    std::lock_guard lock(m_mutex);
    return readChunks(file, chunks);
}

// ---- the asynchronous form: one thread per reader working through submitted batches -----------
struct DirectReader::Async {
    struct Job {
        Ticket ticket;
        const DirectFile* file;
        std::vector<ReadRequest> requests;
    };
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Job> queue;
    std::map<Ticket, Status> finished;  // read, not yet waited for
    Ticket running = 0;                 // the batch being read, 0 = none
    Ticket nextTicket = 1;
    bool stop = false;
    std::thread thread;
};

DirectReader::DirectReader(const DirectReaderOptions& o) : m_options(o) {}
DirectReader::~DirectReader() { stopAsync(); }

void DirectReader::stopAsync()
{
    std::lock_guard start(m_asyncStart);
    if (!m_async) return;
    {
        std::lock_guard lock(m_async->mutex);
        m_async->stop = true;
        for (const auto& job : m_async->queue)
            m_async->finished.emplace(job.ticket, makeError(ErrorCode::Cancelled, job.file->path() +
                                                                                       ": read cancelled: reader destroyed"));
        m_async->queue.clear();
    }
    m_async->changed.notify_all();
    m_async->thread.join();
    m_async.reset();
}

DirectReader::Ticket DirectReader::submit(const DirectFile& file, std::vector<ReadRequest> requests)
{
    {
        std::lock_guard start(m_asyncStart);
        if (!m_async) {
            m_async = std::make_unique<Async>();
            m_async->thread = std::thread([this, a = m_async.get()] {
                std::unique_lock lock(a->mutex);
                for (;;) {
                    a->changed.wait(lock, [a] { return a->stop || !a->queue.empty(); });
                    if (a->queue.empty()) return;  // stopping
                    Async::Job job = std::move(a->queue.front());
                    a->queue.pop_front();
                    a->running = job.ticket;
                    lock.unlock();
                    Status status = readBatch(*job.file, job.requests);
                    lock.lock();
                    a->running = 0;
                    a->finished.emplace(job.ticket, std::move(status));
                    a->changed.notify_all();
                }
            });
        }
    }
    Async& a = *m_async;
    std::lock_guard lock(a.mutex);
    const Ticket t = a.nextTicket++;
    a.queue.push_back(Async::Job{t, &file, std::move(requests)});
    a.changed.notify_all();
    return t;
}

Status DirectReader::wait(Ticket ticket)
{
    Async* a = nullptr;
    {
        std::lock_guard start(m_asyncStart);
        a = m_async.get();
    }
    std::unique_lock<std::mutex> lock;
    auto known = [&] {
        if (!a) return false;
        lock = std::unique_lock(a->mutex);
        if (a->finished.count(ticket) || a->running == ticket) return true;
        return std::any_of(a->queue.begin(), a->queue.end(), [&](const Async::Job& j) { return j.ticket == ticket; });
    };
    if (!known()) return makeError(ErrorCode::InvalidArgument, "direct reader: unknown ticket " + std::to_string(ticket));
    a->changed.wait(lock, [&] { return a->finished.count(ticket) > 0; });
    Status status = std::move(a->finished.at(ticket));
    a->finished.erase(ticket);
    return status;
}

}  // namespace spillway::storage
