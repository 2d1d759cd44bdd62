// GGUF reader and writer: the real stories260K.gguf, writer round trips, hand-made corrupt files,
// patched copies of the real file, truncations and a byte-flip fuzz loop. Every corrupt file must
// give an Error whose message is one line starting with the path.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <unistd.h>

#include "core/formats/gguf.h"

using namespace spillway;
using namespace spillway::gguf;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

const std::string kStories = std::string(SPILLWAY_SHARED_DIR) + "/models/stories260K.gguf";

// A scratch folder per test, removed afterwards.
class Scratch {
public:
    Scratch()
    {
        const auto* info = testing::UnitTest::GetInstance()->current_test_info();
        std::string name = info->name();
        std::replace(name.begin(), name.end(), '/', '_');
        m_dir = fs::path(testing::TempDir()) /
                ("spillway-gguf-" + std::to_string(::getpid()) + "-" + name);
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    ~Scratch() { fs::remove_all(m_dir); }
    std::string path(const std::string& name) const { return (m_dir / name).string(); }
    const fs::path& dir() const { return m_dir; }

private:
    fs::path m_dir;
};

Bytes readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string& path, const Bytes& b, size_t n = SIZE_MAX)
{
    // A new file each time: ext4 flushes a file truncated and rewritten in place (auto_da_alloc),
    // which would make the thousands of corrupt copies below slow.
    ::unlink(path.c_str());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(std::min(n, b.size())));
}

template <class T>
void putAt(Bytes& b, size_t at, T v)
{
    ASSERT_LE(at + sizeof(T), b.size());
    std::memcpy(b.data() + at, &v, sizeof(T));
}

size_t find(const Bytes& b, const std::string& s)
{
    const auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
    EXPECT_NE(it, b.end()) << s;
    return size_t(it - b.begin());
}

// Opens `path` expecting a clean failure; returns the message ("" on unexpected success).
std::string expectError(const std::string& path, std::optional<ErrorCode> code = std::nullopt)
{
    auto r = File::open(path);
    EXPECT_FALSE(r.ok()) << path << " opened but should not have";
    if (r.ok()) return "";
    const Error& e = r.error();
    EXPECT_EQ(e.message.rfind(path + ": ", 0), 0u) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\r'), std::string::npos) << e.message;
    if (code) {
        EXPECT_EQ(int(e.code), int(*code)) << e.message;
    }
    return e.message;
}

// Touches every value and tensor byte range of an opened file, so that ASan sees any bad read.
size_t walk(const Value& v)
{
    if (const auto* s = v.asString()) return s->size();
    if (const auto* a = v.asArray()) {
        size_t n = 0;
        for (const Value& e : a->values) n += walk(e);
        return n + a->values.size();
    }
    return 1;
}

void checkInvariants(const File& f)
{
    size_t n = 0;
    for (const auto& kv : f.metadata()) n += walk(kv.value) + kv.key.size();
    EXPECT_GT(n + 1, 0u);
    for (const TensorInfo& t : f.tensors()) {
        ASSERT_GE(t.dims.size(), 1u);
        ASSERT_LE(t.dims.size(), 4u);
        ASSERT_EQ(t.offset % f.alignment(), 0u);
        ASSERT_LE(f.dataOffset() + t.offset + t.bytes, f.fileSize());
        ASSERT_EQ(t.bytes, gpu::rowBytes(t.type, t.cols()) * uint64_t(t.rows()));
        volatile uint8_t sink = t.data[0];
        sink = t.data[t.bytes - 1];
        (void)sink;
        EXPECT_EQ(f.tensor(t.name), &t);
    }
}

// ---- hand-made GGUF bytes, valid or not -------------------------------------------------------

struct Enc {
    Bytes b;
    template <class T>
    Enc& put(T v)
    {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Enc& str(const std::string& s)
    {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Enc& raw(const Bytes& x)
    {
        b.insert(b.end(), x.begin(), x.end());
        return *this;
    }
};

Bytes kv(const std::string& key, uint32_t type, const Bytes& payload)
{
    return Enc().str(key).put(type).raw(payload).b;
}
Bytes kvU32(const std::string& key, uint32_t v) { return kv(key, 4, Enc().put(v).b); }
Bytes kvStr(const std::string& key, const std::string& v) { return kv(key, 8, Enc().str(v).b); }

struct RawTensor {
    RawTensor(std::string n, std::vector<uint64_t> d, uint32_t t, uint64_t o)
        : name(std::move(n)), dims(std::move(d)), type(t), offset(o) {}
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type = 0;
    uint64_t offset = 0;
    std::optional<uint32_t> nDims;  // written instead of dims.size()
};

struct RawFile {
    uint32_t version = 3;
    std::optional<uint64_t> tensorCount, kvCount;
    std::vector<Bytes> kvs{kvStr("general.architecture", "llama"),
                           kvU32("general.alignment", 32)};
    std::vector<RawTensor> tensors{{"a", {8, 2}, 0, 0}, {"b", {32}, 8, 64}};  // F32, Q8_0
    uint64_t alignment = 32;
    uint64_t dataBytes = 64 + 34;

    Bytes build() const
    {
        Enc e;
        e.raw({'G', 'G', 'U', 'F'}).put(version);
        e.put<uint64_t>(tensorCount.value_or(tensors.size()));
        e.put<uint64_t>(kvCount.value_or(kvs.size()));
        for (const Bytes& k : kvs) e.raw(k);
        for (const RawTensor& t : tensors) {
            e.str(t.name).put<uint32_t>(t.nDims.value_or(uint32_t(t.dims.size())));
            for (uint64_t d : t.dims) e.put(d);
            e.put(t.type).put(t.offset);
        }
        e.b.resize((e.b.size() + alignment - 1) / alignment * alignment, 0);
        for (uint64_t i = 0; i < dataBytes; ++i) e.b.push_back(uint8_t(i * 7));
        return e.b;
    }
};

// ---- a writer exercising every value type and dtype -------------------------------------------

uint8_t patternByte(size_t tensor, size_t i) { return uint8_t((i * 131 + tensor * 17 + 7) >> 1); }

struct Expected {
    std::vector<KeyValue> kv;  // in file order, general.alignment first
    struct Tensor {
        std::string name;
        gpu::DType type;
        std::vector<int64_t> dims;
        uint64_t bytes;
    };
    std::vector<Tensor> tensors;
};

Expected fillWriter(Writer& w, uint64_t alignment)
{
    Expected x;
    x.kv.push_back({"general.alignment", Value::ofUInt(ValueType::UInt32, alignment)});
    const auto set = [&](const std::string& key, Value v) {
        w.setValue(key, v);
        x.kv.push_back({key, std::move(v)});
    };
    w.setString("general.architecture", "replaced below");
    x.kv.push_back({"general.architecture", Value::ofString("llama")});
    const auto add = [&](const char* key, Value v) { x.kv.push_back({key, std::move(v)}); };
    using VT = ValueType;
    w.setUInt8("t.u8", 250), add("t.u8", Value::ofUInt(VT::UInt8, 250));
    w.setInt8("t.i8", -128), add("t.i8", Value::ofInt(VT::Int8, -128));
    w.setUInt16("t.u16", 65535), add("t.u16", Value::ofUInt(VT::UInt16, 65535));
    w.setInt16("t.i16", -12345), add("t.i16", Value::ofInt(VT::Int16, -12345));
    w.setUInt32("t.u32", 4000000000u), add("t.u32", Value::ofUInt(VT::UInt32, 4000000000u));
    w.setInt32("t.i32", -2000000000), add("t.i32", Value::ofInt(VT::Int32, -2000000000));
    w.setUInt64("t.u64", UINT64_MAX), add("t.u64", Value::ofUInt(VT::UInt64, UINT64_MAX));
    w.setInt64("t.i64", INT64_MIN), add("t.i64", Value::ofInt(VT::Int64, INT64_MIN));
    w.setFloat32("t.f32", 1e-5f), add("t.f32", Value::ofFloat(VT::Float32, double(1e-5f)));
    w.setFloat64("t.f64", -3.25e300), add("t.f64", Value::ofFloat(VT::Float64, -3.25e300));
    w.setBool("t.true", true), add("t.true", Value::ofBool(true));
    w.setBool("t.false", false), add("t.false", Value::ofBool(false));
    static const char odd[] = "nul\0inside, \xc3\xa9, new\nline";
    set("t.str", Value::ofString(std::string(odd, sizeof odd - 1)));
    set("t.empty", Value::ofString(""));
    w.setStringArray("t.tokens", {"<unk>", "<s>", "", "\xe2\x96\x81the"});
    x.kv.push_back({"t.tokens", Value::ofArray(ValueType::String,
        {Value::ofString("<unk>"), Value::ofString("<s>"), Value::ofString(""),
         Value::ofString("\xe2\x96\x81the")})});
    w.setFloat32Array("t.scores", {0.f, -1.5f, 3e38f});
    x.kv.push_back({"t.scores", Value::ofArray(ValueType::Float32,
        {Value::ofFloat(ValueType::Float32, 0.0), Value::ofFloat(ValueType::Float32, -1.5),
         Value::ofFloat(ValueType::Float32, double(3e38f))})});
    w.setInt32Array("t.types", {1, 2, -3});
    x.kv.push_back({"t.types", Value::ofArray(ValueType::Int32,
        {Value::ofInt(ValueType::Int32, 1), Value::ofInt(ValueType::Int32, 2),
         Value::ofInt(ValueType::Int32, -3)})});
    set("t.emptyArray", Value::ofArray(ValueType::UInt64, {}));
    set("t.bools", Value::ofArray(ValueType::Bool, {Value::ofBool(true), Value::ofBool(false)}));
    set("t.nested", Value::ofArray(ValueType::Array,
        {Value::ofArray(ValueType::UInt8, {Value::ofUInt(ValueType::UInt8, 1)}),
         Value::ofArray(ValueType::String, {Value::ofString("x")}),
         Value::ofArray(ValueType::Array, {Value::ofArray(ValueType::Int16, {})})}));
    w.setString("general.architecture", "llama");  // replaces, keeps its first position

    const std::vector<Expected::Tensor> tensors = {
        {"f32.7x3", gpu::DType::F32, {7, 3}, 7 * 3 * 4},
        {"q8.64x5", gpu::DType::Q8_0, {64, 5}, 2 * 5 * 34},
        {"q4.32x1", gpu::DType::Q4_0, {32, 1}, 18},
        {"bf16.3x4x2", gpu::DType::BF16, {3, 4, 2}, 3 * 4 * 2 * 2},
        {"f16.5", gpu::DType::F16, {5}, 10},
        {"f32.4d", gpu::DType::F32, {2, 3, 1, 5}, 2 * 3 * 5 * 4},
        {"q4.96x3", gpu::DType::Q4_0, {96, 3}, 3 * 3 * 18},
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        w.addTensor(t.name, t.type, t.dims, [i, bytes = t.bytes](std::span<uint8_t> out) {
            EXPECT_EQ(out.size(), bytes);
            for (size_t j = 0; j < out.size(); ++j) out[j] = patternByte(i, j);
        });
    }
    x.tensors = tensors;
    return x;
}

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
    EXPECT_EQ(std::get<uint64_t>(f.find("t.u64")->v), UINT64_MAX);
    EXPECT_EQ(f.getFloat("t.f32"), double(1e-5f));
    EXPECT_EQ(f.getFloat("t.f64"), -3.25e300);
    EXPECT_EQ(f.getBool("t.true"), true);
    EXPECT_EQ(f.getBool("t.false"), false);
    EXPECT_EQ(f.getString("t.str")->size(), 24u);
    EXPECT_EQ(f.getString("t.str")->substr(4, 6), "inside");
    const Array* nested = f.find("t.nested")->asArray();
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->values.size(), 3u);
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

// ---- the real model ----------------------------------------------------------------------------

TEST(GgufReal, Stories260KOpens)
{
    auto r = File::open(kStories);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const File& f = **r;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.dataOffset(), 14176u);
    EXPECT_EQ(f.metadata().size(), 19u);
    ASSERT_EQ(f.tensors().size(), 48u);
    EXPECT_EQ(f.getString("general.architecture"), "llama");
    EXPECT_EQ(f.getInt("llama.embedding_length"), 64);
    EXPECT_EQ(f.getInt("llama.block_count"), 5);
    EXPECT_EQ(f.getInt("tokenizer.ggml.padding_token_id"), 4294967295);
    EXPECT_NEAR(*f.getFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
    EXPECT_FALSE(f.getInt("general.architecture").has_value());
    EXPECT_FALSE(f.getString("no.such.key").has_value());
    EXPECT_FALSE(f.getBool("llama.block_count").has_value());

    const TensorInfo* embd = f.tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->dims, (std::vector<int64_t>{64, 512}));
    EXPECT_EQ(embd->type, gpu::DType::F32);
    EXPECT_EQ(embd->cols(), 64);
    EXPECT_EQ(embd->rows(), 512);
    EXPECT_EQ(embd->elements(), 64 * 512);
    EXPECT_EQ(embd->bytes, 64u * 512 * 4);
    EXPECT_EQ(f.tensor("no.such.tensor"), nullptr);
    // output.weight is a separate copy of token_embd.weight (see models/README.md).
    const TensorInfo* out = f.tensor("output.weight");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(std::memcmp(out->data, embd->data, embd->bytes), 0);
    EXPECT_EQ(f.tensors().back().name, "blk.4.ffn_norm.weight");
    EXPECT_EQ(f.dataOffset() + f.tensors().back().offset + 256, f.fileSize());

    const Value* tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_NE(tokens->asArray(), nullptr);
    EXPECT_EQ(tokens->asArray()->elementType, ValueType::String);
    ASSERT_EQ(tokens->asArray()->values.size(), 512u);
    EXPECT_EQ(*tokens->asArray()->values[1].asString(), "<s>");
    EXPECT_EQ(*tokens->asArray()->values[2].asString(), "</s>");
    const Value* types = f.find("tokenizer.ggml.token_type");
    ASSERT_NE(types, nullptr);
    EXPECT_EQ(types->asArray()->elementType, ValueType::Int32);
    EXPECT_EQ(types->asArray()->values[0].asInt(), 2);
    checkInvariants(f);
}

TEST(GgufTypes, Names)
{
    EXPECT_STREQ(ggmlTypeName(12), "Q4_K");
    EXPECT_STREQ(ggmlTypeName(39), "MXFP4");
    EXPECT_EQ(ggmlTypeName(4), nullptr);
    EXPECT_EQ(ggmlTypeName(77), nullptr);
    EXPECT_EQ(ggmlTypeInfo(8)->blockBytes, 34);
    for (auto t : {gpu::DType::F32, gpu::DType::F16, gpu::DType::BF16, gpu::DType::Q8_0,
                   gpu::DType::Q4_0}) {
        EXPECT_EQ(dtypeFromGgml(ggmlFromDtype(t)), t);
        const GgmlTypeInfo* info = ggmlTypeInfo(ggmlFromDtype(t));
        EXPECT_STREQ(info->name, gpu::dtypeName(t));
        EXPECT_EQ(info->blockSize, gpu::dtypeTraits(t).blockSize);
        EXPECT_EQ(info->blockBytes, gpu::dtypeTraits(t).blockBytes);
    }
    EXPECT_FALSE(dtypeFromGgml(12).has_value());
    EXPECT_EQ(detail::quoted("a'\n\x01z"), "'a\\x27\\x0a\\x01z'");
    using VT = ValueType;
    EXPECT_TRUE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt8, 1));
    EXPECT_FALSE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt16, 1));
    EXPECT_FALSE(Value::ofUInt(VT::UInt8, 1) == Value::ofUInt(VT::UInt8, 2));
    const auto arr = [](int64_t last) {
        const Value inner =
            Value::ofArray(VT::Int8, {Value::ofInt(VT::Int8, 3), Value::ofInt(VT::Int8, last)});
        return Value::ofArray(VT::Array, {inner});
    };
    EXPECT_TRUE(arr(4) == arr(4));
    EXPECT_FALSE(arr(4) == arr(5));
    EXPECT_EQ(Value::ofUInt(VT::UInt64, UINT64_MAX).asInt(), std::nullopt);
    EXPECT_EQ(Value::ofBool(true).asInt(), 1);
    EXPECT_EQ(Value::ofString("7").asInt(), std::nullopt);
}

// ---- writer ------------------------------------------------------------------------------------

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
    ASSERT_TRUE(again.ok());
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

// ---- hand-made corrupt files ------------------------------------------------------------------

class GgufCorrupt : public testing::Test {
protected:
    // Writes `f`, opens it and checks the error code and that the message contains `what`.
    void expectFailure(const RawFile& f, ErrorCode code, const std::string& what)
    {
        writeBytes(m_path, f.build());
        const std::string msg = expectError(m_path, code);
        EXPECT_NE(msg.find(what), std::string::npos) << "wanted '" << what << "' in: " << msg;
    }
    Scratch m_dir;
    std::string m_path = m_dir.path("c.gguf");
};

TEST_F(GgufCorrupt, BaseFileIsValid)
{
    writeBytes(m_path, RawFile().build());
    auto r = File::open(m_path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)->tensors().size(), 2u);
    EXPECT_EQ((*r)->tensor("b")->type, gpu::DType::Q8_0);
    checkInvariants(**r);
}

TEST_F(GgufCorrupt, Header)
{
    constexpr auto bad = ErrorCode::ModelFileInvalid;
    constexpr auto unsupported = ErrorCode::UnsupportedModel;
    writeBytes(m_path, {});
    EXPECT_NE(expectError(m_path, bad).find("empty file"), std::string::npos);
    writeBytes(m_path, {'G', 'G', 'U'});
    EXPECT_NE(expectError(m_path, bad).find("only 3 bytes"), std::string::npos);
    Bytes b = RawFile().build();
    b[3] = 'L';
    writeBytes(m_path, b);
    EXPECT_NE(expectError(m_path, bad).find("not a GGUF file (magic 'GGUL')"), std::string::npos);
    b[0] = '\n';
    writeBytes(m_path, b);
    EXPECT_NE(expectError(m_path, bad).find("magic '\\x0aGUL'"), std::string::npos);
    RawFile f;
    f.version = 1;
    expectFailure(f, unsupported, "version 1");
    f.version = 99;
    expectFailure(f, unsupported, "version 99");
    f.version = 0x03000000;
    expectFailure(f, unsupported, "big-endian");
    f.version = 0;
    expectFailure(f, bad, "version 0");
    f = RawFile();
    f.tensorCount = uint64_t(1) << 40;
    expectFailure(f, bad, "tensor count 1099511627776 cannot fit");
    f = RawFile();
    f.kvCount = uint64_t(1) << 40;
    expectFailure(f, bad, "metadata count 1099511627776 cannot fit");
    f = RawFile();
    f.kvCount = 3;  // one more than there are: tensor info 0 is read as key 'a' of type uint16
    expectFailure(f, bad, "tensor info 0 name is a string of");
}

TEST_F(GgufCorrupt, Metadata)
{
    constexpr auto bad = ErrorCode::ModelFileInvalid;
    const auto with = [](Bytes extra) {
        RawFile f;
        f.kvs.push_back(std::move(extra));
        return f;
    };
    expectFailure(with(Enc().put<uint64_t>(uint64_t(1) << 62).str("x").b), bad,
                  "metadata key 2 name is a string of 4611686018427387904 bytes");
    expectFailure(with(kv("s", 8, Enc().put<uint64_t>(UINT64_MAX).b)), bad,
                  "metadata key 2 ('s') string is a string of 18446744073709551615 bytes");
    expectFailure(with(kv("a", 9, Enc().put<uint32_t>(0).put<uint64_t>(uint64_t(1) << 60).b)), bad,
                  "is an array of 1152921504606846976 uint8 values");
    expectFailure(with(kv("a", 9, Enc().put<uint32_t>(9).put<uint64_t>(uint64_t(1) << 60).b)), bad,
                  "is an array of 1152921504606846976 array values");
    expectFailure(with(kv("u", 13, Enc().put<uint32_t>(0).b)), bad,
                  "metadata key 2 ('u') has unknown value type 13");
    expectFailure(with(kv("a", 9, Enc().put<uint32_t>(99).put<uint64_t>(1).b)), bad,
                  "array of unknown value type 99");
    expectFailure(with(kv("b", 7, Bytes{2})), bad, "bool of value 2");
    // An error inside an array names the element.
    expectFailure(with(kv("a", 9, Enc().put<uint32_t>(7).put<uint64_t>(3).raw({1, 0, 5}).b)), bad,
                  "metadata key 2 ('a') element 2 is a bool of value 5");
    Enc deep;  // arrays nested 20 deep
    for (int i = 0; i < 20; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
    deep.put<uint32_t>(0).put<uint64_t>(0);
    expectFailure(with(kv("deep", 9, deep.b)), bad, "nests arrays deeper than 8");
    expectFailure(with(kvStr("general.architecture", "x")), bad,
                  "duplicate metadata key 'general.architecture' (keys 0 and 2)");
    for (uint32_t a : {0u, 3u, 48u}) {
        RawFile f;
        f.kvs[1] = kvU32("general.alignment", a);
        expectFailure(f, bad, "general.alignment is " + std::to_string(a));
    }
    RawFile f;
    f.kvs[1] = kvStr("general.alignment", "32");
    expectFailure(f, bad, "general.alignment has type string");
}

TEST_F(GgufCorrupt, TensorInfos)
{
    constexpr auto bad = ErrorCode::ModelFileInvalid;
    RawFile f;
    f.tensors[0].nDims = 0;
    f.tensors[0].dims = {};
    expectFailure(f, bad, "tensor info 0 ('a') has 0 dimensions");
    f = RawFile();
    f.tensors[1].nDims = 9;
    f.tensors[1].dims = {32, 1, 1, 1, 1, 1, 1, 1, 1};
    expectFailure(f, bad, "tensor info 1 ('b') has 9 dimensions");
    f = RawFile();
    f.tensors[0].dims = {8, 0};
    expectFailure(f, bad, "has dimension 1 of 0");
    f = RawFile();
    f.tensors[0].dims = {uint64_t(1) << 63, 1};
    expectFailure(f, bad, "has dimension 0 of 9223372036854775808");
    f = RawFile();
    f.tensors[0].dims = {uint64_t(1) << 32, uint64_t(1) << 32};
    expectFailure(f, bad, "overflows");
    f = RawFile();
    f.tensors[0].dims = {uint64_t(1) << 40, uint64_t(1) << 22};  // elements fit, bytes do not
    expectFailure(f, bad, "overflows");
    f = RawFile();
    f.tensors[1].name = "a\nb";
    f.tensors[0].name = "a\nb";
    expectFailure(f, bad, "duplicate tensor name 'a\\x0ab' (tensor infos 0 and 1)");
    f = RawFile();
    f.tensors[1].type = 77;
    expectFailure(f, bad, "tensor 'b' has unknown tensor type id 77");
    f = RawFile();
    f.tensors[1].dims = {33};
    expectFailure(f, bad, "has 33 columns, not a multiple of its block size 32");
    f = RawFile();
    f.tensors[1].offset = uint64_t(1) << 40;
    expectFailure(f, bad, "lies past the end of the file");
    f = RawFile();
    f.tensors[1].offset = UINT64_MAX - 31;  // data start + offset wraps around
    expectFailure(f, bad, "lies past the end of the file");
    f = RawFile();
    f.tensors[1].offset = 68;
    expectFailure(f, bad, "tensor 'b' data offset 68 is not a multiple of the alignment 32");
    f = RawFile();
    f.dataBytes = 64 + 33;
    expectFailure(f, bad, "truncated: tensor 'b' needs 34 bytes");
    // Overlapping tensors are allowed (nothing in the spec forbids aliasing data).
    f = RawFile();
    f.tensors[1] = RawTensor("c", {16}, 0, 0);
    writeBytes(m_path, f.build());
    EXPECT_TRUE(File::open(m_path).ok());
    // Directories and missing files are I/O errors.
    expectError(m_dir.path("missing.gguf"), ErrorCode::Io);
    expectError(m_dir.dir().string(), ErrorCode::Io);
}

TEST_F(GgufCorrupt, UnsupportedKnownType)
{
    RawFile f;
    // Q4_K (type 12), 2 rows of 144 bytes.
    f.tensors.emplace_back("blk.0.attn_q.weight", std::vector<uint64_t>{256, 2}, 12, 128);
    f.dataBytes = 128 + 288;
    writeBytes(m_path, f.build());
    auto r = File::open(m_path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_EQ(r.error().message,
              m_path + ": tensor 'blk.0.attn_q.weight' has type Q4_K, which Spillway cannot run "
                       "yet (supported: F32, F16, BF16, Q8_0, Q4_0)");
    // A structural problem elsewhere is reported first: the file is corrupt, not just unusual.
    f.dataBytes = 128 + 287;
    writeBytes(m_path, f.build());
    EXPECT_NE(expectError(m_path, ErrorCode::ModelFileInvalid).find("truncated"),
              std::string::npos);
}

// ---- the real file, patched and truncated ------------------------------------------------------

TEST(GgufRealCorrupt, PatchedFields)
{
    Scratch dir;
    const std::string path = dir.path("s.gguf");
    const Bytes orig = readBytes(kStories);
    ASSERT_EQ(orig.size(), 1185376u);
    // The first key is tokenizer.ggml.tokens: key length at 24, value type at 53, array element
    // type at 57, count at 61, first string length at 69.
    ASSERT_EQ(std::string(orig.begin() + 32, orig.begin() + 53), "tokenizer.ggml.tokens");
    const size_t embd = find(orig, "token_embd.weight");  // name; n_dims, dims, type, offset
    struct Case {
        size_t at;
        uint64_t value;
        int bytes;
        ErrorCode code;
        std::string what;
    };
    constexpr auto bad = ErrorCode::ModelFileInvalid;
    const std::vector<Case> cases = {
        {0, 0x46554746, 4, bad, "magic 'FGUF'"},
        {4, 1, 4, ErrorCode::UnsupportedModel, "version 1"},
        {4, 99, 4, ErrorCode::UnsupportedModel, "version 99"},
        {8, uint64_t(1) << 40, 8, bad, "tensor count"},
        {16, uint64_t(1) << 40, 8, bad, "metadata count"},
        {24, uint64_t(1) << 62, 8, bad, "is a string of 4611686018427387904 bytes"},
        {53, 13, 4, bad, "unknown value type 13"},
        {57, 77, 4, bad, "array of unknown value type 77"},
        {61, uint64_t(1) << 60, 8, bad, "is an array of 1152921504606846976 string values"},
        {61, 513, 8, bad, "metadata key 1"},  // one string too many: the next key is misread
        {69, uint64_t(1) << 50, 8, bad, "element 0 string is a string of"},
        {embd + 17, 0, 4, bad, "tensor info 0 ('token_embd.weight') has 0 dimensions"},
        {embd + 17, 9, 4, bad, "has 9 dimensions"},
        {embd + 21, 0, 8, bad, "has dimension 0 of 0"},
        {embd + 21, uint64_t(1) << 62, 8, bad, "overflows"},
        {embd + 29, uint64_t(1) << 62, 8, bad, "overflows"},
        {embd + 37, 77, 4, bad, "unknown tensor type id 77"},
        {embd + 37, 12, 4, bad, "not a multiple of its block size 256"},
        {embd + 37, 3, 4, ErrorCode::UnsupportedModel, "'token_embd.weight' has type Q4_1"},
        {embd + 41, 4, 8, bad, "not a multiple of the alignment 32"},
        {embd + 41, uint64_t(1) << 40, 8, bad, "past the end of the file"},
        {embd + 41, 1185376 - 14176 - 131072 + 32, 8, bad, "truncated: tensor 'token_embd"},
    };
    for (const Case& c : cases) {
        Bytes b = orig;
        if (c.bytes == 4) putAt<uint32_t>(b, c.at, uint32_t(c.value));
        else putAt<uint64_t>(b, c.at, c.value);
        writeBytes(path, b);
        const std::string msg = expectError(path, c.code);
        EXPECT_NE(msg.find(c.what), std::string::npos) << "wanted '" << c.what << "' in: " << msg;
    }
    Bytes b = orig;  // blk.0.attn_k.weight renamed blk.0.attn_q.weight
    b[find(b, "blk.0.attn_k.weight") + 11] = 'q';
    writeBytes(path, b);
    EXPECT_NE(expectError(path, bad).find("duplicate tensor name 'blk.0.attn_q.weight'"),
              std::string::npos);
    b = orig;  // bos_token_id renamed eos_token_id
    b[find(b, "tokenizer.ggml.bos_token_id") + 15] = 'e';
    writeBytes(path, b);
    EXPECT_NE(expectError(path, bad).find("duplicate metadata key 'tokenizer.ggml.eos_token_id'"),
              std::string::npos);
}

// Every truncation of a file whose last tensor ends at (or near) the end must fail cleanly.
void checkTruncations(const std::string& source, const std::string& path, size_t headerStride)
{
    const Bytes orig = readBytes(source);
    auto full = File::open(source);
    ASSERT_TRUE(full.ok()) << full.error().message;
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

// Flips 1-8 random bytes of the header region; opening must succeed or fail cleanly.
void fuzzHeader(const std::string& source, const std::string& path, int iterations, uint32_t seed)
{
    const Bytes orig = readBytes(source);
    auto full = File::open(source);
    ASSERT_TRUE(full.ok()) << full.error().message;
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
