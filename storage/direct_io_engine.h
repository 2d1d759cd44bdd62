#pragma once
// Internal to storage/direct_io*.cpp: what the two read engines (io_uring, pread threads) share.
// Each engine is a DirectReader that takes chunks from the reader's stream, reads them and
// reports them back; direct_io.cpp owns the stream and picks the engine.

#include <cstdint>
#include <memory>

#include "storage/direct_io.h"

namespace spillway::storage::detail {

// A request that keeps failing with EINTR/EAGAIN, or returning nothing but partial blocks, is
// given up after this many attempts rather than spinning for ever.
inline constexpr int kMaxRetries = 1000;

// Progress of one chunk across (possibly several) read calls.
struct ChunkState {
    uint64_t offset = 0;
    size_t bytes = 0;
    uint8_t* dst = nullptr;
    size_t done = 0;
    int retries = 0;
};

enum class Step { Done, Again, Failed };

// Applies one read result (bytes read, or -errno) to a chunk: finished, issue the rest, or
// failed (then `error` names the file and the offset).
Step advance(ChunkState& s, long long res, const DirectFile& f, Error& error);

// A buffered file is being streamed into our own memory: the page cache need not keep it.
void dropFromPageCache(const DirectFile& f, const ChunkState& s);

// nullptr where io_uring is unavailable (old kernel, seccomp, gVisor, no IORING_OP_READ).
std::unique_ptr<DirectReader> createIoUringReader(const DirectReaderOptions& o);
std::unique_ptr<DirectReader> createThreadPoolReader(const DirectReaderOptions& o);

}  // namespace spillway::storage::detail
