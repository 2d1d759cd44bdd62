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

// This file: norms, rope, attention, pointwise ops, the neuron cache's ops, timeline marks, memory
// and copies; test_backend_conformance_matvec.cpp: matvec and getRow of every type, prompt batches;
// test_backend_conformance_families.cpp: the ops of the 2026 families (sinks, windows, DeltaNet).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conformance_support.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace conformance;

namespace {

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
            if (kBackend == "vulkan") {
                EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4)) << "not each query alone";
            }
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
                               PointwiseOp::Scale, PointwiseOp::ScaledAdd, PointwiseOp::ClampedSwiglu,
                               PointwiseOp::SigmoidMul}) {
            const bool clamped = op == PointwiseOp::ClampedSwiglu, gate = op == PointwiseOp::SigmoidMul;
            if (clamped && !gpu().info().caps.clampedSwiglu) continue;  // this backend has no such op yet
            if (gate && !gpu().info().caps.sigmoidGate) continue;
            const std::vector<float> x = randomFloats(n, rng, -4.0f, 4.0f), y = randomFloats(n, rng, -4.0f, 4.0f);
            std::vector<float> want(n);
            // ClampedSwiglu: gpt-oss's alpha, a limit of 2.5 that clamps about a third of x and y.
            PointwiseArgs a{op, x.data(), y.data(), want.data(), n, 0.25f, 0.05f, -40.0f, clamped ? 2.5f : 30.0f,
                            clamped ? 1.702f : 0.3721f};
            const double tolerance = clamped || gate ? 1e-5 : 1e-6;  // the device's own exp
            cpu().pointwise(a);
            DeviceData dx(gpu(), x), dy(gpu(), y), out(gpu(), n * sizeof(float));
            poison(gpu(), out.f(), n);
            PointwiseArgs g = a;
            g.x = dx.f();
            g.y = dy.f();
            g.out = out.f();
            gpu().pointwise(g);
            EXPECT_EQ(unwritten(download(gpu(), out.f(), n)), 0u);
            EXPECT_LE(relL2(download(gpu(), out.f(), n), want), tolerance) << int(op) << " n " << n;
            g.out = dx.f();  // in place
            gpu().pointwise(g);
            EXPECT_LE(relL2(download(gpu(), dx.f(), n), want), tolerance) << int(op) << " in place, n " << n;
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
