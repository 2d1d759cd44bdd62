// Package: opens, validates, maps and verifies a model package folder.

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "storage/mapped_file.h"
#include "storage/package.h"
#include "storage/package_manifest.h"

namespace spillway::storage {

namespace {

constexpr uint64_t kMaxManifestBytes = uint64_t{512} << 20;  // tokenizers are a few MB
constexpr size_t kHashChunkBytes = size_t{64} << 20;         // progress and cancel granularity

Result<std::string> readManifestText(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        return makeError(e == ENOENT ? ErrorCode::ModelFileInvalid : ErrorCode::Io,
                         path + ": cannot open: " + std::strerror(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(ErrorCode::ModelFileInvalid, path + ": not a regular file");
    }
    if (uint64_t(st.st_size) > kMaxManifestBytes) {
        ::close(fd);
        return makeError(ErrorCode::ModelFileInvalid,
                         path + ": " + std::to_string(st.st_size) +
                             " bytes, more than a manifest");
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = n < 0 ? errno : 0;
            ::close(fd);
            return makeError(ErrorCode::Io, path + ": read failed: " +
                                                (e ? std::strerror(e) : "file shrank"));
        }
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    return text;
}

std::string hex64(uint64_t v)
{
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

}  // namespace

Package::Package(Package&&) noexcept = default;
Package& Package::operator=(Package&&) noexcept = default;
Package::~Package() = default;

std::string Package::shardPath(uint32_t shard) const
{
    return m_dir + "/" + packageShardFileName(shard);
}

const PackageTensor* Package::find(const std::string& name) const
{
    for (const PackageTensor& t : m_manifest.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

Result<Package> Package::open(const std::string& dirIn)
{
    Package pkg;
    pkg.m_dir = dirIn;
    while (pkg.m_dir.size() > 1 && pkg.m_dir.back() == '/') pkg.m_dir.pop_back();
    const std::string manifestPath = pkg.m_dir + "/manifest.json";
    auto text = readManifestText(manifestPath);
    if (!text) return text.error();
    auto manifest = parseManifest(*text, manifestPath);
    if (!manifest) return manifest.error();
    pkg.m_manifest = std::move(*manifest);
    SPILLWAY_TRY(checkManifestLayout(pkg.m_manifest, manifestPath));

    for (uint32_t i = 0; i < pkg.m_manifest.shardSizes.size(); ++i) {
        const std::string path = pkg.shardPath(i);
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) {
            const int e = errno;
            return makeError(e == ENOENT ? ErrorCode::ModelFileInvalid : ErrorCode::Io,
                             path + ": shard listed in " + manifestPath + ": " + std::strerror(e));
        }
        auto mapped = MappedFile::open(path);
        if (!mapped) return mapped.error();
        const uint64_t expected = pkg.m_manifest.shardSizes[i];
        if ((*mapped)->size() != expected)
            return makeError(ErrorCode::ModelFileInvalid,
                             path + ": " + std::to_string((*mapped)->size()) + " bytes, " +
                                 manifestPath + " says " + std::to_string(expected));
        pkg.m_shards.push_back(std::move(*mapped));
    }
    return pkg;
}

Result<std::span<const uint8_t>> Package::map(const PackageTensor& t) const
{
    if (t.shard >= m_shards.size())
        return makeError(ErrorCode::InvalidArgument,
                         m_dir + ": tensor '" + t.name + "': no shard " + std::to_string(t.shard));
    const MappedFile& f = *m_shards[t.shard];
    if (t.offset > f.size() || t.bytes > f.size() - t.offset)
        return makeError(ErrorCode::InvalidArgument,
                         m_dir + ": tensor '" + t.name + "': passes the end of " + f.path());
    if (t.bytes == 0) return std::span<const uint8_t>();
    return std::span<const uint8_t>(f.data() + t.offset, static_cast<size_t>(t.bytes));
}

Status Package::verifyTensor(const PackageTensor& t) const
{
    auto data = map(t);
    if (!data) return data.error();
    const uint64_t sum = XXH3_64bits(data->data(), data->size());
    if (sum != t.xxh3)
        return makeError(ErrorCode::ModelFileInvalid,
                         shardPath(t.shard) + ": tensor '" + t.name + "' (offset " +
                             std::to_string(t.offset) + ", " + std::to_string(t.bytes) +
                             " bytes): checksum mismatch (manifest " + hex64(t.xxh3) +
                             ", data " + hex64(sum) + ")");
    return {};
}

Status Package::verify(const PackageProgressFn& progress) const
{
    const auto start = std::chrono::steady_clock::now();
    PackageProgress p;
    for (const PackageTensor& t : m_manifest.tensors) p.bytesTotal += t.bytes;

    XXH3_state_t* state = XXH3_createState();
    if (!state) return makeError(ErrorCode::OutOfMemory, m_dir + ": cannot allocate hash state");
    struct StateFree {
        XXH3_state_t* s;
        ~StateFree() { XXH3_freeState(s); }
    } stateFree{state};

    for (const PackageTensor& t : m_manifest.tensors) {
        auto data = map(t);
        if (!data) return data.error();
        // Hashed in chunks so that progress moves and a cancel is seen within one chunk.
        XXH3_64bits_reset(state);
        size_t done = 0;
        do {
            const size_t n = std::min(kHashChunkBytes, data->size() - done);
            XXH3_64bits_update(state, data->data() + done, n);
            done += n;
            p.bytesDone += n;
            if (progress) {
                const auto elapsed = std::chrono::steady_clock::now() - start;
                p.secondsElapsed = std::chrono::duration<double>(elapsed).count();
                p.etaSeconds = p.bytesDone == 0 ? -1.0
                                                : p.secondsElapsed / double(p.bytesDone) *
                                                      double(p.bytesTotal - p.bytesDone);
                p.currentTensor = t.name;
                if (!progress(p))
                    return makeError(ErrorCode::Cancelled, m_dir + ": verification cancelled");
            }
        } while (done < data->size());
        if (XXH3_64bits_digest(state) != t.xxh3) return verifyTensor(t);  // names the tensor
    }
    return {};
}

}  // namespace spillway::storage
