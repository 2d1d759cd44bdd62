#pragma once
// A read-only memory mapping of a whole file. Model weights are used in place from the mapping,
// so opening a multi-gigabyte model costs no copy and no RAM beyond the page cache.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"

namespace spillway::storage {

class MappedFile {
public:
    static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return m_data; }
    uint64_t size() const { return m_size; }
    const std::string& path() const { return m_path; }

    // Hints that [offset, offset + bytes) will be read soon (MADV_WILLNEED).
    void prefetch(uint64_t offset, uint64_t bytes) const;

private:
    MappedFile() = default;
    std::string m_path;
    const uint8_t* m_data = nullptr;
    uint64_t m_size = 0;
};

}  // namespace spillway::storage
