// Conformance of a GPU backend: every op of the device against the CPU device (the reference),
// on random inputs with awkward sizes. Outputs are poisoned with NaN before each op and every
// element must be written. One source, built once per compiled backend: SPILLWAY_TEST_BACKEND
// names it ("cuda": test_cuda_conformance, "vulkan": test_vulkan_conformance).
//
// Tolerances, as relative L2 error ||gpu - cpu|| / ||cpu|| over a whole output:
//   F32 matvec, rmsnorm, rope, attention, swiglu, add   <= 1e-5 (float rounding only)
//   attention on F16 / Q8 KV caches                      <= 1e-5, caches bit-identical
//   F16, BF16, Q8_0, Q4_0 matvec, and Q4_1, Q5_0,        <= 1e-3 (both quantize x to Q8 the
//   Q4_K, Q5_K, Q6_K where the backend computes them      same way; only summation order differs)
//   BitmapSparse matvec (f32 values)                     <= 1e-5
//   BitmapSparse matvec (f16, bf16, int8, int4 values)   <= 1e-3 (x stays float on both; only
//                                                        summation order differs)
//   getRow (BitmapSparse included)                       exact
// Where no device of the backend is usable every test is skipped with the registry's reason.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/compress/bitmap_sparse.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/registry.h"

#ifndef SPILLWAY_TEST_BACKEND
#error "SPILLWAY_TEST_BACKEND must name the backend under test (tests/gpu/CMakeLists.txt)"
#endif

using namespace spillway;
using namespace spillway::gpu;

namespace {

const std::string kBackend = SPILLWAY_TEST_BACKEND;

struct Devices {
    std::unique_ptr<Device> gpu;
    std::unique_ptr<Device> cpu;
    std::string reason;  // why there is no device of the backend
};

Devices& devices()
{
    static Devices d = [] {
        Devices d;
        auto gpu = createDevice(kBackend, {});
        if (gpu.ok()) d.gpu = std::move(gpu.value());
        else d.reason = gpu.error().message;
        d.cpu = createCpuDevice(2);
        return d;
    }();
    return d;
}

double relL2(const std::vector<float>& got, const std::vector<float>& want)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double diff = static_cast<double>(got[i]) - want[i];
        num += diff * diff;
        den += static_cast<double>(want[i]) * want[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

size_t unwritten(const std::vector<float>& v)
{
    size_t n = 0;
    for (float f : v) n += std::isnan(f) ? 1 : 0;
    return n;
}

std::vector<float> randomFloats(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f)
{
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng);
    return v;
}

// Random weights in the stored layout of gpu/dtype.h; `padding` bytes after each row.
std::vector<uint8_t> randomMatrix(DType type, int64_t rows, int64_t cols, size_t stride, std::mt19937_64& rng)
{
    std::vector<uint8_t> bytes(stride * rows, 0xcd);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), scale(0.001f, 0.1f);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = bytes.data() + r * stride;
        for (int64_t c = 0; c < cols && (type == DType::F32 || type == DType::F16 || type == DType::BF16); ++c) {
            const float v = unit(rng);
            if (type == DType::F32) {
                std::memcpy(row + 4 * c, &v, 4);
            } else {
                const uint16_t h = type == DType::F16 ? fp32ToFp16(v) : fp32ToBf16(v);
                std::memcpy(row + 2 * c, &h, 2);
            }
        }
        if (type == DType::F32 || type == DType::F16 || type == DType::BF16) continue;
        // Quantized blocks: random bytes, then small finite fp16 scales where the layout has them
        // (gpu/dtype.h): d at 0 (and m / dmin at 2: Q4_1, Q4_K, Q5_K), Q6_K's d at 208.
        const DTypeTraits& traits = dtypeTraits(type);
        for (int64_t b = 0; b < cols / traits.blockSize; ++b) {
            uint8_t* block = row + b * traits.blockBytes;
            for (int i = 0; i < traits.blockBytes; ++i) block[i] = static_cast<uint8_t>(byte(rng));
            std::vector<int> scales = {0};
            if (type == DType::Q4_1 || type == DType::Q4_K || type == DType::Q5_K) scales.push_back(2);
            if (type == DType::Q6_K) scales = {208};
            for (int at : scales) {
                const uint16_t d = fp32ToFp16(scale(rng));
                std::memcpy(block + at, &d, 2);
            }
        }
    }
    return bytes;
}

// A device buffer holding `bytes` of host data, or uninitialised. An allocation that fails is a
// test failure and ends the test (an exception, which gtest reports with the message): no op
// runs on a buffer that is not there.
struct DeviceData {
    Buffer buffer;
    DeviceData(Device& d, size_t bytes)
    {
        auto b = d.allocate(bytes);
        if (!b.ok()) throw std::runtime_error("device allocation of " + std::to_string(bytes) + " bytes failed: " +
                                              b.error().message);
        buffer = std::move(b.value());
    }
    template <class T>
    DeviceData(Device& d, const std::vector<T>& host) : DeviceData(d, host.size() * sizeof(T))
    {
        if (buffer) d.upload(buffer.data(), host.data(), host.size() * sizeof(T));
    }
    float* f(size_t offset = 0) const { return buffer.as<float>() + offset; }
};

std::vector<float> download(Device& d, const float* p, size_t n)
{
    std::vector<float> v(n);
    d.download(v.data(), p, n * sizeof(float));
    return v;
}

void poison(Device& d, float* p, size_t n)
{
    std::vector<float> nan(n, std::nanf(""));
    d.upload(p, nan.data(), n * sizeof(float));
}

class BackendConformance : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!devices().gpu) GTEST_SKIP() << "no usable " << kBackend << " device: " << devices().reason;
    }
    // The device under test.
    Device& gpu() { return *devices().gpu; }
    Device& cpu() { return *devices().cpu; }
    void expectHealthy()
    {
        EXPECT_EQ(gpu().info().name.find("[failed"), std::string::npos) << gpu().info().name;
    }
    std::mt19937_64 rng{20240611};
};

TEST_F(BackendConformance, Info)
{
    const DeviceInfo& info = gpu().info();
    EXPECT_EQ(info.backend, kBackend);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.totalMemory, 0u);
    EXPECT_GT(info.freeMemory, 0u);
    EXPECT_FALSE(info.caps.hostPointers);
    if (kBackend == "cuda") {
        EXPECT_TRUE(info.caps.asyncCopy);
    }
    EXPECT_TRUE(info.caps.pinnedHostMemory);
    if (kBackend == "cuda") {
        EXPECT_TRUE(info.caps.events);
    }
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::BitmapSparse})
        EXPECT_TRUE(gpu().supports(t)) << dtypeName(t);
    std::printf("[ INFO     ] %s (%s)\n", info.name.c_str(), info.kernels.c_str());
}

void runMatvecCase(Device& gpu, Device& cpu, DType type, int64_t rows, int64_t cols, size_t padding,
                   size_t xOffset, std::mt19937_64& rng)
{
    SCOPED_TRACE(std::string(dtypeName(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                 " padding " + std::to_string(padding) + " x offset " + std::to_string(xOffset));
    const size_t stride = rowBytes(type, cols) + padding;
    const std::vector<uint8_t> w = randomMatrix(type, rows, cols, stride, rng);
    std::vector<float> x = randomFloats(cols + xOffset, rng);
    std::vector<float> want(rows);
    cpu.matvec(MatrixView{type, w.data(), rows, cols, stride}, x.data() + xOffset, want.data());

    DeviceData dw(gpu, w), dx(gpu, x), dy(gpu, rows * sizeof(float));
    poison(gpu, dy.f(), rows);
    gpu.matvec(MatrixView{type, dw.buffer.data(), rows, cols, stride}, dx.f(xOffset), dy.f());
    const std::vector<float> got = download(gpu, dy.f(), rows);
    EXPECT_EQ(unwritten(got), 0u);
    const double tolerance = type == DType::F32 ? 1e-5 : 1e-3;
    const double err = relL2(got, want);
    EXPECT_LE(err, tolerance);
    if (type != DType::F32 || rows * cols > 100000)
        std::printf("[ INFO     ] matvec %-4s %5lldx%-5lld pad %zu xoff %zu: rel L2 %.2e\n", dtypeName(type),
                    static_cast<long long>(rows), static_cast<long long>(cols), padding, xOffset, err);
}

TEST_F(BackendConformance, MatvecEveryTypeAndShape)
{
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
        for (int64_t rows : {1, 3, 129, 4099})
            for (int64_t cols : {32, 96, 4128}) runMatvecCase(gpu(), cpu(), type, rows, cols, 0, 0, rng);
    expectHealthy();
}

TEST_F(BackendConformance, MatvecColsMultipleOf256)
{
    // The staged Q8_0/Q4_0 kernel takes 16-byte aligned rows of a multiple of 8 blocks; 4096 is
    // a multiple of 64 blocks, 11008 and 256 are not (a partial last step).
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0})
        for (int64_t rows : {1, 3, 129, 4099})
            for (int64_t cols : {256, 4096, 11008}) runMatvecCase(gpu(), cpu(), type, rows, cols, 0, 0, rng);
    for (DType type : {DType::Q8_0, DType::Q4_0}) runMatvecCase(gpu(), cpu(), type, 129, 4096, 16, 0, rng);
    expectHealthy();
}

TEST_F(BackendConformance, MatvecPaddedRowsAndUnalignedX)
{
    // Padding of 16 keeps 16-byte rows (vector kernels); 2 and 4 break them (element kernels for
    // the float types; quantized rows only need 2 bytes). An x one float off breaks 16-byte x.
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        const size_t oddPadding = type == DType::F32 ? 4 : 2;
        for (size_t padding : {size_t{16}, oddPadding})
            runMatvecCase(gpu(), cpu(), type, 129, 4128, padding, 0, rng);
        runMatvecCase(gpu(), cpu(), type, 129, 4128, 0, 1, rng);
    }
    // An odd number of columns (float types have blocks of 1): rows alternate in alignment.
    for (DType type : {DType::F32, DType::F16, DType::BF16}) runMatvecCase(gpu(), cpu(), type, 129, 4127, 0, 0, rng);
    expectHealthy();
}

// The GGUF types beyond Q8_0 / Q4_0 that downloads carry (Q4_K_M is Q4_K with Q6_K; Q5_K_M is
// Q5_K with Q6_K; Q4_1 / Q5_0 where a matrix's columns are no multiple of 256), read in place:
// matvec on awkward shapes (rows of a partial warp, 2-byte aligned rows, x off by a float) and
// getRow exactly. Every backend computes them (CUDA and Vulkan).
const DType kGgufTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST_F(BackendConformance, MatvecGgufTypes)
{
    for (DType type : kGgufTypes) {
        if (!gpu().supports(type)) {
            ADD_FAILURE() << dtypeName(type) << ": not computed by the " << kBackend << " backend";
            continue;
        }
        const int block = dtypeTraits(type).blockSize;
        for (int64_t rows : {1, 3, 129, 4099})
            for (int64_t cols : {int64_t(block), int64_t(block) * 3, block == 32 ? int64_t(4128) : int64_t(4096)})
                runMatvecCase(gpu(), cpu(), type, rows, cols, 0, 0, rng);
        runMatvecCase(gpu(), cpu(), type, 129, block == 32 ? 4128 : 11008, 2, 0, rng);
        runMatvecCase(gpu(), cpu(), type, 129, block == 32 ? 4128 : 4096, 0, 1, rng);
    }
    // Q, K and V of a Q4_K_M file share x (one Q8_K form) beside a Q6_K and a Q8_0 job.
    {
        const int64_t cols = 4096;
        const DType types[] = {DType::Q4_K, DType::Q4_K, DType::Q6_K, DType::Q8_0};
        const int64_t rows[] = {129, 33, 65, 17};
        const std::vector<float> x = randomFloats(cols, rng);
        DeviceData dx(gpu(), x);
        std::vector<std::vector<uint8_t>> hostW;
        std::vector<std::unique_ptr<DeviceData>> devW, devY;
        std::vector<std::vector<float>> want;
        std::vector<MatvecJob> cpuJobs, gpuJobs;
        for (size_t i = 0; i < std::size(types); ++i) {
            const size_t stride = rowBytes(types[i], cols);
            hostW.push_back(randomMatrix(types[i], rows[i], cols, stride, rng));
            want.emplace_back(rows[i]);
            devW.push_back(std::make_unique<DeviceData>(gpu(), hostW.back()));
            devY.push_back(std::make_unique<DeviceData>(gpu(), rows[i] * sizeof(float)));
            poison(gpu(), devY.back()->f(), rows[i]);
            cpuJobs.push_back({{types[i], hostW.back().data(), rows[i], cols, stride}, x.data(), want.back().data()});
            gpuJobs.push_back({{types[i], devW.back()->buffer.data(), rows[i], cols, stride}, dx.f(), devY.back()->f()});
        }
        cpu().matvec(cpuJobs);
        gpu().matvec(gpuJobs);
        for (size_t i = 0; i < std::size(types); ++i) {
            const std::vector<float> got = download(gpu(), devY[i]->f(), rows[i]);
            EXPECT_EQ(unwritten(got), 0u) << "job " << i;
            EXPECT_LE(relL2(got, want[i]), 1e-3) << "job " << i;
        }
    }
    expectHealthy();
}

TEST_F(BackendConformance, GetRowGgufTypesIsExact)
{
    for (DType type : kGgufTypes) {
        if (!gpu().supports(type)) {
            ADD_FAILURE() << dtypeName(type) << ": not computed by the " << kBackend << " backend";
            continue;
        }
        const int64_t rows = 37, cols = dtypeTraits(type).blockSize == 32 ? 4128 : 4096;
        const size_t stride = rowBytes(type, cols) + 2;  // 2-byte aligned rows
        const std::vector<uint8_t> w = randomMatrix(type, rows, cols, stride, rng);
        DeviceData dw(gpu(), w), out(gpu(), cols * sizeof(float));
        for (int64_t row : {int64_t{0}, int64_t{17}, rows - 1}) {
            std::vector<float> want(cols);
            cpu().getRow(MatrixView{type, w.data(), rows, cols, stride}, row, want.data());
            poison(gpu(), out.f(), cols);
            gpu().getRow(MatrixView{type, dw.buffer.data(), rows, cols, stride}, row, out.f());
            const std::vector<float> got = download(gpu(), out.f(), cols);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), cols * sizeof(float)), 0) << dtypeName(type) << " row " << row;
        }
    }
    expectHealthy();
}

// A prompt batch: runs of jobs on one weight matrix with x and y at even strides (as LayerStep
// lays a batch out) become one matrix product from 8 jobs on. Against a double product of the
// weights as getRow decodes them (exact) and x: Vulkan multiplies in fp32 with x as it is (<= 1e-5,
// which the one-token path, x rounded to Q8, cannot meet for the quantized types: that the product
// ran is checked too), CUDA through cuBLAS with x rounded to fp16 or bf16 (<= 4e-3). Tiles
// cut short (129 rows, 17 and 33 tokens); 7 jobs stay matvecs (the Q8 path, <= 1e-2).
TEST_F(BackendConformance, PromptBatchesAsMatrixProducts)
{
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                       DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        const int block = dtypeTraits(type).blockSize;
        const int64_t rows = 129, cols = block == 256 ? 512 : block == 32 ? 160 : 161;
        const size_t stride = rowBytes(type, cols) + 2 * (type != DType::F32) + 4 * (type == DType::F32);
        const std::vector<uint8_t> w = randomMatrix(type, rows, cols, stride, rng);
        std::vector<float> decoded(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
            cpu().getRow(MatrixView{type, w.data(), rows, cols, stride}, r, decoded.data() + r * cols);
        DeviceData dw(gpu(), w);
        for (int tokens : {7, 8, 17, 33}) {
            SCOPED_TRACE(std::string(dtypeName(type)) + ", " + std::to_string(tokens) + " tokens");
            const int64_t sx = cols + 3, sy = rows + 5;
            const std::vector<float> x = randomFloats(size_t(sx * tokens), rng);
            std::vector<float> want(size_t(rows * tokens));
            for (int t = 0; t < tokens; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    double sum = 0;
                    for (int64_t c = 0; c < cols; ++c) sum += double(decoded[size_t(r * cols + c)]) * x[size_t(t * sx + c)];
                    want[size_t(t * rows + r)] = float(sum);
                }
            DeviceData dx(gpu(), x), dy(gpu(), size_t(sy * tokens) * sizeof(float));
            poison(gpu(), dy.f(), sy * tokens);
            std::vector<MatvecJob> jobs;
            for (int t = 0; t < tokens; ++t)
                jobs.push_back({{type, dw.buffer.data(), rows, cols, stride}, dx.f(size_t(t * sx)), dy.f() + t * sy});
            gpu().matvec(jobs);
            const std::vector<float> all = download(gpu(), dy.f(), sy * tokens);
            std::vector<float> got;
            for (int t = 0; t < tokens; ++t) got.insert(got.end(), all.begin() + t * sy, all.begin() + t * sy + rows);
            EXPECT_EQ(unwritten(got), 0u);
            const double err = relL2(got, want);
            const bool product = tokens >= 8;
            const double tolerance = !product ? 1e-2 : kBackend == "cuda" && type != DType::F32 ? 4e-3 : 1e-5;
            EXPECT_LE(err, tolerance);
            std::printf("[ INFO     ] batch %-4s %2d tokens: rel L2 %.2e to the exact product\n", dtypeName(type),
                        tokens, err);
        }
    }
    expectHealthy();
}

TEST_F(BackendConformance, MatvecJobSpanSharesX)
{
    // Q, K and V style: three jobs on one x (quantized once), plus one on another x and type.
    const int64_t cols = 4128;
    struct Spec { DType type; int64_t rows; int xi; };
    const Spec specs[] = {{DType::Q8_0, 129, 0}, {DType::Q4_0, 33, 0}, {DType::Q8_0, 3, 0},
                          {DType::F16, 65, 1}, {DType::Q4_0, 4099, 1}};
    std::vector<std::vector<uint8_t>> hostW;
    std::vector<std::unique_ptr<DeviceData>> devW, devY;
    std::vector<float> x0 = randomFloats(cols, rng), x1 = randomFloats(cols, rng);
    DeviceData dx0(gpu(), x0), dx1(gpu(), x1);
    std::vector<MatvecJob> cpuJobs, gpuJobs;
    std::vector<std::vector<float>> want;
    for (const Spec& s : specs) {
        const size_t stride = rowBytes(s.type, cols);
        hostW.push_back(randomMatrix(s.type, s.rows, cols, stride, rng));
        want.emplace_back(s.rows);
        devW.push_back(std::make_unique<DeviceData>(gpu(), hostW.back()));
        devY.push_back(std::make_unique<DeviceData>(gpu(), s.rows * sizeof(float)));
        poison(gpu(), devY.back()->f(), s.rows);
        cpuJobs.push_back({{s.type, hostW.back().data(), s.rows, cols, stride},
                           s.xi ? x1.data() : x0.data(), want.back().data()});
        gpuJobs.push_back({{s.type, devW.back()->buffer.data(), s.rows, cols, stride},
                            s.xi ? dx1.f() : dx0.f(), devY.back()->f()});
    }
    cpu().matvec(cpuJobs);
    gpu().matvec(gpuJobs);
    for (size_t i = 0; i < std::size(specs); ++i) {
        const std::vector<float> got = download(gpu(), devY[i]->f(), specs[i].rows);
        EXPECT_EQ(unwritten(got), 0u) << "job " << i;
        EXPECT_LE(relL2(got, want[i]), 1e-3) << "job " << i;
    }
    expectHealthy();
}

TEST_F(BackendConformance, GetRowIsExact)
{
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        const int64_t rows = 129, cols = 4128;
        const size_t stride = rowBytes(type, cols);
        const std::vector<uint8_t> w = randomMatrix(type, rows, cols, stride, rng);
        DeviceData dw(gpu(), w), out(gpu(), cols * sizeof(float));
        for (int64_t row : {int64_t{0}, int64_t{77}, rows - 1}) {
            std::vector<float> want(cols);
            cpu().getRow(MatrixView{type, w.data(), rows, cols, stride}, row, want.data());
            poison(gpu(), out.f(), cols);
            gpu().getRow(MatrixView{type, dw.buffer.data(), rows, cols, stride}, row, out.f());
            const std::vector<float> got = download(gpu(), out.f(), cols);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), cols * sizeof(float)), 0)
                << dtypeName(type) << " row " << row;
        }
        // Outside the matrix: NaN, as on the CPU device.
        gpu().getRow(MatrixView{type, dw.buffer.data(), rows, cols, stride}, rows, out.f());
        EXPECT_EQ(unwritten(download(gpu(), out.f(), cols)), static_cast<size_t>(cols));
    }
    expectHealthy();
}

// A pruned random matrix as a bitmap sparse blob (core/compress's encoder): `density` of its
// values kept, row 0 all zero (an empty row), the last row dense.
std::vector<uint8_t> randomBitmapBlob(compress::ValueFormat format, int group, int64_t rows, int64_t cols,
                                      double density, std::mt19937_64& rng)
{
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), keep(0.0f, 1.0f);
    std::vector<float> dense(static_cast<size_t>(rows * cols), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            if ((r == rows - 1 && rows > 1) || (r > 0 && keep(rng) < density)) dense[r * cols + c] = unit(rng);
    auto m = compress::encode(dense.data(), rows, cols, format, group);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    if (!m.ok()) return {};
    std::vector<uint8_t> blob = compress::serialize(m.value());
    EXPECT_EQ(checkBitmapBlob(blob.data(), blob.size()), "");
    return blob;
}

struct BitmapCase {
    compress::ValueFormat format;
    int group;
};
const BitmapCase kBitmapCases[] = {{compress::ValueFormat::F32, 0},  {compress::ValueFormat::F16, 0},
                                   {compress::ValueFormat::BF16, 0}, {compress::ValueFormat::Int8, 32},
                                   {compress::ValueFormat::Int8, 64}, {compress::ValueFormat::Int4, 128}};

TEST_F(BackendConformance, MatvecBitmapSparseEveryFormat)
{
    // cols: under one bitmap word, not a multiple of 64 (a partial last word), and more than one
    // warp's step of 2048 columns with a partial step.
    for (const BitmapCase& bc : kBitmapCases)
        for (int64_t rows : {1, 129, 1031})
            for (int64_t cols : {40, 4127, 5120})
                for (double density : {0.5, 0.1}) {
                    if (rows == 1031 && cols == 40) continue;
                    SCOPED_TRACE(std::string("bitmap ") + compress::valueFormatName(bc.format) + " g" +
                                 std::to_string(bc.group) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                                 " density " + std::to_string(density));
                    const std::vector<uint8_t> blob = randomBitmapBlob(bc.format, bc.group, rows, cols, density, rng);
                    ASSERT_FALSE(blob.empty());
                    const std::vector<float> x = randomFloats(cols + 1, rng);
                    std::vector<float> want(rows);
                    cpu().matvec(MatrixView{DType::BitmapSparse, blob.data(), rows, cols, 0}, x.data(), want.data());
                    // x one float off: no alignment of x is assumed.
                    DeviceData dw(gpu(), blob), dx(gpu(), x), dy(gpu(), rows * sizeof(float));
                    poison(gpu(), dy.f(), rows);
                    gpu().matvec(MatrixView{DType::BitmapSparse, dw.buffer.data(), rows, cols, 0}, dx.f(1), dy.f());
                    std::vector<float> shifted(want.size());
                    cpu().matvec(MatrixView{DType::BitmapSparse, blob.data(), rows, cols, 0}, x.data() + 1,
                                 shifted.data());
                    const std::vector<float> got = download(gpu(), dy.f(), rows);
                    EXPECT_EQ(unwritten(got), 0u);
                    EXPECT_EQ(got[0], 0.0f);  // the empty row
                    const double tolerance = bc.format == compress::ValueFormat::F32 ? 1e-5 : 1e-3;
                    EXPECT_LE(relL2(got, shifted), tolerance);
                }
    expectHealthy();
}

TEST_F(BackendConformance, MatvecBitmapSparseBesideDenseJobs)
{
    // One call mixing a bitmap job with quantized and float jobs on the same x (the layer's Q, K,
    // V projections when only some of them were pruned).
    const int64_t cols = 4096, rows = 257;
    const std::vector<uint8_t> blob = randomBitmapBlob(compress::ValueFormat::F16, 0, rows, cols, 0.5, rng);
    ASSERT_FALSE(blob.empty());
    const std::vector<uint8_t> q8 = randomMatrix(DType::Q8_0, rows, cols, rowBytes(DType::Q8_0, cols), rng);
    const std::vector<uint8_t> f16 = randomMatrix(DType::F16, rows, cols, rowBytes(DType::F16, cols), rng);
    const std::vector<float> x = randomFloats(cols, rng);
    DeviceData dBlob(gpu(), blob), dQ8(gpu(), q8), dF16(gpu(), f16), dx(gpu(), x), dy(gpu(), 3 * rows * sizeof(float));
    std::vector<float> want(3 * rows);
    const MatrixView views[3] = {{DType::Q8_0, q8.data(), rows, cols, rowBytes(DType::Q8_0, cols)},
                                 {DType::BitmapSparse, blob.data(), rows, cols, 0},
                                 {DType::F16, f16.data(), rows, cols, rowBytes(DType::F16, cols)}};
    const void* devData[3] = {dQ8.buffer.data(), dBlob.buffer.data(), dF16.buffer.data()};
    std::vector<MatvecJob> cpuJobs, gpuJobs;
    for (int i = 0; i < 3; ++i) {
        cpuJobs.push_back({views[i], x.data(), want.data() + i * rows});
        MatrixView v = views[i];
        v.data = devData[i];
        gpuJobs.push_back({v, dx.f(), dy.f(i * rows)});
    }
    poison(gpu(), dy.f(), 3 * rows);
    cpu().matvec(cpuJobs);
    gpu().matvec(gpuJobs);
    const std::vector<float> got = download(gpu(), dy.f(), 3 * rows);
    EXPECT_EQ(unwritten(got), 0u);
    for (int i = 0; i < 3; ++i) {
        const std::vector<float> g(got.begin() + i * rows, got.begin() + (i + 1) * rows);
        const std::vector<float> w(want.begin() + i * rows, want.begin() + (i + 1) * rows);
        EXPECT_LE(relL2(g, w), 1e-3) << "job " << i;
    }
    expectHealthy();
}

TEST_F(BackendConformance, GetRowOfBitmapSparseIsExact)
{
    for (const BitmapCase& bc : kBitmapCases) {
        const int64_t rows = 67, cols = 4127;
        const std::vector<uint8_t> blob = randomBitmapBlob(bc.format, bc.group, rows, cols, 0.3, rng);
        ASSERT_FALSE(blob.empty());
        DeviceData dw(gpu(), blob), out(gpu(), (cols + 1) * sizeof(float));
        const MatrixView host{DType::BitmapSparse, blob.data(), rows, cols, 0};
        const MatrixView dev{DType::BitmapSparse, dw.buffer.data(), rows, cols, 0};
        for (int64_t row : {int64_t{0}, int64_t{33}, rows - 1}) {
            std::vector<float> want(cols);
            cpu().getRow(host, row, want.data());
            // out one float off: the kernel may not assume 8-byte aligned output.
            poison(gpu(), out.f(), cols + 1);
            gpu().getRow(dev, row, out.f(1));
            const std::vector<float> got = download(gpu(), out.f(1), cols);
            EXPECT_EQ(std::memcmp(got.data(), want.data(), cols * sizeof(float)), 0)
                << compress::valueFormatName(bc.format) << " row " << row;
        }
        gpu().getRow(dev, rows, out.f());
        EXPECT_EQ(unwritten(download(gpu(), out.f(), cols)), static_cast<size_t>(cols));
    }
    expectHealthy();
}

TEST_F(BackendConformance, Rmsnorm)
{
    for (int n : {1, 3, 129, 4099, 8192}) {
        for (bool inPlace : {false, true}) {
            const std::vector<float> x = randomFloats(n, rng, -3.0f, 3.0f), w = randomFloats(n, rng);
            std::vector<float> want(n);
            cpu().rmsnorm(x.data(), w.data(), want.data(), n, 1e-5f);
            DeviceData dx(gpu(), x), dw(gpu(), w), out(gpu(), n * sizeof(float));
            float* target = inPlace ? dx.f() : out.f();
            if (!inPlace) poison(gpu(), target, n);
            gpu().rmsnorm(dx.f(), dw.f(), target, n, 1e-5f);
            const std::vector<float> got = download(gpu(), target, n);
            EXPECT_EQ(unwritten(got), 0u) << n;
            EXPECT_LE(relL2(got, want), 1e-5) << "n " << n << " in place " << inPlace;
        }
    }
    expectHealthy();
}

TEST_F(BackendConformance, RopeBothConventions)
{
    for (auto [heads, headDim] : {std::pair{8, 64}, {32, 128}, {5, 96}})
        for (int rotary : {headDim, headDim / 2})
            for (bool neox : {false, true})
                for (int pos : {0, 1, 17, 300, 4099})
                    for (float freqScale : {1.0f, 0.25f}) {
                        const RopeParams p{rotary, neox ? 1000000.0f : 10000.0f, freqScale, neox};
                        std::vector<float> want = randomFloats(static_cast<size_t>(heads) * headDim, rng);
                        DeviceData dx(gpu(), want);
                        cpu().rope(want.data(), heads, headDim, pos, p);
                        gpu().rope(dx.f(), heads, headDim, pos, p);
                        const std::vector<float> got = download(gpu(), dx.f(), want.size());
                        EXPECT_EQ(unwritten(got), 0u);
                        EXPECT_LE(relL2(got, want), 1e-5)
                            << heads << "x" << headDim << " rotary " << rotary << " neox " << neox
                            << " pos " << pos << " scale " << freqScale;
                    }
    expectHealthy();
}

TEST_F(BackendConformance, AttentionGroupedQuery)
{
    for (auto [heads, kvHeads] : {std::pair{8, 2}, {32, 4}, {5, 5}})
        for (int headDim : {64, 128})
            for (int nPos : {1, 17, 300})
                for (bool ownScores : {false, true}) {
                    const int ctx = nPos + 5;
                    const size_t kvFloats = static_cast<size_t>(ctx) * kvHeads * headDim;
                    const std::vector<float> q = randomFloats(static_cast<size_t>(heads) * headDim, rng);
                    const std::vector<float> k = randomFloats(kvFloats, rng), v = randomFloats(kvFloats, rng);
                    std::vector<float> want(q.size());
                    AttentionArgs a{q.data(), k.data(), v.data(), want.data(), nullptr, heads, kvHeads,
                                    headDim, nPos, 1.0f / std::sqrt(static_cast<float>(headDim))};
                    cpu().attention(a);
                    DeviceData dq(gpu(), q), dk(gpu(), k), dv(gpu(), v), out(gpu(), q.size() * 4),
                        scores(gpu(), static_cast<size_t>(heads) * ctx * 4);
                    poison(gpu(), out.f(), q.size());
                    AttentionArgs g = a;
                    g.q = dq.f(); g.kCache = dk.f(); g.vCache = dv.f(); g.out = out.f();
                    g.scores = ownScores ? scores.f() : nullptr;
                    gpu().attention(g);
                    const std::vector<float> got = download(gpu(), out.f(), q.size());
                    EXPECT_EQ(unwritten(got), 0u);
                    const double err = relL2(got, want);
                    EXPECT_LE(err, 1e-5) << heads << "/" << kvHeads << " dim " << headDim << " nPos " << nPos;
                }
    expectHealthy();
}

// A prompt batch's attention (Device::attentionBatch): `queries` queries at consecutive positions
// after `before` cached ones, their K and V stored by the op, query rows at a padded stride.
// Against the backend's own attention() run once per query (the interface's default, called
// directly): the same outputs and caches bit for bit where the backend batches them (Vulkan:
// each query computed as alone); and against the CPU's batch within float rounding.
TEST_F(BackendConformance, AttentionBatchIsEachQueryAlone)
{
    for (KvType type : {KvType::F32, KvType::F16, KvType::Q8})
        for (auto [queries, before] : {std::pair{9, 0}, {5, 17}, {33, 3}}) {
            SCOPED_TRACE(std::string(kvTypeName(type)) + ", " + std::to_string(queries) + " queries after " +
                         std::to_string(before));
            const int heads = 8, kvHeads = 2, headDim = 64, nPos = before + queries, ctx = nPos + 2;
            const size_t rowStride = size_t(heads) * headDim + 5, kvDim = size_t(kvHeads) * headDim;
            const size_t cacheBytes = size_t(ctx) * kvDim * kvElementBytes(type), vectors = size_t(ctx) * kvHeads;
            // The cache's first `before` positions as any earlier steps left them (random bytes;
            // Q8 scales small and positive), the batch's q, K and V.
            std::vector<uint8_t> cache(cacheBytes);
            std::uniform_int_distribution<int> byte(0, 255);
            for (size_t i = 0; i < size_t(before) * kvDim * kvElementBytes(type); ++i) cache[i] = uint8_t(byte(rng));
            if (type == KvType::F16)
                for (size_t i = 0; i < size_t(before) * kvDim; ++i) {
                    const uint16_t h = fp32ToFp16(std::uniform_real_distribution<float>(-1, 1)(rng));
                    std::memcpy(cache.data() + 2 * i, &h, 2);
                }
            if (type == KvType::F32) {
                const std::vector<float> f = randomFloats(size_t(before) * kvDim, rng);
                std::memcpy(cache.data(), f.data(), f.size() * 4);
            }
            std::vector<float> scales(vectors, 0.0f);
            for (size_t i = 0; i < size_t(before) * kvHeads; ++i) scales[i] = 0.01f;
            const std::vector<float> q = randomFloats(rowStride * queries, rng);
            const std::vector<float> kNew = randomFloats(kvDim * queries, rng), vNew = randomFloats(kvDim * queries, rng);
            const float scale = 1.0f / std::sqrt(float(headDim));

            std::vector<uint8_t> cpuK = cache, cpuV = cache;
            std::vector<float> cpuKs = scales, cpuVs = scales, want(rowStride * queries, 0.0f);
            AttentionArgs c{q.data(), cpuK.data(), cpuV.data(), want.data(), nullptr, heads, kvHeads, headDim, nPos, scale};
            c.kvType = type;
            c.kScales = cpuKs.data();
            c.vScales = cpuVs.data();
            c.kNew = kNew.data();
            c.vNew = vNew.data();
            cpu().attentionBatch(c, queries, rowStride);

            std::vector<std::vector<float>> outs;
            std::vector<std::vector<uint8_t>> caches;
            for (bool batched : {true, false}) {
                DeviceData dq(gpu(), q), dk(gpu(), cache), dv(gpu(), cache), dks(gpu(), scales), dvs(gpu(), scales),
                    dkNew(gpu(), kNew), dvNew(gpu(), vNew), out(gpu(), rowStride * queries * 4);
                poison(gpu(), out.f(), rowStride * queries);
                AttentionArgs g = c;
                g.q = dq.f(); g.kCache = dk.f(); g.vCache = dv.f(); g.out = out.f();
                g.kScales = dks.f(); g.vScales = dvs.f(); g.kNew = dkNew.f(); g.vNew = dvNew.f();
                if (batched) gpu().attentionBatch(g, queries, rowStride);
                else gpu().Device::attentionBatch(g, queries, rowStride);
                const std::vector<float> all = download(gpu(), out.f(), rowStride * queries);
                outs.emplace_back();
                for (int i = 0; i < queries; ++i)
                    outs.back().insert(outs.back().end(), all.begin() + i * rowStride, all.begin() + i * rowStride + heads * headDim);
                caches.emplace_back(cacheBytes);
                gpu().download(caches.back().data(), dk.buffer.data(), cacheBytes);
            }
            EXPECT_EQ(unwritten(outs[0]), 0u);
            EXPECT_TRUE(caches[0] == caches[1]) << "K caches differ";
            if (kBackend == "vulkan")
                EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4)) << "not each query alone";
            std::vector<float> wantRows;
            for (int i = 0; i < queries; ++i)
                wantRows.insert(wantRows.end(), want.begin() + i * rowStride, want.begin() + i * rowStride + heads * headDim);
            EXPECT_LE(relL2(outs[0], wantRows), 1e-5);
        }
    expectHealthy();
}

// F16 and Q8 KV caches: each position stored by the attention op itself (kNew / vNew), on both
// devices. The caches must hold the same bits (both round the same IEEE way), and the outputs
// agree within float rounding like the F32 case.
TEST_F(BackendConformance, AttentionF16AndQ8Caches)
{
    for (KvType type : {KvType::F16, KvType::Q8})
        for (auto [heads, kvHeads] : {std::pair{8, 2}, {5, 5}})
            for (int headDim : {64, 128})
                for (int nPos : {1, 17, 300}) {
                    SCOPED_TRACE(std::string(kvTypeName(type)) + " " + std::to_string(heads) + "/" +
                                 std::to_string(kvHeads) + " dim " + std::to_string(headDim) + " nPos " +
                                 std::to_string(nPos));
                    const int ctx = nPos + 3;
                    const size_t kvDim = static_cast<size_t>(kvHeads) * headDim;
                    const size_t cacheBytes = static_cast<size_t>(ctx) * kvDim * kvElementBytes(type);
                    const size_t vectors = static_cast<size_t>(ctx) * kvHeads;
                    std::vector<uint8_t> k(cacheBytes, 0), v(cacheBytes, 0);
                    std::vector<float> kScales(vectors, 0.0f), vScales(vectors, 0.0f);
                    DeviceData dk(gpu(), k), dv(gpu(), v), dks(gpu(), kScales), dvs(gpu(), vScales);
                    DeviceData dkNew(gpu(), kvDim * 4), dvNew(gpu(), kvDim * 4), out(gpu(), heads * headDim * 4);
                    std::vector<float> want(static_cast<size_t>(heads) * headDim);
                    std::vector<float> q;
                    for (int pos = 0; pos < nPos; ++pos) {
                        q = randomFloats(want.size(), rng);
                        const std::vector<float> kNew = randomFloats(kvDim, rng, -2.0f, 2.0f);
                        const std::vector<float> vNew = randomFloats(kvDim, rng);
                        AttentionArgs a{q.data(), k.data(), v.data(), want.data(), nullptr, heads, kvHeads,
                                        headDim, pos + 1, 1.0f / std::sqrt(static_cast<float>(headDim))};
                        a.kvType = type;
                        a.kScales = kScales.data();
                        a.vScales = vScales.data();
                        a.kNew = kNew.data();
                        a.vNew = vNew.data();
                        cpu().attention(a);
                        gpu().synchronize();  // the previous step's kernels are done with kNew / q
                        DeviceData dq(gpu(), q);
                        gpu().upload(dkNew.f(), kNew.data(), kvDim * 4);
                        gpu().upload(dvNew.f(), vNew.data(), kvDim * 4);
                        poison(gpu(), out.f(), want.size());
                        AttentionArgs g = a;
                        g.q = dq.f(); g.kCache = dk.f(); g.vCache = dv.f(); g.out = out.f();
                        g.kScales = dks.f(); g.vScales = dvs.f(); g.kNew = dkNew.f(); g.vNew = dvNew.f();
                        gpu().attention(g);
                        gpu().synchronize();
                    }
                    const std::vector<float> got = download(gpu(), out.f(), want.size());
                    EXPECT_EQ(unwritten(got), 0u);
                    EXPECT_LE(relL2(got, want), 1e-5);
                    std::vector<uint8_t> gotK(cacheBytes), gotV(cacheBytes);
                    gpu().download(gotK.data(), dk.buffer.data(), cacheBytes);
                    gpu().download(gotV.data(), dv.buffer.data(), cacheBytes);
                    EXPECT_TRUE(gotK == k) << "K cache bits differ";
                    EXPECT_TRUE(gotV == v) << "V cache bits differ";
                    if (type == KvType::Q8) {
                        EXPECT_TRUE(download(gpu(), dks.f(), vectors) == kScales) << "K scales differ";
                        EXPECT_TRUE(download(gpu(), dvs.f(), vectors) == vScales) << "V scales differ";
                    }
                }
    expectHealthy();
}

TEST_F(BackendConformance, SwigluAndAdd)
{
    for (int n : {1, 3, 129, 4099, 11008}) {
        const std::vector<float> gate = randomFloats(n, rng, -6.0f, 6.0f), up = randomFloats(n, rng);
        std::vector<float> want(n);
        cpu().swiglu(gate.data(), up.data(), want.data(), n);
        DeviceData dg(gpu(), gate), du(gpu(), up), out(gpu(), n * 4);
        poison(gpu(), out.f(), n);
        gpu().swiglu(dg.f(), du.f(), out.f(), n);
        std::vector<float> got = download(gpu(), out.f(), n);
        EXPECT_EQ(unwritten(got), 0u);
        EXPECT_LE(relL2(got, want), 1e-5) << "swiglu " << n;
        gpu().swiglu(dg.f(), du.f(), dg.f(), n);  // out aliasing gate
        EXPECT_LE(relL2(download(gpu(), dg.f(), n), want), 1e-5) << "swiglu in place " << n;

        std::vector<float> y = randomFloats(n, rng);
        const std::vector<float> x = randomFloats(n, rng);
        DeviceData dy(gpu(), y), dx(gpu(), x);
        cpu().add(y.data(), x.data(), n);
        gpu().add(dy.f(), dx.f(), n);
        got = download(gpu(), dy.f(), n);
        EXPECT_EQ(unwritten(got), 0u);
        EXPECT_LE(relL2(got, y), 1e-5) << "add " << n;
    }
    expectHealthy();
}

// The neuron cache's ops. rowSum against the CPU device (F32, F16, BF16 rows and int8 rows with a
// scale table; rows weighted 0 hold NaN and must not be read); scatterRows moves exactly the rows
// it is given.
TEST_F(BackendConformance, RowSumEveryTypeAndScatterRows)
{
    std::uniform_int_distribution<int> q8(-127, 127), pick(0, 3);
    for (int64_t rows : {1, 77, 2050})
        for (int64_t cols : {1, 129, 4100})
            for (int kind = 0; kind < 4; ++kind) {  // F32, F16, BF16, int8 with scales
                SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " kind " + std::to_string(kind));
                const DType type = kind == 1 ? DType::F16 : kind == 2 ? DType::BF16 : DType::F32;
                const size_t element = kind == 3 ? 1 : kind == 0 ? 4 : 2;
                const size_t stride = (size_t(cols) * element + 7) / 4 * 4;
                std::vector<uint8_t> w(stride * size_t(rows), 0xff);  // NaN in every float type
                std::vector<float> a = randomFloats(size_t(rows), rng);
                std::vector<int32_t> group(static_cast<size_t>(rows));
                const std::vector<float> scales = randomFloats(size_t(4 * cols), rng, 0.001f, 0.1f);
                for (int64_t r = 0; r < rows; ++r) {
                    group[size_t(r)] = pick(rng);
                    if (r % 3 == 1) {
                        a[size_t(r)] = 0.0f;
                        continue;
                    }
                    uint8_t* row = w.data() + size_t(r) * stride;
                    const std::vector<float> v = randomFloats(size_t(cols), rng);
                    for (int64_t c = 0; c < cols; ++c) {
                        if (kind == 0) {
                            std::memcpy(row + 4 * c, &v[size_t(c)], 4);
                        } else if (kind == 3) {
                            row[c] = uint8_t(int8_t(q8(rng)));
                        } else {
                            const uint16_t h = kind == 1 ? fp32ToFp16(v[size_t(c)]) : fp32ToBf16(v[size_t(c)]);
                            std::memcpy(row + 2 * c, &h, 2);
                        }
                    }
                }
                RowSumArgs want;
                want.w = MatrixView{type, w.data(), rows, cols, stride};
                want.a = a.data();
                std::vector<float> expected(static_cast<size_t>(cols));
                want.y = expected.data();
                if (kind == 3) {
                    want.scales = scales.data();
                    want.group = group.data();
                }
                cpu().rowSum(want);

                DeviceData dw(gpu(), w), da(gpu(), a), dy(gpu(), size_t(cols) * 4), ds(gpu(), scales), dg(gpu(), group);
                poison(gpu(), dy.f(), size_t(cols));
                RowSumArgs args = want;
                args.w.data = dw.buffer.data();
                args.a = da.f();
                args.y = dy.f();
                if (kind == 3) {
                    args.scales = ds.f();
                    args.group = dg.buffer.as<int32_t>();
                }
                gpu().rowSum(args);
                const std::vector<float> got = download(gpu(), dy.f(), size_t(cols));
                EXPECT_EQ(unwritten(got), 0u);
                EXPECT_LE(relL2(got, expected), 1e-5);
            }
    // scatterRows: 5 rows of 36 bytes into a 48-byte stride; the rows not named keep their bytes.
    const std::vector<float> src = randomFloats(5 * 9, rng);
    std::vector<float> slots = randomFloats(20 * 12, rng);
    const std::vector<int32_t> index = {19, 0, 7, 8, 3};
    DeviceData ds(gpu(), src), dd(gpu(), slots), di(gpu(), index);
    gpu().scatterRows({dd.buffer.data(), 48, ds.buffer.data(), 36, 36, di.buffer.as<int32_t>(), 5});
    const std::vector<float> got = download(gpu(), dd.f(), slots.size());
    for (size_t i = 0; i < index.size(); ++i)
        std::copy(src.begin() + long(i * 9), src.begin() + long(i * 9 + 9), slots.begin() + index[i] * 12);
    EXPECT_EQ(got, slots);
    expectHealthy();
}

// The timeline's marks: one after each op, in the device's order, tied to the host's steady
// clock. They lie between the host's clock before the first op and after synchronize(), rise
// with the ops, and the newest is when synchronize() returned; a second take has none.
TEST_F(BackendConformance, TimelineMarksFollowTheOps)
{
    const auto now = [] {
        return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count());
    };
    const int64_t rows = 2048, cols = 2048;
    const std::vector<float> w = randomFloats(size_t(rows * cols), rng), x = randomFloats(size_t(cols), rng);
    DeviceData dw(gpu(), w), dx(gpu(), x), dy(gpu(), size_t(rows) * 4);
    const MatrixView m{DType::F32, dw.buffer.data(), rows, cols, size_t(cols) * 4};
    gpu().synchronize();
    uint64_t stale[4];
    gpu().takeMarks(stale);  // whatever earlier tests left
    for (bool synchronize : {true, false}) {  // takeMarks ties the clocks itself when not synchronized
        const uint64_t before = now();
        gpu().mark();
        for (int i = 0; i < 4; ++i) {
            for (int k = 0; k < 8; ++k) gpu().matvec(m, dx.f(), dy.f());
            gpu().mark();
        }
        if (synchronize) gpu().synchronize();
        uint64_t marks[8] = {};
        const size_t got = gpu().takeMarks(marks);
        const uint64_t after = now();
        ASSERT_EQ(got, 5u) << "synchronize " << synchronize;
        EXPECT_GE(marks[0], before);
        EXPECT_LE(marks[4], after);
        for (size_t i = 1; i < got; ++i) EXPECT_LE(marks[i - 1], marks[i]) << i;
        EXPECT_GT(marks[4], marks[0]);  // 32 matvecs of 16 MiB take time
        EXPECT_EQ(gpu().takeMarks(marks), 0u);
    }
    // More marks than asked for: the newest.
    for (int i = 0; i < 3; ++i) gpu().mark();
    gpu().synchronize();
    uint64_t two[2] = {};
    EXPECT_EQ(gpu().takeMarks(two), 2u);
    EXPECT_LE(two[0], two[1]);
    expectHealthy();
}

TEST_F(BackendConformance, MemoryBudgetAndAccounting)
{
    DeviceOptions options;
    options.memoryLimit = 1 << 20;
    auto made = createDevice(kBackend, options);
    ASSERT_TRUE(made.ok()) << made.error().message;
    Device& d = *made.value();
    EXPECT_EQ(d.memoryStats().limit, 1u << 20);
    EXPECT_EQ(d.info().totalMemory, 1u << 20);
    {
        auto a = d.allocate(600 << 10);
        ASSERT_TRUE(a.ok()) << a.error().message;
        auto b = d.allocate(600 << 10);
        ASSERT_FALSE(b.ok());
        EXPECT_EQ(b.error().code, ErrorCode::OutOfDeviceMemory);
        EXPECT_EQ(d.memoryStats().used, 600u << 10);
        auto h = d.allocateHost(3 << 20);  // pinned host memory: not in the device budget
        ASSERT_TRUE(h.ok()) << h.error().message;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(h->data()) % 4096, 0u);
        EXPECT_EQ(d.memoryStats().hostUsed, 3u << 20);
    }
    const MemoryStats s = d.memoryStats();
    EXPECT_EQ(s.used, 0u);
    EXPECT_EQ(s.peak, 600u << 10);
    EXPECT_EQ(s.hostUsed, 0u);
    EXPECT_EQ(s.hostPeak, 3u << 20);
    d.resetPeak();
    EXPECT_EQ(d.memoryStats().peak, 0u);

    // Far past the card, with no budget: an error value, and the device still works.
    auto huge = gpu().allocate(size_t{1} << 50);
    ASSERT_FALSE(huge.ok());
    EXPECT_EQ(huge.error().code, ErrorCode::OutOfDeviceMemory);
    auto small = gpu().allocate(4096);
    EXPECT_TRUE(small.ok());
    expectHealthy();
}

TEST_F(BackendConformance, UploadFromAnotherThreadWhileOpsRun)
{
    // The prefetcher's pattern: one thread uploads the next weights (pinned staging) while the
    // inference thread runs matvecs; each upload is complete when it returns.
    const int64_t rows = 4096, cols = 4096;
    const size_t bytes = rowBytes(DType::F16, cols) * rows;
    auto staging = gpu().allocateHost(bytes);
    ASSERT_TRUE(staging.ok()) << staging.error().message;
    const std::vector<uint8_t> w = randomMatrix(DType::F16, rows, cols, rowBytes(DType::F16, cols), rng);
    std::memcpy(staging->data(), w.data(), bytes);
    DeviceData busyW(gpu(), w), x(gpu(), randomFloats(cols, rng)), y(gpu(), rows * 4);
    DeviceData target(gpu(), bytes);
    std::thread copier([&] {
        for (int i = 0; i < 8; ++i) gpu().upload(target.buffer.data(), staging->data(), bytes);
    });
    for (int i = 0; i < 200; ++i)
        gpu().matvec(MatrixView{DType::F16, busyW.buffer.data(), rows, cols, rowBytes(DType::F16, cols)},
                      x.f(), y.f());
    copier.join();
    std::vector<uint8_t> back(bytes);
    gpu().download(back.data(), target.buffer.data(), bytes);
    EXPECT_EQ(back, w);
    expectHealthy();
}

TEST_F(BackendConformance, Layernorm)
{
    for (int n : {1, 3, 129, 4099, 8192}) {
        for (bool inPlace : {false, true}) {
            const std::vector<float> x = randomFloats(n, rng, -3.0f, 3.0f), w = randomFloats(n, rng),
                                     b = randomFloats(n, rng);
            std::vector<float> want(n);
            cpu().layernorm(x.data(), w.data(), b.data(), want.data(), n, 1e-5f);
            DeviceData dx(gpu(), x), dw(gpu(), w), db(gpu(), b), out(gpu(), n * sizeof(float));
            float* target = inPlace ? dx.f() : out.f();
            if (!inPlace) poison(gpu(), target, n);
            gpu().layernorm(dx.f(), dw.f(), db.f(), target, n, 1e-5f);
            const std::vector<float> got = download(gpu(), target, n);
            EXPECT_EQ(unwritten(got), 0u) << n;
            EXPECT_LE(relL2(got, want), 1e-5) << "n " << n << " in place " << inPlace;
        }
    }
    expectHealthy();
}

TEST_F(BackendConformance, RopeWithFrequencyFactors)
{
    // Llama 3 scaling: each pair's angle divided by its factor (device memory).
    for (bool neox : {false, true})
        for (int pos : {0, 5, 3000}) {
            const int heads = 4, headDim = 64;
            const std::vector<float> factors = randomFloats(headDim / 2, rng, 1.0f, 8.0f);
            DeviceData dFactors(gpu(), factors);
            RopeParams p{headDim, 500000.0f, 1.0f, neox, factors.data()};
            std::vector<float> want = randomFloats(static_cast<size_t>(heads) * headDim, rng);
            DeviceData dx(gpu(), want);
            cpu().rope(want.data(), heads, headDim, pos, p);
            p.freqFactors = dFactors.f();
            gpu().rope(dx.f(), heads, headDim, pos, p);
            const std::vector<float> got = download(gpu(), dx.f(), want.size());
            EXPECT_EQ(unwritten(got), 0u);
            EXPECT_LE(relL2(got, want), 1e-5) << "neox " << neox << " pos " << pos;
        }
    expectHealthy();
}

TEST_F(BackendConformance, PointwiseOps)
{
    for (int n : {1, 129, 4099}) {
        for (PointwiseOp op : {PointwiseOp::ShiftedRelu, PointwiseOp::ShiftedReluGlu, PointwiseOp::SnapToGrid,
                               PointwiseOp::Scale, PointwiseOp::ScaledAdd}) {
            const std::vector<float> x = randomFloats(n, rng, -4.0f, 4.0f), y = randomFloats(n, rng);
            std::vector<float> want(n);
            PointwiseArgs a{op, x.data(), y.data(), want.data(), n, 0.25f, 0.05f, -40.0f, 30.0f, 0.3721f};
            cpu().pointwise(a);
            DeviceData dx(gpu(), x), dy(gpu(), y), out(gpu(), n * sizeof(float));
            poison(gpu(), out.f(), n);
            PointwiseArgs g = a;
            g.x = dx.f();
            g.y = dy.f();
            g.out = out.f();
            gpu().pointwise(g);
            EXPECT_EQ(unwritten(download(gpu(), out.f(), n)), 0u);
            EXPECT_LE(relL2(download(gpu(), out.f(), n), want), 1e-6) << int(op) << " n " << n;
            g.out = dx.f();  // in place
            gpu().pointwise(g);
            EXPECT_LE(relL2(download(gpu(), dx.f(), n), want), 1e-6) << int(op) << " in place, n " << n;
        }
    }
    expectHealthy();
}

// The runtime's streamed embedding: one row uploaded after another into one buffer, each read
// by a getRow issued in between. On the Vulkan device an upload waits for the ops before it,
// so each getRow sees its own row (CUDA's copy stream gives no such order: not checked there).
TEST_F(BackendConformance, UploadAfterAnOpDoesNotChangeWhatItRead)
{
    if (kBackend != "vulkan") return;
    const int64_t cols = 4128;
    DeviceData row(gpu(), cols * sizeof(float)), out(gpu(), 3 * cols * sizeof(float));
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 3; ++i) {
        rows.push_back(randomFloats(cols, rng));
        gpu().upload(row.f(), rows.back().data(), cols * sizeof(float));
        gpu().getRow(MatrixView{DType::F32, row.buffer.data(), 1, cols, cols * sizeof(float)}, 0,
                     out.f(static_cast<size_t>(i) * cols));
    }
    const std::vector<float> got = download(gpu(), out.f(), 3 * cols);
    for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(std::equal(rows[i].begin(), rows[i].end(), got.begin() + i * cols)) << "row " << i;
    expectHealthy();
}

// An upload to memory the device did not allocate is recorded (sticky), not a crash: checked on
// a device of its own, since the error stays.
TEST_F(BackendConformance, UploadOutsideTheDevicesBuffersIsAnError)
{
    // Checked where the backend resolves addresses itself (not GTEST_SKIP: CTest would then show
    // the whole executable as skipped).
    if (kBackend != "vulkan") return;
    auto made = createDevice(kBackend, {});
    ASSERT_TRUE(made.ok()) << made.error().message;
    Device& d = *made.value();
    auto b = d.allocate(4096);
    ASSERT_TRUE(b.ok()) << b.error().message;
    const float v[4] = {1, 2, 3, 4};
    d.upload(b->as<float>() + 1020, v, sizeof v);  // the last 16 bytes: fine
    EXPECT_TRUE(d.lastError().ok());
    d.upload(b->as<float>() + 1022, v, sizeof v);  // 8 bytes past the end
    ASSERT_FALSE(d.lastError().ok());
    EXPECT_EQ(d.lastError().error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(d.info().name.find("[failed"), std::string::npos) << d.info().name;
    EXPECT_FALSE(d.allocate(64).ok());
}

}  // namespace
