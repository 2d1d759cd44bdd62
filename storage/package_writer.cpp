// PackageWriter: shards and manifest into `<dir>.partial-XXXXXX`, then one atomic rename.

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <unordered_set>
#include <xxhash.h>

#include "storage/package.h"
#include "storage/package_manifest.h"

namespace spillway::storage {

namespace {

constexpr size_t kWriteChunkBytes = size_t{64} << 20;  // progress and cancel granularity

std::string parentDir(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

Error ioError(const std::string& path, const char* what, int err)
{
    return makeError(err == ENOSPC || err == EDQUOT ? ErrorCode::DiskFull : ErrorCode::Io,
                     path + ": " + what + ": " + std::strerror(err));
}

Status writeAll(int fd, const uint8_t* p, size_t bytes, const std::string& path)
{
    while (bytes > 0) {
        const ssize_t n = ::write(fd, p, bytes);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ioError(path, "write failed", errno);
        }
        p += n;
        bytes -= static_cast<size_t>(n);
    }
    return {};
}

Status fsyncPath(const std::string& path, bool directory)
{
    const int flags = O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0);
    const int fd = ::open(path.c_str(), flags);
    if (fd < 0) return ioError(path, "cannot open for fsync", errno);
    const int rc = ::fsync(fd);
    const int e = errno;
    ::close(fd);
    if (rc != 0) return ioError(path, "fsync failed", e);
    return {};
}

// Removes a folder that holds only plain files (what the writer creates).
void removeFlatDir(const std::string& dir)
{
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            ::unlink((dir + "/" + name).c_str());
        }
        ::closedir(d);
    }
    ::rmdir(dir.c_str());
}

uint64_t alignUp(uint64_t v)
{
    return (v + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment;
}

}  // namespace

struct PackageWriter::State {
    std::string finalDir;
    std::string tmpDir;
    PackageWriterOptions options;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::vector<PackageTensor> tensors;
    std::unordered_set<std::string> names;
    std::vector<uint64_t> shardSizes;  // bytes written to each shard (a multiple of 4096)
    int shardFd = -1;                  // the shard being written (the last one)
    uint64_t bytesDone = 0;            // tensor bytes written
    std::vector<uint8_t> fillBuffer;   // reused by addTensor(meta, fill)
    std::optional<Error> failed;       // set once; every later call returns it
    bool sealed = false;               // shards and manifest complete in tmpDir
    bool finished = false;             // renamed to finalDir
    PackageManifest manifest;          // as sealed

    std::string shardPath(size_t i) const
    {
        return tmpDir + "/" + packageShardFileName(static_cast<uint32_t>(i));
    }

    void closeShard()
    {
        if (shardFd >= 0) ::close(shardFd);
        shardFd = -1;
    }

    ~State()
    {
        closeShard();
        if (!finished && !tmpDir.empty()) removeFlatDir(tmpDir);
    }
};

PackageWriter::PackageWriter(std::unique_ptr<State> state) : m_state(std::move(state)) {}
PackageWriter::PackageWriter(PackageWriter&&) noexcept = default;
PackageWriter& PackageWriter::operator=(PackageWriter&&) noexcept = default;
PackageWriter::~PackageWriter() = default;

const std::vector<PackageTensor>& PackageWriter::tensors() const { return m_state->tensors; }
const std::string& PackageWriter::temporaryDir() const { return m_state->tmpDir; }

Result<PackageWriter> PackageWriter::create(const std::string& finalDirIn,
                                            const PackageWriterOptions& options)
{
    std::string finalDir = finalDirIn;
    while (finalDir.size() > 1 && finalDir.back() == '/') finalDir.pop_back();
    if (finalDir.empty())
        return makeError(ErrorCode::InvalidArgument, "package: empty destination path");
    if (options.shardBytes == 0)
        return makeError(ErrorCode::InvalidArgument, finalDir + ": shardBytes must be > 0");
    struct stat st {};
    if (::lstat(finalDir.c_str(), &st) == 0)
        return makeError(ErrorCode::InvalidArgument, finalDir + ": already exists");

    const std::string parent = parentDir(finalDir);
    struct statvfs vfs {};
    if (::statvfs(parent.c_str(), &vfs) != 0) return ioError(parent, "cannot stat", errno);
    const uint64_t freeBytes = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
    if (options.expectedBytes > freeBytes)
        return makeError(ErrorCode::DiskFull,
                         parent + ": not enough free space for " + finalDir + ": needs " +
                             std::to_string(options.expectedBytes) + " bytes, " +
                             std::to_string(freeBytes) + " free");

    auto state = std::make_unique<State>();
    state->finalDir = finalDir;
    state->options = options;
    std::string tmpl = finalDir + ".partial-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return ioError(finalDir, "cannot create temporary folder", errno);
    state->tmpDir = tmpl;
    return PackageWriter(std::move(state));
}

Status PackageWriter::fail(Error error)
{
    State& s = *m_state;
    s.closeShard();
    if (!s.tmpDir.empty()) removeFlatDir(s.tmpDir);
    s.finished = true;  // nothing left to remove
    s.failed = error;
    return error;
}

Status PackageWriter::addTensor(PackageTensor meta,
                                const std::function<Status(uint8_t* dst, size_t bytes)>& fill)
{
    State& s = *m_state;
    if (s.failed) return *s.failed;
    const size_t bytes = static_cast<size_t>(meta.bytes);
    if (s.fillBuffer.size() < bytes) {
        try {
            s.fillBuffer.resize(bytes);
        } catch (const std::bad_alloc&) {
            return fail(makeError(ErrorCode::OutOfMemory,
                                  s.finalDir + ": tensor '" + meta.name + "': cannot allocate " +
                                      std::to_string(bytes) + " bytes"));
        }
    }
    Status filled = fill(s.fillBuffer.data(), bytes);
    if (!filled) return fail(filled.error());
    return addTensor(std::move(meta), std::span<const uint8_t>(s.fillBuffer.data(), bytes));
}

Status PackageWriter::addTensor(PackageTensor meta, std::span<const uint8_t> data)
{
    State& s = *m_state;
    if (s.failed) return *s.failed;
    if (s.finished)
        return makeError(ErrorCode::InvalidArgument, s.finalDir + ": package already finished");
    if (meta.name.empty())
        return fail(makeError(ErrorCode::InvalidArgument, s.finalDir + ": tensor without a name"));
    if (!s.names.insert(meta.name).second)
        return fail(makeError(ErrorCode::InvalidArgument,
                              s.finalDir + ": duplicate tensor name '" + meta.name + "'"));
    meta.bytes = data.size();
    const uint64_t padded = alignUp(meta.bytes);

    // A new shard when this tensor would pass shardBytes (never leave a shard empty).
    if (s.shardFd < 0 || (s.shardSizes.back() > 0 &&
                          s.shardSizes.back() + padded > s.options.shardBytes)) {
        s.closeShard();
        const std::string path = s.shardPath(s.shardSizes.size());
        s.shardFd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (s.shardFd < 0) return fail(ioError(path, "cannot create", errno));
        s.shardSizes.push_back(0);
    }
    const size_t shard = s.shardSizes.size() - 1;
    const std::string path = s.shardPath(shard);
    meta.shard = static_cast<uint32_t>(shard);
    meta.offset = s.shardSizes[shard];
    meta.xxh3 = XXH3_64bits(data.data(), data.size());

    size_t done = 0;
    do {
        const size_t n = std::min(kWriteChunkBytes, data.size() - done);
        Status w = writeAll(s.shardFd, data.data() + done, n, path);
        if (!w) return fail(w.error());
        done += n;
        s.bytesDone += n;
        if (s.options.progress) {
            PackageProgress p;
            p.bytesDone = s.bytesDone;
            p.bytesTotal = s.options.expectedBytes;
            p.secondsElapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                             s.start).count();
            if (p.bytesTotal > 0 && p.bytesDone > 0)
                p.etaSeconds = p.bytesDone >= p.bytesTotal
                                   ? 0.0
                                   : p.secondsElapsed / double(p.bytesDone) *
                                         double(p.bytesTotal - p.bytesDone);
            p.currentTensor = meta.name;
            if (!s.options.progress(p))
                return fail(makeError(ErrorCode::Cancelled, s.finalDir + ": cancelled"));
        }
    } while (done < data.size());

    static const uint8_t zeros[kPackageAlignment] = {};
    Status pad = writeAll(s.shardFd, zeros, padded - meta.bytes, path);
    if (!pad) return fail(pad.error());
    s.shardSizes[shard] += padded;
    s.tensors.push_back(std::move(meta));
    return {};
}

Status PackageWriter::finish(PackageManifest manifest)
{
    SPILLWAY_TRY(seal(std::move(manifest)));
    return publish();
}

Status PackageWriter::seal(PackageManifest manifest)
{
    State& s = *m_state;
    if (s.failed) return *s.failed;
    if (s.finished || s.sealed)
        return makeError(ErrorCode::InvalidArgument, s.finalDir + ": package already sealed");
    if (manifest.tensors.empty()) {
        manifest.tensors = s.tensors;
    } else {
        if (manifest.tensors.size() != s.tensors.size())
            return fail(makeError(ErrorCode::InvalidArgument,
                                  s.finalDir + ": manifest lists " +
                                      std::to_string(manifest.tensors.size()) + " tensors, " +
                                      std::to_string(s.tensors.size()) + " were added"));
        for (size_t i = 0; i < s.tensors.size(); ++i) {
            PackageTensor& t = manifest.tensors[i];
            const PackageTensor& w = s.tensors[i];
            if (t.name != w.name)
                return fail(makeError(ErrorCode::InvalidArgument,
                                      s.finalDir + ": manifest tensor " + std::to_string(i) +
                                          " is '" + t.name + "', added was '" + w.name + "'"));
            t.shard = w.shard;
            t.offset = w.offset;
            t.bytes = w.bytes;
            t.xxh3 = w.xxh3;
        }
    }
    manifest.version = kPackageVersion;
    manifest.shardSizes = s.shardSizes;
    s.closeShard();
    for (size_t i = 0; i < s.shardSizes.size(); ++i) {
        Status st = fsyncPath(s.shardPath(i), false);
        if (!st) return fail(st.error());
    }
    s.manifest = std::move(manifest);
    Status w = writeManifest();
    if (!w) return fail(w.error());
    s.sealed = true;
    return {};
}

// manifest.json.tmp, fsynced, renamed over manifest.json, folder fsynced: a reader sees the old
// manifest or the new one, never a torn one.
Status PackageWriter::writeManifest()
{
    State& s = *m_state;
    auto text = manifestToJson(s.manifest);
    if (!text) return text.error();
    const std::string manifestPath = s.tmpDir + "/manifest.json";
    const std::string tmpPath = manifestPath + ".tmp";
    const int fd = ::open(tmpPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ioError(tmpPath, "cannot create", errno);
    Status w = writeAll(fd, reinterpret_cast<const uint8_t*>(text->data()), text->size(), tmpPath);
    if (w && ::fsync(fd) != 0) w = ioError(tmpPath, "fsync failed", errno);
    ::close(fd);
    if (w && ::rename(tmpPath.c_str(), manifestPath.c_str()) != 0) w = ioError(manifestPath, "cannot rename", errno);
    if (!w) return w;
    return fsyncPath(s.tmpDir, true);
}

Status PackageWriter::setQuality(std::string qualityJson)
{
    State& s = *m_state;
    if (s.failed) return *s.failed;
    if (!s.sealed || s.finished)
        return makeError(ErrorCode::InvalidArgument, s.finalDir + ": setQuality() needs a sealed, unpublished package");
    s.manifest.qualityJson = std::move(qualityJson);
    Status w = writeManifest();
    if (!w) return fail(w.error());
    return {};
}

Status PackageWriter::publish()
{
    State& s = *m_state;
    if (s.failed) return *s.failed;
    if (!s.sealed || s.finished)
        return makeError(ErrorCode::InvalidArgument, s.finalDir + ": publish() needs a sealed, unpublished package");

    // RENAME_NOREPLACE: a plain rename() would replace an existing empty folder.
    if (::renameat2(AT_FDCWD, s.tmpDir.c_str(), AT_FDCWD, s.finalDir.c_str(),
                    RENAME_NOREPLACE) != 0) {
        const int e = errno;
        if (e == EEXIST || e == ENOTEMPTY)
            return fail(makeError(ErrorCode::InvalidArgument, s.finalDir + ": already exists"));
        if (e != EINVAL && e != ENOSYS) return fail(ioError(s.finalDir, "cannot rename", e));
        // The filesystem lacks RENAME_NOREPLACE: check, then rename (a small race remains).
        struct stat st {};
        if (::lstat(s.finalDir.c_str(), &st) == 0)
            return fail(makeError(ErrorCode::InvalidArgument, s.finalDir + ": already exists"));
        if (::rename(s.tmpDir.c_str(), s.finalDir.c_str()) != 0)
            return fail(ioError(s.finalDir, "cannot rename", errno));
    }
    s.finished = true;
    Status parentSync = fsyncPath(parentDir(s.finalDir), true);
    if (!parentSync) return parentSync.error();  // the package is complete; report only
    return {};
}

}  // namespace spillway::storage
