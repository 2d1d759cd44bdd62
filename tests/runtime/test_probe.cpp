// The hardware probe in quick mode, in a temporary folder: every figure is measured and sane,
// the profile survives JSON, the cache is reused while the fingerprint matches and re-measured
// when asked or corrupt, and the disk test leaves nothing behind.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "../common/temp_dir.h"
#include "core/hw/probe.h"

using namespace spillway;
using namespace spillway::hw;
namespace fs = std::filesystem;

namespace {

using TempDir = spillway::testing_support::TempDir;

bool folderEmpty(const std::string& path) { return fs::is_empty(path); }

constexpr double kSane = 1e12;  // bytes/s: no figure of this machine reaches 1 TB/s

class ProbeTest : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_storage = std::make_unique<TempDir>();
        s_cache = std::make_unique<TempDir>();
        ASSERT_FALSE(s_storage->path().empty());
        auto p = probeHardware(options(true));
        ASSERT_TRUE(p.ok()) << p.error().message;
        s_profile = std::make_unique<HardwareProfile>(*p);
        std::printf("%s\n", profileToJson(*p).c_str());
    }
    static void TearDownTestSuite()
    {
        s_profile.reset();
        s_storage.reset();
        s_cache.reset();
    }
    static ProbeOptions options(bool remeasure)
    {
        ProbeOptions o;
        o.storagePath = s_storage->path();
        o.cacheFile = baseCacheFile();
        o.quick = true;
        o.threads = 2;
        o.remeasure = remeasure;
        return o;
    }
    static std::string baseCacheFile() { return s_cache->path() + "/spillway/hardware-profile.json"; }
    // Where options() (2 threads) keep their profile: the base file where 2 is one per core.
    static std::string cacheFile() { return probeCacheFileFor(baseCacheFile(), 2); }
    void SetUp() override { ASSERT_TRUE(s_profile) << "the first probe failed"; }

    static inline std::unique_ptr<TempDir> s_storage, s_cache;
    static inline std::unique_ptr<HardwareProfile> s_profile;
};

}  // namespace

TEST_F(ProbeTest, HostFiguresAreSane)
{
    const HostProfile& h = s_profile->host;
    EXPECT_FALSE(h.cpuName.empty());
    EXPECT_GT(h.cores, 0);
    EXPECT_EQ(h.threads, 2);
    EXPECT_GT(h.ramTotal, uint64_t{64} << 20);
    EXPECT_GT(h.ramAvailable, 0u);
    EXPECT_LE(h.ramAvailable, h.ramTotal);
    EXPECT_GT(h.memoryReadBytesPerSecond, 1e8);
    EXPECT_LT(h.memoryReadBytesPerSecond, kSane);
    // F32, F16, BF16, Q8_0, Q4_0, one type of each newer family (Q4_K, Q3_K, IQ2_XXS, IQ4_XS: the
    // others take their rates, hw::measuredStandIn) and a 50% bitmap sparse blob: the CPU runs
    // them all.
    ASSERT_EQ(h.cpuMatvec.size(), 10u);
    std::set<gpu::DType> types;
    for (const auto& t : h.cpuMatvec) {
        types.insert(t.type);
        EXPECT_GT(t.bytesPerSecond, 1e6) << gpu::dtypeName(t.type);
        EXPECT_LT(t.bytesPerSecond, kSane) << gpu::dtypeName(t.type);
    }
    EXPECT_EQ(types.size(), 10u);
    EXPECT_GT(hw::matvecRate(h.cpuMatvec, gpu::DType::Q2_K), 0);  // Q3_K's
    EXPECT_EQ(hw::matvecRate(h.cpuMatvec, gpu::DType::Q2_K), hw::matvecRate(h.cpuMatvec, gpu::DType::Q3_K));
    EXPECT_EQ(hw::matvecRate(h.cpuMatvec, gpu::DType::Q6_K), hw::matvecRate(h.cpuMatvec, gpu::DType::Q4_K));
    EXPECT_EQ(hw::matvecRate(h.cpuMatvec, gpu::DType::IQ1_M), hw::matvecRate(h.cpuMatvec, gpu::DType::IQ2_XXS));
    EXPECT_EQ(hw::matvecRate(h.cpuMatvec, gpu::DType::MXFP4), hw::matvecRate(h.cpuMatvec, gpu::DType::IQ4_XS));
    EXPECT_EQ(types.count(gpu::DType::BitmapSparse), 1u);
}

TEST_F(ProbeTest, StorageFiguresAreSaneAndNothingIsLeftBehind)
{
    const StorageProfile& s = s_profile->storage;
    EXPECT_EQ(s.path, s_storage->path());
    EXPECT_FALSE(s.filesystem.empty());
    EXPECT_GT(s.totalBytes, 0u);
    EXPECT_GT(s.freeBytes, 0u);
    EXPECT_LE(s.freeBytes, s.totalBytes);
    EXPECT_TRUE(s.ioEngine == "io_uring" || s.ioEngine == "pread threads") << s.ioEngine;
    EXPECT_EQ(s.testFileBytes, uint64_t{64} << 20);

    ASSERT_EQ(s.sequential.size(), 4u);
    const int seqDepths[] = {1, 4, 16, 32};
    double best = 0;
    for (size_t i = 0; i < s.sequential.size(); ++i) {
        const ReadBandwidth& r = s.sequential[i];
        EXPECT_EQ(r.queueDepth, seqDepths[i]);
        EXPECT_EQ(r.requestBytes, size_t{1} << 20);
        EXPECT_GT(r.bytesPerSecond, 1e6);
        EXPECT_LT(r.bytesPerSecond, kSane);
        EXPECT_NEAR(r.iops * double(r.requestBytes), r.bytesPerSecond, r.bytesPerSecond * 1e-6);
        best = std::max(best, r.bytesPerSecond);
    }
    // The figure: the median of the best configuration read three times (the sweep's run one of them).
    EXPECT_LE(s.sequentialBytesPerSecond, best * 1.5);
    EXPECT_GT(s.sequentialBytesPerSecond, 0);

    ASSERT_EQ(s.random32k.size(), 4u);
    const int randDepths[] = {1, 4, 16, 64};
    for (size_t i = 0; i < s.random32k.size(); ++i) {
        const ReadBandwidth& r = s.random32k[i];
        EXPECT_EQ(r.queueDepth, randDepths[i]);
        EXPECT_EQ(r.requestBytes, size_t{32} << 10);
        EXPECT_GT(r.iops, 10.0);
        EXPECT_LT(r.bytesPerSecond, kSane);
    }
    // Big requests beat small ones at the same depth (per-request cost), however fast the disk.
    // The best of the sequential sweep is compared: one short quick-mode sample can be hit by
    // another process's I/O on a shared CI machine.
    double bestSequential = 0;
    for (const auto& r : s.sequential) bestSequential = std::max(bestSequential, r.bytesPerSecond);
    EXPECT_GE(bestSequential, s.random32k[0].bytesPerSecond);

    // The test file was unlinked and is gone; nothing else was written there.
    EXPECT_TRUE(folderEmpty(s_storage->path()));
}

TEST_F(ProbeTest, CpuDeviceIsListed)
{
    ASSERT_FALSE(s_profile->devices.empty());
    const auto cpu = std::find_if(s_profile->devices.begin(), s_profile->devices.end(),
                                  [](const DeviceProfile& d) { return d.backend == "cpu"; });
    ASSERT_NE(cpu, s_profile->devices.end());
    EXPECT_FALSE(cpu->name.empty());
    EXPECT_GT(cpu->totalMemory, 0u);
    EXPECT_TRUE(cpu->caps.hostPointers);
    EXPECT_GT(cpu->hostToDevicePinned, 1e7);
    EXPECT_GT(cpu->hostToDevicePageable, 1e7);
    EXPECT_LT(cpu->hostToDevicePinned, kSane);
    EXPECT_EQ(cpu->matvec, s_profile->host.cpuMatvec);  // the CPU device is the host
    // One layer's ops at a negligible size: more than nothing, less than a millisecond on a CPU.
    EXPECT_GT(cpu->layerOverheadSeconds, 0.0);
    EXPECT_LT(cpu->layerOverheadSeconds, 1e-3);
}

TEST_F(ProbeTest, JsonRoundTripIsExact)
{
    const std::string text = profileToJson(*s_profile);
    auto back = profileFromJson(text);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_TRUE(*back == *s_profile);
    EXPECT_EQ(profileToJson(*back), text);
    ASSERT_FALSE(back->devices.empty());
    ASSERT_FALSE(s_profile->devices.empty());
    EXPECT_EQ(back->devices.front().caps.hostPointers, s_profile->devices.front().caps.hostPointers);

    for (const char* bad : {"", "{", "[]", "{\"version\": 1}", "{\"version\": 99}", "null"}) {
        auto r = profileFromJson(bad);
        EXPECT_FALSE(r.ok()) << bad;
    }
    std::string wrongType = text;
    const size_t q4 = wrongType.find("\"Q4_0\"");
    ASSERT_NE(q4, std::string::npos) << text;
    wrongType.replace(q4, 6, "\"Q9_9\"");
    EXPECT_FALSE(profileFromJson(wrongType).ok());
}

TEST_F(ProbeTest, FingerprintIsStableAndMatchesTheProfile)
{
    const std::string a = hardwareFingerprint(s_storage->path());
    const std::string b = hardwareFingerprint(s_storage->path());
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, s_profile->fingerprint);
}

// Whether a probe measured or the cache answered is told by the work done, not by timestamps
// (two measurements within one second share measuredAt): the progress callback runs only when
// the machine is measured.
struct Probed {
    Result<HardwareProfile> profile = makeError(ErrorCode::Internal, "not run");
    int stages = 0;  // progress calls: 0 when the cache answered
};

Probed probeCounting(ProbeOptions o)
{
    Probed p;
    o.progress = [&p](double, const std::string&) { ++p.stages; };
    p.profile = probeHardware(o);
    return p;
}

TEST_F(ProbeTest, CacheIsReusedUntilRemeasureOrCorrupt)
{
    ASSERT_TRUE(fs::exists(cacheFile()));
    // Reused: the same measurement comes back, nothing measured.
    auto again = probeCounting(options(false));
    ASSERT_TRUE(again.profile.ok()) << again.profile.error().message;
    EXPECT_EQ(again.stages, 0);
    EXPECT_TRUE(*again.profile == *s_profile);

    // Another thread count is another measurement, kept in a file of its own: the 2-thread
    // profile (and the runs' calibration rows in it) stays, and both answer from the cache.
    ProbeOptions oneThread = options(false);
    oneThread.threads = 1;
    auto other = probeCounting(oneThread);
    ASSERT_TRUE(other.profile.ok()) << other.profile.error().message;
    EXPECT_GT(other.stages, 0);
    EXPECT_EQ(other.profile->host.threads, 1);
    EXPECT_NE(probeCacheFileFor(baseCacheFile(), 1), cacheFile());
    EXPECT_TRUE(fs::exists(probeCacheFileFor(baseCacheFile(), 1)));
    EXPECT_EQ(probeCounting(options(false)).stages, 0);
    EXPECT_EQ(probeCounting(oneThread).stages, 0);

    // Remeasure: a new measurement, which then is the cache.
    auto fresh = probeCounting(options(true));
    ASSERT_TRUE(fresh.profile.ok()) << fresh.profile.error().message;
    EXPECT_GT(fresh.stages, 0);
    auto cached = probeCounting(options(false));
    ASSERT_TRUE(cached.profile.ok()) << cached.profile.error().message;
    EXPECT_EQ(cached.stages, 0);
    EXPECT_TRUE(*cached.profile == *fresh.profile);

    // Corrupt cache: measured again, never a crash; the cache is whole again afterwards.
    {
        std::ofstream(cacheFile(), std::ios::trunc) << "{\"version\": 1, \"fingerprint\": tru";
    }
    auto repaired = probeCounting(options(false));
    ASSERT_TRUE(repaired.profile.ok()) << repaired.profile.error().message;
    EXPECT_GT(repaired.stages, 0);
    std::ifstream in(cacheFile());
    ASSERT_TRUE(in) << "cannot read " << cacheFile();
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto parsed = profileFromJson(text);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_TRUE(*parsed == *repaired.profile);
    EXPECT_TRUE(folderEmpty(s_storage->path()));
}

TEST_F(ProbeTest, TooLittleFreeSpaceIsDiskFullAndLeavesNothing)
{
    ProbeOptions o = options(true);
    o.cacheFile = s_cache->path() + "/unused.json";
    o.testFileBytes = uint64_t{1} << 60;  // an exbibyte: no disk has it free
    auto r = probeHardware(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::DiskFull);
    EXPECT_NE(r.error().message.find(s_storage->path()), std::string::npos) << r.error().message;
    EXPECT_TRUE(folderEmpty(s_storage->path()));
    EXPECT_FALSE(fs::exists(o.cacheFile));
}

TEST_F(ProbeTest, MissingFolderIsIoError)
{
    ProbeOptions o = options(true);
    o.storagePath = s_storage->path() + "/no-such-folder";
    auto r = probeHardware(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::Io);
    EXPECT_NE(r.error().message.find("no-such-folder"), std::string::npos) << r.error().message;
}

TEST(ProbeDefaults, CacheFileFollowsXdg)
{
    const char* old = std::getenv("XDG_CACHE_HOME");
    const std::string saved = old ? old : "";
    ::setenv("XDG_CACHE_HOME", "/some/cache", 1);
    EXPECT_EQ(defaultProbeCacheFile(), "/some/cache/spillway/hardware-profile.json");
    ::setenv("XDG_CACHE_HOME", "relative", 1);  // not absolute: ignored (XDG base-dir spec)
    EXPECT_NE(defaultProbeCacheFile().find("/.cache/spillway/hardware-profile.json"), std::string::npos);
    if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else ::unsetenv("XDG_CACHE_HOME");
    EXPECT_FALSE(defaultStoragePath().empty());
    // One thread per core: the file itself; another count: a file of its own beside it.
    EXPECT_EQ(probeCacheFileFor("/c/hardware-profile.json", 0), "/c/hardware-profile.json");
    const int cores = std::max(1, int(std::thread::hardware_concurrency()));
    EXPECT_EQ(probeCacheFileFor("/c/hardware-profile.json", cores + 1),
              "/c/hardware-profile-t" + std::to_string(cores + 1) + ".json");
}

TEST_F(ProbeTest, ProgressRisesThroughEveryStageAndEndsAtOne)
{
    std::vector<std::pair<double, std::string>> seen;
    ProbeOptions o = options(true);
    o.progress = [&seen](double fraction, const std::string& stage) { seen.emplace_back(fraction, stage); };
    auto p = probeHardware(o);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_GE(seen.size(), 4u);
    EXPECT_EQ(seen.front().first, 0.0);
    EXPECT_EQ(seen.back().first, 1.0);
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].first, seen[i - 1].first) << seen[i].second;
    for (const auto& [fraction, stage] : seen) EXPECT_FALSE(stage.empty());

    // The cache answers without measuring: no progress at all.
    seen.clear();
    o.remeasure = false;
    ASSERT_TRUE(probeHardware(o).ok());
    EXPECT_TRUE(seen.empty());
}

// An app that closes while the machine is measured: the probe stops at the next stage with
// Cancelled, caches nothing and leaves no test file behind. Cancelling at each stage in turn.
TEST_F(ProbeTest, CancelledStopsAtTheNextStageAndCachesNothing)
{
    int stagesSeen = 0;
    for (int cancelAfter = 1;; ++cancelAfter) {
        SCOPED_TRACE(cancelAfter);
        ProbeOptions o = options(true);
        o.cacheFile = s_cache->path() + "/cancelled.json";
        int stages = 0;
        o.progress = [&stages](double, const std::string&) { ++stages; };
        o.cancelled = [&stages, cancelAfter] { return stages >= cancelAfter; };
        auto r = probeHardware(o);
        EXPECT_TRUE(folderEmpty(s_storage->path()));
        if (r.ok()) {  // past the last check: every stage was cancellable before it
            EXPECT_GE(cancelAfter, 4);
            break;
        }
        EXPECT_EQ(r.error().code, ErrorCode::Cancelled) << r.error().message;
        EXPECT_EQ(stages, cancelAfter) << "measured on after the cancel";
        EXPECT_FALSE(fs::exists(o.cacheFile));
        stagesSeen = stages;
        ASSERT_LT(cancelAfter, 10) << "never got through";
    }
    EXPECT_GE(stagesSeen, 3);
}

// The probe knows its noise: every measurement is repeated and its spread kept in the profile
// (and its cache file); a spread wider than kSpreadLimit names the measurement as the reason the
// machine counts as busy.
TEST_F(ProbeTest, EveryMeasurementKeepsTheSpreadOfItsRepeats)
{
    const HardwareProfile& p = *s_profile;
    for (const char* what : {"disk sequential reads", "memory reads", "cpu matvec F32", "cpu copies (pinned)"}) {
        SCOPED_TRACE(what);
        auto it = std::find_if(p.spreads.begin(), p.spreads.end(), [&](const Spread& s) { return s.what == what; });
        ASSERT_NE(it, p.spreads.end());
        EXPECT_GE(it->repeats, 2);
        EXPECT_GT(it->low, 0);
        EXPECT_LE(it->low, it->median);
        EXPECT_LE(it->median, it->high);
    }
    // The disk's figure is the median of the best configuration's three reads.
    auto disk = std::find_if(p.spreads.begin(), p.spreads.end(), [](const Spread& s) { return s.what == "disk sequential reads"; });
    ASSERT_NE(disk, p.spreads.end());
    EXPECT_EQ(disk->repeats, 3);
    EXPECT_DOUBLE_EQ(p.storage.sequentialBytesPerSecond, disk->median);

    std::vector<Spread> spreads = {{"memory reads", 5, 50e9, 60e9, 65e9, true},            // 25 %: within
                                   {"cpu per-layer overhead", 9, 1e-6, 2e-6, 9e-6, false}};  // wide, not judged
    EXPECT_EQ(spreadReason(spreads), "");
    spreads.push_back({"disk sequential reads", 3, 0.8e9, 1.5e9, 1.6e9, true});  // 53 %
    EXPECT_EQ(spreadReason(spreads), "disk sequential reads varied by 53 % between its 3 repeats (more than 30 %)");
}

// A profile measured busy kBusyTries times in a row is kept (marked) rather than measured again at
// every start: a machine whose noise the quarter-second check misses does not cost a probe each time.
TEST_F(ProbeTest, ABusyProfileIsMeasuredAgainAtMostkBusyTriesTimes)
{
    HardwareProfile busy = *s_profile;
    busy.quick = false;  // a quick probe accepts a full measurement from the cache
    busy.busy = "cpu matvec F16 varied by 45 % between its 30 repeats (more than 30 %)";
    busy.busyTries = kBusyTries;
    {
        std::ofstream(cacheFile(), std::ios::trunc) << profileToJson(busy);
    }
    auto kept = probeCounting(options(false));
    ASSERT_TRUE(kept.profile.ok()) << kept.profile.error().message;
    EXPECT_EQ(kept.stages, 0);
    EXPECT_EQ(kept.profile->busy, busy.busy);
    EXPECT_EQ(kept.profile->busyTries, kBusyTries);
    EXPECT_EQ(kept.profile->spreads, s_profile->spreads);  // through the cache file
    // --remeasure measures it again whatever the mark says (a quick one is never judged busy).
    auto fresh = probeCounting(options(true));
    ASSERT_TRUE(fresh.profile.ok()) << fresh.profile.error().message;
    EXPECT_GT(fresh.stages, 0);
    EXPECT_EQ(fresh.profile->busy, "");
    EXPECT_EQ(fresh.profile->busyTries, 0);
}
