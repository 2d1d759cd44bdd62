// Conformance of a GPU backend, matvec and getRow: every stored weight type (dense, quantized,
// the GGUF types, bitmap sparse) against the CPU device, on awkward shapes, and prompt batches as
// matrix products. Tolerances and the rest: test_backend_conformance.cpp.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance_support.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace conformance;

namespace {

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

// The rest of GGUF's block types (issue 50: Q2_K and Q3_K of the Q2_K / Q3_K_M files, the
// imatrix IQ types, MXFP4 experts), held to the same tests. Vulkan computes every one; a backend
// whose kernels for them are still to come says so through supports() and the test notes it.
const DType kIqTypes[] = {DType::Q2_K,    DType::Q3_K,   DType::Q5_1,    DType::IQ4_NL, DType::IQ4_XS,
                          DType::IQ3_XXS, DType::IQ3_S,  DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                          DType::IQ1_S,   DType::IQ1_M,  DType::MXFP4};

// Whether the device under test computes `type`; a failure where it should (every type on Vulkan,
// the older GGUF types everywhere).
bool computes(Device& gpu, DType type)
{
    if (gpu.supports(type)) return true;
    const bool required = kBackend == "vulkan" || std::find(std::begin(kIqTypes), std::end(kIqTypes), type) ==
                                                      std::end(kIqTypes);
    if (required) ADD_FAILURE() << dtypeName(type) << ": not computed by the " << kBackend << " backend";
    else std::printf("[ NOTE     ] %s: not computed by the %s backend yet (supports() is false)\n", dtypeName(type),
                     kBackend.c_str());
    return false;
}

std::vector<DType> everyGgufType()
{
    std::vector<DType> types(std::begin(kGgufTypes), std::end(kGgufTypes));
    types.insert(types.end(), std::begin(kIqTypes), std::end(kIqTypes));
    return types;
}

TEST_F(BackendConformance, MatvecGgufTypes)
{
    for (DType type : everyGgufType()) {
        if (!computes(gpu(), type)) continue;
        const int block = dtypeTraits(type).blockSize;
        for (int64_t rows : {1, 3, 129, 4099})
            for (int64_t cols : {int64_t(block), int64_t(block) * 3, block == 32 ? int64_t(4128) : int64_t(4096)})
                runMatvecCase(gpu(), cpu(), type, rows, cols, 0, 0, rng);
        runMatvecCase(gpu(), cpu(), type, 129, block == 32 ? 4128 : 11008, 2, 0, rng);
        runMatvecCase(gpu(), cpu(), type, 129, block == 32 ? 4128 : 4096, 0, 1, rng);
        // MXFP4's blocks are 17 bytes: rows that start at odd addresses.
        if (type == DType::MXFP4) runMatvecCase(gpu(), cpu(), type, 129, 4128, 1, 0, rng);
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
    for (DType type : everyGgufType()) {
        if (!computes(gpu(), type)) continue;
        const int64_t rows = 37, cols = dtypeTraits(type).blockSize == 32 ? 4128 : 4096;
        // 2-byte aligned rows (MXFP4: rows at odd addresses).
        const size_t stride = rowBytes(type, cols) + (type == DType::MXFP4 ? 1 : 2);
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
        // Outside the matrix: NaN, as on the CPU device.
        gpu().getRow(MatrixView{type, dw.buffer.data(), rows, cols, stride}, rows, out.f());
        EXPECT_EQ(unwritten(download(gpu(), out.f(), cols)), static_cast<size_t>(cols)) << dtypeName(type);
    }
    expectHealthy();
}

// A prompt batch: runs of jobs on one weight matrix with x and y at even strides (as LayerStep
// lays a batch out) become one matrix product from 8 jobs on. Against a double product of the
// weights as getRow decodes them (exact) and x: Vulkan multiplies in fp32 with x as it is (<= 1e-5,
// which the one-token path, x rounded to Q8, cannot meet for the quantized types: that the product
// ran is checked too), CUDA through cuBLAS with x rounded to fp16 or bf16 (<= 4e-3). Tiles
// cut short (129 rows, 17 and 33 tokens); 7 jobs stay matvecs (the Q8 path, <= 1e-2). On Vulkan
// the kIqTypes stay matvecs at any length, x quantized per token as the CPU device and llama.cpp
// do (vulkan_ops.cpp's matmulRun): the Q8 path's tolerance, and each token the CPU's matvec.
TEST_F(BackendConformance, PromptBatchesAsMatrixProducts)
{
    std::vector<DType> types = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
    for (DType t : everyGgufType()) types.push_back(t);
    for (DType type : types) {
        if (!computes(gpu(), type)) continue;
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
            const bool iq = std::find(std::begin(kIqTypes), std::end(kIqTypes), type) != std::end(kIqTypes);
            const bool product = tokens >= 8 && !(iq && kBackend == "vulkan");
            const double tolerance = !product ? 1e-2 : kBackend == "cuda" && type != DType::F32 ? 4e-3 : 1e-5;
            EXPECT_LE(err, tolerance);
            std::printf("[ INFO     ] batch %-4s %2d tokens: rel L2 %.2e to the exact product\n", dtypeName(type),
                        tokens, err);
            if (!product) {  // matvecs: each token the CPU device's (x quantized per token), not a product's
                std::vector<float> cpuY(size_t(sy * tokens), 0.0f);
                std::vector<MatvecJob> cpuJobs;
                for (int t = 0; t < tokens; ++t)
                    cpuJobs.push_back({{type, w.data(), rows, cols, stride}, x.data() + t * sx, cpuY.data() + t * sy});
                cpu().matvec(cpuJobs);
                std::vector<float> cpuGot;
                for (int t = 0; t < tokens; ++t)
                    cpuGot.insert(cpuGot.end(), cpuY.begin() + t * sy, cpuY.begin() + t * sy + rows);
                EXPECT_LE(relL2(got, cpuGot), 1e-4) << "against the CPU device's matvecs";
            }
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

}  // namespace
