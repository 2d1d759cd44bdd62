// GGUF reader on corrupt input: hand-made files with one field wrong each, and patched copies of
// the real stories260K.gguf. Every corrupt file must give an Error whose message is one line
// starting with the path, naming what is wrong.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gguf_test_util.h"

using namespace spillway;
using namespace spillway::gguf;
using namespace spillway::gguf_test;

namespace {

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

}  // namespace

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
    ASSERT_NE((*r)->tensor("b"), nullptr);
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
    // TQ1_0 (type 34, ggml's ternary blocks: known, not run), 2 rows of 54 bytes.
    f.tensors.emplace_back("blk.0.attn_q.weight", std::vector<uint64_t>{256, 2}, 34, 128);
    f.dataBytes = 128 + 108;
    writeBytes(m_path, f.build());
    auto r = File::open(m_path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::UnsupportedModel);
    EXPECT_EQ(r.error().message,
              m_path + ": tensor 'blk.0.attn_q.weight' has type TQ1_0, which Spillway cannot run "
                       "yet (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
                       "Q5_K, Q6_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, MXFP4)");
    // A structural problem elsewhere is reported first: the file is corrupt, not just unusual.
    f.dataBytes = 128 + 107;
    writeBytes(m_path, f.build());
    EXPECT_NE(expectError(m_path, ErrorCode::ModelFileInvalid).find("truncated"),
              std::string::npos);
}

// ---- the real file, patched ------------------------------------------------------------------

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
        {embd + 37, 9, 4, ErrorCode::UnsupportedModel, "'token_embd.weight' has type Q8_1"},
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
    const size_t attnK = find(b, "blk.0.attn_k.weight");
    ASSERT_LT(attnK + 11, b.size());
    b[attnK + 11] = 'q';
    writeBytes(path, b);
    EXPECT_NE(expectError(path, bad).find("duplicate tensor name 'blk.0.attn_q.weight'"),
              std::string::npos);
    b = orig;  // bos_token_id renamed eos_token_id
    const size_t bos = find(b, "tokenizer.ggml.bos_token_id");
    ASSERT_LT(bos + 15, b.size());
    b[bos + 15] = 'e';
    writeBytes(path, b);
    EXPECT_NE(expectError(path, bad).find("duplicate metadata key 'tokenizer.ggml.eos_token_id'"),
              std::string::npos);
}

