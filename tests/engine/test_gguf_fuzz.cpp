// GGUF reader on damaged copies made in bulk: every truncation of a written file and of
// stories260K.gguf, and byte-flip fuzzing of their headers. Opening must fail cleanly or give a
// file whose every tensor lies inside it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gguf_test_util.h"

using namespace spillway;
using namespace spillway::gguf;
using namespace spillway::gguf_test;

// ---- truncations ------------------------------------------------------------------------------

namespace {

// Every truncation of a file whose last tensor ends at (or near) the end must fail cleanly.
void checkTruncations(const std::string& source, const std::string& path, size_t headerStride)
{
    const Bytes orig = readBytes(source);
    auto full = File::open(source);
    ASSERT_TRUE(full.ok()) << full.error().message;
    ASSERT_FALSE(orig.empty()) << "cannot read " << source;
    uint64_t dataEnd = 0;
    for (const TensorInfo& t : (*full)->tensors()) {
        dataEnd = std::max(dataEnd, (*full)->dataOffset() + t.offset + t.bytes);
    }
    ASSERT_LE(dataEnd, orig.size());
    std::vector<size_t> cuts;
    for (size_t n = 0; n < (*full)->dataOffset(); n += n < 256 ? 1 : headerStride) {
        cuts.push_back(n);
    }
    for (uint64_t n = (*full)->dataOffset(); n < dataEnd; n += (dataEnd - n) / 2 + 1) {
        cuts.push_back(n);
    }
    for (int i = 1; i <= 64; ++i) {
        cuts.push_back(size_t((*full)->dataOffset() + (dataEnd - (*full)->dataOffset()) * i / 65));
    }
    cuts.push_back(dataEnd - 1);
    for (size_t n : cuts) {
        writeBytes(path, orig, n);
        expectError(path, ErrorCode::ModelFileInvalid);
        if (testing::Test::HasFailure()) {
            ADD_FAILURE() << "truncated at " << n << " of " << orig.size();
            return;
        }
    }
}

}  // namespace

TEST(GgufTruncation, WrittenFile)
{
    Scratch dir;
    Writer w(32);
    fillWriter(w, 32);
    ASSERT_TRUE(w.write(dir.path("w.gguf")).ok());
    checkTruncations(dir.path("w.gguf"), dir.path("cut.gguf"), 1);
}

TEST(GgufTruncation, Stories260K)
{
    Scratch dir;
    checkTruncations(kStories, dir.path("cut.gguf"), 7);
}

// ---- fuzzing -----------------------------------------------------------------------------------

namespace {

// Flips 1-8 random bytes of the header region; opening must succeed or fail cleanly.
void fuzzHeader(const std::string& source, const std::string& path, int iterations, uint32_t seed)
{
    const Bytes orig = readBytes(source);
    auto full = File::open(source);
    ASSERT_TRUE(full.ok()) << full.error().message;
    ASSERT_FALSE(orig.empty()) << "cannot read " << source;
    const size_t header = std::min<size_t>((*full)->dataOffset(), orig.size());
    std::mt19937 rng(seed);
    int failures = 0;
    for (int it = 0; it < iterations; ++it) {
        Bytes b = orig;
        const int flips = 1 + int(rng() % 8);
        for (int i = 0; i < flips; ++i) b[rng() % header] ^= uint8_t(1 + rng() % 255);
        writeBytes(path, b);
        auto r = File::open(path);
        if (r.ok()) {
            checkInvariants(**r);
        } else {
            ++failures;
            const Error& e = r.error();
            EXPECT_EQ(e.message.rfind(path + ": ", 0), 0u) << e.message;
            EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
            EXPECT_TRUE(e.code == ErrorCode::ModelFileInvalid ||
                        e.code == ErrorCode::UnsupportedModel || e.code == ErrorCode::OutOfMemory)
                << e.message;
        }
        if (testing::Test::HasFailure()) {
            ADD_FAILURE() << "iteration " << it;
            return;
        }
    }
    std::printf("fuzz %s: %d of %d corrupt copies rejected, the rest opened\n",
                source.c_str(), failures, iterations);
    EXPECT_GT(failures, iterations / 4);  // the flips do reach the checks
}
}  // namespace

TEST(GgufFuzz, SmallWrittenFile)
{
    Scratch dir;
    Writer w(32);
    fillWriter(w, 32);
    ASSERT_TRUE(w.write(dir.path("w.gguf")).ok());
    fuzzHeader(dir.path("w.gguf"), dir.path("f.gguf"), 2000, 20240601);
}

TEST(GgufFuzz, Stories260KHeader)
{
    Scratch dir;
    fuzzHeader(kStories, dir.path("f.gguf"), 300, 7);
}
