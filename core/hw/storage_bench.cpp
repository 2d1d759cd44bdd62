// SSD read bandwidth where the models live: sequential sweeps (1 and 4 MiB requests) and 32 KiB
// random reads at several queue depths, through DirectReader on a temporary test file that the
// page cache does not hold (written with O_DIRECT, fsync'd, then dropped with fadvise).

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/hw/measure.h"
#include "storage/direct_io.h"

namespace spillway::hw::detail {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string mib(uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

// 4096-aligned heap memory.
struct AlignedMemory {
    explicit AlignedMemory(size_t bytes) : size(bytes), data(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes))) {}
    ~AlignedMemory() { std::free(data); }
    AlignedMemory(const AlignedMemory&) = delete;
    AlignedMemory& operator=(const AlignedMemory&) = delete;
    size_t size;
    uint8_t* data;
};

// The test file: unlinked right after it is created, so nothing is left behind whatever happens
// (error, exception, Ctrl-C, crash); its blocks are freed when the last descriptor closes.
class TestFile {
public:
    static Result<TestFile> create(const std::string& folder)
    {
        std::string name = folder + "/.spillway-probe-XXXXXX";
        const int fd = ::mkostemp(name.data(), O_CLOEXEC);
        if (fd < 0) {
            const int e = errno;
            return makeError(e == ENOSPC || e == EDQUOT ? ErrorCode::DiskFull : ErrorCode::Io,
                             folder + ": cannot create the probe's test file: " + std::strerror(e));
        }
        ::unlink(name.c_str());
        TestFile f;
        f.m_fd = fd;
        // Reopen through the descriptor's /proc link (works on the unlinked file) for O_DIRECT
        // writes; where that is refused, write through the page cache and drop it afterwards.
        f.m_directFd = ::open(f.procPath().c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
        return f;
    }
    TestFile(TestFile&& o) noexcept : m_fd(o.m_fd), m_directFd(o.m_directFd) { o.m_fd = o.m_directFd = -1; }
    TestFile& operator=(TestFile&&) = delete;
    ~TestFile()
    {
        if (m_directFd >= 0) ::close(m_directFd);
        if (m_fd >= 0) ::close(m_fd);
    }

    std::string procPath() const { return "/proc/self/fd/" + std::to_string(m_fd); }

    // `bytes` (a multiple of 4 MiB) of random, never-zero data, flushed to the disk.
    Status fill(uint64_t bytes, const std::string& folder)
    {
        auto fail = [&](const char* what, int e) {
            return makeError(e == ENOSPC || e == EDQUOT ? ErrorCode::DiskFull : ErrorCode::Io,
                             folder + ": probe test file: " + what + ": " + std::strerror(e));
        };
        // Reserve the space first: a full disk fails here, before minutes of writing.
        if (const int e = ::posix_fallocate(m_fd, 0, off_t(bytes)); e == ENOSPC || e == EDQUOT)
            return fail("cannot reserve space", e);
        constexpr size_t kBlock = 4 * kMiB;
        AlignedMemory buf(kBlock);
        if (!buf.data) return makeError(ErrorCode::OutOfMemory, "probe: out of memory");
        std::mt19937_64 rng(0x5eed);
        for (size_t i = 0; i < kBlock; i += 8) {
            const uint64_t r = rng() | 1;
            std::memcpy(buf.data + i, &r, 8);
        }
        const int fd = m_directFd >= 0 ? m_directFd : m_fd;
        for (uint64_t at = 0; at < bytes; at += kBlock) {
            // Every 4 KiB block distinct, so no deduplicating or compressing layer shrinks it.
            for (size_t p = 0; p < kBlock; p += 4096) {
                const uint64_t stamp = (at + p) | 1;
                std::memcpy(buf.data + p, &stamp, 8);
            }
            size_t done = 0;
            while (done < kBlock) {
                const ssize_t n = ::pwrite(fd, buf.data + done, kBlock - done, off_t(at + done));
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EINVAL && fd == m_directFd) return fillBuffered(bytes, folder);
                if (n <= 0) return fail("write failed", n < 0 ? errno : EIO);
                done += size_t(n);
            }
        }
        if (::fsync(m_fd) != 0) return fail("fsync failed", errno);
        ::posix_fadvise(m_fd, 0, 0, POSIX_FADV_DONTNEED);
        return {};
    }

private:
    TestFile() = default;
    Status fillBuffered(uint64_t bytes, const std::string& folder)
    {
        ::close(m_directFd);
        m_directFd = -1;
        return fill(bytes, folder);
    }
    int m_fd = -1;
    int m_directFd = -1;
};

// Reads with `reader` for about `seconds`: sequential passes over the file (wrapping around),
// or random requests. Returns bytes/s and requests/s.
ReadBandwidth timeSequential(storage::DirectReader& reader, const storage::DirectFile& file,
                             AlignedMemory& dst, double seconds)
{
    const auto& o = reader.options();
    const uint64_t fileBytes = file.size() / o.chunkBytes * o.chunkBytes;
    // One call reads `batch` bytes as 16 MiB requests split into chunkBytes reads kept
    // queueDepth deep; the requests land in dst over and over (the data is not looked at).
    const uint64_t slice = std::min<uint64_t>(dst.size, 16 * kMiB);
    const uint64_t batch = std::min<uint64_t>(
        fileBytes, std::clamp<uint64_t>(uint64_t(o.queueDepth) * o.chunkBytes * 8, 16 * kMiB, 256 * kMiB));
    std::vector<storage::ReadRequest> reqs;
    uint64_t pos = 0, bytes = 0;
    const double t0 = nowSeconds();
    double elapsed = 0;
    do {
        reqs.clear();
        for (uint64_t done = 0; done < batch;) {
            if (pos >= fileBytes) pos = 0;
            const uint64_t n = std::min({slice, batch - done, fileBytes - pos});
            reqs.push_back({pos, size_t(n), dst.data + (reqs.size() % (dst.size / slice)) * slice});
            pos += n;
            done += n;
        }
        if (!reader.readBatch(file, reqs).ok()) return {};
        bytes += batch;
        elapsed = nowSeconds() - t0;
    } while (elapsed < seconds);
    return ReadBandwidth{o.queueDepth, o.chunkBytes, double(bytes) / elapsed,
                         double(bytes) / double(o.chunkBytes) / elapsed};
}

ReadBandwidth timeRandom(storage::DirectReader& reader, const storage::DirectFile& file,
                         AlignedMemory& dst, size_t requestBytes, double seconds, uint64_t seed)
{
    const int depth = reader.options().queueDepth;
    const uint64_t slots = file.size() / requestBytes;
    const size_t dstSlots = dst.size / requestBytes;
    std::mt19937_64 rng(seed);
    std::vector<storage::ReadRequest> reqs(size_t(depth) * 16);
    uint64_t count = 0;
    const double t0 = nowSeconds();
    double elapsed = 0;
    do {
        for (size_t i = 0; i < reqs.size(); ++i)
            reqs[i] = {rng() % slots * requestBytes, requestBytes, dst.data + (i % dstSlots) * requestBytes};
        if (!reader.readBatch(file, reqs).ok()) return {};
        count += reqs.size();
        elapsed = nowSeconds() - t0;
    } while (elapsed < seconds);
    return ReadBandwidth{depth, requestBytes, double(count * requestBytes) / elapsed, double(count) / elapsed};
}

}  // namespace

double nowSeconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string describeFilesystem(const std::string& folder)
{
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0) return "";
    std::error_code ec;
    const std::string canonical = std::filesystem::weakly_canonical(folder, ec).string();
    const std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    std::ifstream in("/proc/self/mountinfo");
    std::string line, best;
    size_t bestLen = 0;
    // "36 35 98:0 /root /mnt rw,noatime master:1 - ext4 /dev/vda rw": fields, then "-", type, source.
    while (std::getline(in, line)) {
        std::istringstream s(line);
        std::string id, parent, majmin, root, mountPoint, field, type, source;
        s >> id >> parent >> majmin >> root >> mountPoint;
        while (s >> field && field != "-") {}
        s >> type >> source;
        if (majmin != dev) continue;
        const bool under = canonical.compare(0, mountPoint.size(), mountPoint) == 0;
        if (!best.empty() && !(under && mountPoint.size() >= bestLen)) continue;
        best = type + " on " + source;
        bestLen = under ? mountPoint.size() : 0;
    }
    return best;
}

Result<StorageProfile> measureStorage(const std::string& folder, uint64_t fileBytes, bool quick,
                                      std::vector<Spread>* spreads)
{
    StorageProfile p;
    p.path = folder;
    p.filesystem = describeFilesystem(folder);
    struct statvfs vfs {};
    if (::statvfs(folder.c_str(), &vfs) != 0)
        return makeError(ErrorCode::Io, folder + ": cannot read the free space: " + std::strerror(errno));
    p.totalBytes = uint64_t(vfs.f_blocks) * vfs.f_frsize;
    p.freeBytes = uint64_t(vfs.f_bavail) * vfs.f_frsize;

    // Test file size: asked for, or 64 MiB (quick), or min(1 GiB, 5% of free space); whole
    // 4 MiB blocks. It must leave 64 MiB free besides.
    const uint64_t reserve = 64 * kMiB;
    uint64_t bytes = fileBytes ? fileBytes : quick ? 64 * kMiB : std::min<uint64_t>(1024 * kMiB, p.freeBytes / 20);
    bytes = std::max<uint64_t>(bytes / (4 * kMiB) * (4 * kMiB), 4 * kMiB);
    if ((!fileBytes && !quick && bytes < 64 * kMiB) || p.freeBytes < bytes + reserve)
        return makeError(ErrorCode::DiskFull,
                         folder + ": not enough free space to measure the disk (the probe writes a " +
                             mib(std::max<uint64_t>(bytes, 64 * kMiB)) +
                             " test file and leaves 64 MiB free; " + mib(p.freeBytes) + " free)");
    p.testFileBytes = bytes;

    auto test = TestFile::create(folder);
    if (!test) return test.error();
    SPILLWAY_TRY(test->fill(bytes, folder));
    auto file = storage::DirectFile::open(test->procPath());
    if (!file) return file.error();
    p.directIo = file->direct();

    const double seqSeconds = quick ? 0.04 : 0.5;
    const double randSeconds = quick ? 0.04 : 0.5;
    AlignedMemory dst(quick ? 16 * kMiB : 64 * kMiB);
    if (!dst.data) return makeError(ErrorCode::OutOfMemory, "probe: out of memory");
    std::vector<size_t> requestSizes{kMiB};
    if (!quick) requestSizes.push_back(4 * kMiB);
    for (size_t request : requestSizes) {
        for (int depth : {1, 4, 16, 32}) {
            auto reader = storage::DirectReader::create({depth, request, false});
            if (!reader) return reader.error();
            p.ioEngine = (*reader)->engine();
            ReadBandwidth r = timeSequential(**reader, *file, dst, seqSeconds);
            if (r.bytesPerSecond <= 0)
                return makeError(ErrorCode::Io, folder + ": reading the probe's test file failed");
            p.sequential.push_back(r);
        }
    }
    // The best configuration read twice more: the three runs' median is the figure, and their
    // spread says whether something else used the disk meanwhile.
    const ReadBandwidth best = *std::max_element(p.sequential.begin(), p.sequential.end(),
        [](const ReadBandwidth& a, const ReadBandwidth& b) { return a.bytesPerSecond < b.bytesPerSecond; });
    std::vector<double> repeats{best.bytesPerSecond};
    for (int again = 0; again < 2; ++again) {
        auto reader = storage::DirectReader::create({best.queueDepth, best.requestBytes, false});
        if (!reader) return reader.error();
        const ReadBandwidth r = timeSequential(**reader, *file, dst, seqSeconds);
        if (r.bytesPerSecond <= 0) return makeError(ErrorCode::Io, folder + ": reading the probe's test file failed");
        repeats.push_back(r.bytesPerSecond);
    }
    const Spread seq = spreadOf("disk sequential reads", repeats);
    p.sequentialBytesPerSecond = seq.median;
    if (spreads) spreads->push_back(seq);
    for (int depth : {1, 4, 16, 64}) {
        auto reader = storage::DirectReader::create({depth, 32 << 10, false});
        if (!reader) return reader.error();
        ReadBandwidth r = timeRandom(**reader, *file, dst, 32 << 10, randSeconds, uint64_t(depth));
        if (r.bytesPerSecond <= 0)
            return makeError(ErrorCode::Io, folder + ": reading the probe's test file failed");
        p.random32k.push_back(r);
    }
    return p;
}

}  // namespace spillway::hw::detail
