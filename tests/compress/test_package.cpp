// The model package: round trip across shards, 4 KiB alignment, checksums, O_DIRECT reads of the
// recorded offsets, corrupt manifests (ModelFileInvalid naming the file), and the writer's
// promise that a cancel, an error, a destination that exists, a full disk or a writer dropped
// before finish() leaves the parent folder exactly as it was.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <sys/statvfs.h>
#include <vector>

#include "../common/error_code.h"
#include "storage/direct_io.h"
#include "storage/package.h"

using namespace spillway;
using namespace spillway::storage;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed)
{
    std::vector<uint8_t> v(bytes);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < bytes; ++i) {
        x = x * 1103515245u + 12345u;
        v[i] = uint8_t(x >> 16);
    }
    return v;
}

using testing_support::errorCodeOf;

std::set<std::string> listing(const fs::path& dir)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

std::string readText(const fs::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

void writeText(const fs::path& p, const std::string& text)
{
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << text;
}

// Sizes chosen to cross 4 KiB boundaries, fill a 16 KiB shard, and pass it (a shard of its own).
struct Spec {
    std::string name;
    size_t bytes;
};
const std::vector<Spec> kSpecs = {
    {"tok_embd", 5000}, {"blk.0.attn_q", 12288}, {"blk.0.norm", 1},
    {"blk.0.ffn_up", 20000}, {"blk.1.attn_q", 4096}, {"empty", 0}, {"output", 7000},
};
constexpr uint64_t kShardBytes = 16 * 1024;

class PackageTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::string tmpl = (fs::temp_directory_path() / "spillway-package-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        m_root = tmpl;
    }
    void TearDown() override { fs::remove_all(m_root); }

    // Writes kSpecs (tensor i holds pattern(bytes, i)) to m_root/name.
    fs::path writePackage(const std::string& name = "pkg",
                          std::vector<uint64_t>* progress = nullptr)
    {
        const fs::path dir = m_root / name;
        PackageWriterOptions o;
        o.shardBytes = kShardBytes;
        for (const Spec& s : kSpecs) o.expectedBytes += s.bytes;
        if (progress)
            o.progress = [progress](const PackageProgress& p) {
                progress->push_back(p.bytesDone);
                return true;
            };
        auto w = PackageWriter::create(dir.string(), o);
        EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
        if (!w) return dir;
        for (size_t i = 0; i < kSpecs.size(); ++i) {
            PackageTensor t;
            t.name = kSpecs[i].name;
            t.shape = {int64_t(kSpecs[i].bytes)};
            t.format = "u8";
            t.tierHint = i % 2 ? "ssd" : "device";
            if (i == 1) t.extraJson = R"({"rmse":0.25})";
            const auto data = pattern(kSpecs[i].bytes, uint32_t(i));
            Status st;
            if (i % 2 == 0) {
                st = w->addTensor(t, data);
            } else {
                t.bytes = data.size();
                st = w->addTensor(t, [&](uint8_t* dst, size_t bytes) -> Status {
                    EXPECT_EQ(bytes, data.size());
                    std::memcpy(dst, data.data(), bytes);
                    return {};
                });
            }
            EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
        }
        PackageManifest m;
        m.architecture = "llama";
        m.hyperParametersJson = R"({"n_layer":2,"n_embd":64})";
        m.tokenizerJson = R"({"model":"bpe","vocab":["a","b"]})";
        m.chatTemplate = "{{ messages }}\n";
        m.qualityJson = R"({"perplexity":5.5})";
        const Status st = w->finish(m);
        EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
        return dir;
    }

    fs::path m_root;
};

TEST_F(PackageTest, RoundTripAcrossShards)
{
    std::vector<uint64_t> progress;
    const fs::path dir = writePackage("pkg", &progress);
    EXPECT_EQ(listing(m_root), std::set<std::string>{"pkg"});  // no temporary folder left
    ASSERT_FALSE(progress.empty());
    for (size_t i = 1; i < progress.size(); ++i) EXPECT_GE(progress[i], progress[i - 1]);
    uint64_t total = 0;
    for (const Spec& s : kSpecs) total += s.bytes;
    EXPECT_EQ(progress.back(), total);

    auto pkg = Package::open(dir.string());
    ASSERT_TRUE(pkg.ok()) << pkg.error().message;
    const PackageManifest& m = pkg->manifest();
    EXPECT_EQ(m.version, 1);
    EXPECT_EQ(m.architecture, "llama");
    EXPECT_EQ(json::parse(m.hyperParametersJson), json::parse(R"({"n_layer":2,"n_embd":64})"));
    EXPECT_EQ(json::parse(m.tokenizerJson)["model"], "bpe");
    EXPECT_EQ(m.chatTemplate, "{{ messages }}\n");
    EXPECT_EQ(json::parse(m.qualityJson)["perplexity"], 5.5);
    ASSERT_EQ(m.tensors.size(), kSpecs.size());
    EXPECT_GE(m.shardSizes.size(), 3u);
    for (uint32_t s = 0; s < m.shardSizes.size(); ++s) {
        EXPECT_EQ(fs::file_size(pkg->shardPath(s)), m.shardSizes[s]);
        EXPECT_EQ(m.shardSizes[s] % 4096, 0u);
    }
    for (size_t i = 0; i < kSpecs.size(); ++i) {
        const PackageTensor& t = m.tensors[i];
        SCOPED_TRACE(t.name);
        EXPECT_EQ(t.name, kSpecs[i].name);
        EXPECT_EQ(t.bytes, kSpecs[i].bytes);
        EXPECT_EQ(t.shape, std::vector<int64_t>{int64_t(kSpecs[i].bytes)});
        EXPECT_EQ(t.tierHint, i % 2 ? "ssd" : "device");
        EXPECT_EQ(t.offset % 4096, 0u);
        // A shard passes shardBytes only when one tensor alone is bigger.
        if (t.offset > 0) {
            EXPECT_LE(t.offset + t.bytes, kShardBytes);
        }
        auto span = pkg->map(t);
        ASSERT_TRUE(span.ok()) << span.error().message;
        const auto want = pattern(kSpecs[i].bytes, uint32_t(i));
        EXPECT_TRUE(std::equal(span->begin(), span->end(), want.begin(), want.end()));
        EXPECT_TRUE(pkg->verifyTensor(t).ok());
    }
    EXPECT_EQ(json::parse(m.tensors[1].extraJson)["rmse"], 0.25);
    ASSERT_NE(pkg->find("blk.0.ffn_up"), nullptr);
    EXPECT_EQ(pkg->find("blk.0.ffn_up")->offset, 0u);  // bigger than a shard: its own
    EXPECT_EQ(pkg->find("nope"), nullptr);

    uint64_t lastDone = 0, lastTotal = 0;
    const Status v = pkg->verify([&](const PackageProgress& p) {
        lastDone = p.bytesDone;
        lastTotal = p.bytesTotal;
        return true;
    });
    EXPECT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(lastDone, total);
    EXPECT_EQ(lastTotal, total);
    const Status cancelled = pkg->verify([](const PackageProgress&) { return false; });
    ASSERT_FALSE(cancelled.ok());
    EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled);
}

TEST_F(PackageTest, DirectReaderReadsRecordedOffsets)
{
    const fs::path dir = writePackage();
    auto pkg = Package::open(dir.string());
    ASSERT_TRUE(pkg.ok()) << pkg.error().message;
    auto reader = DirectReader::create({});
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    ASSERT_EQ(pkg->manifest().tensors.size(), kSpecs.size());
    for (size_t i = 0; i < kSpecs.size(); ++i) {
        const PackageTensor& t = pkg->manifest().tensors[i];
        if (t.bytes == 0) continue;
        SCOPED_TRACE(t.name);
        auto file = DirectFile::open(pkg->shardPath(t.shard));
        ASSERT_TRUE(file.ok()) << file.error().message;
        const AlignedRange r = alignRange(t.offset, size_t(t.bytes));
        EXPECT_EQ(r.offset, t.offset);
        EXPECT_EQ(r.skip, 0u);
        EXPECT_LE(r.offset + r.bytes, file->size());  // padding makes the whole range exist
        auto* buf = static_cast<uint8_t*>(std::aligned_alloc(kDirectIoAlignment, r.bytes));
        ASSERT_NE(buf, nullptr);
        const Status st = (*reader)->read(*file, r.offset, r.bytes, buf);
        EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
        const auto want = pattern(kSpecs[i].bytes, uint32_t(i));
        EXPECT_EQ(std::memcmp(buf + r.skip, want.data(), want.size()), 0);
        for (size_t b = t.bytes; b < r.bytes; ++b) ASSERT_EQ(buf[b], 0) << "padding at " << b;
        std::free(buf);
    }
}

TEST_F(PackageTest, CorruptManifestsAreModelFileInvalid)
{
    const fs::path dir = writePackage();
    const fs::path manifestPath = dir / "manifest.json";
    {
        auto opened = Package::open(dir.string());
        ASSERT_TRUE(opened.ok()) << opened.error().message;
    }
    const std::string good = readText(manifestPath);
    const json base = json::parse(good);
    const uint64_t shard0 = base["shards"][0]["bytes"].get<uint64_t>();

    struct Case {
        const char* what;
        std::function<void(json&)> edit;
        const char* expect;  // a piece of the message
    };
    const std::vector<Case> cases = {
        {"version as a string", [](json& j) { j["version"] = "1"; }, "version"},
        {"unknown version", [](json& j) { j["version"] = 2; }, "unsupported version"},
        {"no format tag", [](json& j) { j.erase("format"); }, "format"},
        {"architecture a number", [](json& j) { j["architecture"] = 7; }, "architecture"},
        {"tensors an object", [](json& j) { j["tensors"] = json::object(); }, "tensors"},
        {"name a number", [](json& j) { j["tensors"][0]["name"] = 3; }, "tensors[0].name"},
        {"offset a string", [](json& j) { j["tensors"][1]["offset"] = "0"; }, "tensors[1].offset"},
        {"negative bytes", [](json& j) { j["tensors"][1]["bytes"] = -5; }, "tensors[1].bytes"},
        {"shape with -1", [](json& j) { j["tensors"][0]["shape"] = {4, -1}; }, "shape"},
        {"shape a string", [](json& j) { j["tensors"][0]["shape"] = "4x4"; }, "shape"},
        {"xxh3 not hex", [](json& j) { j["tensors"][0]["xxh3"] = "zz"; }, "xxh3"},
        {"extra an array", [](json& j) { j["tensors"][0]["extra"] = {1}; }, "extra"},
        {"hyperParameters a string", [](json& j) { j["hyperParameters"] = "x"; },
         "hyperParameters"},
        {"missing bytes", [](json& j) { j["tensors"][2].erase("bytes"); }, "missing"},
        {"offset past the shard",
         [&](json& j) { j["tensors"][0]["offset"] = shard0 + 4096; }, "pass the end"},
        {"bytes past the shard",
         [&](json& j) { j["tensors"][0]["bytes"] = shard0 + 1; }, "pass the end"},
        {"misaligned offset", [](json& j) { j["tensors"][1]["offset"] = 16; }, "aligned"},
        {"overlapping tensors",
         [](json& j) {
             j["tensors"][2]["shard"] = j["tensors"][1]["shard"];  // 1 byte inside 12288
             j["tensors"][2]["offset"] = j["tensors"][1]["offset"].get<uint64_t>() + 4096;
         },
         "overlaps"},
        {"duplicate names",
         [](json& j) { j["tensors"][2]["name"] = j["tensors"][0]["name"]; }, "duplicate"},
        {"shard index past the list", [](json& j) { j["tensors"][0]["shard"] = 99; }, "shard 99"},
        {"shard file outside the folder",
         [](json& j) { j["shards"][0]["file"] = "../evil.bin"; }, "shards[0].file"},
        {"missing shard",
         [](json& j) {
             j["shards"].push_back({{"file", "shard-0000" + std::to_string(j["shards"].size()) +
                                                 ".bin"},
                                    {"bytes", 4096}});
         },
         "No such file"},
        {"shard size differs", [](json& j) { j["shards"][0]["bytes"] = 1 << 20; }, "says"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        json j = base;
        c.edit(j);
        writeText(manifestPath, j.dump(1));
        auto pkg = Package::open(dir.string());
        ASSERT_FALSE(pkg.ok());
        EXPECT_EQ(pkg.error().code, ErrorCode::ModelFileInvalid) << pkg.error().message;
        EXPECT_NE(pkg.error().message.find(c.expect), std::string::npos) << pkg.error().message;
        EXPECT_NE(pkg.error().message.find(dir.string()), std::string::npos)
            << pkg.error().message;
    }

    const std::pair<const char*, std::string> texts[] = {
        {"truncated JSON", good.substr(0, good.size() / 2)},
        {"empty file", ""},
        {"not an object", "[1, 2]"},
    };
    for (const auto& [what, text] : texts) {
        SCOPED_TRACE(what);
        writeText(manifestPath, text);
        auto pkg = Package::open(dir.string());
        ASSERT_FALSE(pkg.ok());
        EXPECT_EQ(pkg.error().code, ErrorCode::ModelFileInvalid);
        EXPECT_NE(pkg.error().message.find("manifest.json"), std::string::npos)
            << pkg.error().message;
    }

    // A shard file deleted from disk.
    writeText(manifestPath, good);
    fs::remove(dir / "shard-00001.bin");
    auto missing = Package::open(dir.string());
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(missing.error().message.find("shard-00001.bin"), std::string::npos);

    fs::remove(manifestPath);
    auto noManifest = Package::open(dir.string());
    ASSERT_FALSE(noManifest.ok());
    EXPECT_EQ(noManifest.error().code, ErrorCode::ModelFileInvalid);
}

TEST_F(PackageTest, FlippedByteNamesTheTensor)
{
    const fs::path dir = writePackage();
    PackageTensor target;
    {
        auto pkg = Package::open(dir.string());
        ASSERT_TRUE(pkg.ok()) << pkg.error().message;
        ASSERT_NE(pkg->find("blk.1.attn_q"), nullptr);
        target = *pkg->find("blk.1.attn_q");
    }
    {
        std::fstream f(dir / packageShardFileName(target.shard),
                       std::ios::in | std::ios::out | std::ios::binary);
        ASSERT_TRUE(f) << "cannot open " << (dir / packageShardFileName(target.shard));
        f.seekg(std::streamoff(target.offset + 1234));
        char c = 0;
        f.read(&c, 1);
        c = char(c ^ 0x10);
        f.seekp(std::streamoff(target.offset + 1234));
        f.write(&c, 1);
    }
    auto pkg = Package::open(dir.string());
    ASSERT_TRUE(pkg.ok()) << pkg.error().message;  // open does not hash; verify does
    const Status v = pkg->verify();
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(v.error().message.find("'blk.1.attn_q'"), std::string::npos) << v.error().message;
    ASSERT_NE(pkg->find("blk.1.attn_q"), nullptr);
    ASSERT_NE(pkg->find("tok_embd"), nullptr);
    EXPECT_FALSE(pkg->verifyTensor(*pkg->find("blk.1.attn_q")).ok());
    EXPECT_TRUE(pkg->verifyTensor(*pkg->find("tok_embd")).ok());
}

TEST_F(PackageTest, CancelLeavesNothing)
{
    const auto before = listing(m_root);
    PackageWriterOptions o;
    o.shardBytes = kShardBytes;
    int calls = 0;
    o.progress = [&](const PackageProgress& p) {
        EXPECT_FALSE(p.currentTensor.empty());
        return ++calls < 2;  // cancel during the second tensor
    };
    auto w = PackageWriter::create((m_root / "pkg").string(), o);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const auto data = pattern(10000, 1);
    PackageTensor t;
    t.name = "a";
    ASSERT_TRUE(w->addTensor(t, data).ok());
    t.name = "b";
    const Status st = w->addTensor(t, data);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::Cancelled);
    EXPECT_EQ(listing(m_root), before);
    t.name = "c";
    EXPECT_EQ(errorCodeOf(w->addTensor(t, data)), ErrorCode::Cancelled);
    EXPECT_EQ(errorCodeOf(w->finish({})), ErrorCode::Cancelled);
    EXPECT_EQ(listing(m_root), before);
}

TEST_F(PackageTest, FillErrorOrDroppedWriterLeavesNothing)
{
    const auto before = listing(m_root);
    {
        auto w = PackageWriter::create((m_root / "pkg").string(), {});
        ASSERT_TRUE(w.ok()) << w.error().message;
        EXPECT_TRUE(fs::is_directory(w->temporaryDir()));
        PackageTensor t;
        t.name = "a";
        ASSERT_TRUE(w->addTensor(t, pattern(5000, 2)).ok());
        t.name = "b";
        t.bytes = 8192;
        const Status st = w->addTensor(t, [](uint8_t*, size_t) -> Status {
            return makeError(ErrorCode::Io, "source model: read failed");
        });
        ASSERT_FALSE(st.ok());
        EXPECT_EQ(st.error().message, "source model: read failed");
        EXPECT_EQ(listing(m_root), before);  // removed at once, not only at destruction
    }
    {
        auto w = PackageWriter::create((m_root / "pkg").string(), {});
        ASSERT_TRUE(w.ok()) << w.error().message;
        PackageTensor t;
        t.name = "a";
        ASSERT_TRUE(w->addTensor(t, pattern(5000, 3)).ok());
        EXPECT_NE(listing(m_root), before);
    }  // dropped without finish()
    EXPECT_EQ(listing(m_root), before);
    {
        auto w = PackageWriter::create((m_root / "pkg").string(), {});
        ASSERT_TRUE(w.ok()) << w.error().message;
        PackageManifest m;
        m.qualityJson = "{not json";
        const Status st = w->finish(m);
        ASSERT_FALSE(st.ok());
        EXPECT_EQ(st.error().code, ErrorCode::InvalidArgument);
    }
    EXPECT_EQ(listing(m_root), before);
}

TEST_F(PackageTest, ExistingDestinationIsNeverTouched)
{
    const fs::path dest = m_root / "pkg";
    fs::create_directory(dest);
    writeText(dest / "mine.txt", "keep me");
    auto w = PackageWriter::create(dest.string(), {});
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(w.error().message.find("exists"), std::string::npos);
    EXPECT_EQ(listing(m_root), std::set<std::string>{"pkg"});

    // The destination appears while the writer works: finish() fails and leaves it alone, even
    // when it is an empty folder (which a plain rename() would replace).
    const fs::path late = m_root / "late";
    auto w2 = PackageWriter::create(late.string(), {});
    ASSERT_TRUE(w2.ok()) << w2.error().message;
    PackageTensor t;
    t.name = "a";
    ASSERT_TRUE(w2->addTensor(t, pattern(100, 4)).ok());
    fs::create_directory(late);
    const Status st = w2->finish({});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("exists"), std::string::npos);
    EXPECT_TRUE(fs::is_empty(late));
    EXPECT_EQ(listing(m_root), (std::set<std::string>{"pkg", "late"}));
    EXPECT_EQ(readText(dest / "mine.txt"), "keep me");
}

TEST_F(PackageTest, NotEnoughSpaceIsDiskFullBeforeAnyFile)
{
    struct statvfs vfs {};
    ASSERT_EQ(::statvfs(m_root.c_str(), &vfs), 0);
    const uint64_t freeBytes = uint64_t(vfs.f_bavail) * vfs.f_frsize;
    const auto before = listing(m_root);
    PackageWriterOptions o;
    o.expectedBytes = freeBytes + (uint64_t{1} << 30);
    auto w = PackageWriter::create((m_root / "pkg").string(), o);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().code, ErrorCode::DiskFull);
    EXPECT_NE(w.error().message.find(m_root.string()), std::string::npos) << w.error().message;
    EXPECT_EQ(listing(m_root), before);
}

TEST_F(PackageTest, ManifestTensorsKeepDescriptionsTakeStorageFields)
{
    auto w = PackageWriter::create((m_root / "pkg").string(), {});
    ASSERT_TRUE(w.ok()) << w.error().message;
    PackageTensor t;
    t.name = "w";
    t.format = "f16";
    ASSERT_TRUE(w->addTensor(t, pattern(6000, 5)).ok());
    PackageManifest m;
    m.tensors = w->tensors();
    ASSERT_EQ(m.tensors.size(), 1u);
    m.tensors[0].extraJson = R"({"sparsity":0.5})";  // a quality figure known only afterwards
    m.tensors[0].offset = 12345;                      // ignored: the writer knows
    ASSERT_TRUE(w->finish(m).ok());
    auto pkg = Package::open((m_root / "pkg").string());
    ASSERT_TRUE(pkg.ok()) << pkg.error().message;
    ASSERT_EQ(pkg->manifest().tensors.size(), 1u);
    EXPECT_EQ(pkg->manifest().tensors[0].offset, 0u);
    EXPECT_EQ(json::parse(pkg->manifest().tensors[0].extraJson)["sparsity"], 0.5);
    EXPECT_TRUE(pkg->verify().ok());
}

}  // namespace
