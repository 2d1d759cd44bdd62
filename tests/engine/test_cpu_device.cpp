// The CPU device itself: memory (allocation, copies, the device-memory budget and its
// accounting), device info, kernel-set selection, and the host bandwidth measurement.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "cpu_test_util.h"

using namespace spillway;
using namespace spillway::gpu;
using namespace spillway::cpu_test;

// ---- memory, info, kernel-set selection --------------------------------------------------------

TEST(CpuBackend, AllocateAndCopy)
{
    auto device = createCpuDevice(1, bestCpuKernelSet());
    auto absurd = device->allocate(size_t{1} << 62);
    ASSERT_FALSE(absurd.ok());
    EXPECT_EQ(absurd.error().code, ErrorCode::OutOfMemory);
    EXPECT_FALSE(absurd.error().message.empty());

    for (size_t bytes : {size_t{1}, size_t{1000}, size_t{5} << 20}) {
        auto buffer = device->allocate(bytes);
        ASSERT_TRUE(buffer.ok()) << buffer.error().message;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 64, 0u);
        EXPECT_EQ(buffer->bytes(), bytes);
        std::vector<uint8_t> src(bytes), back(bytes);
        for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
        device->upload(buffer->data(), src.data(), bytes);
        device->synchronize();
        device->download(back.data(), buffer->data(), bytes);
        EXPECT_EQ(src, back);
    }
}

// A CPU device with a memory limit behaves like a card of that size: allocate() succeeds up to
// the limit and returns OutOfDeviceMemory past it; memoryStats() follows allocations and Buffer
// destruction; host staging buffers are counted apart and not against the limit.
TEST(CpuBackend, MemoryLimitAndAccounting)
{
    constexpr size_t kLimit = size_t{1} << 20;  // bytes
    constexpr size_t kQuarter = kLimit / 4;
    auto device = createCpuDevice(1, CpuKernelSet::Scalar, kLimit);
    const auto aligned = [](const Buffer& b) {
        return reinterpret_cast<uintptr_t>(b.data()) % 4096 == 0;
    };
    EXPECT_EQ(device->info().totalMemory, kLimit);
    EXPECT_LE(device->info().freeMemory, kLimit);
    MemoryStats s = device->memoryStats();
    EXPECT_EQ(s.limit, kLimit);
    EXPECT_EQ(s.used, 0u);
    EXPECT_EQ(s.peak, 0u);
    EXPECT_EQ(s.hostUsed, 0u);
    EXPECT_EQ(s.hostPeak, 0u);

    // Fill the budget exactly, in uneven pieces.
    std::vector<Buffer> held;  // destroyed before the device
    size_t used = 0;
    for (size_t bytes : {kQuarter, kQuarter, size_t{1000}, 2 * kQuarter - 1000}) {
        auto b = device->allocate(bytes);
        ASSERT_TRUE(b.ok()) << b.error().message;
        EXPECT_TRUE(aligned(*b));
        EXPECT_EQ(b->bytes(), bytes);
        held.push_back(std::move(*b));
        used += bytes;
        EXPECT_EQ(device->memoryStats().used, used);
        EXPECT_EQ(device->memoryStats().peak, used);
    }
    ASSERT_EQ(used, kLimit);

    // One byte past the budget is an error value, and changes nothing.
    auto over = device->allocate(1);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.error().code, ErrorCode::OutOfDeviceMemory);
    EXPECT_FALSE(over.error().message.empty());
    EXPECT_EQ(device->memoryStats().used, kLimit);
    EXPECT_EQ(device->memoryStats().peak, kLimit);

    // Destroying buffers gives their bytes back; the peak stays until resetPeak().
    held.erase(held.begin(), held.begin() + 2);  // the two quarters
    s = device->memoryStats();
    EXPECT_EQ(s.used, 2 * kQuarter);
    EXPECT_EQ(s.peak, kLimit);
    device->resetPeak();
    EXPECT_EQ(device->memoryStats().peak, 2 * kQuarter);
    auto again = device->allocate(kQuarter);  // freed bytes can be allocated again
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(device->memoryStats().used, 3 * kQuarter);
    EXPECT_EQ(device->memoryStats().peak, 3 * kQuarter);
    auto tooBig = device->allocate(kQuarter + 1);
    ASSERT_FALSE(tooBig.ok());
    EXPECT_EQ(tooBig.error().code, ErrorCode::OutOfDeviceMemory);

    // Host staging memory is counted apart, and not against the device budget.
    {
        auto host = device->allocateHost(2 * kLimit);
        ASSERT_TRUE(host.ok()) << host.error().message;
        EXPECT_TRUE(aligned(*host));
        EXPECT_EQ(host->bytes(), 2 * kLimit);
        s = device->memoryStats();
        EXPECT_EQ(s.hostUsed, 2 * kLimit);
        EXPECT_EQ(s.hostPeak, 2 * kLimit);
        EXPECT_EQ(s.used, 3 * kQuarter);
        auto last = device->allocate(kQuarter);  // the device budget is still all there
        ASSERT_TRUE(last.ok()) << last.error().message;
        EXPECT_EQ(device->memoryStats().used, kLimit);
    }
    s = device->memoryStats();
    EXPECT_EQ(s.used, 3 * kQuarter);
    EXPECT_EQ(s.peak, kLimit);
    EXPECT_EQ(s.hostUsed, 0u);
    EXPECT_EQ(s.hostPeak, 2 * kLimit);
    device->resetPeak();
    EXPECT_EQ(device->memoryStats().hostPeak, 0u);
    EXPECT_EQ(device->memoryStats().peak, 3 * kQuarter);

    held.clear();
    *again = Buffer();  // move-assigning over a buffer releases it
    EXPECT_EQ(device->memoryStats().used, 0u);
}

TEST(CpuBackend, InfoAndKernelSets)
{
    auto device = createCpuDevice(3, CpuKernelSet::Avx512);
    const DeviceInfo& info = device->info();
    EXPECT_EQ(info.backend, "cpu");
    EXPECT_EQ(info.threads, 3);
    EXPECT_TRUE(info.caps.hostPointers);
    EXPECT_GT(info.totalMemory, 0u);
    EXPECT_GT(info.freeMemory, 0u);
    EXPECT_NE(info.name.find("3 threads"), std::string::npos) << info.name;
    // Asking for more than the CPU has falls back to what it has.
    EXPECT_EQ(info.kernels, cpuKernelSetName(bestCpuKernelSet()));
    for (DType t : kAllTypes) EXPECT_TRUE(device->supports(t));

    ::setenv("SPILLWAY_CPU_KERNELS", "scalar", 1);
    EXPECT_EQ(createCpuDevice(1)->info().kernels, "scalar");
    ::setenv("SPILLWAY_CPU_KERNELS", "avx512", 1);
    EXPECT_EQ(createCpuDevice(1)->info().kernels, cpuKernelSetName(bestCpuKernelSet()));
    ::unsetenv("SPILLWAY_CPU_KERNELS");
    EXPECT_EQ(createCpuDevice(0)->info().kernels, cpuKernelSetName(bestCpuKernelSet()));
}

// The kernel sets the tests compare are those bestCpuKernelSet() finds; that must be every set the
// CPU has (by the kernel's own /proc/cpuinfo flags, which Linux clears for a register state the OS
// does not save), or a CPU with AVX-512 would quietly compare AVX2 alone.
TEST(CpuKernelSets, DetectionMatchesTheCpuFlags)
{
    std::ifstream cpuinfo("/proc/cpuinfo");
    ASSERT_TRUE(cpuinfo) << "cannot read /proc/cpuinfo";
    std::set<std::string> flags;
    for (std::string line; std::getline(cpuinfo, line);)
        if (line.rfind("flags", 0) == 0) {
            std::istringstream words(line.substr(line.find(':') + 1));
            for (std::string w; words >> w;) flags.insert(w);
            break;
        }
    ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
    auto has = [&](std::initializer_list<const char*> names) {
        return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n) > 0; });
    };
    CpuKernelSet expected = CpuKernelSet::Scalar;
    if (has({"avx2", "fma", "f16c"})) expected = CpuKernelSet::Avx2;
    if (expected == CpuKernelSet::Avx2 && has({"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni"}))
        expected = CpuKernelSet::Avx512;
    testing_support::announceKernelSets();
    EXPECT_STREQ(cpuKernelSetName(bestCpuKernelSet()), cpuKernelSetName(expected));
    // Each set this CPU runs is a device of that very set.
    for (CpuKernelSet set : testing_support::kernelSetsThisCpuRuns())
        EXPECT_STREQ(createCpuDevice(1, set)->info().kernels.c_str(), cpuKernelSetName(set));
}

TEST(CpuBackend, HostReadBandwidthIsMeasured)
{
    const double bw = measureHostReadBandwidth(2, size_t{16} << 20, 2);
    // Speed is the benchmarks' business (a loaded CI runner can be slow by any factor): a test
    // checks that a figure came out, positive and finite, not how large it is.
    EXPECT_GT(bw, 0.0);
    EXPECT_TRUE(std::isfinite(bw));

    // A buffer of its own: equal 4 KiB-multiple slices per thread; too small to split is invalid.
    HostReadProbe own(3, (size_t{8} << 20) + 5000);
    ASSERT_TRUE(own.valid());
    EXPECT_EQ(own.bytes(), ((size_t{8} << 20) + 5000) / 3 / 4096 * 4096 * 3);
    EXPECT_GT(own.read(), 0.0);
    HostReadProbe tiny(2, 4096);
    EXPECT_FALSE(tiny.valid());
    EXPECT_EQ(tiny.read(), 0.0);
}

// The probe of memory someone else owns reads inside its ranges only (the pages around them are
// inaccessible: a read past a share's end would crash the test), never writes them, skips what
// it cannot read with aligned loads, and counts exactly the bytes of the threads' shares.
TEST(CpuBackend, HostReadProbeReadsTheGivenRangesOnly)
{
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t inner = 64 * page;
    auto* region = static_cast<uint8_t*>(
        mmap(nullptr, inner + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(region, MAP_FAILED);
    ASSERT_EQ(mprotect(region, page, PROT_NONE), 0);
    ASSERT_EQ(mprotect(region + page + inner, page, PROT_NONE), 0);
    uint8_t* data = region + page;
    for (size_t i = 0; i < inner; ++i) data[i] = uint8_t(i * 131 + 7);
    const std::vector<uint8_t> before(data, data + inner);

    const int threads = 3;
    const size_t firstBytes = inner / 2 + 4000;   // not a multiple of 256 per thread
    const size_t secondBytes = inner / 2 - 4096;  // up to the guard page
    std::vector<HostReadProbe::Range> ranges = {
        {data, firstBytes},
        {data + inner - secondBytes, secondBytes},
        {data + 8, 4096},     // misaligned: skipped
        {data, 100},          // too small to give every thread 256 bytes: skipped
        {nullptr, 1 << 20},   // nothing: skipped
    };
    HostReadProbe probe(threads, ranges);
    ASSERT_TRUE(probe.valid());
    auto shares = [&](size_t bytes) { return bytes / threads / 256 * 256 * threads; };
    EXPECT_EQ(probe.bytes(), shares(firstBytes) + shares(secondBytes));
    for (int i = 0; i < 3; ++i) {
        const double bw = probe.read();
        EXPECT_GT(bw, 0.0);
        EXPECT_TRUE(std::isfinite(bw));
    }
    EXPECT_EQ(0, std::memcmp(before.data(), data, inner));

    HostReadProbe none(threads, std::vector<HostReadProbe::Range>{{data + 8, 4096}});
    EXPECT_FALSE(none.valid());
    EXPECT_EQ(none.bytes(), 0u);
    EXPECT_EQ(none.read(), 0.0);
    munmap(region, inner + 2 * page);
}
