#pragma once
// The model package: a folder holding `manifest.json` and shard files (`shard-00000.bin`, ...).
// Every tensor's data starts at a 4096-byte-aligned offset of its shard (zero padding between
// tensors, shard sizes a multiple of 4096), so the runtime can read it with O_DIRECT
// (DirectReader) or use it in place through a memory mapping. Each tensor carries an XXH3-64
// checksum of its bytes.
//
// PackageWriter writes a package into a temporary sibling folder (`<dir>.partial-XXXXXX`) and
// renames it to `<dir>` only when finish() has flushed everything to disk: a failure, a full
// disk, a cancel or a writer destroyed before finish() leaves nothing behind.
//
// Package opens one for reading. The manifest is untrusted input: every field's type, every
// offset and size is checked at open(), and a bad package gives ModelFileInvalid naming the file
// and the problem.
//
// Storage treats the tensor formats ("f16", "q8_0", "bitmap-f16", ...) and the JSON texts
// (hyper-parameters, tokenizer, quality report) as opaque; the core gives them meaning.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway::storage {

class MappedFile;

inline constexpr int kPackageVersion = 1;             // manifest "version" this code reads
inline constexpr uint64_t kPackageAlignment = 4096;   // bytes; tensor offsets and shard sizes

struct PackageTensor {
    std::string name;             // unique within the package
    std::vector<int64_t> shape;   // elements per dimension, each >= 0
    std::string format;           // e.g. "f16", "q8_0", "bitmap-f16", "int4-g64"; opaque here
    std::string tierHint;         // e.g. "device", "ram", "ssd"; may be empty
    uint32_t shard = 0;           // index of the shard file; filled by the writer
    uint64_t offset = 0;          // bytes into the shard, 4096-aligned; filled by the writer
    uint64_t bytes = 0;           // stored size in bytes
    uint64_t xxh3 = 0;            // XXH3-64 of the stored bytes; filled by the writer
    std::string extraJson;        // a JSON object's text (quality report, ...), or empty
};

struct PackageManifest {
    int version = kPackageVersion;
    std::string architecture;          // e.g. "llama"
    std::string hyperParametersJson;   // JSON object texts the core fills (may be empty)
    std::string tokenizerJson;
    std::string chatTemplate;          // plain text (a Jinja template)
    std::string qualityJson;
    std::vector<PackageTensor> tensors;
    std::vector<uint64_t> shardSizes;  // bytes of each shard file; filled by the writer
};

// Reported while writing or verifying. bytes are tensor data bytes (padding not counted).
struct PackageProgress {
    uint64_t bytesDone = 0;
    uint64_t bytesTotal = 0;       // 0 when unknown (no expectedBytes given)
    double secondsElapsed = 0;
    double etaSeconds = -1;        // -1 when unknown
    std::string currentTensor;
};
// Returns false to cancel (the operation then fails with ErrorCode::Cancelled).
using PackageProgressFn = std::function<bool(const PackageProgress&)>;

struct PackageWriterOptions {
    uint64_t shardBytes = uint64_t{4} << 30;  // a shard is closed before it would pass this;
                                              // a bigger tensor gets a shard of its own
    PackageProgressFn progress;               // called after each written chunk; may be empty
    uint64_t expectedBytes = 0;               // total tensor bytes, for the free-space check
                                              // and the ETA; 0 = unknown (no check)
};

class PackageWriter {
public:
    // Checks that `finalDir` does not exist and that its parent has `expectedBytes` free
    // (DiskFull naming the folder, before anything is created), then creates the temporary
    // folder. Errors: InvalidArgument (finalDir exists, empty path, shardBytes 0), DiskFull, Io.
    static Result<PackageWriter> create(const std::string& finalDir,
                                        const PackageWriterOptions& options);
    PackageWriter(PackageWriter&&) noexcept;
    PackageWriter& operator=(PackageWriter&&) noexcept;
    PackageWriter(const PackageWriter&) = delete;
    PackageWriter& operator=(const PackageWriter&) = delete;
    ~PackageWriter();  // without a successful finish(): removes the temporary folder

    // Appends one tensor. `meta.bytes` is the size to store; `fill` writes exactly that many
    // bytes to dst (a buffer owned by the writer). shard, offset and xxh3 are filled in.
    // After any error (including fill's own, and Cancelled from the progress callback) the
    // temporary folder is already removed and every later call fails.
    Status addTensor(PackageTensor meta, const std::function<Status(uint8_t* dst, size_t bytes)>&
                                             fill);
    // The same with the bytes given; meta.bytes is set to data.size().
    Status addTensor(PackageTensor meta, std::span<const uint8_t> data);

    // The tensors added so far, with their storage fields filled in.
    const std::vector<PackageTensor>& tensors() const;

    // Writes manifest.json, fsyncs every file and the folder, and renames the temporary folder
    // to finalDir (never over an existing one: then InvalidArgument, and the existing folder is
    // untouched). `manifest.tensors` is either empty (the tensors added are listed) or names
    // the added tensors in the same order: then its descriptive fields (shape, format,
    // tierHint, extraJson) are kept and the storage fields come from the writer.
    Status finish(PackageManifest manifest);

    // finish() in two steps, for a caller that checks the package before publishing it:
    // seal() writes and fsyncs everything into temporaryDir() (then a complete package that
    // Package::open reads), setQuality() may then replace the manifest's quality report there
    // (atomically), and publish() renames the folder to finalDir. Until publish(), destroying
    // the writer removes the folder.
    Status seal(PackageManifest manifest);
    Status setQuality(std::string qualityJson);
    Status publish();

    const std::string& temporaryDir() const;  // for tests and messages

private:
    struct State;
    explicit PackageWriter(std::unique_ptr<State> state);
    Status fail(Error error);  // removes the temporary folder, remembers the error
    Status writeManifest();    // the sealed manifest into the temporary folder
    std::unique_ptr<State> m_state;
};

class Package {
public:
    // Reads and validates `dir`/manifest.json and maps every shard. ModelFileInvalid (naming
    // the file and the problem) for a manifest that is not valid JSON, a field of the wrong
    // type, an unknown version, a missing or resized shard, a misaligned offset, a tensor past
    // the end of its shard, overlapping tensors or duplicate names.
    static Result<Package> open(const std::string& dir);
    Package(Package&&) noexcept;
    Package& operator=(Package&&) noexcept;
    ~Package();

    const std::string& dir() const { return m_dir; }
    const PackageManifest& manifest() const { return m_manifest; }
    const PackageTensor* find(const std::string& name) const;  // nullptr if absent
    std::string shardPath(uint32_t shard) const;

    // The tensor's bytes, in place in the shard's memory mapping (valid while the Package
    // lives). InvalidArgument for a tensor that does not fit this package's shards.
    Result<std::span<const uint8_t>> map(const PackageTensor& tensor) const;

    // Recomputes every tensor's checksum; a mismatch -> ModelFileInvalid naming the tensor and
    // its shard. progress may cancel (-> Cancelled).
    Status verify(const PackageProgressFn& progress = {}) const;
    Status verifyTensor(const PackageTensor& tensor) const;

private:
    Package() = default;
    std::string m_dir;
    PackageManifest m_manifest;
    std::vector<std::unique_ptr<MappedFile>> m_shards;
};

// "shard-00007.bin" for shard 7.
std::string packageShardFileName(uint32_t shard);

}  // namespace spillway::storage
