// DirectReader and DirectFile: bytes read through both engines (io_uring and the pread thread
// pool) at several queue depths and chunk sizes equal the file's bytes; the tail past the end
// of the file reads as zeros; misuse and missing files are errors that say what is wrong. The
// streaming form (enqueue/wait): many groups back to back, tickets finishing in order, a failed
// read failing its own ticket, destruction with tickets outstanding.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../common/temp_dir.h"
#include "storage/direct_io.h"
#include "../common/count_allocations.h"

using spillway::testing_support::g_allocations;

using namespace spillway;
using namespace spillway::storage;

namespace {

// A byte of the test pattern at a file offset: never a run of zeros, different every 8 bytes.
uint8_t patternByte(uint64_t offset)
{
    uint64_t x = (offset / 8) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return uint8_t((x >> (8 * (offset % 8))) | 1);
}

struct AlignedBuffer {
    explicit AlignedBuffer(size_t bytes)
        : size(bytes), data(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096)))
    {
        std::memset(data, 0xAB, (bytes + 4095) / 4096 * 4096 + 4096);
    }
    ~AlignedBuffer() { std::free(data); }
    size_t size;
    uint8_t* data;
};

using TempDir = spillway::testing_support::TempDir;

std::string tempParent()
{
    const char* t = std::getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

void writePatternFile(const std::string& path, uint64_t bytes)
{
    std::vector<uint8_t> data(bytes);
    for (uint64_t i = 0; i < bytes; ++i) data[i] = patternByte(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    ASSERT_EQ(std::fclose(f), 0);
}

// Checks dst against the file's bytes at [offset, offset + bytes); zeros past `fileSize`.
::testing::AssertionResult matchesFile(const uint8_t* dst, uint64_t offset, size_t bytes, uint64_t fileSize)
{
    for (size_t i = 0; i < bytes; ++i) {
        const uint64_t at = offset + i;
        const uint8_t want = at < fileSize ? patternByte(at) : 0;
        if (dst[i] != want)
            return ::testing::AssertionFailure() << "byte at file offset " << at << " is " << int(dst[i])
                                                 << ", want " << int(want);
    }
    return ::testing::AssertionSuccess();
}

constexpr uint64_t kFileBytes = (8u << 20) + 12345;  // not a multiple of 4096: a partial tail

class DirectIoTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_FALSE(m_dir.path().empty());
        m_file = m_dir.path() + "/pattern.bin";
        ASSERT_NO_FATAL_FAILURE(writePatternFile(m_file, kFileBytes));
    }
    TempDir m_dir{"spillway-direct-io", tempParent()};
    std::string m_file;
};

}  // namespace

TEST(AlignRange, Cases)
{
    auto r = alignRange(0, 4096);
    EXPECT_EQ(r.offset, 0u); EXPECT_EQ(r.bytes, 4096u); EXPECT_EQ(r.skip, 0u);
    r = alignRange(100, 10);
    EXPECT_EQ(r.offset, 0u); EXPECT_EQ(r.bytes, 4096u); EXPECT_EQ(r.skip, 100u);
    r = alignRange(4095, 2);  // straddles a boundary
    EXPECT_EQ(r.offset, 0u); EXPECT_EQ(r.bytes, 8192u); EXPECT_EQ(r.skip, 4095u);
    r = alignRange(8192, 4097);
    EXPECT_EQ(r.offset, 8192u); EXPECT_EQ(r.bytes, 8192u); EXPECT_EQ(r.skip, 0u);
    r = alignRange((5ull << 32) + 7, 1, 512);  // offsets past 4 GiB, other alignment
    EXPECT_EQ(r.offset, 5ull << 32); EXPECT_EQ(r.bytes, 512u); EXPECT_EQ(r.skip, 7u);
    r = alignRange(12288, 0);
    EXPECT_EQ(r.offset, 12288u); EXPECT_EQ(r.bytes, 0u); EXPECT_EQ(r.skip, 0u);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 1000; ++i) {
        const uint64_t off = rng() % (1ull << 40);
        const size_t n = size_t(rng() % (1u << 22)) + 1;
        r = alignRange(off, n);
        EXPECT_EQ(r.offset % 4096, 0u);
        EXPECT_EQ(r.bytes % 4096, 0u);
        EXPECT_EQ(r.offset + r.skip, off);
        EXPECT_GE(r.bytes, r.skip + n);
        EXPECT_LT(r.skip, 4096u);
        EXPECT_LT(r.bytes - (r.skip + n), 4096u);  // smallest superset
    }
}

TEST(DirectReaderCreate, RejectsBadOptions)
{
    auto r = DirectReader::create({0, 1 << 20, false});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    r = DirectReader::create({4, 1000, false});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    r = DirectReader::create({4, 8192, true});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_STREQ((*r)->engine(), "pread threads");
    r = DirectReader::create({4, 8192, false});
    ASSERT_TRUE(r.ok()) << r.error().message;
    std::printf("default engine here: %s\n", (*r)->engine());
}

TEST_F(DirectIoTest, RandomAlignedRangesBothEnginesManyDepths)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_EQ(file->size(), kFileBytes);
    std::printf("%s: direct=%d\n", m_file.c_str(), int(file->direct()));
    std::mt19937_64 rng(42);
    AlignedBuffer buf(kFileBytes + (1 << 20));
    for (bool pool : {false, true}) {
        for (int depth : {1, 4, 16}) {
            for (size_t chunk : {size_t(4096), size_t(64) << 10, size_t(1) << 20}) {
                auto reader = DirectReader::create({depth, chunk, pool});
                ASSERT_TRUE(reader.ok()) << reader.error().message;
                SCOPED_TRACE(std::string((*reader)->engine()) + " qd " + std::to_string(depth) +
                             " chunk " + std::to_string(chunk));
                for (int i = 0; i < 12; ++i) {
                    const uint64_t off = rng() % kFileBytes;
                    const size_t len = size_t(rng() % (3u << 20)) + 1;
                    const AlignedRange a = alignRange(off, len);
                    ASSERT_LE(a.bytes, buf.size + 4096);
                    ASSERT_TRUE((*reader)->read(*file, a.offset, a.bytes, buf.data).ok());
                    ASSERT_TRUE(matchesFile(buf.data, a.offset, a.bytes, kFileBytes));
                }
                // The whole file in one call: many chunks kept `depth` deep.
                const AlignedRange all = alignRange(0, kFileBytes);
                ASSERT_TRUE((*reader)->read(*file, 0, all.bytes, buf.data).ok());
                ASSERT_TRUE(matchesFile(buf.data, 0, all.bytes, kFileBytes));
            }
        }
    }
}

TEST_F(DirectIoTest, BatchOfRandomSmallReads)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({32, 1 << 20, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        constexpr size_t kReq = 32 << 10, kCount = 200;
        AlignedBuffer buf(kReq * kCount);
        std::vector<ReadRequest> reqs;
        std::mt19937_64 rng(pool ? 1 : 2);
        for (size_t i = 0; i < kCount; ++i)
            reqs.push_back({rng() % (kFileBytes / kReq + 1) * kReq, kReq, buf.data + i * kReq});
        ASSERT_TRUE((*reader)->readBatch(*file, reqs).ok());
        for (const auto& r : reqs)
            ASSERT_TRUE(matchesFile(static_cast<uint8_t*>(r.dst), r.offset, r.bytes, kFileBytes)) << (*reader)->engine();
    }
}

TEST_F(DirectIoTest, PastEndOfFileReadsZeros)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({4, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        AlignedBuffer buf(1 << 20);
        // Starts before the end and runs 256 KiB past it (the last tensor's aligned range).
        const uint64_t start = kFileBytes / 4096 * 4096 - (128 << 10);
        ASSERT_TRUE((*reader)->read(*file, start, 512 << 10, buf.data).ok());
        EXPECT_TRUE(matchesFile(buf.data, start, 512 << 10, kFileBytes)) << (*reader)->engine();
        // Entirely past the end.
        ASSERT_TRUE((*reader)->read(*file, 64 << 20, 64 << 10, buf.data).ok());
        EXPECT_TRUE(matchesFile(buf.data, 64 << 20, 64 << 10, kFileBytes));
    }
}

TEST_F(DirectIoTest, MisalignedDirectReadIsInvalidArgument)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    if (!file->direct()) GTEST_SKIP() << "this filesystem refuses O_DIRECT; reads are buffered";
    auto reader = DirectReader::create({4, 1 << 20, false});
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    AlignedBuffer buf(1 << 20);
    for (auto [off, len, shift] : {std::tuple{100ull, 4096ul, 0}, std::tuple{0ull, 1000ul, 0},
                                   std::tuple{0ull, 4096ul, 8}}) {
        const Status s = (*reader)->read(*file, off, len, buf.data + shift);
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(s.error().message.find("aligned"), std::string::npos) << s.error().message;
    }
}

TEST_F(DirectIoTest, MissingFileOrFolderIsIoErrorNamingThePath)
{
    const std::string missing = m_dir.path() + "/no-such-shard.bin";
    auto f = DirectFile::open(missing);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().code, ErrorCode::Io);
    EXPECT_NE(f.error().message.find(missing), std::string::npos) << f.error().message;
    EXPECT_NE(f.error().message.find("No such file"), std::string::npos) << f.error().message;

    auto d = DirectFile::open(m_dir.path());
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::Io);

    if (::geteuid() != 0) {  // root reads anything
        ASSERT_EQ(::chmod(m_file.c_str(), 0), 0);
        auto p = DirectFile::open(m_file);
        ASSERT_FALSE(p.ok());
        EXPECT_EQ(p.error().code, ErrorCode::Io);
        EXPECT_NE(p.error().message.find("Permission denied"), std::string::npos) << p.error().message;
    }
}

TEST_F(DirectIoTest, MoveKeepsTheDescriptor)
{
    auto f = DirectFile::open(m_file);
    ASSERT_TRUE(f.ok()) << f.error().message;
    const int fd = f->fd();
    DirectFile a = std::move(*f);
    EXPECT_EQ(a.fd(), fd);
    EXPECT_EQ(f->fd(), -1);
    DirectFile b = std::move(a);
    EXPECT_EQ(b.fd(), fd);
    EXPECT_EQ(b.size(), kFileBytes);
}

TEST_F(DirectIoTest, ConcurrentCallersAreSerialized)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({8, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        std::vector<std::thread> threads;
        std::atomic<int> failures{0};
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                AlignedBuffer buf(2 << 20);
                std::mt19937_64 rng(100 + t);
                for (int i = 0; i < 10; ++i) {
                    const uint64_t off = rng() % (kFileBytes / 4096) * 4096;
                    if (!(*reader)->read(*file, off, 2 << 20, buf.data).ok() ||
                        !matchesFile(buf.data, off, 2 << 20, kFileBytes))
                        ++failures;
                }
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(failures.load(), 0) << (*reader)->engine();
    }
}

TEST_F(DirectIoTest, EnqueueAndWaitInAnyOrder)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({8, 256 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        constexpr size_t kBytes = 2 << 20;
        std::vector<std::unique_ptr<AlignedBuffer>> bufs;
        std::vector<DirectReader::Ticket> tickets;
        std::vector<uint64_t> offsets;
        for (int i = 0; i < 4; ++i) {
            bufs.push_back(std::make_unique<AlignedBuffer>(kBytes));
            offsets.push_back(uint64_t(i) * (3 << 20) / 4096 * 4096);
            tickets.push_back((*reader)->enqueue(*file, {{offsets.back(), kBytes, bufs.back()->data}}));
        }
        for (int i = 3; i >= 0; --i) {  // waited for in reverse order
            ASSERT_TRUE((*reader)->wait(tickets[size_t(i)]).ok());
            EXPECT_TRUE(matchesFile(bufs[size_t(i)]->data, offsets[size_t(i)], kBytes, kFileBytes));
        }
        const Status again = (*reader)->wait(tickets[0]);  // each ticket once
        ASSERT_FALSE(again.ok());
        EXPECT_EQ(again.error().code, ErrorCode::InvalidArgument);
        EXPECT_FALSE((*reader)->wait(0).ok());
        EXPECT_FALSE((*reader)->wait(tickets.back() + 100).ok());
        // A misaligned group fails in wait(), as readBatch would; so does an empty one succeed.
        const auto bad = (*reader)->enqueue(*file, {{100, 4096, bufs[0]->data}});
        EXPECT_EQ((*reader)->wait(bad).ok(), !file->direct());
        EXPECT_TRUE((*reader)->wait((*reader)->enqueue(*file, {})).ok());
    }
}

// Many groups enqueued back to back (a prefetcher's layers): one queue, no drain between them;
// every byte lands where its group said.
// The neuron cache and the streamer read every token: once the reader has seen the stream's
// depth, enqueue() and wait() (and readBatch()) allocate nothing, on either engine.
TEST_F(DirectIoTest, WarmStreamAllocatesNothing)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({4, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        SCOPED_TRACE((*reader)->engine());
        AlignedBuffer a(3 * 4096), b(8 * 4096);
        const ReadRequest group[] = {{0, 4096, a.data}, {8192, 2 * 4096, a.data + 4096}, {65536, 8 * 4096, b.data}};
        auto round = [&] {
            const auto first = (*reader)->enqueue(*file, group);
            const auto second = (*reader)->enqueue(*file, {group, 2});
            EXPECT_TRUE((*reader)->wait(first).ok());
            EXPECT_TRUE((*reader)->wait(second).ok());
            EXPECT_TRUE((*reader)->readBatch(*file, group).ok());
        };
        for (int i = 0; i < 8; ++i) round();  // warm: the ring and the request storage grow
        const long before = g_allocations.load();
        for (int i = 0; i < 100; ++i) round();
        EXPECT_EQ(g_allocations.load() - before, 0);
        EXPECT_TRUE(matchesFile(b.data, 65536, 8 * 4096, kFileBytes));
    }
}

TEST_F(DirectIoTest, StreamOfManyGroupsReadsRight)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        for (int depth : {1, 3, 16}) {
            auto reader = DirectReader::create({depth, 64 << 10, pool});
            ASSERT_TRUE(reader.ok()) << reader.error().message;
            SCOPED_TRACE(std::string((*reader)->engine()) + " qd " + std::to_string(depth));
            std::mt19937_64 rng(uint64_t(depth) * 2 + pool);
            struct Group { DirectReader::Ticket ticket; std::vector<ReadRequest> reqs; };
            std::vector<Group> groups;
            std::vector<std::unique_ptr<AlignedBuffer>> bufs;
            for (int g = 0; g < 60; ++g) {
                Group group;
                const int n = 1 + int(rng() % 3);
                for (int i = 0; i < n; ++i) {
                    // Some ranges run past the end of the file; some are a single block.
                    const size_t bytes = (1 + rng() % 100) * 4096;
                    const uint64_t off = rng() % (kFileBytes / 4096 + 4) * 4096;
                    bufs.push_back(std::make_unique<AlignedBuffer>(bytes));
                    group.reqs.push_back({off, bytes, bufs.back()->data});
                }
                group.ticket = (*reader)->enqueue(*file, group.reqs);
                groups.push_back(std::move(group));
            }
            for (const Group& g : groups) {
                ASSERT_TRUE((*reader)->wait(g.ticket).ok());
                for (const ReadRequest& r : g.reqs)
                    ASSERT_TRUE(matchesFile(static_cast<uint8_t*>(r.dst), r.offset, r.bytes, kFileBytes));
            }
        }
    }
}

TEST_F(DirectIoTest, TicketsFinishInOrder)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({8, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        for (int round = 0; round < 5; ++round) {
            // A large group, then a small one whose reads may well finish first: once the small
            // one's wait() returns, the large one must be complete too.
            AlignedBuffer big(8 << 20), small(4096);
            const auto first = (*reader)->enqueue(*file, {{0, 8 << 20, big.data}});
            const auto second = (*reader)->enqueue(*file, {{4096, 4096, small.data}});
            EXPECT_LT(first, second);
            ASSERT_TRUE((*reader)->wait(second).ok());
            EXPECT_TRUE(matchesFile(big.data, 0, 8 << 20, kFileBytes)) << (*reader)->engine();
            EXPECT_TRUE(matchesFile(small.data, 4096, 4096, kFileBytes));
            ASSERT_TRUE((*reader)->wait(first).ok());
        }
    }
}

// A read that fails (here: the descriptor turned into a folder's, so pread says EISDIR) fails
// its own ticket, naming the file and the offset; the groups around it are read as usual.
TEST_F(DirectIoTest, FailedReadFailsItsTicketOnly)
{
    auto good = DirectFile::open(m_file);
    auto broken = DirectFile::open(m_file);
    ASSERT_TRUE(good.ok() && broken.ok()) << (good ? "" : good.error().message) << (broken ? "" : broken.error().message);
    const int folder = ::open(m_dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(folder, 0);
    ASSERT_EQ(::dup2(folder, broken->fd()), broken->fd());
    ::close(folder);
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({4, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        AlignedBuffer a(1 << 20), b(1 << 20), c(1 << 20);
        const auto before = (*reader)->enqueue(*good, {{0, 1 << 20, a.data}});
        const auto failing = (*reader)->enqueue(*broken, {{1 << 20, 1 << 20, b.data}});
        const auto after = (*reader)->enqueue(*good, {{2 << 20, 1 << 20, c.data}});
        EXPECT_TRUE((*reader)->wait(before).ok());
        const Status s = (*reader)->wait(failing);
        ASSERT_FALSE(s.ok()) << (*reader)->engine();
        EXPECT_EQ(s.error().code, ErrorCode::Io);
        EXPECT_NE(s.error().message.find(m_file), std::string::npos) << s.error().message;
        // The offset of whichever of its chunks failed first: inside the group's range.
        const size_t at = s.error().message.find("offset ");
        ASSERT_NE(at, std::string::npos) << s.error().message;
        const uint64_t offset = std::stoull(s.error().message.substr(at + 7));
        EXPECT_GE(offset, 1u << 20);
        EXPECT_LT(offset, 2u << 20);
        EXPECT_TRUE((*reader)->wait(after).ok());
        EXPECT_TRUE(matchesFile(a.data, 0, 1 << 20, kFileBytes));
        EXPECT_TRUE(matchesFile(c.data, 2 << 20, 1 << 20, kFileBytes));
        // Synchronous reads report it the same way.
        const Status sync = (*reader)->read(*broken, 0, 4096, b.data);
        ASSERT_FALSE(sync.ok());
        EXPECT_EQ(sync.error().code, ErrorCode::Io);
    }
}

// Destroyed with groups queued and in flight: the reads in flight finish before the destructor
// returns (the buffers are freed after it), queued ones are dropped. Clean under the sanitizers.
TEST_F(DirectIoTest, DestroyWithTicketsOutstanding)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        for (int waitFirst : {0, 1}) {
            std::vector<std::unique_ptr<AlignedBuffer>> bufs;
            auto reader = DirectReader::create({4, 64 << 10, pool});
            ASSERT_TRUE(reader.ok()) << reader.error().message;
            std::vector<DirectReader::Ticket> tickets;
            for (int i = 0; i < 16; ++i) {
                bufs.push_back(std::make_unique<AlignedBuffer>(2 << 20));
                tickets.push_back((*reader)->enqueue(*file, {{uint64_t(i % 4) << 20, 2 << 20, bufs.back()->data}}));
            }
            if (waitFirst) {
                ASSERT_TRUE((*reader)->wait(tickets[0]).ok());
            }
            reader->reset();
        }
    }
}

// Several threads streaming at once through one reader: each gets its own bytes.
TEST_F(DirectIoTest, ConcurrentStreams)
{
    auto file = DirectFile::open(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({8, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937_64 rng(200 + t);
                std::vector<std::unique_ptr<AlignedBuffer>> bufs;
                std::vector<std::pair<DirectReader::Ticket, uint64_t>> tickets;
                for (int i = 0; i < 20; ++i) {
                    const uint64_t off = rng() % (kFileBytes / 4096) * 4096;
                    bufs.push_back(std::make_unique<AlignedBuffer>(256 << 10));
                    tickets.emplace_back((*reader)->enqueue(*file, {{off, 256 << 10, bufs.back()->data}}), off);
                }
                for (size_t i = 0; i < tickets.size(); ++i)
                    if (!(*reader)->wait(tickets[i].first).ok() ||
                        !matchesFile(bufs[i]->data, tickets[i].second, 256 << 10, kFileBytes))
                        ++failures;
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(failures.load(), 0) << (*reader)->engine();
    }
}

TEST_F(DirectIoTest, BufferedFileReadsUnalignedRanges)
{
    auto file = DirectFile::openBuffered(m_file);
    ASSERT_TRUE(file.ok()) << file.error().message;
    EXPECT_FALSE(file->direct());
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({4, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        std::vector<uint8_t> buf((3 << 20) + 16);
        std::mt19937_64 rng(11);
        for (int i = 0; i < 20; ++i) {
            const uint64_t off = rng() % (kFileBytes + 1000);  // some start past the end
            const size_t len = size_t(rng() % (3 << 20)) + 1;
            ASSERT_TRUE((*reader)->read(*file, off, len, buf.data() + 3).ok());
            ASSERT_TRUE(matchesFile(buf.data() + 3, off, len, kFileBytes)) << (*reader)->engine();
        }
    }
}

TEST(DirectIoTmpfs, FallsBackToBufferedAndReadsRight)
{
    if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
    TempDir dir("spillway-direct-io", "/dev/shm");
    ASSERT_FALSE(dir.path().empty());
    const std::string path = dir.path() + "/pattern.bin";
    constexpr uint64_t kBytes = (1u << 20) + 777;
    ASSERT_NO_FATAL_FAILURE(writePatternFile(path, kBytes));
    auto file = DirectFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    // Linux >= 6.6 accepts O_DIRECT on tmpfs (served from memory); older kernels refuse it and
    // the file falls back to buffered reads. Both must read right.
    std::printf("tmpfs file: direct=%d\n", int(file->direct()));
    for (bool pool : {false, true}) {
        auto reader = DirectReader::create({4, 64 << 10, pool});
        ASSERT_TRUE(reader.ok()) << reader.error().message;
        AlignedBuffer buf(2 << 20);
        std::mt19937_64 rng(3);
        for (int i = 0; i < 20; ++i) {
            const uint64_t off = rng() % kBytes;
            const size_t len = size_t(rng() % (512 << 10)) + 1;
            // Buffered reads need no alignment; direct ones get the aligned superset.
            const AlignedRange a = file->direct() ? alignRange(off, len) : AlignedRange{off, len, 0};
            ASSERT_TRUE((*reader)->read(*file, a.offset, a.bytes, buf.data).ok());
            ASSERT_TRUE(matchesFile(buf.data, a.offset, a.bytes, kBytes)) << (*reader)->engine();
        }
        // Unaligned tail past the end of a buffered file also reads as zeros.
        const AlignedRange tail = alignRange(kBytes - 100, 5000);
        ASSERT_TRUE((*reader)->read(*file, tail.offset, tail.bytes, buf.data).ok());
        ASSERT_TRUE(matchesFile(buf.data, tail.offset, tail.bytes, kBytes));
    }
}
