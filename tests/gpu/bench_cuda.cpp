// bench-cuda: what the CUDA backend reaches next to what the card can do.
//   ceiling  device-to-device copy bandwidth (cudaMemcpyAsync, bytes read + bytes written)
//   h2d      host -> device of 256 MiB, from pinned (cudaHostAlloc) and from pageable memory,
//            raw cudaMemcpyAsync and through Device::upload (what the runtime's prefetcher gets)
//   matvec   y = W x through CudaDevice::matvec for F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (and
//            F32, custom kernel and cublasSgemv) at decode shapes; bytes = weights + x + y; quantized types include
//            the quantization of x, as in real use. Weight sets rotate through a 1 GiB arena so
//            that no run finds its weights in the 50 MB L2.
//   bitmap   ENDOR bitmap sparse blobs (50% of each row pruned at random; fp16 values, and int8
//            g64): the fused GEMV (bytes = blob + x + y) and decompression to dense fp16 (bytes =
//            blob read + dense fp16 written), against the same d2d copy ceiling; the blobs are
//            real encodings (core/compress) of random matrices, copied through the arena.
// Times come from CUDA events on the compute stream: warm-up, then the median of many runs.
// Usage: bench-cuda [--json FILE] [--quick]

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/compress/bitmap_sparse.h"
#include "gpu/cuda/cuda_device.h"
#include "gpu/cuda/cuda_ops.h"

using namespace spillway;
using namespace spillway::gpu;

namespace {

void checkCuda(cudaError_t e, const char* what)
{
    if (e != cudaSuccess) {
        std::fprintf(stderr, "bench-cuda: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median seconds of `runs` timed calls of body() (each may enqueue several launches), after
// `warmup` untimed ones, with events recorded on `stream`.
template <class Body>
double timeEvents(cudaStream_t stream, int warmup, int runs, Body body)
{
    cudaEvent_t start, stop;
    checkCuda(cudaEventCreate(&start), "cudaEventCreate");
    checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
    for (int i = 0; i < warmup; ++i) body();
    checkCuda(cudaStreamSynchronize(stream), "warm-up");
    std::vector<double> seconds;
    for (int i = 0; i < runs; ++i) {
        checkCuda(cudaEventRecord(start, stream), "cudaEventRecord");
        body();
        checkCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
        checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        checkCuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        seconds.push_back(ms * 1e-3);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return median(seconds);
}

struct Row {
    std::string figure;
    std::string shape;
    double microseconds = 0;
    double gbps = 0;      // GB/s, 1e9 bytes
    double ceiling = 0;   // GB/s
};

void fillRandom(void* data, size_t bytes, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    auto* p = static_cast<uint64_t*>(data);
    for (size_t i = 0; i < bytes / 8; ++i) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        p[i] = s;
    }
}

}  // namespace

int main(int argc, char** argv)
{
    std::string jsonPath;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--json") && i + 1 < argc) jsonPath = argv[++i];
        else if (!std::strcmp(argv[i], "--quick")) quick = true;
        else {
            std::fprintf(stderr, "usage: bench-cuda [--json FILE] [--quick]\n");
            return 2;
        }
    }
    std::string error;
    auto device = cuda::CudaDevice::create({}, &error);
    if (!device) {
        std::fprintf(stderr, "bench-cuda: no CUDA device: %s\n", error.c_str());
        return 1;
    }
    cudaStream_t stream = device->computeStream();
    std::printf("device: %s\n", device->info().name.c_str());
    const int runs = quick ? 10 : 50;
    std::vector<Row> rows;

    // ---- ceiling: device-to-device copy --------------------------------------------------------
    const size_t arenaBytes = size_t{1} << 30;
    auto arena = device->allocate(arenaBytes);
    auto copyDst = device->allocate(arenaBytes / 2);
    if (!arena.ok() || !copyDst.ok()) {
        std::fprintf(stderr, "bench-cuda: cannot allocate 1.5 GiB of device memory\n");
        return 1;
    }
    {
        auto staging = device->allocateHost(256u << 20);
        if (!staging.ok()) return 1;
        for (size_t off = 0; off < arenaBytes; off += staging->bytes()) {
            fillRandom(staging->data(), staging->bytes(), off + 1);
            device->upload(static_cast<uint8_t*>(arena->data()) + off, staging->data(), staging->bytes());
        }
    }
    const size_t copyBytes = arenaBytes / 2;
    const double copySeconds = timeEvents(stream, 3, runs, [&] {
        checkCuda(cudaMemcpyAsync(copyDst->data(), arena->data(), copyBytes, cudaMemcpyDeviceToDevice, stream),
                  "d2d copy");
    });
    const double ceiling = 2.0 * copyBytes / copySeconds / 1e9;
    rows.push_back({"copy d2d (read+write)", "512 MiB", copySeconds * 1e6, ceiling, ceiling});

    // ---- host -> device ----------------------------------------------------------------------
    {
        const size_t bytes = size_t{256} << 20;
        auto pinned = device->allocateHost(bytes);
        if (!pinned.ok()) {
            std::fprintf(stderr, "bench-cuda: cannot allocate 256 MiB of pinned memory: %s\n",
                         pinned.error().message.c_str());
            return 1;
        }
        std::vector<uint8_t> pageable(bytes);
        fillRandom(pinned->data(), bytes, 7);
        std::memcpy(pageable.data(), pinned->data(), bytes);
        const double pinnedS = timeEvents(stream, 2, quick ? 5 : 15, [&] {
            checkCuda(cudaMemcpyAsync(copyDst->data(), pinned->data(), bytes, cudaMemcpyHostToDevice, stream), "h2d");
        });
        const double pageableS = timeEvents(stream, 2, quick ? 5 : 15, [&] {
            checkCuda(cudaMemcpyAsync(copyDst->data(), pageable.data(), bytes, cudaMemcpyHostToDevice, stream), "h2d");
        });
        // Device::upload (copy stream, blocking): host clock.
        std::vector<double> uploadS;
        for (int i = 0; i < (quick ? 5 : 15); ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            device->upload(copyDst->data(), pinned->data(), bytes);
            uploadS.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double pinnedGbps = bytes / pinnedS / 1e9;
        rows.push_back({"h2d pinned", "256 MiB", pinnedS * 1e6, pinnedGbps, pinnedGbps});
        rows.push_back({"h2d pageable", "256 MiB", pageableS * 1e6, bytes / pageableS / 1e9, pinnedGbps});
        rows.push_back({"Device::upload pinned", "256 MiB", median(uploadS) * 1e6,
                        bytes / median(uploadS) / 1e9, pinnedGbps});
    }

    // ---- matvec --------------------------------------------------------------------------------
    auto x = device->allocate(64 << 10);
    auto y = device->allocate(64 << 10);
    if (!x.ok() || !y.ok()) {
        std::fprintf(stderr, "bench-cuda: cannot allocate the matvec vectors: %s\n",
                     (x.ok() ? y : x).error().message.c_str());
        return 1;
    }
    {
        std::vector<float> hx(16 << 10);
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : hx) v = dist(rng);
        device->upload(x->data(), hx.data(), hx.size() * 4);
    }
    const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {5120, 13824}};
    struct Variant { DType type; bool cublas; const char* name; };
    const Variant variants[] = {{DType::F16, false, "F16"},   {DType::BF16, false, "BF16"},
                                {DType::Q8_0, false, "Q8_0"}, {DType::Q4_0, false, "Q4_0"},
                                {DType::Q4_K, false, "Q4_K"}, {DType::Q5_K, false, "Q5_K"},
                                {DType::Q6_K, false, "Q6_K"}, {DType::F32, false, "F32"},
                                {DType::F32, true, "F32 cublasSgemv"}};
    for (const Variant& v : variants) {
        device->setF32Gemv(v.cublas);
        for (auto [r, c] : shapes) {
            const size_t matrixBytes = rowBytes(v.type, c) * r;
            const size_t slot = (matrixBytes + 4095) & ~size_t{4095};
            const int sets = static_cast<int>(std::max<size_t>(1, arenaBytes / slot));
            std::vector<MatvecJob> jobs(sets);
            for (int s = 0; s < sets; ++s)
                jobs[s] = {MatrixView{v.type, static_cast<uint8_t*>(arena->data()) + s * slot, r, c, rowBytes(v.type, c)},
                           x->as<float>(), y->as<float>()};
            // One timed run = one matvec per weight set, back to back (separate calls, as the
            // engine issues them); the time per matvec is the run's time / sets.
            const double seconds = timeEvents(stream, 2, quick ? 5 : 21, [&] {
                for (int s = 0; s < sets; ++s) device->matvec(jobs[s].w, jobs[s].x, jobs[s].y);
            }) / sets;
            const double bytes = static_cast<double>(matrixBytes) + 4.0 * c + 4.0 * r;
            rows.push_back({std::string("matvec ") + v.name, std::to_string(r) + "x" + std::to_string(c),
                            seconds * 1e6, bytes / seconds / 1e9, ceiling});
            if (v.type != DType::F16 && v.type != DType::BF16 && v.type != DType::F32) {
                // The same weights as one call of `sets` jobs sharing x: x is quantized once, so
                // this is the GEMV kernel alone (what the Q, K, V projections of a layer get).
                const double shared = timeEvents(stream, 2, quick ? 5 : 21, [&] { device->matvec(jobs); }) / sets;
                rows.push_back({std::string("matvec ") + v.name + " shared x", std::to_string(r) + "x" + std::to_string(c),
                                shared * 1e6, bytes / shared / 1e9, ceiling});
            }
        }
    }
    device->setF32Gemv(false);

    // ---- bitmap sparse: fused GEMV and decompression -------------------------------------------
    {
        const std::pair<compress::ValueFormat, int> formats[] = {{compress::ValueFormat::F16, 0},
                                                                 {compress::ValueFormat::Int8, 64}};
        auto dense16 = device->allocate(size_t{5120} * 13824 * 2 + 4096);
        if (!dense16.ok()) return 1;
        std::mt19937 rng(11);
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (auto [format, group] : formats) {
            for (auto [r, c] : shapes) {
                std::vector<float> dense(static_cast<size_t>(r) * c);
                for (float& v : dense) v = (rng() & 1) ? dist(rng) : 0.0f;
                auto m = compress::encode(dense.data(), r, c, format, group ? group : 64);
                if (!m.ok()) {
                    std::fprintf(stderr, "bench-cuda: encode: %s\n", m.error().message.c_str());
                    return 1;
                }
                const std::vector<uint8_t> blob = compress::serialize(m.value());
                const size_t slot = (blob.size() + 4095) & ~size_t{4095};
                const int sets = static_cast<int>(std::max<size_t>(1, arenaBytes / slot));
                std::vector<MatvecJob> jobs(sets);
                for (int i = 0; i < sets; ++i) {
                    uint8_t* at = static_cast<uint8_t*>(arena->data()) + i * slot;
                    device->upload(at, blob.data(), blob.size());
                    jobs[i] = {MatrixView{DType::BitmapSparse, at, r, c, 0}, x->as<float>(), y->as<float>()};
                }
                const std::string name = std::string("bitmap ") + compress::valueFormatName(format) +
                                         (group ? " g" + std::to_string(group) : std::string());
                const std::string shape = std::to_string(r) + "x" + std::to_string(c);
                const double gemv = timeEvents(stream, 2, quick ? 5 : 21, [&] {
                    for (int i = 0; i < sets; ++i) device->matvec(jobs[i].w, jobs[i].x, jobs[i].y);
                }) / sets;
                rows.push_back({"matvec " + name, shape, gemv * 1e6,
                                (static_cast<double>(blob.size()) + 4.0 * c + 4.0 * r) / gemv / 1e9, ceiling});
                const double unpack = timeEvents(stream, 2, quick ? 5 : 21, [&] {
                    for (int i = 0; i < sets; ++i)
                        checkCuda(cuda::launchBitmapToF16(jobs[i].w, dense16->as<uint16_t>(), stream), "decompress");
                }) / sets;
                rows.push_back({"decompress " + name, shape, unpack * 1e6,
                                (static_cast<double>(blob.size()) + 2.0 * r * c) / unpack / 1e9, ceiling});
                std::printf("%s %s: blob %.1f%% of dense fp16\n", name.c_str(), shape.c_str(),
                            100.0 * blob.size() / (2.0 * r * c));
            }
        }
    }
    if (Status s = device->firstError(); !s.ok()) {
        std::fprintf(stderr, "bench-cuda: device error: %s\n", s.error().message.c_str());
        return 1;
    }

    std::printf("\n%-24s %-12s %12s %10s %10s %7s\n", "figure", "shape", "time (us)", "GB/s", "ceiling", "ratio");
    for (const Row& row : rows)
        std::printf("%-24s %-12s %12.1f %10.1f %10.1f %6.1f%%\n", row.figure.c_str(), row.shape.c_str(),
                    row.microseconds, row.gbps, row.ceiling, 100.0 * row.gbps / row.ceiling);
    std::printf("(GB = 1e9 bytes; ceiling of matvec rows: the d2d copy; of h2d rows: h2d pinned)\n");

    if (!jsonPath.empty()) {
        FILE* f = std::fopen(jsonPath.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "bench-cuda: cannot write %s\n", jsonPath.c_str());
            return 1;
        }
        std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"rows\": [\n", device->info().name.c_str());
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& row = rows[i];
            std::fprintf(f,
                         "    {\"figure\": \"%s\", \"shape\": \"%s\", \"microseconds\": %.3f, "
                         "\"GBps\": %.2f, \"ceiling_GBps\": %.2f, \"ratio\": %.4f}%s\n",
                         row.figure.c_str(), row.shape.c_str(), row.microseconds, row.gbps, row.ceiling,
                         row.gbps / row.ceiling, i + 1 < rows.size() ? "," : "");
        }
        std::fprintf(f, "  ]\n}\n");
        std::fclose(f);
        std::printf("wrote %s\n", jsonPath.c_str());
    }
    return 0;
}
