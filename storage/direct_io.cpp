#include "storage/direct_io.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/direct_io_engine.h"

namespace spillway::storage {

namespace {

constexpr uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
bool aligned(uint64_t v) { return v % kDirectIoAlignment == 0; }

Error openError(const std::string& path, const char* what, int err)
{
    return makeError(ErrorCode::Io, path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

// ---- what both engines share ------------------------------------------------------------------
namespace detail {

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

void dropFromPageCache(const DirectFile& f, const ChunkState& s)
{
    if (!f.direct()) ::posix_fadvise(f.fd(), off_t(s.offset), off_t(s.bytes), POSIX_FADV_DONTNEED);
}

}  // namespace detail

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

// ---- DirectReader: the stream of groups that both engines read from ---------------------------
// Tickets [first, next) are in `groups`, oldest first. Tickets below `finishedUpTo` are finished
// (every chunk issued, or the group failed, and none in flight); waited ones leave from the front.
struct DirectReader::Stream {
    struct Group {
        const DirectFile* file = nullptr;
        std::vector<ReadRequest> requests;  // the parts inside the file, none empty
        size_t nextRequest = 0;             // the next chunk to issue: this request,
        uint64_t nextOffset = 0;            // this many bytes in
        int inflight = 0;                   // chunks handed to the engine, not finished
        bool failed = false;                // no more chunks are issued; `status` says why
        bool waited = false;
        Status status;
        bool allIssued() const { return failed || nextRequest == requests.size(); }
    };
    // Tickets [first, next) in a ring that only grows; a group that leaves keeps its requests'
    // capacity for the next one, so a steady stream of enqueue()/wait() allocates nothing.
    std::vector<Group> ring;
    size_t head = 0;  // ring index of ticket `first`
    Ticket first = 1, next = 1;
    Ticket issueAt = 1;       // no group before this one has chunks left to issue
    Ticket finishedUpTo = 1;
    bool broken = false;      // failStream(): every later group fails with `brokenError`
    Error brokenError;
    std::condition_variable finished;  // with the reader's m_mutex: finishedUpTo moved

    Group& at(Ticket t) { return ring[(head + size_t(t - first)) % ring.size()]; }
    size_t size() const { return size_t(next - first); }

    // A fresh group for ticket `next` (its requests empty, their capacity kept).
    Group& push()
    {
        if (size() == ring.size()) {
            std::vector<Group> grown(std::max<size_t>(8, 2 * ring.size()));
            for (size_t i = 0; i < size(); ++i) grown[i] = std::move(ring[(head + i) % ring.size()]);
            ring = std::move(grown);
            head = 0;
        }
        Group& g = ring[(head + size()) % ring.size()];
        std::vector<ReadRequest> keep = std::move(g.requests);
        keep.clear();
        g = Group{};
        g.requests = std::move(keep);
        return g;
    }
    void popFront()
    {
        head = (head + 1) % ring.size();
        ++first;
    }

    void advanceFinished()
    {
        const Ticket before = finishedUpTo;
        while (finishedUpTo < next) {
            const Group& g = at(finishedUpTo);
            if (g.inflight > 0 || !g.allIssued()) break;
            ++finishedUpTo;
        }
        if (finishedUpTo != before) finished.notify_all();
    }
};

DirectReader::DirectReader(const DirectReaderOptions& o)
    : m_options(o), m_stream(std::make_unique<Stream>())
{
}

DirectReader::~DirectReader() = default;  // the engine has stopped and joined its threads

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
        if (auto ring = detail::createIoUringReader(o)) return ring;
    }
    return detail::createThreadPoolReader(o);
}

const char* DirectReader::engine() const { return usesIoUring() ? "io_uring" : "pread threads"; }

Status DirectReader::read(const DirectFile& file, uint64_t offset, size_t bytes, void* dst)
{
    const ReadRequest r{offset, bytes, dst};
    return readBatch(file, {&r, 1});
}

Status DirectReader::readBatch(const DirectFile& file, std::span<const ReadRequest> requests)
{
    return wait(enqueue(file, requests));
}

namespace {

// Checks every request, zero-fills the parts past the end of the file, and leaves in
// `requests` only the parts to read (none empty).
Status prepare(const DirectFile& file, std::vector<ReadRequest>& requests)
{
    if (file.fd() < 0) return makeError(ErrorCode::InvalidArgument, "direct reader: file is not open");
    for (const ReadRequest& r : requests) {
        if (r.bytes == 0) continue;
        if (!r.dst) return makeError(ErrorCode::InvalidArgument, file.path() + ": read into a null buffer");
        if (file.direct() && !(aligned(r.offset) && aligned(r.bytes) && aligned(uintptr_t(r.dst))))
            return makeError(ErrorCode::InvalidArgument,
                             file.path() + ": direct read at offset " + std::to_string(r.offset) +
                                 " of " + std::to_string(r.bytes) +
                                 " bytes: offset, length and buffer must be 4096-byte aligned");
    }
    // Requests end at the file's end (its aligned end for a direct file); the rest is zeros.
    const uint64_t size = file.size();
    const uint64_t readableEnd = file.direct() ? alignUp(size, kDirectIoAlignment) : size;
    for (ReadRequest& r : requests) {
        if (r.bytes == 0) continue;
        const uint64_t end = r.offset + r.bytes;
        const uint64_t inFileEnd = std::clamp(readableEnd, r.offset, end);
        if (inFileEnd < end)
            std::memset(static_cast<uint8_t*>(r.dst) + (inFileEnd - r.offset), 0,
                        size_t(end - inFileEnd));
        r.bytes = size_t(inFileEnd - r.offset);
    }
    std::erase_if(requests, [](const ReadRequest& r) { return r.bytes == 0; });
    return {};
}

}  // namespace

DirectReader::Ticket DirectReader::enqueue(const DirectFile& file, std::span<const ReadRequest> requests)
{
    Ticket ticket = 0;
    {
        std::lock_guard lock(m_mutex);
        Stream& s = *m_stream;
        Stream::Group& g = s.push();
        ticket = s.next++;
        g.file = &file;
        g.requests.assign(requests.begin(), requests.end());
        Status valid = prepare(file, g.requests);
        if (!valid) g.status = std::move(valid);
        else if (s.broken) g.status = s.brokenError;
        else if (m_stopping)
            g.status = makeError(ErrorCode::Cancelled, file.path() + ": read cancelled: reader destroyed");
        g.failed = !g.status.ok();
        s.advanceFinished();  // a failed or empty group finishes at once (after those before it)
    }
    wakeEngine();
    return ticket;
}

Status DirectReader::wait(Ticket ticket)
{
    std::unique_lock lock(m_mutex);
    Stream& s = *m_stream;
    if (ticket < s.first || ticket >= s.next || s.at(ticket).waited)
        return makeError(ErrorCode::InvalidArgument, "direct reader: unknown ticket " + std::to_string(ticket));
    s.finished.wait(lock, [&] { return ticket < s.finishedUpTo; });
    Stream::Group& g = s.at(ticket);
    g.waited = true;
    Status status = std::move(g.status);
    while (s.size() > 0 && s.at(s.first).waited) s.popFront();
    return status;
}

bool DirectReader::takeChunk(Chunk& c)
{
    Stream& s = *m_stream;
    if (m_stopping) return false;
    for (s.issueAt = std::max(s.issueAt, s.first); s.issueAt < s.next; ++s.issueAt) {
        Stream::Group& g = s.at(s.issueAt);
        if (g.allIssued()) continue;
        const ReadRequest& r = g.requests[g.nextRequest];
        const size_t n = size_t(std::min<uint64_t>(m_options.chunkBytes, r.bytes - g.nextOffset));
        c = Chunk{r.offset + g.nextOffset, n, static_cast<uint8_t*>(r.dst) + g.nextOffset, g.file, s.issueAt};
        g.nextOffset += n;
        if (g.nextOffset == r.bytes) {
            ++g.nextRequest;
            g.nextOffset = 0;
        }
        ++g.inflight;
        return true;
    }
    return false;
}

void DirectReader::finishChunk(Ticket ticket, Error* error)
{
    Stream& s = *m_stream;
    Stream::Group& g = s.at(ticket);
    --g.inflight;
    if (error && !g.failed) {
        g.failed = true;  // the rest of this group is not read; other groups go on
        g.status = std::move(*error);
    }
    s.advanceFinished();
}

void DirectReader::failStream(const Error& error)
{
    Stream& s = *m_stream;
    s.broken = true;
    s.brokenError = error;
    for (Ticket t = s.finishedUpTo; t < s.next; ++t) {
        Stream::Group& g = s.at(t);
        if (!g.allIssued()) {
            g.failed = true;
            g.status = error;
        }
    }
    s.advanceFinished();
}

void DirectReader::stopStream()
{
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping) return;
        m_stopping = true;
        Stream& s = *m_stream;
        for (Ticket t = s.finishedUpTo; t < s.next; ++t) {
            Stream::Group& g = s.at(t);
            if (!g.allIssued()) {
                g.failed = true;
                g.status = makeError(ErrorCode::Cancelled,
                                     g.file->path() + ": read cancelled: reader destroyed");
            }
        }
        s.advanceFinished();
    }
    wakeEngine();
}

}  // namespace spillway::storage
