// bench-compress: the compressed weight formats on one 4096 x 11008 matrix (a Llama-7B FFN
// projection) pruned to 50% unstructured sparsity. Prints bytes per format, decompression
// throughput, single-thread GEMV times (dense fp16 vs bitmap sparse fp16 vs bitmap + int8), and
// zstd levels 1 and 3 on the same pruned fp16 bytes (ENDOR §5.1's comparison).
//
//   bench-compress [--json FILE] [--repeats N]

#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/compress/bitmap_sparse.h"
#include "core/compress/group_quant.h"
#include "core/compress/sparse_gemv.h"
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
    auto s16 = encode(w.data(), rows, cols, ValueFormat::F16).value();
    auto s8 = encode(w.data(), rows, cols, ValueFormat::Int8, 64).value();
    auto s4 = encode(w.data(), rows, cols, ValueFormat::Int4, 64).value();
    auto q8 = quantize(w.data(), rows, cols, 8, 64).value();

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

    std::printf("\n%-22s %10s %10s %12s\n", "GEMV (1 thread)", "ms", "speed-up", "weight GB/s");
    auto reportGemv = [&](const char* name, double bytes, double s, double base) {
        std::printf("%-22s %10.2f %9.2fx %12.2f\n", name, s * 1e3, base / s, bytes / s / 1e9);
        out["gemv"][name] = {{"seconds", s}, {"speedup_vs_dense_f16", base / s}, {"weight_GBps", bytes / s / 1e9}};
    };
    const double gDense = medianSeconds(repeats, [&] { gemvDenseF16(dense16.data(), cols, x.data(), y.data(), 0, rows); });
    reportGemv("dense f16", denseF16Bytes, gDense, gDense);
    reportGemv("bitmap f16", double(s16.bytes()),
               medianSeconds(repeats, [&] { gemvBitmapSparse(s16, x.data(), y.data(), 0, rows); }), gDense);
    reportGemv("bitmap int8 g64", double(s8.bytes()),
               medianSeconds(repeats, [&] { gemvBitmapSparse(s8, x.data(), y.data(), 0, rows); }), gDense);
    reportGemv("bitmap int4 g64", double(s4.bytes()),
               medianSeconds(repeats, [&] { gemvBitmapSparse(s4, x.data(), y.data(), 0, rows); }), gDense);
    reportGemv("dense int8 g64", double(q8.bytes()),
               medianSeconds(repeats, [&] { gemvQuantized(q8, x.data(), y.data(), 0, rows); }), gDense);

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
