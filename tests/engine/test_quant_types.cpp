// ggml's block types beyond the K-quants (Q2_K, Q3_K, Q5_1, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, MXFP4) against ggml itself: blocks that llama.cpp's
// quantizer wrote (and blocks of random bytes, which reach every grid index and sign pattern) and
// the floats ggml's dequantize_row_* gave for them, kept in tests/data/quants (README there).
//   - every decoder (getRow, gpu::decodeRow, gguf::dequantizeRow) gives ggml's floats bit for bit;
//   - each kernel set's matvec is within the quantized-x bound of the exact product with ggml's
//     values, and every set gives the same bits as the scalar one (they compute the same int32
//     sums and the same float operations on them);
//   - a prompt batch is one integer product (gemm_int8_x86.h) on every instruction set that can
//     take the type, within kPromptIntegerTolerance of one token at a time, its AVX2 unpacking
//     of each block (int8_unpack_x86.h) the scalar expansion's bytes and scales bit for bit;
//   - the IQ grids are the tables their checksums name.

#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/formats/ggml_quants.h"
#include "core/formats/gguf.h"
#include "gpu/cpu/cpu_kernels.h"
#include "gpu/host.h"
#include "gpu/iq_grids.h"
#include "gpu/matvec_runs.h"
#include "../common/int8_product.h"
#include "../common/kernel_sets.h"
#include "../common/prompt_tolerance.h"
#include "int8_unpack_check.h"

using namespace spillway;
using namespace spillway::gpu;

namespace {

const std::filesystem::path kDir = std::filesystem::path(SPILLWAY_TEST_DATA_DIR) / "quants";

// One reference file: "SWQ1", ggml type, block size, block bytes, blocks, quantized blocks (the
// rest random bytes); the blocks; ggml's floats for them.
struct Reference {
    std::string name;
    uint32_t ggmlType = 0;
    DType type = DType::F32;
    int blockSize = 0, blockBytes = 0, blocks = 0, quantized = 0;
    std::vector<uint8_t> bytes;
    std::vector<float> values;
};

Reference load(const std::string& name)
{
    Reference r;
    r.name = name;
    std::ifstream in(kDir / (name + ".bin"), std::ios::binary);
    uint32_t h[6] = {};
    in.read(reinterpret_cast<char*>(h), sizeof h);
    EXPECT_TRUE(in && h[0] == 0x31515753u) << name << ": not a reference file";
    r.ggmlType = h[1];
    r.blockSize = int(h[2]);
    r.blockBytes = int(h[3]);
    r.blocks = int(h[4]);
    r.quantized = int(h[5]);
    r.bytes.resize(size_t(r.blocks) * r.blockBytes);
    r.values.resize(size_t(r.blocks) * r.blockSize);
    in.read(reinterpret_cast<char*>(r.bytes.data()), std::streamsize(r.bytes.size()));
    in.read(reinterpret_cast<char*>(r.values.data()), std::streamsize(r.values.size() * 4));
    EXPECT_TRUE(in) << name << ": truncated";
    const auto t = gguf::dtypeFromGgml(r.ggmlType);
    EXPECT_TRUE(t.has_value()) << name << ": ggml type " << r.ggmlType << " is not read";
    if (t) r.type = *t;
    return r;
}

const char* const kTypes[] = {"Q2_K",   "Q3_K",    "Q5_1",   "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S",
                              "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S",  "IQ1_M",  "MXFP4"};

bool have(const std::string& name) { return std::filesystem::exists(kDir / (name + ".bin")); }

uint32_t bits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::string hexSha256(const void* data, size_t bytes)
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, bytes, md, &len, EVP_sha256(), nullptr);
    std::string hex;
    char buf[3];
    for (unsigned i = 0; i < len; ++i) {
        std::snprintf(buf, sizeof buf, "%02x", md[i]);
        hex += buf;
    }
    return hex;
}

template <class T, size_t N>
std::string tableSha256(const T (&table)[N])
{
    return hexSha256(table, sizeof table);  // x86 is little-endian, as the checksums are
}

}  // namespace

TEST(QuantTypes, GridsAreTheTablesTheirChecksumsName)
{
    EXPECT_EQ(tableSha256(kIq2xxsGrid), SPILLWAY_IQ2XXS_GRID_SHA256);
    EXPECT_EQ(tableSha256(kIq2xsGrid), SPILLWAY_IQ2XS_GRID_SHA256);
    EXPECT_EQ(tableSha256(kIq2sGrid), SPILLWAY_IQ2S_GRID_SHA256);
    EXPECT_EQ(tableSha256(kIq3xxsGrid), SPILLWAY_IQ3XXS_GRID_SHA256);
    EXPECT_EQ(tableSha256(kIq3sGrid), SPILLWAY_IQ3S_GRID_SHA256);
    EXPECT_EQ(tableSha256(kIq1sGrid), SPILLWAY_IQ1S_GRID_SHA256);
    // The IQ2 lattice points are 8 values of {8, 25, 43}; IQ1's of {-1, 0, 1}.
    for (uint64_t g : kIq2xxsGrid)
        for (int j = 0; j < 8; ++j) {
            const int v = int((g >> (8 * j)) & 0xff);
            ASSERT_TRUE(v == 8 || v == 25 || v == 43) << std::hex << g;
        }
    for (uint64_t g : kIq1sGrid)
        for (int j = 0; j < 8; ++j) {
            const int v = int(int8_t(g >> (8 * j)));
            ASSERT_TRUE(v >= -1 && v <= 1) << std::hex << g;
        }
}

TEST(QuantTypes, SignsHaveEvenParityAndKeepTheStoredBits)
{
    for (uint32_t s = 0; s < 128; ++s) {
        const uint8_t full = iqSigns(s);
        EXPECT_EQ(full & 127, int(s));
        EXPECT_EQ(__builtin_popcount(full) % 2, 0) << s;
    }
    EXPECT_EQ(e8m0Half(127), 0.5f);  // 2^0 / 2
    EXPECT_EQ(e8m0Half(128), 1.0f);
    EXPECT_EQ(e8m0Half(1), std::ldexp(1.0f, -127));
    EXPECT_EQ(e8m0Half(0), std::ldexp(1.0f, -128));
}

TEST(QuantTypes, EveryTypeHasItsReferenceAndItsGgmlId)
{
    for (const char* name : kTypes) {
        ASSERT_TRUE(have(name)) << name;
        const Reference r = load(name);
        EXPECT_STREQ(dtypeName(r.type), name);
        EXPECT_EQ(dtypeTraits(r.type).blockSize, r.blockSize) << name;
        EXPECT_EQ(dtypeTraits(r.type).blockBytes, r.blockBytes) << name;
        EXPECT_EQ(gguf::ggmlFromDtype(r.type), r.ggmlType) << name;
        EXPECT_STREQ(gguf::ggmlTypeName(r.ggmlType), name);
    }
}

// getRow, gguf::dequantizeRow and every set's dequant entry against ggml's floats, bit for bit.
TEST(QuantTypes, DecodingEqualsGgmlBitForBit)
{
    for (const char* name : kTypes) {
        ASSERT_TRUE(have(name)) << name;
        SCOPED_TRACE(name);
        const Reference r = load(name);
        const int64_t n = int64_t(r.blocks) * r.blockSize;
        std::vector<float> viaRow(static_cast<size_t>(n)), viaFormats(static_cast<size_t>(n));
        decodeRow(r.type, r.bytes.data(), n, viaRow.data());
        gguf::dequantizeRow(r.type, r.bytes.data(), n, viaFormats.data());
        int wrong = 0;
        for (int64_t i = 0; i < n && wrong < 5; ++i) {
            if (bits(viaRow[size_t(i)]) != bits(r.values[size_t(i)]) || bits(viaFormats[size_t(i)]) != bits(r.values[size_t(i)])) {
                ++wrong;
                ADD_FAILURE() << "value " << i << " (block " << i / r.blockSize
                              << (i / r.blockSize < r.quantized ? ", quantized" : ", random bytes") << "): ggml "
                              << r.values[size_t(i)] << ", decodeRow " << viaRow[size_t(i)] << ", dequantizeRow "
                              << viaFormats[size_t(i)];
            }
        }
        // One device row of all the blocks through getRow, on each set (no set has a float
        // dequantizer for these types: their prompts run the decode kernels).
        const MatrixView w{r.type, r.bytes.data(), 1, n, r.bytes.size()};
        for (CpuKernelSet set : testing_support::kernelSetsThisCpuRuns())
            EXPECT_EQ(cpu::kernelsFor(set).dequant[static_cast<int>(r.type)], nullptr) << cpuKernelSetName(set);
        auto device = createCpuDevice(1);
        std::vector<float> viaDevice(static_cast<size_t>(n));
        device->getRow(w, 0, viaDevice.data());
        EXPECT_EQ(std::memcmp(viaDevice.data(), r.values.data(), size_t(n) * 4), 0);
    }
}

// The matvec of each set on ggml's blocks, rows of 1024 values (several blocks each): within the
// bound of x's quantization of the exact product with ggml's floats, and the same bits on every
// set and thread count.
TEST(QuantTypes, MatvecIsTheProductWithGgmlsValuesOnEverySet)
{
    std::mt19937_64 rng(7);
    for (const char* name : kTypes) {
        ASSERT_TRUE(have(name)) << name;
        SCOPED_TRACE(name);
        const Reference r = load(name);
        const int64_t cols = 1024, rows = int64_t(r.blocks) * r.blockSize / cols;
        ASSERT_GE(rows, 4);
        const size_t stride = rowBytes(r.type, cols);
        const MatrixView w{r.type, r.bytes.data(), rows, cols, stride};
        const int xBlock = xFormFor(r.type) == XForm::Q8K ? 256 : 32;
        for (int trial = 0; trial < 3; ++trial) {
            std::vector<float> x(static_cast<size_t>(cols));
            std::normal_distribution<float> normal;
            for (float& v : x) v = trial == 2 ? float(int(rng() % 255) - 127) * 0.01f : normal(rng);  // trial 2: exact in Q8
            std::vector<float> first;
            for (CpuKernelSet set : testing_support::kernelSetsThisCpuRuns())
                for (int threads : {1, 3}) {
                    auto device = createCpuDevice(threads, set);
                    std::vector<float> y(static_cast<size_t>(rows), NAN);
                    device->matvec(w, x.data(), y.data());
                    device->synchronize();
                    for (int64_t row = 0; row < rows; ++row) {
                        double ref = 0, mag = 0, bound = 0;
                        for (int64_t c = 0; c < cols; ++c) {
                            const double v = r.values[size_t(row * cols + c)];
                            ref += v * x[size_t(c)];
                            mag += std::fabs(v * x[size_t(c)]);
                        }
                        for (int64_t b = 0; b < cols / xBlock; ++b) {
                            double amax = 0, wsum = 0;
                            for (int i = 0; i < xBlock; ++i) {
                                amax = std::max(amax, std::fabs(double(x[size_t(b * xBlock + i)])));
                                wsum += std::fabs(double(r.values[size_t(row * cols + b * xBlock + i)]));
                            }
                            bound += wsum * 0.6 * amax / 127.0;
                        }
                        EXPECT_LE(std::fabs(y[size_t(row)] - ref), 2e-5 * mag + bound + 1e-30)
                            << cpuKernelSetName(set) << " x" << threads << " row " << row << " trial " << trial;
                    }
                    if (first.empty())
                        first = y;
                    else
                        EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0)
                            << cpuKernelSetName(set) << " x" << threads << " differs from the scalar set";
                }
        }
    }
}

// A tensor of one of these types in a GGUF file opens with its type; its rows decode as ggml's.
TEST(QuantTypes, TheirIdsMapBothWays)
{
    for (uint32_t id = 0; id < 40; ++id) {
        const auto t = gguf::dtypeFromGgml(id);
        if (!t) continue;
        EXPECT_EQ(gguf::ggmlFromDtype(*t), id) << id;
        EXPECT_STREQ(dtypeName(*t), gguf::ggmlTypeName(id)) << id;
    }
    // Still refused, by name: Q8_1 / Q8_K (x's forms inside ggml), the ternary TQ types.
    for (uint32_t id : {9u, 15u, 34u, 35u}) EXPECT_FALSE(gguf::dtypeFromGgml(id).has_value()) << gguf::ggmlTypeName(id);
}

namespace {

// A rows x cols matrix of ggml's quantized blocks of the reference (drawn with replacement).
std::vector<uint8_t> matrixOfBlocks(const Reference& r, int64_t rows, int64_t cols, std::mt19937_64& rng)
{
    const int64_t perRow = cols / r.blockSize;
    std::vector<uint8_t> bytes(size_t(rows * perRow * r.blockBytes));
    for (int64_t i = 0; i < rows * perRow; ++i) {
        const size_t from = size_t(rng() % uint64_t(r.quantized)) * size_t(r.blockBytes);
        std::memcpy(bytes.data() + size_t(i) * size_t(r.blockBytes), r.bytes.data() + from, size_t(r.blockBytes));
    }
    return bytes;
}

}  // namespace

// Every integer product this CPU runs (AVX-512 VNNI, AVX-VNNI, AVX2), called directly on ggml's
// blocks: each type taken by every VNNI product (and by AVX2's wherever its bytes cannot saturate
// vpmaddubsw's pairs: all but IQ4_NL, IQ4_XS and MXFP4), the same bits from each, and each token
// within kPromptIntegerTolerance of the decode kernels on it alone; rows not a multiple of any
// tile, depths of 1 and 5 super-blocks (blocks of 32: 8 and 40), batches of 1 to 130. Then the
// device: a batch of 33 jobs goes through the product, within the same tolerance.
TEST(QuantTypes, PromptBatchesAreOneIntegerProduct)
{
    gpu::cpu::GemmInt8 variants[3];
    const int count = gpu::cpu::gemmInt8Variants(variants);
    if (count == 0) GTEST_SKIP() << "this CPU runs no integer product (no AVX2)";
    std::mt19937_64 rng(29);
    auto device = createCpuDevice(1, bestCpuKernelSet());
    for (const char* name : kTypes) {
        ASSERT_TRUE(have(name)) << name;
        SCOPED_TRACE(name);
        const Reference r = load(name);
        const bool wide = r.type == DType::IQ4_NL || r.type == DType::IQ4_XS || r.type == DType::MXFP4;
        for (int64_t rows : {int64_t{57}, int64_t{130}})
            for (int64_t cols : {int64_t{256}, int64_t{1280}}) {
                const std::vector<uint8_t> bytes = matrixOfBlocks(r, rows, cols, rng);
                const MatrixView view{r.type, bytes.data(), rows, cols, rowBytes(r.type, cols)};
                for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}, int64_t{130}}) {
                    if (cols > 256 && n > 33) continue;
                    const int64_t ldc = rows + 3;
                    std::vector<float> x(size_t(n * cols));
                    std::normal_distribution<float> normal;
                    for (float& v : x) v = normal(rng);
                    std::vector<float> first;
                    for (int v = 0; v < count; ++v) {
                        const gpu::cpu::GemmInt8& p = variants[v];
                        const std::string what = std::string(p.name) + " " + std::to_string(rows) + " x " +
                                                 std::to_string(cols) + " batch " + std::to_string(n);
                        const bool vnni = std::string(p.name) != "avx2";
                        ASSERT_EQ(p.takes(view), vnni || !wide) << what;
                        if (!p.takes(view)) continue;
                        const std::vector<float> y = testing_support::runInt8Product(p, view, x.data(), n, ldc, NAN).y;
                        testing_support::expectTokensNearDecode(*device, view, x.data(), y, n, ldc, NAN, what);
                        if (first.empty()) first = y;
                        else ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float))) << what;
                    }
                }
                // Through the device: 33 jobs of one matrix, one product.
                const int64_t n = 33;
                std::vector<float> x(size_t(n * cols)), y(size_t(n * rows), NAN);
                std::normal_distribution<float> normal;
                for (float& v : x) v = normal(rng);
                std::vector<MatvecJob> jobs;
                for (int64_t j = 0; j < n; ++j) jobs.push_back({view, x.data() + j * cols, y.data() + j * rows});
                auto batch = createCpuDevice(2, bestCpuKernelSet());
                batch->matvec(jobs);
                batch->synchronize();
                for (int64_t j = 0; j < n; ++j) {
                    std::vector<float> alone(size_t(rows), NAN);
                    device->matvec(view, x.data() + j * cols, alone.data());
                    const std::vector<float> got(y.begin() + j * rows, y.begin() + (j + 1) * rows);
                    EXPECT_LE(testing_support::relativeL2(got, alone), testing_support::kPromptIntegerTolerance)
                        << "device batch, job " << j;
                }
            }
    }
}

// The product's weight rows are unpacked by AVX2 code of each type's own (int8_unpack_x86.h): on
// ggml's blocks and random ones (every grid index, sign and scale pattern), every byte and every
// float scale must be what iq_expand.h's scalar expansion gives.
TEST(QuantTypes, UnpackingForTheProductIsTheExpansion)
{
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        GTEST_SKIP() << "this CPU has no AVX2: the product and its unpacking do not run here";
    std::mt19937_64 rng(31);
    for (const char* name : kTypes) {
        ASSERT_TRUE(have(name)) << name;
        const Reference r = load(name);
        std::vector<uint8_t> blocks = r.bytes;
        // Random blocks beside ggml's (NaN scales among them: a NaN times a scale is the same NaN
        // however it is computed).
        const size_t random = 4096;
        blocks.resize(blocks.size() + random * r.blockBytes);
        for (size_t i = r.bytes.size(); i < blocks.size(); ++i) blocks[i] = uint8_t(rng());
        char what[256] = {};
        const int bad = testing_support::int8UnpackMismatches(r.type, blocks.data(), int(blocks.size() / r.blockBytes),
                                                              what, int(sizeof what));
        EXPECT_EQ(bad, 0) << name << ": " << what;
    }
}
