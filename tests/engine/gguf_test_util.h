#pragma once
// Helpers shared by the GGUF tests (test_gguf_reader.cpp, test_gguf_writer.cpp,
// test_gguf_corrupt.cpp, test_gguf_fuzz.cpp): scratch folders, file bytes, the clean-failure
// check every corrupt file must pass, and a writer filled with every value type and dtype.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/formats/gguf.h"

namespace spillway::gguf_test {

using namespace spillway::gguf;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

inline const std::string kStories = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

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

inline Bytes readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Writes the first `n` bytes of `b` (all of them by default).
inline void writeBytes(const std::string& path, const Bytes& b, size_t n = SIZE_MAX)
{
    // A new file each time: ext4 flushes a file truncated and rewritten in place (auto_da_alloc),
    // which would make the thousands of corrupt copies in the tests slow.
    ::unlink(path.c_str());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(std::min(n, b.size())));
}

// Opens `path` expecting a clean failure; returns the message ("" on unexpected success).
inline std::string expectError(const std::string& path,
                               std::optional<ErrorCode> code = std::nullopt)
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
inline size_t walk(const Value& v)
{
    if (const auto* s = v.asString()) return s->size();
    if (const auto* a = v.asArray()) {
        size_t n = 0;
        for (const Value& e : a->values) n += walk(e);
        return n + a->values.size();
    }
    return 1;
}

inline void checkInvariants(const File& f)
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

// ---- a writer exercising every value type and dtype -------------------------------------------

// Byte i of tensor number `tensor` as fillWriter writes it.
inline uint8_t patternByte(size_t tensor, size_t i)
{
    return uint8_t((i * 131 + tensor * 17 + 7) >> 1);
}

// What a file written by fillWriter must read back as.
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

inline Expected fillWriter(Writer& w, uint64_t alignment)
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

}  // namespace spillway::gguf_test
