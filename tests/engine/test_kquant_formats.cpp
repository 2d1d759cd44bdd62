// The formats side of Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and Q8_G64: the quantizers of
// core/formats/ggml_quants.h write blocks that this test's own ggml-layout decoder
// (kquant_test_util.h) reads back close to the input; hand-built blocks decode to values worked
// out by hand (through the engine's getRow, the compress decoder and the test's decoder alike);
// GGUF files holding such tensors open with the right types; make-synthetic writes K-quants.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/formats/ggml_quants.h"
#include "core/formats/gguf.h"
#include "core/model/synthetic_model.h"
#include "kquant_test_util.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;
using namespace spillway::kquant_test;

namespace {

// A scratch folder per test, removed afterwards.
struct ScratchDir {
    std::filesystem::path dir;
    ScratchDir()
    {
        dir = std::filesystem::path(testing::TempDir()) /
              ("spillway-kquant-" + std::to_string(::getpid()) + "-" +
               testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    ~ScratchDir() { std::filesystem::remove_all(dir); }
    std::string path(const std::string& name) const { return (dir / name).string(); }
};

std::vector<uint8_t> quantized(DType type, const std::vector<float>& values)
{
    std::vector<uint8_t> bytes(rowBytes(type, int64_t(values.size())));
    gguf::quantizeRow(type, values.data(), int64_t(values.size()), bytes.data());
    return bytes;
}

// One block decoded three ways, each checked against `want` (exact values worked out by hand).
void expectBlock(DType type, const std::vector<uint8_t>& block, const std::vector<double>& want,
                 const std::vector<std::pair<int, double>>& spotChecks)
{
    const int n = dtypeTraits(type).blockSize;
    ASSERT_EQ(int(block.size()), dtypeTraits(type).blockBytes);
    ASSERT_EQ(int(want.size()), n);
    auto device = createCpuDevice(1);
    std::vector<float> viaDevice(n), viaCompress(n);
    device->getRow({type, block.data(), 1, n, block.size()}, 0, viaDevice.data());
    gguf::dequantizeRow(type, block.data(), n, viaCompress.data());
    for (int e = 0; e < n; ++e) {
        const RefValue v = refValue(type, block.data(), e);
        EXPECT_EQ(v.exact, want[e]) << dtypeName(type) << " value " << e;
        EXPECT_EQ(double(viaDevice[e]), want[e]) << dtypeName(type) << " value " << e;
        EXPECT_EQ(double(viaCompress[e]), want[e]) << dtypeName(type) << " value " << e;
    }
    for (const auto& [e, value] : spotChecks) EXPECT_EQ(want[e], value) << "value " << e;
}

void putHalfAt(std::vector<uint8_t>& b, size_t at, float f)
{
    const uint16_t h = fp32ToFp16(f);
    std::memcpy(b.data() + at, &h, 2);
}

}  // namespace

// ---- quantize -> decode ----------------------------------------------------------------------

TEST(KQuantFormats, QuantizeRoundTrip)
{
    // Bounds on rms(error) / rms(values) for normal values (measured: about 2/3 of each bound).
    const std::pair<DType, double> cases[] = {
        {DType::Q4_1, 0.12}, {DType::Q5_0, 0.06}, {DType::Q4_K, 0.12},
        {DType::Q5_K, 0.06}, {DType::Q6_K, 0.03}, {DType::Q8_G64, 0.01},
        {DType::Q8_0, 0.01}, {DType::Q4_0, 0.15},
    };
    std::mt19937_64 rng(21);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(64 * 256);
    for (size_t i = 0; i < values.size(); ++i)  // blocks of differing spread, some offset
        values[i] = normal(rng) * (0.01f + float(i / 256 % 7)) + (i / 256 % 5 == 0 ? 0.5f : 0.0f);
    for (const auto& [type, bound] : cases) {
        const std::vector<uint8_t> bytes = quantized(type, values);
        std::vector<float> back(values.size());
        gguf::dequantizeRow(type, bytes.data(), int64_t(values.size()), back.data());
        double err2 = 0, sum2 = 0, maxRel = 0;
        const int block = dtypeTraits(type).blockSize;
        for (size_t b = 0; b < values.size() / size_t(block); ++b) {
            double amax = 0;
            for (int i = 0; i < block; ++i)
                amax = std::max(amax, std::fabs(double(values[b * block + i])));
            for (int i = 0; i < block; ++i) {
                const size_t k = b * block + i;
                err2 += std::pow(double(back[k]) - values[k], 2);
                sum2 += std::pow(double(values[k]), 2);
                maxRel = std::max(maxRel, std::fabs(double(back[k]) - values[k]) / amax);
            }
        }
        const double rel = std::sqrt(err2 / sum2);
        EXPECT_LT(rel, bound) << dtypeName(type);
        EXPECT_LT(maxRel, 8 * bound) << dtypeName(type) << ": a value far off its block's range";
        // The test's own decoder of the ggml layout reads the same values.
        if (type != DType::Q8_0 && type != DType::Q4_0) {
            for (size_t k = 0; k < values.size(); ++k) {
                const uint8_t* blockBytes = bytes.data() + k / block * dtypeTraits(type).blockBytes;
                const RefValue v = refValue(type, blockBytes, int(k % block));
                ASSERT_EQ(bitsOf(v.ggml), bitsOf(back[k])) << dtypeName(type) << " value " << k;
            }
        }
        std::printf("%-6s rms error / rms = %.4f (bound %.3f)\n", dtypeName(type), rel, bound);
    }
}

TEST(KQuantFormats, QuantizeZerosAndConstants)
{
    for (DType type : kNewTypes) {
        const std::vector<float> zeros(512, 0.0f), ones(512, 0.75f);
        std::vector<float> back(512);
        gguf::dequantizeRow(type, quantized(type, zeros).data(), 512, back.data());
        for (float v : back) ASSERT_EQ(v, 0.0f) << dtypeName(type);
        gguf::dequantizeRow(type, quantized(type, ones).data(), 512, back.data());
        for (float v : back) ASSERT_NEAR(v, 0.75f, 0.75f / 50) << dtypeName(type);
    }
}

// ---- hand-built blocks -----------------------------------------------------------------------

TEST(KQuantFormats, HandBuiltQ4_KAndQ5_K)
{
    // d = 0.5, dmin = 0.25; 6-bit scales and mins, sub-blocks 4..7 using their top bits:
    const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 60};
    const int mn[8] = {0, 5, 10, 63, 16, 32, 47, 1};
    // Packed by hand: bytes 0..3 = sc[j] | (sc[j+4] >> 4) << 6, bytes 4..7 = mn[j] | (mn[j+4] >>
    // 4) << 6, bytes 8..11 = (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
    const uint8_t scales[12] = {0x41, 0x82, 0xc3, 0xff, 0x40, 0x85, 0x8a, 0x3f,
                                0x01, 0x01, 0xf0, 0x1c};
    for (bool five : {false, true}) {
        const DType type = five ? DType::Q5_K : DType::Q4_K;
        std::vector<uint8_t> b(five ? 176 : 144, 0);
        putHalfAt(b, 0, 0.5f);
        putHalfAt(b, 2, 0.25f);
        std::memcpy(b.data() + 4, scales, 12);
        // Nibble byte i: low = i % 16, high = 15 - i % 16. Q5_K: qh[l] = 0xaa sets bit 4 of the
        // values in the upper half of every 64-value chunk (odd sub-blocks).
        uint8_t* nibbles = b.data() + (five ? 48 : 16);
        for (int i = 0; i < 128; ++i) nibbles[i] = uint8_t((i % 16) | ((15 - i % 16) << 4));
        if (five) std::memset(b.data() + 16, 0xaa, 32);
        std::vector<double> want(256);
        for (int e = 0; e < 256; ++e) {
            const int j = e / 32, l = e % 32;
            const bool upper = j % 2 == 1;
            const int q = (upper ? 15 - l % 16 : l % 16) + (five && upper ? 16 : 0);
            want[e] = 0.5 * sc[j] * q - 0.25 * mn[j];
        }
        if (!five) {
            expectBlock(type, b, want,
                        {{0, 0.0}, {5, 2.5}, {32, 13.75}, {100, 330.75}, {130, 13.0},
                         {200, 180.25}, {255, -0.25}});
        } else {
            expectBlock(type, b, want, {{5, 2.5}, {32, 29.75}, {100, 834.75}, {255, 479.75}});
        }
    }
}

TEST(KQuantFormats, HandBuiltQ6_K)
{
    std::vector<uint8_t> b(210, 0);
    // ql[i]: low = i % 16, high = 15 - i % 16; qh = 0xe4 everywhere: bits (1..0, 3..2, 5..4,
    // 7..6) = 0, 1, 2, 3, so the quarter p of each 128 gets high bits p; scales g - 8; d = 1/8.
    for (int i = 0; i < 128; ++i) b[i] = uint8_t((i % 16) | ((15 - i % 16) << 4));
    std::memset(b.data() + 128, 0xe4, 64);
    for (int g = 0; g < 16; ++g) b[192 + g] = uint8_t(int8_t(g - 8));
    putHalfAt(b, 208, 0.125f);
    std::vector<double> want(256);
    for (int e = 0; e < 256; ++e) {
        const int p = e % 128 / 32, l = e % 32;
        const int low = p < 2 ? l % 16 : 15 - l % 16;
        want[e] = 0.125 * (e / 16 - 8) * (low + 16 * p - 32);
    }
    expectBlock(DType::Q6_K, b, want,
                {{0, 32.0}, {40, 6.0}, {77, -1.0}, {127, -2.0}, {200, 3.5}, {255, 14.0}});
}

TEST(KQuantFormats, HandBuiltQ4_1Q5_0AndQ8_G64)
{
    {  // Q4_1: d = 0.25, m = -1; byte i = i | (15 - i) << 4
        std::vector<uint8_t> b(20, 0);
        putHalfAt(b, 0, 0.25f);
        putHalfAt(b, 2, -1.0f);
        for (int i = 0; i < 16; ++i) b[4 + i] = uint8_t(i | ((15 - i) << 4));
        std::vector<double> want(32);
        for (int e = 0; e < 32; ++e) want[e] = 0.25 * (e < 16 ? e : 15 - (e - 16)) - 1.0;
        expectBlock(DType::Q4_1, b, want, {{0, -1.0}, {15, 2.75}, {16, 2.75}, {31, -1.0}});
    }
    {  // Q5_0: d = 0.5; qh = 0x0000ffff: bit 4 set for values 0..15 only
        std::vector<uint8_t> b(22, 0);
        putHalfAt(b, 0, 0.5f);
        const uint32_t qh = 0x0000ffffu;
        std::memcpy(b.data() + 2, &qh, 4);
        for (int i = 0; i < 16; ++i) b[6 + i] = uint8_t(i | ((15 - i) << 4));
        std::vector<double> want(32);
        for (int e = 0; e < 32; ++e) want[e] = 0.5 * (e < 16 ? e : 15 - (e - 16) - 16);
        expectBlock(DType::Q5_0, b, want, {{0, 0.0}, {15, 7.5}, {16, -0.5}, {31, -8.0}});
    }
    {  // Q8_G64: s = 0.5, q = i - 32
        std::vector<uint8_t> b(68, 0);
        const float s = 0.5f;
        std::memcpy(b.data(), &s, 4);
        for (int i = 0; i < 64; ++i) b[4 + i] = uint8_t(int8_t(i - 32));
        std::vector<double> want(64);
        for (int e = 0; e < 64; ++e) want[e] = 0.5 * (e - 32);
        expectBlock(DType::Q8_G64, b, want, {{0, -16.0}, {63, 15.5}});
    }
}

// ---- GGUF ------------------------------------------------------------------------------------

TEST(KQuantFormats, GgmlTypeIds)
{
    const std::pair<DType, uint32_t> ids[] = {{DType::Q4_1, 3}, {DType::Q5_0, 6},
                                              {DType::Q4_K, 12}, {DType::Q5_K, 13},
                                              {DType::Q6_K, 14}};
    for (const auto& [type, id] : ids) {
        EXPECT_EQ(gguf::ggmlFromDtype(type), id);
        ASSERT_TRUE(gguf::dtypeFromGgml(id).has_value());
        EXPECT_EQ(*gguf::dtypeFromGgml(id), type);
        const gguf::GgmlTypeInfo* info = gguf::ggmlTypeInfo(id);
        ASSERT_NE(info, nullptr);
        EXPECT_STREQ(info->name, dtypeName(type));
        EXPECT_EQ(info->blockSize, dtypeTraits(type).blockSize);
        EXPECT_EQ(info->blockBytes, dtypeTraits(type).blockBytes);
    }
    // Q8_G64 is llama2.c's, not ggml's: no id maps to it.
    for (uint32_t id = 0; id < 64; ++id) {
        const auto type = gguf::dtypeFromGgml(id);
        EXPECT_FALSE(type && *type == DType::Q8_G64) << id;
    }
    EXPECT_FALSE(gguf::dtypeFromGgml(34).has_value());  // TQ1_0 (ternary): still not run
}

TEST(KQuantFormats, GgufWithKQuantTensorsOpens)
{
    ScratchDir scratch;
    std::mt19937_64 rng(22);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    struct Tensor {
        std::string name;
        DType type;
        int64_t cols, rows;
        uint32_t ggml;
        std::vector<uint8_t> bytes;
    };
    std::vector<Tensor> tensors = {{"blk.0.attn_q.weight", DType::Q4_K, 512, 3, 12, {}},
                                   {"blk.0.attn_v.weight", DType::Q6_K, 256, 2, 14, {}},
                                   {"blk.0.ffn_up.weight", DType::Q5_0, 64, 4, 6, {}},
                                   {"blk.0.ffn_down.weight", DType::Q5_K, 256, 1, 13, {}},
                                   {"token_embd.weight", DType::Q4_1, 32, 5, 3, {}}};
    gguf::Writer writer;
    writer.setString("general.architecture", "llama");
    for (Tensor& t : tensors) {
        std::vector<float> values(size_t(t.cols * t.rows));
        for (float& v : values) v = normal(rng);
        t.bytes = quantized(t.type, values);
        auto fill = [bytes = t.bytes](std::span<uint8_t> out) {
            ASSERT_EQ(out.size(), bytes.size());
            std::memcpy(out.data(), bytes.data(), bytes.size());
        };
        writer.addTensor(t.name, t.type, {t.cols, t.rows}, fill);
    }
    const std::string path = scratch.path("kquants.gguf");
    ASSERT_TRUE(writer.write(path).ok());
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    for (const Tensor& t : tensors) {
        const gguf::TensorInfo* info = (*file)->tensor(t.name);
        ASSERT_NE(info, nullptr) << t.name;
        EXPECT_EQ(info->ggmlType, t.ggml) << t.name;
        EXPECT_EQ(info->type, t.type) << t.name;
        EXPECT_EQ(info->cols(), t.cols);
        EXPECT_EQ(info->rows(), t.rows);
        ASSERT_EQ(info->bytes, t.bytes.size()) << t.name;
        EXPECT_EQ(std::memcmp(info->data, t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
}

TEST(KQuantFormats, SyntheticModelInKQuants)
{
    ScratchDir scratch;
    SyntheticOptions options;
    options.preset = "tinyllama-1.1b";
    options.layers = 1;
    options.alignment = 32;
    for (DType type : {DType::Q4_K, DType::Q6_K}) {
        options.type = type;
        const std::string path = scratch.path(std::string(dtypeName(type)) + ".gguf");
        ASSERT_TRUE(writeSyntheticModel(options, path).ok());
        auto file = gguf::File::open(path);
        ASSERT_TRUE(file.ok()) << file.error().message;
        const gguf::TensorInfo* q = (*file)->tensor("blk.0.attn_q.weight");
        ASSERT_NE(q, nullptr);
        EXPECT_EQ(q->type, type);
        // Random values of the stated amplitude (sqrt(3 / cols)), not garbage.
        std::vector<float> row(size_t(q->cols()));
        gguf::dequantizeRow(type, q->data, q->cols(), row.data());
        double sum2 = 0;
        for (float v : row) {
            ASSERT_TRUE(std::isfinite(v));
            ASSERT_LE(std::fabs(v), 1.2 * std::sqrt(3.0 / q->cols()));
            sum2 += double(v) * v;
        }
        const double rms = std::sqrt(1.0 / q->cols());  // of uniform values in [-a, a]
        EXPECT_NEAR(std::sqrt(sum2 / row.size()), rms, 0.2 * rms);
        std::filesystem::remove(path);
    }
}
