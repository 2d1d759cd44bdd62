#pragma once
// Writes a file so that readers see either the old file or the complete new one: the bytes go to
// a temporary file beside the target, are flushed to disk, and are renamed over the target by
// commit(). Destroying an uncommitted AtomicFile removes the temporary file, so a failure, a full
// disk or a cancel leaves no partial output.

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace spillway::storage {

class AtomicFile {
public:
    // mode: the finished file's permissions (0600: readable by the user alone, from the first byte).
    static Result<AtomicFile> create(const std::string& path, unsigned mode = 0644);
    AtomicFile(AtomicFile&& other) noexcept;
    AtomicFile& operator=(AtomicFile&&) = delete;
    AtomicFile(const AtomicFile&) = delete;
    ~AtomicFile();

    Status write(const void* data, size_t bytes);
    Status writeZeros(size_t bytes);
    uint64_t written() const { return m_written; }
    // fsync, rename over the target, fsync the folder.
    Status commit();

private:
    AtomicFile(std::string path, std::string tmpPath, int fd)
        : m_path(std::move(path)), m_tmpPath(std::move(tmpPath)), m_fd(fd) {}
    Error ioError(const char* what, int err) const;
    std::string m_path;
    std::string m_tmpPath;
    int m_fd = -1;
    uint64_t m_written = 0;
    bool m_committed = false;
};

}  // namespace spillway::storage
