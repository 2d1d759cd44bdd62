#include "storage/atomic_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace spillway::storage {

namespace {
std::string parentDir(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}
}  // namespace

Result<AtomicFile> AtomicFile::create(const std::string& path, unsigned mode)
{
    std::string tmpl = path + ".partial-XXXXXX";
    const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        return makeError(e == ENOSPC ? ErrorCode::DiskFull : ErrorCode::Io,
                         path + ": cannot create: " + std::strerror(e));
    }
    ::fchmod(fd, mode_t(mode));
    return AtomicFile(path, tmpl, fd);
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : m_path(std::move(o.m_path)), m_tmpPath(std::move(o.m_tmpPath)), m_fd(o.m_fd),
      m_written(o.m_written), m_committed(o.m_committed)
{
    o.m_fd = -1;
    o.m_committed = true;  // the moved-from object owns nothing to clean up
}

AtomicFile::~AtomicFile()
{
    if (m_fd >= 0) ::close(m_fd);
    if (!m_committed && !m_tmpPath.empty()) ::unlink(m_tmpPath.c_str());
}

Error AtomicFile::ioError(const char* what, int err) const
{
    return makeError(err == ENOSPC || err == EDQUOT ? ErrorCode::DiskFull : ErrorCode::Io,
                     m_path + ": " + what + ": " + std::strerror(err));
}

Status AtomicFile::write(const void* data, size_t bytes)
{
    const auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(m_fd, p, bytes);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ioError("write failed", errno);
        }
        p += n;
        bytes -= static_cast<size_t>(n);
        m_written += static_cast<uint64_t>(n);
    }
    return {};
}

Status AtomicFile::writeZeros(size_t bytes)
{
    static const uint8_t zeros[4096] = {};
    while (bytes > 0) {
        const size_t n = bytes < sizeof zeros ? bytes : sizeof zeros;
        SPILLWAY_TRY(write(zeros, n));
        bytes -= n;
    }
    return {};
}

Status AtomicFile::commit()
{
    if (::fsync(m_fd) != 0) return ioError("fsync failed", errno);
    if (::close(m_fd) != 0) {
        m_fd = -1;
        return ioError("close failed", errno);
    }
    m_fd = -1;
    if (::rename(m_tmpPath.c_str(), m_path.c_str()) != 0) return ioError("rename failed", errno);
    m_committed = true;
    const int dir = ::open(parentDir(m_path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
    return {};
}

}  // namespace spillway::storage
