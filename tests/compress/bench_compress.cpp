// bench-compress: the compressed weight formats on one 4096 x 11008 matrix (a Llama-7B FFN
// projection) pruned to 50% unstructured sparsity. Prints bytes per format, decompression
// throughput, GEMV times and zstd levels 1 and 3 on the same pruned fp16 bytes (ENDOR §5.1's
// comparison). The GEMV baseline is the engine's own dense fp16 matvec: the CPU device's
// (gpu::createCpuDevice, widest kernel set) on the same matrix, at 1 and 2 threads; the bitmap
// sparse kernels (f16 and int8 g64 values) run under each kernel set this CPU has, the 2-thread
// runs splitting rows in half.
//
//   bench-compress [--json FILE] [--repeats N]

#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/compress/bitmap_sparse.h"
#include "core/compress/group_quant.h"
#include "core/compress/sparse_gemv.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/dtype.h"

using namespace spillway;
using namespace spillway::compress;

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double medianSeconds(int repeats, F&& f)
{
    std::vector<double> t;
    for (int i = 0; i < repeats; ++i) {
        const auto t0 = Clock::now();
        f();
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// True if `r` holds a value; otherwise says why on stderr.
template <class T>
bool succeeded(const Result<T>& r, const char* what)
{
    if (r.ok()) return true;
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    return false;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string jsonPath;
    int repeats = 7;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--json" && i + 1 < argc) jsonPath = argv[++i];
        else if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: bench-compress [--json FILE] [--repeats N]\n");
            return 2;
        }
    }
    const int64_t rows = 4096, cols = 11008;
    const double denseF16Bytes = double(rows) * cols * 2;

    // Random values at random positions, exactly half of each row zero.
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> w(rows * cols, 0.0f);
    std::vector<int32_t> perm(cols);
    for (int64_t r = 0; r < rows; ++r) {
        for (int32_t c = 0; c < cols; ++c) perm[c] = c;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t k = 0; k < cols / 2; ++k) w[r * cols + perm[k]] = value(rng) + 2e-3f;
    }
    std::vector<uint16_t> dense16(w.size());
    for (size_t i = 0; i < w.size(); ++i) dense16[i] = gpu::fp32ToFp16(w[i]);
    std::vector<float> x(cols);
    for (auto& v : x) v = value(rng);
    std::vector<float> y(rows);

    nlohmann::json out;
    out["matrix"] = {{"rows", rows}, {"cols", cols}, {"sparsity", 0.5}, {"repeats", repeats}};

    std::printf("bench-compress: %lld x %lld, 50%% unstructured sparsity, single thread, median of %d\n\n",
                (long long)rows, (long long)cols, repeats);
    std::printf("%-22s %14s %9s %14s %14s\n", "format", "bytes", "of f16", "decomp GB/s", "(input GB/s)");

    auto reportSize = [&](const char* name, double bytes, double decompS) {
        const double outGBs = decompS > 0 ? denseF16Bytes / decompS / 1e9 : 0;
        const double inGBs = decompS > 0 ? bytes / decompS / 1e9 : 0;
        if (decompS > 0)
            std::printf("%-22s %14.0f %8.2f%% %14.2f %14.2f\n", name, bytes, 100 * bytes / denseF16Bytes, outGBs, inGBs);
        else
            std::printf("%-22s %14.0f %8.2f%% %14s %14s\n", name, bytes, 100 * bytes / denseF16Bytes, "-", "-");
        out["formats"][name] = {{"bytes", bytes}, {"fraction_of_dense_f16", bytes / denseF16Bytes},
                                {"decompress_s", decompS}, {"decompress_out_GBps", outGBs},
                                {"decompress_in_GBps", inGBs}};
    };

    reportSize("dense f16", denseF16Bytes, 0);
    auto s16Encoded = encode(w.data(), rows, cols, ValueFormat::F16);
    auto s8Encoded = encode(w.data(), rows, cols, ValueFormat::Int8, 64);
    auto s4Encoded = encode(w.data(), rows, cols, ValueFormat::Int4, 64);
    auto q8Quantized = quantize(w.data(), rows, cols, 8, 64);
    if (!succeeded(s16Encoded, "bitmap f16") || !succeeded(s8Encoded, "bitmap int8 g64") ||
        !succeeded(s4Encoded, "bitmap int4 g64") || !succeeded(q8Quantized, "dense int8 g64"))
        return 1;
    auto s16 = std::move(s16Encoded).value();
    auto s8 = std::move(s8Encoded).value();
    auto s4 = std::move(s4Encoded).value();
    auto q8 = std::move(q8Quantized).value();

    std::vector<uint16_t> back16(w.size());
    const double d16 = medianSeconds(repeats, [&] { decompressRows16(s16, 0, rows, back16.data()); });
    if (std::memcmp(back16.data(), dense16.data(), back16.size() * 2) != 0) {
        std::fprintf(stderr, "decompression mismatch\n");
        return 1;
    }
    reportSize("bitmap f16", double(serializedBytes(s16)), d16);
    // Quantized formats decompress to fp32; GB/s of output is still counted as dense fp16 bytes.
    std::vector<float> backF(w.size());
    reportSize("bitmap int8 g64", double(serializedBytes(s8)),
               medianSeconds(repeats, [&] { decompressRows(s8, 0, rows, backF.data()); }));
    reportSize("bitmap int4 g64", double(serializedBytes(s4)),
               medianSeconds(repeats, [&] { decompressRows(s4, 0, rows, backF.data()); }));
    reportSize("dense int8 g64", double(q8.bytes()), 0);

    // zstd on the pruned dense fp16 bytes.
    for (int level : {1, 3}) {
        std::vector<uint8_t> z(ZSTD_compressBound(dense16.size() * 2));
        const size_t zn = ZSTD_compress(z.data(), z.size(), dense16.data(), dense16.size() * 2, level);
        if (ZSTD_isError(zn)) {
            std::fprintf(stderr, "zstd: %s\n", ZSTD_getErrorName(zn));
            return 1;
        }
        const double dz = medianSeconds(repeats, [&] {
            ZSTD_decompress(back16.data(), back16.size() * 2, z.data(), zn);
        });
        const std::string name = "zstd-" + std::to_string(level) + " f16";
        reportSize(name.c_str(), double(zn), dz);
    }

    // GEMV. Baseline: the CPU device's dense fp16 matvec, the matrix in its own memory.
    std::vector<float> yRef(rows), yDev(rows);
    gemvDenseF16(dense16.data(), cols, x.data(), yRef.data(), 0, rows);
    double baseline[3] = {0, 0, 0};  // by thread count
    std::string baselineKernels;
    for (int threads : {1, 2}) {
        auto dev = gpu::createCpuDevice(threads);
        baselineKernels = dev->info().kernels;
        auto buf = dev->allocate(dense16.size() * 2);
        if (!buf.ok()) {
            std::fprintf(stderr, "cpu device: %s\n", buf.error().message.c_str());
            return 1;
        }
        dev->upload(buf->data(), dense16.data(), dense16.size() * 2);
        const gpu::MatrixView view{gpu::DType::F16, buf->data(), rows, cols, size_t(cols) * 2};
        baseline[threads] = medianSeconds(repeats, [&] {
            dev->matvec(view, x.data(), yDev.data());
            dev->synchronize();
        });
        for (int64_t r = 0; r < rows; ++r)
            if (std::fabs(yDev[r] - yRef[r]) > 1e-3f * (1 + std::fabs(yRef[r]))) {
                std::fprintf(stderr, "cpu device matvec mismatch at row %lld\n", (long long)r);
                return 1;
            }
    }
    out["gemv_baseline"] = {{"what", "gpu::createCpuDevice matvec, DType::F16"}, {"kernels", baselineKernels}};

    // Rows split in halves over `threads` threads (one call each; started per run, ~50 us).
    auto split = [&](int threads, auto&& gemv) {
        if (threads == 1) return gemv(int64_t{0}, rows);
        std::thread t([&] { gemv(int64_t{0}, rows / 2); });
        gemv(rows / 2, rows);
        t.join();
    };
    std::printf("\nGEMV, baseline = CPU device dense f16 matvec (%s kernels); median of %d\n",
                baselineKernels.c_str(), repeats);
    std::printf("%-30s %8s %10s %10s %12s\n", "kernel", "threads", "ms", "speed-up", "weight GB/s");
    auto reportGemv = [&](const std::string& name, int threads, double bytes, double sec) {
        const double base = baseline[threads];
        std::printf("%-30s %8d %10.2f %9.2fx %12.2f\n", name.c_str(), threads, sec * 1e3, base / sec,
                    bytes / sec / 1e9);
        out["gemv"][name + " t" + std::to_string(threads)] = {
            {"threads", threads}, {"seconds", sec}, {"speedup_vs_dense_f16", base / sec},
            {"weight_GBps", bytes / sec / 1e9}};
    };
    // Int8 is checked against its own scalar kernel (quantization moves it off the fp16 result).
    std::vector<float> yInt8(rows);
    gemvBitmapSparse(s8, x.data(), yInt8.data(), 0, rows, gpu::CpuKernelSet::Scalar);
    auto checkSparse = [&](const char* what, const std::vector<float>& want) {
        for (int64_t r = 0; r < rows; ++r)
            if (std::fabs(y[r] - want[r]) > 1e-3f * (1 + std::fabs(want[r]))) {
                std::fprintf(stderr, "%s mismatch at row %lld\n", what, (long long)r);
                return false;
            }
        return true;
    };
    struct SparseCase {
        const char* name;
        const BitmapSparseMatrix* m;
        const std::vector<float>* want;
    };
    const SparseCase sparseCases[] = {{"bitmap f16 ", &s16, &yRef}, {"bitmap int8 g64 ", &s8, &yInt8}};
    for (int threads : {1, 2}) {
        reportGemv("dense f16 (cpu device)", threads, denseF16Bytes, baseline[threads]);
        for (const SparseCase& sc : sparseCases)
            for (int s = int(bestSparseKernelSet()); s >= 0; --s) {
                const auto set = gpu::CpuKernelSet(s);
                const std::string name = sc.name + std::string(gpu::cpuKernelSetName(set));
                std::fill(y.begin(), y.end(), 0.0f);
                const double sec = medianSeconds(repeats, [&] {
                    split(threads, [&](int64_t r0, int64_t r1) {
                        gemvBitmapSparse(*sc.m, x.data(), y.data(), r0, r1, set);
                    });
                });
                if (!checkSparse(name.c_str(), *sc.want)) return 1;
                reportGemv(name, threads, double(sc.m->bytes()), sec);
            }
    }
    // Kernels with scalar versions only, single thread.
    reportGemv("dense f16 scalar (reference)", 1, denseF16Bytes,
               medianSeconds(repeats, [&] { gemvDenseF16(dense16.data(), cols, x.data(), y.data(), 0, rows); }));
    reportGemv("bitmap int4 g64 scalar", 1, double(s4.bytes()),
               medianSeconds(repeats, [&] { gemvBitmapSparse(s4, x.data(), y.data(), 0, rows); }));
    reportGemv("dense int8 g64 scalar", 1, double(q8.bytes()),
               medianSeconds(repeats, [&] { gemvQuantized(q8, x.data(), y.data(), 0, rows); }));

    if (!jsonPath.empty()) {
        std::ofstream f(jsonPath);
        f << out.dump(2) << "\n";
        if (!f) {
            std::fprintf(stderr, "cannot write %s\n", jsonPath.c_str());
            return 1;
        }
    }
    return 0;
}
