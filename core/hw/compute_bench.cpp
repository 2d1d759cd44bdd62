// Device micro-benchmarks: matvec throughput per weight format, and host->device copy bandwidth
// from pinned and from pageable memory. Written against gpu::Device only, so they run on every
// backend the same way.

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/hw/measure.h"
#include "gpu/block_fields.h"
#include "gpu/sparse_format.h"

namespace spillway::hw::detail {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Random but well-formed weights of `type` (finite values, small block scales, never all zeros).
// A 1 MiB pattern is generated and repeated: the matrix is far bigger than the caches either way.
void fillWeights(gpu::DType type, uint8_t* data, size_t bytes, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    auto randomFloat = [&] { return float(int32_t(rng())) * 0x1p-31f; };
    auto putHalf = [](uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); };
    const size_t blockBytes = std::max<size_t>(1, size_t(gpu::dtypeTraits(type).blockBytes));
    const size_t pattern = std::min(bytes, (kMiB / blockBytes) * blockBytes);
    switch (type) {
    case gpu::DType::F32:
        for (size_t i = 0; i + 4 <= pattern; i += 4) {
            const float v = randomFloat();
            std::memcpy(data + i, &v, 4);
        }
        break;
    case gpu::DType::F16:
    case gpu::DType::BF16:
        for (size_t i = 0; i + 2 <= pattern; i += 2) {
            const float v = randomFloat();
            putHalf(data + i, type == gpu::DType::F16 ? gpu::fp32ToFp16(v) : gpu::fp32ToBf16(v));
        }
        break;
    case gpu::DType::Q8_0:
    case gpu::DType::Q4_0:
    case gpu::DType::Q4_1:
    case gpu::DType::Q5_0:
    case gpu::DType::Q4_K:
    case gpu::DType::Q5_K:
    case gpu::DType::Q6_K:
    case gpu::DType::Q8_G64: {
        // Random codes; the block's scales (at these byte offsets: see gpu/dtype.h) small.
        for (size_t i = 0; i < pattern; ++i) data[i] = uint8_t(rng());
        const bool fp32Scale = type == gpu::DType::Q8_G64;
        const size_t scaleAt = type == gpu::DType::Q6_K ? 208 : 0;
        const int halves = type == gpu::DType::Q4_1 || type == gpu::DType::Q4_K ||
                                   type == gpu::DType::Q5_K ? 2 : 1;  // d and m / dmin
        for (size_t i = 0; i + blockBytes <= pattern; i += blockBytes) {
            const float scale = 0.01f + 0.001f * float(rng() % 16);
            if (fp32Scale) {
                std::memcpy(data + i, &scale, 4);
                continue;
            }
            for (int h = 0; h < halves; ++h)
                putHalf(data + i + scaleAt + 2 * h, gpu::fp32ToFp16(scale));
        }
        break;
    }
    case gpu::DType::BitmapSparse: return;  // not measured here: its speed depends on the sparsity
    default:  // ggml's other block types: random codes, a small block scale
        for (size_t i = 0; i < pattern; ++i) data[i] = uint8_t(rng());
        for (size_t i = 0; i + blockBytes <= pattern; i += blockBytes)
            gpu::setBlockScale(type, data + i, 0.001f + 0.0001f * float(rng() % 16));
        break;
    }
    for (size_t at = pattern; at < bytes; at += pattern)
        std::memcpy(data + at, data, std::min(pattern, bytes - at));
}

double median(std::vector<double> v)
{
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Times `run` repeatedly for about `seconds` (at least `minRuns` times): seconds of each run.
template <class F>
std::vector<double> timeRuns(F&& run, double seconds, int minRuns)
{
    std::vector<double> times;
    const double start = nowSeconds();
    while (int(times.size()) < minRuns || nowSeconds() - start < seconds) {
        const double t0 = nowSeconds();
        run();
        times.push_back(nowSeconds() - t0);
        if (times.size() >= 1000) break;
    }
    return times;
}

// Allocates the largest of `bytes`, bytes/2, ... (down to `least`) the device grants.
Result<gpu::Buffer> allocateUpTo(gpu::Device& device, size_t bytes, size_t least, bool host)
{
    for (;;) {
        auto b = host ? device.allocateHost(bytes) : device.allocate(bytes);
        if (b || bytes / 2 < least) return b;
        bytes /= 2;
    }
}

// A 50%-sparse ENDOR bitmap blob (fp16 values) of `rows` x `cols`: random bits and values, laid
// out as gpu/sparse_format.h says.
std::vector<uint8_t> randomBitmapBlob(int64_t rows, int64_t cols, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    const int64_t words = (cols + 63) / 64;
    std::vector<uint64_t> bits(size_t(rows * words));
    std::vector<uint64_t> offsets(size_t(rows) + 1, 0);
    for (int64_t r = 0; r < rows; ++r) {
        uint64_t nnz = 0;
        for (int64_t w = 0; w < words; ++w) {
            uint64_t b = rng();
            if (w == words - 1 && cols % 64) b &= (uint64_t(1) << (cols % 64)) - 1;
            bits[size_t(r * words + w)] = b;
            nnz += uint64_t(__builtin_popcountll(b));
        }
        offsets[size_t(r) + 1] = offsets[size_t(r)] + 2 * nnz;
    }
    const uint64_t valuesBytes = offsets.back();
    const gpu::BitmapBlobSections sec = gpu::bitmapBlobSections(uint64_t(rows), uint64_t(cols), valuesBytes);
    std::vector<uint8_t> blob(sec.total, 0);
    gpu::writeBitmapBlobHeader(blob.data(), gpu::SparseValues::F16, 0, uint64_t(rows), uint64_t(cols), valuesBytes);
    std::memcpy(blob.data() + sec.offsets, offsets.data(), offsets.size() * 8);
    std::memcpy(blob.data() + sec.bitmap, bits.data(), bits.size() * 8);
    for (uint64_t i = 0; i + 2 <= valuesBytes; i += 2) {
        const uint16_t h = gpu::fp32ToFp16(float(int32_t(rng())) * 0x1p-31f);
        std::memcpy(blob.data() + sec.values + i, &h, 2);
    }
    return blob;
}

}  // namespace

Spread spreadOf(std::string what, std::vector<double> samples, bool judged)
{
    Spread s;
    s.what = std::move(what);
    s.judged = judged;
    s.repeats = int(samples.size());
    if (samples.empty()) return s;
    std::sort(samples.begin(), samples.end());
    const size_t n = samples.size();
    s.median = samples[n / 2];
    s.low = n >= 5 ? samples[n / 4] : samples.front();
    s.high = n >= 5 ? samples[(3 * n) / 4] : samples.back();
    return s;
}

Spread rateSpreadOf(std::string what, const std::vector<double>& seconds, double units, bool judged)
{
    std::vector<double> rates;
    for (double t : seconds)
        if (t > 0) rates.push_back(units / t);
    return spreadOf(std::move(what), std::move(rates), judged);
}

std::vector<FormatThroughput> measureMatvec(gpu::Device& device, bool quick, std::vector<Spread>* spreads)
{
    std::vector<FormatThroughput> out;
    // Matrices of ~32 MiB (a 4096 x 4096 fp16 projection), as many copies as make 384 MiB, and
    // every trial reads each copy once: however big the last-level cache, the weights stream
    // from memory, as when decoding a model bigger than the caches.
    const size_t matrixBytes = quick ? 2 * kMiB : 32 * kMiB;
    const size_t totalBytes = quick ? 4 * kMiB : 384 * kMiB;
    const int64_t cols = 4096;  // a multiple of every block size
    // Times y = W x over copies of the `bytes` at `host` (rows x cols of `type`); weight bytes/s.
    auto measure = [&](gpu::DType type, const uint8_t* host, size_t bytes, int64_t rows, size_t rowStride) {
        auto x = device.allocate(size_t(cols) * sizeof(float));
        auto y = device.allocate(size_t(rows) * sizeof(float));
        auto staging = device.allocateHost(bytes);
        if (!x || !y || !staging) return;
        std::memcpy(staging->data(), host, bytes);
        std::vector<gpu::Buffer> copies;
        std::vector<gpu::MatrixView> views;
        while (copies.size() * bytes < totalBytes) {
            // Weights go through a staging buffer and uploadMatrix, as a session's resident
            // weights do, so the device keeps them in the row layout its kernels read fastest
            // (the CPU device reorders Q8_0 rows on AVX-512). A bitmap blob's header and offsets
            // stay as they are; its values differ a little between copies.
            staging->as<uint8_t>()[bytes - 1 - copies.size() % 64] ^= 0x10;
            auto w = device.uploadMatrix(gpu::MatrixView{type, staging->data(), rows, cols, rowStride}, bytes);
            if (!w) break;  // a small device: fewer copies
            views.push_back(w->view);
            copies.push_back(std::move(w->buffer));
        }
        if (copies.empty()) return;
        {
            std::vector<float> xs(static_cast<size_t>(cols));
            std::mt19937 rng(7);
            for (float& v : xs) v = float(int32_t(rng())) * 0x1p-31f;
            device.upload(x->data(), xs.data(), xs.size() * sizeof(float));
        }
        auto pass = [&] {
            for (const gpu::MatrixView& w : views) device.matvec(w, x->as<const float>(), y->as<float>());
            device.synchronize();
        };
        pass();  // warm-up: pages, scratch, worker pool
        const std::vector<double> times = timeRuns(pass, quick ? 0.02 : 0.3, quick ? 3 : 5);
        const double seconds = median(times);
        const double streamed = double(bytes * copies.size());
        if (seconds > 0) out.push_back({type, streamed / seconds});
        if (spreads)
            spreads->push_back(rateSpreadOf(device.info().backend + " matvec " + gpu::dtypeName(type), times, streamed));
    };
    // One type of each family (measuredStandIn, probe.h): the others take its rate.
    for (gpu::DType type : {gpu::DType::F32, gpu::DType::F16, gpu::DType::BF16, gpu::DType::Q8_0,
                            gpu::DType::Q4_0, gpu::DType::Q4_K, gpu::DType::Q3_K, gpu::DType::IQ2_XXS,
                            gpu::DType::IQ4_XS}) {
        if (!device.supports(type)) continue;
        const size_t rowBytes = gpu::rowBytes(type, cols);
        const int64_t rows = int64_t(matrixBytes / rowBytes);
        const size_t bytes = size_t(rows) * rowBytes;
        std::vector<uint8_t> host(bytes);
        fillWeights(type, host.data(), bytes, uint64_t(type) + 1);
        measure(type, host.data(), bytes, rows, rowBytes);
    }
    // Bitmap sparse: a blob pruned to 50% with fp16 values (a pruned model's usual form), per
    // blob byte. Its kernels' speed depends on the columns more than on the bytes, so the figure
    // holds for densities near this one.
    if (device.supports(gpu::DType::BitmapSparse)) {
        const int64_t rows = int64_t(matrixBytes / (size_t(cols) / 8 + size_t(cols)));
        const std::vector<uint8_t> blob = randomBitmapBlob(rows, cols, 11);
        measure(gpu::DType::BitmapSparse, blob.data(), blob.size(), rows, 0);
    }
    return out;
}

double measureLayerOverhead(gpu::Device& device, bool quick, std::vector<Spread>* spreads)
{
    // A decode step's ops for one layer at a size where the arithmetic and the bytes are nothing:
    // what is left is what every op costs to issue and finish (a pool's wake-up and barrier on
    // the CPU, a launch on a GPU).
    constexpr int dim = 64, heads = 4;
    constexpr size_t vectorBytes = size_t(dim) * sizeof(float);
    auto act = device.allocate(8 * vectorBytes);
    auto norm = device.allocate(vectorBytes);
    const size_t matrixBytes = size_t(dim) * vectorBytes;
    std::vector<float> host(size_t(dim) * dim);
    std::mt19937 rng(3);
    for (float& v : host) v = float(int32_t(rng())) * 0x1p-34f;
    auto weights = device.uploadMatrix(gpu::MatrixView{gpu::DType::F32, host.data(), dim, dim, vectorBytes}, matrixBytes);
    if (!act || !norm || !weights) return 0;
    {
        std::vector<float> ones(size_t(8) * dim, 1.0f);
        device.upload(act->data(), ones.data(), ones.size() * sizeof(float));
        device.upload(norm->data(), ones.data(), vectorBytes);
    }
    float* a = act->as<float>();
    float *x = a, *h = a + dim, *q = a + 2 * dim, *k = a + 3 * dim, *v = a + 4 * dim, *g = a + 5 * dim,
          *u = a + 6 * dim, *o = a + 7 * dim;
    const float* w = norm->as<const float>();
    const gpu::MatrixView m = weights->view;
    gpu::RopeParams rope;
    rope.rotaryDims = dim / heads;
    constexpr int kLayers = 64;  // per timed run
    auto run = [&] {
        for (int layer = 0; layer < kLayers; ++layer) {
            device.rmsnorm(x, w, h, dim, 1e-5f);
            const gpu::MatvecJob qkv[] = {{m, h, q}, {m, h, k}, {m, h, v}};
            device.matvec(qkv);
            device.rope(q, heads, dim / heads, layer, rope);
            device.rope(k, heads, dim / heads, layer, rope);
            device.matvec(m, v, o);
            device.add(x, o, dim);
            device.rmsnorm(x, w, h, dim, 1e-5f);
            const gpu::MatvecJob gateUp[] = {{m, h, g}, {m, h, u}};
            device.matvec(gateUp);
            device.swiglu(g, u, o, dim);
            device.matvec(m, o, h);
            device.add(x, h, dim);
        }
        device.synchronize();
    };
    run();  // warm-up
    std::vector<double> times = timeRuns(run, quick ? 0.01 : 0.1, quick ? 3 : 9);
    for (double& t : times) t /= kLayers;
    if (spreads) spreads->push_back(spreadOf(device.info().backend + " per-layer overhead", times, false));
    return median(times);
}

UploadBandwidth measureUpload(gpu::Device& device, bool quick, std::vector<Spread>* spreads)
{
    UploadBandwidth r;
    const size_t want = quick ? 8 * kMiB : 256 * kMiB;
    const double seconds = quick ? 0.02 : 0.25;
    auto dst = allocateUpTo(device, want, kMiB, false);
    if (!dst) return r;
    const size_t bytes = dst->bytes();
    if (auto pinned = allocateUpTo(device, bytes, bytes, true)) {
        std::memset(pinned->data(), 0x5a, bytes);  // touch every page before timing
        auto run = [&] { device.upload(dst->data(), pinned->data(), bytes); };
        run();
        const std::vector<double> times = timeRuns(run, seconds, 3);
        const double s = median(times);
        if (s > 0) r.pinned = double(bytes) / s;
        if (spreads) spreads->push_back(rateSpreadOf(device.info().backend + " copies (pinned)", times, double(bytes)));
    }
    {
        std::unique_ptr<uint8_t[]> pageable(new (std::nothrow) uint8_t[bytes]);
        if (pageable) {
            std::memset(pageable.get(), 0xa5, bytes);
            auto run = [&] { device.upload(dst->data(), pageable.get(), bytes); };
            run();
            const double s = median(timeRuns(run, seconds, 3));
            if (s > 0) r.pageable = double(bytes) / s;
        }
    }
    return r;
}

}  // namespace spillway::hw::detail
