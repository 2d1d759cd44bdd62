#pragma once
// The hardware probe: what this machine can do, measured, not assumed. The planner takes every
// figure it uses from here: SSD read bandwidth at several queue depths, host memory bandwidth,
// host->device copy bandwidth, and matvec throughput per weight format on every device.
//
// Measuring takes ~10-20 s (a 1 GiB test file is written and read back), so the profile is cached
// as JSON together with a fingerprint of the hardware; probeHardware() returns the cached profile
// while the fingerprint matches. All figures are bytes per second unless named otherwise.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/device.h"
#include "gpu/dtype.h"

namespace spillway::hw {

// One point of a read sweep: `queueDepth` requests of `requestBytes` kept in flight.
struct ReadBandwidth {
    int queueDepth = 0;
    size_t requestBytes = 0;
    double bytesPerSecond = 0;
    double iops = 0;  // requests per second
    bool operator==(const ReadBandwidth&) const = default;
};

struct StorageProfile {
    std::string path;            // folder measured (where models live), absolute
    std::string filesystem;      // e.g. "ext4 on /dev/vda"
    uint64_t totalBytes = 0, freeBytes = 0;
    bool directIo = false;       // O_DIRECT worked there
    std::string ioEngine;        // "io_uring" / "pread threads"
    double sequentialBytesPerSecond = 0;   // median of the sweep's best configuration read 3 times
    std::vector<ReadBandwidth> sequential; // 1 MiB (and 4 MiB) requests at QD 1, 4, 16, 32
    std::vector<ReadBandwidth> random32k;  // 32 KiB random reads at QD 1, 4, 16, 64
    uint64_t testFileBytes = 0;  // size of the temporary file the sweeps read
    bool operator==(const StorageProfile&) const = default;
};

// Weight bytes per second one matvec streams (y = W x, W of `type`, bigger than the caches).
struct FormatThroughput {
    gpu::DType type = gpu::DType::F32;
    double bytesPerSecond = 0;
    bool operator==(const FormatThroughput&) const = default;
};

// The probe times one type of each family of block formats (compute_bench.cpp); the others take
// the rate of the one that stands in for them: float types their own, Q8_0 and Q4_0 their own
// (Q4_1, Q5_0, Q5_1 take Q4_0's, Q8_G64 Q8_0's), Q5_K and Q6_K Q4_K's, Q2_K Q3_K's (the 2- and
// 3-bit K-quants, whose kernels differ), the lattice types (IQ1_*,
// IQ2_*, IQ3_*) IQ2_XXS's, the 16-level tables (IQ4_NL, IQ4_XS, MXFP4) IQ4_XS's.
gpu::DType measuredStandIn(gpu::DType type);
// The weight bytes/s of `type` in `rates`: its own figure, else its stand-in's; 0 with neither.
double matvecRate(const std::vector<FormatThroughput>& rates, gpu::DType type);

struct DeviceProfile {
    std::string backend, name;
    uint64_t totalMemory = 0, freeMemory = 0;
    gpu::DeviceCapabilities caps;
    double hostToDevicePinned = 0, hostToDevicePageable = 0;  // bytes/s; a memcpy on the CPU device
    std::vector<FormatThroughput> matvec;
    std::string kernels;  // kernel set that ran ("avx2", ...), where the device says
    // Seconds per layer per decoded token that do not depend on the weights: one layer's ops
    // issued and finished at a size where their arithmetic is nothing (detail::measureLayerOverhead).
    // 0: not measured.
    double layerOverheadSeconds = 0;
    // A device with memory of its own: host memory read by the CPU's threads and by this
    // device's copies at the same time, the two rates added (bytes/s): the budget HeteGen's split
    // shares (the CPU's rows and the copies of the others). Rough: the two measurements overlap
    // for the shorter one's time. 0: not measured (no contention is modelled then).
    double sharedHostReadBytesPerSecond = 0;
};
bool operator==(const DeviceProfile& a, const DeviceProfile& b);

struct HostProfile {
    std::string cpuName;
    int cores = 0;    // online cores this process may use
    int threads = 0;  // CPU threads the measurements ran with
    uint64_t ramTotal = 0, ramAvailable = 0;  // bytes
    double memoryReadBytesPerSecond = 0;
    std::vector<FormatThroughput> cpuMatvec;
    bool operator==(const HostProfile&) const = default;
};

// What runs measured, beside what the probe measured (issue 33: every run calibrates). One row per
// run and key: a lane's (or the whole token's) measured time over the time the probe's figures
// predicted for it. Kept with the profile in its cache file (the newest kCalibrationRows per
// key); a re-measurement starts without them, since they are ratios to the figures it replaces.
struct Observation {
    std::string backend;   // the device that computed ("cpu", "cuda", "vulkan")
    // "ssd", "copy", "device", "cpu" (a lane's busy time per token), or "token/<lane>": the whole
    // token's time where <lane> was the predicted bottleneck.
    std::string lane;
    int sizeClass = 0;     // modelSizeClass() of the model's weights
    // The weights' kind: the format most of their bytes are in ("F16", "Q8_0", "BITMAP"), and
    // "+neuron-cache" / "+experts" where those caches serve part of them ("": a row of before).
    std::string format;
    double ratio = 1.0;    // measured / predicted (from the probe's figures alone)
    double tokens = 0;     // tokens the run decoded (the row's weight)
    int64_t atMs = 0;      // when (Unix ms)
    bool operator==(const Observation&) const = default;
};

// One measurement taken several times: the spread of its repeats (issue 33: the probe knows its
// noise). `low` and `high` are the quartiles where it ran 5 or more times, else the extremes; all
// in the unit of the figure (bytes/s, seconds).
struct Spread {
    std::string what;   // "disk sequential reads", "memory reads", "cpu matvec f16", "vulkan copies (pinned)", ...
    int repeats = 0;
    double low = 0, median = 0, high = 0;
    // Whether a spread this wide makes the measurement unusable (probeHardware's busy check);
    // the per-layer overhead (microseconds, noisy by nature) is recorded but not judged.
    bool judged = true;
    double relative() const { return median > 0 ? (high - low) / median : 0; }
    bool operator==(const Spread&) const = default;
};
// A measurement whose repeats differ by more than this share of their median was taken on a busy
// machine (or a device that is not settled), whatever the CPU sampling says.
constexpr double kSpreadLimit = 0.30;
// "memory reads varied by 41 % between its 5 repeats (more than 30 %)" for the widest judged
// spread above kSpreadLimit; "" when every judged one is within it.
std::string spreadReason(const std::vector<Spread>& spreads);

struct HardwareProfile {
    int version = 3;          // of this layout; a cache of another version is measured again (2: layerOverheadSeconds; 3: Q4_K, Q3_K, IQ2_XXS, IQ4_XS timed)
    std::string fingerprint;  // hardwareFingerprint() when measured
    std::string measuredAt;   // UTC, ISO 8601 with milliseconds
    bool quick = false;       // measured with ProbeOptions::quick (small sizes; tests only)
    HostProfile host;
    StorageProfile storage;
    std::vector<DeviceProfile> devices;  // every usable backend; "cpu" is always one of them
    std::vector<Spread> spreads;         // each measurement's repeats (quick ones: not judged)
    std::vector<Observation> observed;   // calibration.h: what runs measured since
    // Why a run found the probe's figures wrong by more than 2x ("" when none did): shown until
    // the machine is measured again.
    std::string suspect;
    // Why this measurement was taken on a busy machine ("" when it was quiet): such a profile is
    // cached only until a later probe finds the machine quiet, which then measures it again.
    std::string busy;
    // How many measurements in a row were busy (1 for the first busy one): after kBusyTries the
    // marked profile is kept until `probe --remeasure` (a machine whose noise the quarter-second
    // check misses is not measured again at every start).
    int busyTries = 0;
    bool operator==(const HardwareProfile&) const = default;
};

constexpr int kBusyTries = 3;

struct ProbeOptions {
    std::string storagePath;   // folder to measure; "" = defaultStoragePath()
    int threads = 0;           // CPU threads; 0 = one per core
    bool remeasure = false;    // ignore the cache
    std::string cacheFile;     // "" = defaultProbeCacheFile(); probeCacheFileFor(cacheFile, threads) is used
    bool quick = false;        // small sizes and short timings, for tests (figures are rough)
    uint64_t testFileBytes = 0;  // 0 = automatic: min(1 GiB, 5% of free space); quick: 64 MiB
    // Called on the measuring thread as each stage starts (fraction of the whole, 0..1, and what
    // is measured now), and with 1 at the end; not called when the cache answers.
    std::function<void(double fraction, const std::string& stage)> progress;
    // Asked between stages and between devices, on the measuring thread: true ends the probe with
    // a Cancelled error (an app closing while it measures). Nothing is cached then.
    std::function<bool()> cancelled;
};

// The machine's CPU time in /proc/stat's units (all CPUs together), and what this process used.
struct CpuSample {
    double total = 0, idle = 0, steal = 0;  // seconds: all states; idle + iowait; stolen by the hypervisor
    double self = 0;                        // this process's user + system seconds
};
CpuSample sampleCpu();
// Whether a measurement between `before` and `after` on `cores` cores ran on a busy machine: other
// processes kept more than a quarter of the CPUs busy, or the hypervisor stole more than 5 % of
// the time (the load average is not asked: it lags a minute behind). "" when quiet, else why.
std::string busyReason(const CpuSample& before, const CpuSample& after, int cores);

// The cached profile when the cache file holds one whose fingerprint matches this machine (and
// was measured with the same thread count, and not in quick mode unless quick is asked for),
// else a fresh measurement, which is then written to the cache file atomically. A corrupt or
// unreadable cache is measured again. Errors: the storage folder missing (Io), too little free
// space for the test file (DiskFull), no CPU device (BackendUnavailable), cancelled (Cancelled).
// A failing cache write is not an error (the profile is returned all the same).
// Each measurement is repeated and its spread kept (HardwareProfile::spreads); one whose spread is
// above kSpreadLimit is measured once more, and the narrower of the two kept. A measurement taken
// while the machine was busy (other processes' CPU time, the hypervisor's steal, or a spread still
// above the limit; HardwareProfile::busy, not for quick ones) is cached with that mark, and
// measured again by the first later probe that finds the machine quiet (a quarter second of CPU
// sampling), up to kBusyTries busy measurements in a row; while it stays busy, the marked figures
// answer.
// A device that emulates a GPU on the host's CPU (Mesa's lavapipe: DeviceCapabilities::emulated)
// is measured with the quick sizes whatever `quick` says: its figures only need to show it is no
// faster than the CPU device, and the full sizes took minutes on a 2-core machine.
Result<HardwareProfile> probeHardware(const ProbeOptions& o);

// Measures without looking at or writing the cache.
Result<HardwareProfile> measureHardware(const ProbeOptions& o);

std::string profileToJson(const HardwareProfile& p);  // pretty (indent 2)
Result<HardwareProfile> profileFromJson(const std::string& text);

// $XDG_CACHE_HOME/spillway/hardware-profile.json, or ~/.cache/spillway/hardware-profile.json.
std::string defaultProbeCacheFile();
// Where the profile measured with `threads` CPU threads is kept: `cacheFile` ("" =
// defaultProbeCacheFile()) for one thread per core (`threads` 0 or the online cores), else the
// same name with "-t<N>" before ".json": a measurement with another thread count (`-t 1`) does
// not replace the usual one, nor the calibration rows its runs left there.
std::string probeCacheFileFor(const std::string& cacheFile, int threads);
// Where models live: $XDG_DATA_HOME/spillway/models (or ~/.local/share/spillway/models) when
// that folder exists, else the current directory.
std::string defaultStoragePath();

// A hash (FNV-1a, hex) of: CPU model, core count, RAM total, the name and memory of every usable
// device, and the filesystem device id of storagePath. Stable while the hardware is.
std::string hardwareFingerprint(const std::string& storagePath);

}  // namespace spillway::hw
