// GGUF writer: round trips of every value type and dtype at several alignments, files without
// tensors, rejected input and unwritable paths. Nothing half-written is ever left behind.

#include <gtest/gtest.h>

#include <filesystem>
#include <span>
#include <string>
#include <variant>

#include "gguf_test_util.h"

using namespace spillway;
using namespace spillway::gguf;
using namespace spillway::gguf_test;

namespace {

// Checks a file written from fillWriter(w, alignment) against what fillWriter said it holds.
void checkRoundTrip(const File& f, const Expected& x, uint64_t alignment)
{
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.dataOffset() % alignment, 0u);
    ASSERT_EQ(f.metadata().size(), x.kv.size());
    for (size_t i = 0; i < x.kv.size(); ++i) {
        EXPECT_EQ(f.metadata()[i].key, x.kv[i].key) << i;
        EXPECT_TRUE(f.metadata()[i].value == x.kv[i].value) << x.kv[i].key;
        EXPECT_EQ(f.find(x.kv[i].key), &f.metadata()[i].value);
    }
    // Spot checks that do not rely on Value's operator==.
    EXPECT_EQ(f.getInt("t.u8"), 250);
    EXPECT_EQ(f.getInt("t.i64"), INT64_MIN);
    ASSERT_NE(f.find("t.u64"), nullptr);
    EXPECT_EQ(std::get<uint64_t>(f.find("t.u64")->v), UINT64_MAX);
    EXPECT_EQ(f.getFloat("t.f32"), double(1e-5f));
    EXPECT_EQ(f.getFloat("t.f64"), -3.25e300);
    EXPECT_EQ(f.getBool("t.true"), true);
    EXPECT_EQ(f.getBool("t.false"), false);
    ASSERT_TRUE(f.getString("t.str").has_value());
    EXPECT_EQ(f.getString("t.str")->size(), 24u);
    EXPECT_EQ(f.getString("t.str")->substr(4, 6), "inside");
    ASSERT_NE(f.find("t.nested"), nullptr);
    const Array* nested = f.find("t.nested")->asArray();
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->values.size(), 3u);
    ASSERT_NE(nested->values[1].asArray(), nullptr);
    ASSERT_FALSE(nested->values[1].asArray()->values.empty());
    ASSERT_NE(nested->values[1].asArray()->values[0].asString(), nullptr);
    ASSERT_NE(nested->values[2].asArray(), nullptr);
    ASSERT_FALSE(nested->values[2].asArray()->values.empty());
    ASSERT_NE(nested->values[2].asArray()->values[0].asArray(), nullptr);
    EXPECT_EQ(*nested->values[1].asArray()->values[0].asString(), "x");
    EXPECT_EQ(nested->values[2].asArray()->values[0].asArray()->elementType, ValueType::Int16);
    ASSERT_EQ(f.tensors().size(), x.tensors.size());
    for (size_t i = 0; i < x.tensors.size(); ++i) {
        const TensorInfo& t = f.tensors()[i];
        EXPECT_EQ(t.name, x.tensors[i].name);
        EXPECT_EQ(t.type, x.tensors[i].type);
        EXPECT_EQ(t.ggmlType, ggmlFromDtype(x.tensors[i].type));
        EXPECT_EQ(t.dims, x.tensors[i].dims);
        ASSERT_EQ(t.bytes, x.tensors[i].bytes) << t.name;
        EXPECT_EQ(t.offset % alignment, 0u);
        for (size_t j = 0; j < t.bytes; ++j) ASSERT_EQ(t.data[j], patternByte(i, j)) << t.name;
    }
    checkInvariants(f);
}

}  // namespace

class GgufRoundTrip : public testing::TestWithParam<uint64_t> {};

TEST_P(GgufRoundTrip, EveryTypeAndDtype)
{
    Scratch dir;
    const uint64_t alignment = GetParam();
    Writer w(alignment);
    const Expected x = fillWriter(w, alignment);
    const std::string path = dir.path("rt.gguf");
    ASSERT_TRUE(w.write(path).ok());
    auto r = File::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    checkRoundTrip(**r, x, alignment);
    EXPECT_EQ((*r)->fileSize() % alignment, 0u);

    // Writing again over the file replaces it; no temporary files are left behind.
    ASSERT_TRUE(w.write(path).ok());
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir.dir())) entries += e.is_regular_file();
    EXPECT_EQ(entries, 1u);
    auto again = File::open(path);
    ASSERT_TRUE(again.ok()) << again.error().message;
    checkRoundTrip(**again, x, alignment);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufRoundTrip, testing::Values(32u, 4096u, 1u));

TEST(GgufWriter, NoTensors)
{
    Scratch dir;
    Writer w;
    w.setString("general.architecture", "llama");
    w.setUInt32("general.alignment", 64);  // overridden: the writer's alignment is 32
    ASSERT_TRUE(w.write(dir.path("e.gguf")).ok());
    auto r = File::open(dir.path("e.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE((*r)->tensors().empty());
    EXPECT_EQ((*r)->alignment(), 32u);
    EXPECT_EQ((*r)->metadata().size(), 2u);
    EXPECT_EQ((*r)->metadata()[1].key, "general.alignment");
}

TEST(GgufWriter, RejectsBadInput)
{
    Scratch dir;
    const auto fill = [](std::span<uint8_t>) {};
    const auto expectInvalid = [&](const Writer& w, const std::string& what) {
        const std::string path = dir.path("bad.gguf");
        const Status s = w.write(path);
        ASSERT_FALSE(s.ok()) << what;
        EXPECT_EQ(s.error().code, ErrorCode::InvalidArgument) << s.error().message;
        EXPECT_NE(s.error().message.find(what), std::string::npos) << s.error().message;
        EXPECT_EQ(s.error().message.rfind(path + ": ", 0), 0u);
        EXPECT_FALSE(fs::exists(path));
        EXPECT_TRUE(fs::is_empty(dir.dir()));
    };
    Writer dup;
    dup.addTensor("x", gpu::DType::F32, {4}, fill);
    dup.addTensor("x", gpu::DType::F32, {4}, fill);
    expectInvalid(dup, "duplicate tensor 'x'");
    Writer block;
    block.addTensor("q", gpu::DType::Q8_0, {33, 2}, fill);
    expectInvalid(block, "not a multiple of its block size 32");
    Writer zero;
    zero.addTensor("z", gpu::DType::F32, {4, 0}, fill);
    expectInvalid(zero, "dimension of 0");
    Writer five;
    five.addTensor("d", gpu::DType::F32, {1, 1, 1, 1, 1}, fill);
    expectInvalid(five, "5 dimensions");
    Writer unaligned(3);
    expectInvalid(unaligned, "alignment 3");
    Writer range;
    range.setValue("k", Value::ofUInt(ValueType::UInt8, 300));
    expectInvalid(range, "300 does not fit in uint8");
    Writer mixed;
    mixed.setValue("k", Value::ofArray(ValueType::Int32, {Value::ofString("s")}));
    expectInvalid(mixed, "element 0 has type string");
}

TEST(GgufWriter, MissingFolderIsIoError)
{
    Scratch dir;
    Writer w;
    w.addTensor("x", gpu::DType::F32, {4}, [](std::span<uint8_t>) {});
    const std::string path = dir.path("missing/sub/x.gguf");
    const Status s = w.write(path);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::Io) << s.error().message;
    EXPECT_EQ(s.error().message.rfind(path + ": ", 0), 0u) << s.error().message;
    EXPECT_FALSE(fs::exists(dir.path("missing")));
    EXPECT_TRUE(fs::is_empty(dir.dir()));
}
