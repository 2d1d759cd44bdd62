#include "storage/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace spillway::storage {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return makeError(ErrorCode::Io, path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return makeError(ErrorCode::Io, path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(ErrorCode::Io, path + ": not a regular file");
    }
    auto file = std::unique_ptr<MappedFile>(new MappedFile());
    file->m_path = path;
    file->m_size = static_cast<uint64_t>(st.st_size);
    if (file->m_size > 0) {
        void* p = ::mmap(nullptr, file->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            return makeError(ErrorCode::Io, path + ": cannot map: " + std::strerror(e));
        }
        file->m_data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
    return file;
}

MappedFile::~MappedFile()
{
    if (m_data) ::munmap(const_cast<uint8_t*>(m_data), m_size);
}

void MappedFile::prefetch(uint64_t offset, uint64_t bytes) const
{
    if (!m_data || offset >= m_size) return;
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset & ~(page - 1);
    const uint64_t end = std::min(m_size, offset + bytes);
    ::madvise(const_cast<uint8_t*>(m_data) + start, end - start, MADV_WILLNEED);
}

}  // namespace spillway::storage
