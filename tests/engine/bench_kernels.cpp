// bench-kernels: matvec throughput of the CPU backend per weight type and kernel set, next to
// the ceiling it is bounded by (host memory read bandwidth with the same thread count).
//
//   bench-kernels [--threads N] [--json FILE] [--quick] [--type Q8_0] [--kernels avx2]
//   bench-kernels --products   (the prompt path's matrix products instead: measureProducts)
//   bench-kernels [--threads N] --delta-net   (a Gated DeltaNet mixer: measureDeltaNet)
//
// Prints a table and writes the same figures as JSON (default bench-kernels.json). Matrices
// rotate over copies totalling at least 320 MiB and twice the last-level cache (some server
// CPUs have hundreds of MiB of it), so every matvec streams from memory, as decoding a model
// bigger than the caches does. The ceiling reads those same copies with a plain loop (a VM's
// pages are not all equally fast: another buffer of the same size can be 10-20% faster or slower),
// once after every trial; each trial is compared with the higher of the two reads framing it
// (the bandwidth of a shared machine drifts within a second), and the median trial counts.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/formats/ggml_quants.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/block_fields.h"
#include "gpu/cpu/cpu_kernels.h"

using namespace spillway::gpu;

namespace {

struct Case {
    DType type;
    int64_t rows;
    int64_t cols;
    bool uploaded = false;  // through Device::uploadMatrix (the device's own row layout)
};

struct Measurement {
    std::string kernels;
    Case shape;
    size_t bytes = 0;          // one matrix
    double seconds = 0.0;        // time of one matvec, in the best trial
    double medianSeconds = 0.0;  // time of one matvec, in the median trial
    double ceiling = 0.0;        // bytes/s: reading the same copies (median of the trials' ceilings)
    double fraction = 0.0;       // median trial's bytes/s over its ceiling
    double bytesPerSecond = 0.0;
};

uint64_t g_state = 0x9e3779b97f4a7c15ull;
uint64_t nextRandom()
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return g_state;
}

// Random but well-formed weights: finite values and small block scales.
void fillWeights(DType type, uint8_t* data, size_t bytes)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t r = nextRandom();
        std::memcpy(data + i, &r, 8);
    }
    auto putHalf = [](uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); };
    switch (type) {
    case DType::F32:
        for (size_t i = 0; i + 4 <= bytes; i += 4) {
            const float v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;
            std::memcpy(data + i, &v, 4);
        }
        break;
    case DType::F16:
    case DType::BF16:
        for (size_t i = 0; i + 2 <= bytes; i += 2) {
            const float v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;
            putHalf(data + i, type == DType::F16 ? fp32ToFp16(v) : fp32ToBf16(v));
        }
        break;
    case DType::Q8_0:
        for (size_t i = 0; i + 34 <= bytes; i += 34) putHalf(data + i, fp32ToFp16(0.01f));
        break;
    case DType::Q4_0:
        for (size_t i = 0; i + 18 <= bytes; i += 18) putHalf(data + i, fp32ToFp16(0.01f));
        break;
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
        // Random codes; small fp16 scales (d and m / dmin where the block has both).
        const int blockBytes = dtypeTraits(type).blockBytes;
        const size_t scaleAt = type == DType::Q6_K ? 208 : 0;
        const int halves = type == DType::Q5_0 || type == DType::Q6_K ? 1 : 2;
        for (size_t i = 0; i + blockBytes <= bytes; i += blockBytes)
            for (int h = 0; h < halves; ++h)
                putHalf(data + i + scaleAt + 2 * h, fp32ToFp16(0.001f));
        break;
    }
    case DType::Q8_G64:
        for (size_t i = 0; i + 68 <= bytes; i += 68) {
            const float s = 0.01f;
            std::memcpy(data + i, &s, 4);
        }
        break;
    case DType::BitmapSparse: break;  // not a dense benchmark case
    default:  // ggml's other block types: random codes, a small block scale (gpu/block_fields.h)
        for (size_t i = 0; i < bytes; ++i) data[i] = uint8_t(i * 2654435761u >> 13);
        for (size_t i = 0; i + size_t(dtypeTraits(type).blockBytes) <= bytes; i += size_t(dtypeTraits(type).blockBytes))
            setBlockScale(type, data + i, 0.01f);
        break;
    }
}

// Bytes a benchmark pass must cover so that it cannot be served from the caches.
size_t streamingBytes()
{
    size_t bytes = size_t{320} << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0) bytes = std::max(bytes, 2 * static_cast<size_t>(llc));
#endif
    return bytes;
}

Measurement measure(Device& device, const Case& c, double minSeconds)
{
    Measurement m;
    m.kernels = device.info().kernels;
    m.shape = c;
    m.bytes = rowBytes(c.type, c.cols) * static_cast<size_t>(c.rows);
    const size_t copies = std::max<size_t>(2, (streamingBytes() + m.bytes - 1) / m.bytes);

    std::vector<Buffer> weights;
    std::vector<MatrixView> views;
    std::vector<uint8_t> stored(c.uploaded ? m.bytes : 0);
    for (size_t i = 0; i < copies; ++i) {
        const MatrixView shape{c.type, nullptr, c.rows, c.cols, rowBytes(c.type, c.cols)};
        if (c.uploaded) {
            fillWeights(c.type, stored.data(), m.bytes);
            MatrixView src = shape;
            src.data = stored.data();
            auto u = device.uploadMatrix(src, m.bytes);
            if (!u.ok()) {
                std::fprintf(stderr, "upload: %s\n", u.error().message.c_str());
                return m;
            }
            views.push_back(u->view);
            weights.push_back(std::move(u->buffer));
            continue;
        }
        auto b = device.allocate(m.bytes);
        if (!b.ok()) {
            std::fprintf(stderr, "allocate: %s\n", b.error().message.c_str());
            return m;
        }
        fillWeights(c.type, b->as<uint8_t>(), m.bytes);
        MatrixView v = shape;
        v.data = b->data();
        views.push_back(v);
        weights.push_back(std::move(*b));
    }
    std::vector<float> x(static_cast<size_t>(c.cols)), y(static_cast<size_t>(c.rows));
    for (float& v : x) v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;

    auto run = [&](size_t i) { device.matvec(views[i % copies], x.data(), y.data()); };
    for (size_t i = 0; i < copies; ++i) run(i);  // warm up: page tables, scratch, pool

    // The ceiling reads the same copies with a plain loop and the same thread count (a VM's
    // pages are not all equally fast, so another buffer would be a different ceiling). One trial
    // reads every copy once, then the probe reads them all once; each trial is compared with the
    // higher of the two reads framing it (the bandwidth of a shared machine drifts).
    std::vector<HostReadProbe::Range> ranges;
    for (const MatrixView& v : views) ranges.push_back({v.data, m.bytes});
    HostReadProbe probe(device.info().threads, std::move(ranges));
    struct Trial { double seconds, ratio, ceiling; };
    std::vector<Trial> trials;
    const auto start = std::chrono::steady_clock::now();
    size_t n = 0;
    double before = probe.read();
    while (trials.size() < 5 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
               minSeconds) {
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < copies; ++i) run(n++);
        const auto t1 = std::chrono::steady_clock::now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count() / copies;
        const double after = probe.read();
        const double ceiling = std::max(before, after);
        trials.push_back({seconds, static_cast<double>(m.bytes) / seconds / ceiling, ceiling});
        before = after;
    }
    auto medianOf = [&](auto field) {
        std::vector<double> v;
        for (const Trial& t : trials) v.push_back(t.*field);
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    m.seconds = std::min_element(trials.begin(), trials.end(),
                                 [](const Trial& a, const Trial& b) { return a.seconds < b.seconds; })
                    ->seconds;
    m.medianSeconds = medianOf(&Trial::seconds);
    m.bytesPerSecond = static_cast<double>(m.bytes) / m.seconds;
    m.ceiling = medianOf(&Trial::ceiling);
    m.fraction = medianOf(&Trial::ratio);
    return m;
}

// --products: the prompt path's matrix products on one thread, 256 tokens x a 2048 x 2048 matrix
// of each type the prompt path multiplies as integers (Q4_0, Q8_0, the K-quants, the IQ types,
// Q5_1, MXFP4: synthetic values, or random codes where there is no encoder) and F16, the best of 5: each integer product this CPU runs (gemm_int8_*.cpp) and
// each kernel set's float product (rows unpacked to floats, then its own tile), as CpuDevice::gemm
// calls them. In GOP/s (2 per multiply-add), by the wall clock and by the thread's CPU time.
void measureProducts()
{
    constexpr int64_t n = 256, dim = 2048;
    std::vector<float> values(size_t(dim * dim)), x(size_t(n * dim)), y(size_t(n * dim));
    for (float& v : values) v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;
    for (float& v : x) v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;
    const double ops = 2.0 * n * dim * dim;
    // The shortest of 5 runs (after one to warm up), by the wall clock and by the thread's CPU
    // time (which leaves out the time other processes had the core: steadier on a busy machine).
    struct Best {
        double wall = 1e30, cpu = 1e30;
    };
    auto best = [](auto&& run) {
        const auto cpuNow = [] {
            timespec ts{};
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
            return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
        };
        Best fastest;
        for (int r = 0; r < 6; ++r) {
            const auto start = std::chrono::steady_clock::now();
            const double cpuStart = cpuNow();
            run();
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            const double c = cpuNow() - cpuStart;
            if (r > 0) {
                fastest.wall = std::min(fastest.wall, s);
                fastest.cpu = std::min(fastest.cpu, c);
            }
        }
        return fastest;
    };
    std::printf("%-24s %-5s %10s %10s\n", "product (1 thread)", "type", "GOP/s", "GOP/s cpu");
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16, DType::Q2_K,
                       DType::Q3_K, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S,
                       DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M, DType::MXFP4}) {
        const size_t stride = rowBytes(type, dim);
        std::vector<uint8_t> bytes(stride * size_t(dim));
        if (spillway::gguf::hasRowEncoder(type)) {
            for (int64_t r = 0; r < dim; ++r)
                spillway::gguf::quantizeRow(type, values.data() + r * dim, dim, bytes.data() + size_t(r) * stride);
        } else {
            fillWeights(type, bytes.data(), bytes.size());  // random codes (no encoder)
        }
        const MatrixView w{type, bytes.data(), dim, dim, stride};
        cpu::GemmInt8 variants[3];
        const int count = cpu::gemmInt8Variants(variants);
        for (int v = 0; v < count; ++v) {
            const cpu::GemmInt8& p = variants[v];
            if (!p.takes(w)) continue;
            const int64_t panels = (n + p.tokens - 1) / p.tokens;
            std::vector<uint8_t> packed(size_t(panels * (dim / 32) * cpu::gemmInt8XBlockBytes(p.tokens)));
            std::vector<uint8_t> panel(size_t(dim / 32 * cpu::gemmInt8WBlockBytes(p.rowsPerBlock)));
            const Best s = best([&] {
                p.pack(x.data(), dim, n, dim, 0, panels, w, packed.data());
                for (int64_t r0 = 0; r0 < dim; r0 += p.rowsPerBlock)
                    p.rows(packed.data(), n, w, r0, std::min(dim, r0 + p.rowsPerBlock), y.data(), dim, panel.data());
            });
            std::printf("%-24s %-5s %10.1f %10.1f\n", (std::string("integer, ") + p.name).c_str(), dtypeName(type),
                        ops / s.wall / 1e9, ops / s.cpu / 1e9);
        }
        for (int set = static_cast<int>(bestCpuKernelSet()); set >= 1; --set) {
            const cpu::Kernels& k = cpu::kernelsFor(static_cast<CpuKernelSet>(set));
            const cpu::DequantRowsFn dequant = k.dequant[static_cast<int>(type)];
            if (!k.gemmRows || !dequant) continue;
            const int64_t panels = (n + cpu::kGemmPanelTokens - 1) / cpu::kGemmPanelTokens;
            std::vector<float> packed(size_t(panels * cpu::kGemmPanelTokens * dim));
            std::vector<float> unpacked(size_t(k.gemmPanelRows * dim)), panel(size_t(k.gemmPanelRows * dim) + 16);
            float* aligned = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel.data()) + 63) & ~uintptr_t{63});
            const Best s = best([&] {
                k.packGemmX(x.data(), dim, n, dim, 0, panels, packed.data());
                for (int64_t r0 = 0; r0 < dim; r0 += k.gemmPanelRows) {
                    const int64_t r1 = std::min(dim, r0 + k.gemmPanelRows);
                    dequant(w, r0, r1, unpacked.data());
                    k.gemmRows(packed.data(), n, dim, unpacked.data(), dim, r1 - r0, y.data() + r0, dim, aligned);
                }
            });
            std::printf("%-24s %-5s %10.1f %10.1f\n", (std::string("float, ") + cpuKernelSetName(k.set)).c_str(),
                        dtypeName(type), ops / s.wall / 1e9, ops / s.cpu / 1e9);
        }
    }
}

// --delta-net: a Gated DeltaNet layer's mixer (Qwen3.5-35B-A3B's shapes: 16 key and 32 value
// heads of 128, a 4-tap convolution) over a 512-token prompt, token by token (the recurrent
// step, as decoding runs it) and as one batch (the chunked form the prompt path takes), on the
// CPU device with `threads` threads, the best of 5; in ms, tokens/s and GFLOP/s of the
// recurrence's own arithmetic (4 x heads x 128 x 128 multiply-adds per token).
void measureDeltaNet(int threads)
{
    const int kh = 16, vh = 32, dk = 128, dv = 128, taps = 4, n = 512;
    const int convDim = 2 * kh * dk + vh * dv, stride = convDim + vh * dv + 2 * vh + vh * dv;
    std::vector<float> io(size_t(n) * stride), conv(size_t(convDim) * taps), dtBias(vh), a(vh), norm(dv, 1.0f);
    for (float& v : io) v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-31f;
    for (float& v : conv) v = static_cast<float>(static_cast<int32_t>(nextRandom())) * 0x1p-32f;
    for (int h = 0; h < vh; ++h) dtBias[h] = 0.5f, a[h] = -0.1f * float(1 + h % 4);
    std::vector<float> convState(size_t(taps - 1) * convDim), state(size_t(vh) * dv * dk);
    auto device = createCpuDevice(threads);
    auto run = [&](int first, int count) {
        DeltaNetArgs d;
        float* t = io.data() + size_t(first) * stride;
        d.qkv = t;
        d.z = t + convDim;
        d.beta = d.z + vh * dv;
        d.alpha = d.beta + vh;
        d.out = t + convDim + vh * dv + 2 * vh;
        d.convWeight = conv.data();
        d.dtBias = dtBias.data();
        d.a = a.data();
        d.normWeight = norm.data();
        d.convState = convState.data();
        d.state = state.data();
        d.kHeads = kh, d.vHeads = vh, d.stateDim = dk, d.headVDim = dv, d.kernel = taps, d.tiled = true;
        d.n = count;
        d.stride = size_t(stride);
        device->deltaNet(d);
    };
    const double flops = 2.0 * 4.0 * vh * dk * dv * n;
    std::printf("Gated DeltaNet mixer, %d tokens, %d threads (16 x 32 heads of 128)\n", n, threads);
    for (bool batched : {false, true}) {
        double best = 1e30;
        for (int r = 0; r < 6; ++r) {
            std::fill(state.begin(), state.end(), 0.0f);
            std::fill(convState.begin(), convState.end(), 0.0f);
            const auto start = std::chrono::steady_clock::now();
            if (batched)
                run(0, n);
            else
                for (int i = 0; i < n; ++i) run(i, 1);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (r > 0) best = std::min(best, s);
        }
        std::printf("%-34s %8.2f ms %9.0f tokens/s %7.1f GFLOP/s\n",
                    batched ? "one batch (chunked form)" : "token by token (recurrent step)", best * 1e3, n / best,
                    flops / best / 1e9);
    }
}

}  // namespace

int main(int argc, char** argv)
{
    int threads = 2;
    std::string jsonPath = "bench-kernels.json";
    bool quick = false;
    std::string onlyType, onlyKernels;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (a == "--json" && i + 1 < argc) jsonPath = argv[++i];
        else if (a == "--quick") quick = true;
        else if (a == "--type" && i + 1 < argc) onlyType = argv[++i];
        else if (a == "--kernels" && i + 1 < argc) onlyKernels = argv[++i];
        else if (a == "--products") {
            measureProducts();
            return 0;
        } else if (a == "--delta-net") {
            measureDeltaNet(threads);
            return 0;
        } else {
            std::fprintf(stderr, "usage: bench-kernels [--threads N] [--json FILE] [--quick] "
                                 "[--type F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q4_K|Q5_K|Q6_K|Q8_G64] "
                                 "[--kernels scalar|avx2|avx512] | --products | [--threads N] --delta-net\n");
            return 2;
        }
    }
    const double minSeconds = quick ? 0.2 : 1.0;

    const double ownBuffer = measureHostReadBandwidth(threads, streamingBytes(), 4);
    std::printf("host read bandwidth, %d threads, a buffer of its own: %.2f GB/s\n"
                "(each case is compared with reading its own matrices, trial by trial)\n\n",
                threads, ownBuffer / 1e9);
    std::printf("%-7s %-5s %13s %10s %9s %12s %10s %8s\n", "kernels", "type", "rows x cols",
                "us/matvec", "GB/s", "median GB/s", "ceil GB/s", "% ceil");

    std::vector<Case> cases;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                    DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_G64, DType::Q2_K, DType::Q3_K,
                    DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS, DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS,
                    DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M, DType::MXFP4})
        cases.push_back({t, 4096, 11008});  // Llama-2-7B's FFN down projection
    // TinyLlama's shapes (k, v: dispatch-bound; q, o; gate, up; down; the output), each as the
    // file stores it and as the device keeps it after uploadMatrix (a decode's resident weights).
    for (bool uploaded : {false, true})
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{256, 2048}, {2048, 2048}, {5632, 2048},
                                  {2048, 5632}, {32000, 2048}})
            cases.push_back({DType::Q8_0, rows, cols, uploaded});

    std::vector<Measurement> results;
    for (int s = static_cast<int>(bestCpuKernelSet()); s >= 0; --s) {
        const auto set = static_cast<CpuKernelSet>(s);
        if (!onlyKernels.empty() && onlyKernels != cpuKernelSetName(set)) continue;
        auto device = createCpuDevice(threads, set);
        for (const Case& c : cases) {
            if (!onlyType.empty() && onlyType != dtypeName(c.type)) continue;
            if (s == 0 && quick && c.rows > 4096) continue;
            Measurement m = measure(*device, c, minSeconds);
            if (m.ceiling <= 0) continue;  // the copies could not be allocated (reported)
            results.push_back(m);
            const std::string shape = std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                      (c.uploaded ? " up" : "");
            std::printf("%-7s %-5s %13s %10.1f %9.2f %12.2f %10.2f %7.1f%%\n", m.kernels.c_str(),
                        dtypeName(c.type), shape.c_str(), m.medianSeconds * 1e6, m.bytesPerSecond / 1e9,
                        m.bytes / m.medianSeconds / 1e9, m.ceiling / 1e9, 100.0 * m.fraction);
            std::fflush(stdout);
        }
    }

    FILE* f = std::fopen(jsonPath.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "cannot write %s\n", jsonPath.c_str());
        return 1;
    }
    std::fprintf(f, "{\n  \"threads\": %d,\n  \"hostReadBytesPerSecond\": %.0f,\n"
                    "  \"method\": \"ceiling = reading the case's own matrices; each trial against the higher "
                    "of the two reads framing it; fraction = median trial\",\n"
                    "  \"results\": [\n", threads, ownBuffer);
    for (size_t i = 0; i < results.size(); ++i) {
        const Measurement& m = results[i];
        std::fprintf(f,
                     "    {\"kernels\": \"%s\", \"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
                     "\"uploaded\": %s, \"bytes\": %zu, \"bestSeconds\": %.9f, \"medianSeconds\": %.9f, "
                     "\"bytesPerSecond\": %.0f, \"hostReadBytesPerSecond\": %.0f, "
                     "\"fractionOfHostRead\": %.4f}%s\n",
                     m.kernels.c_str(), dtypeName(m.shape.type),
                     static_cast<long long>(m.shape.rows), static_cast<long long>(m.shape.cols),
                     m.shape.uploaded ? "true" : "false", m.bytes, m.seconds, m.medianSeconds, m.bytesPerSecond, m.ceiling,
                     m.fraction,
                     i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
    std::printf("\nwrote %s\n", jsonPath.c_str());
    return 0;
}
