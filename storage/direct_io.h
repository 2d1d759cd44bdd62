#pragma once
// Direct (O_DIRECT) reads of model shards: SSD -> caller's memory with no page-cache copy.
//
// Why large, parallel reads: an NVMe SSD reaches its bandwidth only with big requests and many of
// them in flight ("LLM in a flash", §2.2). DirectReader splits a range into `chunkBytes`
// requests and keeps `queueDepth` of them in flight, through io_uring where the kernel allows it,
// else through a pool of reader threads doing pread.
//
// Direct reads need the file offset, the length and the destination address 4096-byte aligned.
// alignRange() turns any byte range into the smallest aligned range that holds it; read that and
// use the bytes from `skip` on. Where the filesystem refuses O_DIRECT, DirectFile falls back to
// buffered reads (no alignment needed) and tells the page cache not to keep what was read.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway::storage {

inline constexpr size_t kDirectIoAlignment = 4096;  // bytes; offset, length and address

// The smallest `alignment`-aligned superset of [offset, offset + bytes): read `bytes` bytes at
// `offset`, and the wanted bytes start at `skip` in what was read.
struct AlignedRange {
    uint64_t offset = 0;
    size_t bytes = 0;
    size_t skip = 0;
};
AlignedRange alignRange(uint64_t offset, size_t bytes, size_t alignment = kDirectIoAlignment);

// A file opened read-only for direct reads. Move-only; closes itself.
class DirectFile {
public:
    // Opens with O_DIRECT, or buffered where the filesystem refuses O_DIRECT (open fails with
    // EINVAL, or the first aligned read does). Errors: missing file, no permission, a folder ->
    // ErrorCode::Io naming the path and the reason.
    static Result<DirectFile> open(const std::string& path);
    // Always buffered (page cache), never O_DIRECT: for comparisons and tests.
    static Result<DirectFile> openBuffered(const std::string& path);

    DirectFile(DirectFile&& other) noexcept;
    DirectFile& operator=(DirectFile&& other) noexcept;
    DirectFile(const DirectFile&) = delete;
    DirectFile& operator=(const DirectFile&) = delete;
    ~DirectFile();

    bool direct() const { return m_direct; }  // O_DIRECT in effect (reads must be aligned)
    uint64_t size() const { return m_size; }  // bytes, at open time
    int fd() const { return m_fd; }
    const std::string& path() const { return m_path; }

private:
    DirectFile(std::string path, int fd, bool direct, uint64_t size)
        : m_path(std::move(path)), m_fd(fd), m_direct(direct), m_size(size) {}
    static Result<DirectFile> openImpl(const std::string& path, bool tryDirect);
    void close();
    std::string m_path;
    int m_fd = -1;
    bool m_direct = false;
    uint64_t m_size = 0;
};

struct DirectReaderOptions {
    int queueDepth = 8;              // requests in flight (io_uring entries, or reader threads)
    size_t chunkBytes = size_t{1} << 20;  // bytes per request; a multiple of 4096, <= 1 GiB
    bool forceThreadPool = false;    // skip io_uring (tests; comparisons)
};

// One read of a batch: `bytes` bytes at file `offset` into `dst`.
struct ReadRequest {
    uint64_t offset = 0;
    size_t bytes = 0;
    void* dst = nullptr;
};

// Reads ranges of DirectFiles, `queueDepth` requests deep.
//
// Every read goes through one stream per reader: callers enqueue groups of requests (a ticket
// each), and the reader's engine keeps up to `queueDepth` chunks in flight across all of them,
// taking the next group's chunks as soon as the previous group has none left to issue. So a
// prefetcher that enqueues layer L+1 while L is still being read never lets the queue drain at
// a layer boundary. Tickets finish in the order they were enqueued.
//
// Thread safety: every method may be called from any thread, and from several at once; the
// groups of all callers share the one queue, in the order they were enqueued.
class DirectReader {
public:
    // Uses io_uring unless options.forceThreadPool, or io_uring_queue_init fails (old kernel,
    // seccomp, gVisor) or the kernel lacks IORING_OP_READ: then `queueDepth` pread threads.
    // InvalidArgument for queueDepth outside [1, 1024] or chunkBytes not a multiple of 4096 in
    // (0, 1 GiB].
    static Result<std::unique_ptr<DirectReader>> create(const DirectReaderOptions& options);
    // Waits for every read in flight; groups not yet started fail with ErrorCode::Cancelled.
    // Do not call wait() while (or after) the reader is destroyed.
    virtual ~DirectReader();

    const char* engine() const;  // "io_uring" or "pread threads"
    const DirectReaderOptions& options() const { return m_options; }

    // Reads [offset, offset + bytes) of `file` into `dst`; returns when all of it is there.
    // For a direct file, offset, bytes and dst must be 4096-aligned (else InvalidArgument).
    // Bytes past the end of the file read as zeros. Short reads are resumed, EINTR/EAGAIN
    // retried; a failing read (EIO, ...) -> ErrorCode::Io naming the file and the offset, after
    // every request still in flight has finished (dst is not written after the call returns).
    Status read(const DirectFile& file, uint64_t offset, size_t bytes, void* dst);

    // The same for several ranges at once, all kept in flight together (random reads, or the
    // tensors of one layer). Each request follows the rules of read().
    Status readBatch(const DirectFile& file, std::span<const ReadRequest> requests);

    // Streaming form (the prefetcher enqueues layer L+1, L+2, ... while L is read): enqueue()
    // queues a group and returns at once; its chunks join the running queue behind those of
    // earlier groups. `file` and every dst must stay valid until wait(ticket) returns (or the
    // reader is destroyed). wait() blocks until the group is read and returns its status (as
    // readBatch would: a failed chunk fails its own ticket only, after that ticket's reads in
    // flight have finished). Wait for each ticket once, in any order (an unknown or already
    // waited ticket -> InvalidArgument). Tickets are never 0.
    using Ticket = uint64_t;
    // The requests are copied into storage the reader keeps and reuses: once warm, a steady
    // stream of enqueue()/wait() (and readBatch()) allocates nothing.
    Ticket enqueue(const DirectFile& file, std::span<const ReadRequest> requests);
    Ticket enqueue(const DirectFile& file, std::initializer_list<ReadRequest> requests)
    {
        return enqueue(file, std::span<const ReadRequest>(requests.begin(), requests.size()));
    }
    Status wait(Ticket ticket);

protected:
    // One request of at most chunkBytes, as an engine reads it.
    struct Chunk {
        uint64_t offset = 0;  // file offset
        size_t bytes = 0;     // request length (aligned for a direct file)
        uint8_t* dst = nullptr;
        const DirectFile* file = nullptr;
        Ticket ticket = 0;
    };
    explicit DirectReader(const DirectReaderOptions& o);

    // The engine's side of the stream; both need m_mutex held. takeChunk() gives the next chunk
    // to read, in ticket order (false: none now, or stopping). finishChunk() reports one read
    // chunk: error == nullptr for success, else it fails the chunk's ticket.
    bool takeChunk(Chunk& chunk);
    void finishChunk(Ticket ticket, Error* error);
    // The engine can read no more (io_uring broke): every group not yet read fails with `error`,
    // and so does every later enqueue().
    void failStream(const Error& error);
    // Engines call it first thing in their destructor, then join their threads: no new chunk
    // is handed out, and groups not yet started are cancelled.
    void stopStream();
    // Work arrived, or stopStream() was called: the engine should look (called without m_mutex).
    virtual void wakeEngine() = 0;
    virtual bool usesIoUring() const = 0;

    DirectReaderOptions m_options;
    std::mutex m_mutex;      // guards the stream (and the engines' own waiting)
    bool m_stopping = false;

private:
    struct Stream;
    std::unique_ptr<Stream> m_stream;
};

}  // namespace spillway::storage
