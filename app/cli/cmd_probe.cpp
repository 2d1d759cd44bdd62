// spillway-cli probe: what this machine can do (disk, memory, devices), measured; the figures the
// placement planner uses. Cached with a hardware fingerprint (see core/hw/probe.h).

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "cli_common.h"
#include "core/hw/probe.h"
#include "gpu/registry.h"

namespace spillway::cli {

namespace {

struct ProbeCommand {
    bool json = false;
    bool remeasure = false;
    bool quick = false;
    std::string path;  // "" = hw::defaultStoragePath()
    int threads = 0;
};

std::string gib(uint64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1ull << 30));
    return buf;
}

std::string gbps(double bytesPerSecond)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", bytesPerSecond / 1e9);
    return buf;
}

std::string utcNow()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm {};
    gmtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return buf;
}

// One row of a read sweep: "label  v1  v2 ..." with the figure `get` picks.
template <class Get>
void printSweep(const char* label, const std::vector<hw::ReadBandwidth>& sweep, size_t requestBytes, Get get)
{
    std::printf("  %-26s", label);
    for (const auto& r : sweep)
        if (r.requestBytes == requestBytes) std::printf(" %9s", get(r).c_str());
    std::printf("\n");
}

void printSweepHeader(const char* title, const std::vector<hw::ReadBandwidth>& sweep, size_t requestBytes)
{
    std::printf("  %-26s", title);
    for (const auto& r : sweep)
        if (r.requestBytes == requestBytes) std::printf(" %9s", ("QD " + std::to_string(r.queueDepth)).c_str());
    std::printf("\n");
}

void printTable(const hw::HardwareProfile& p)
{
    const hw::HostProfile& h = p.host;
    std::printf("Host\n");
    std::printf("  %-26s %s, %d cores (measured with %d threads)\n", "CPU", h.cpuName.c_str(), h.cores, h.threads);
    std::printf("  %-26s %s total, %s available\n", "RAM", gib(h.ramTotal).c_str(), gib(h.ramAvailable).c_str());
    std::printf("  %-26s %s GB/s\n", "memory read bandwidth", gbps(h.memoryReadBytesPerSecond).c_str());

    std::printf("\nDevices\n  %-8s %-34s %10s %10s %15s %15s\n", "backend", "name", "memory", "free",
                "upload pinned", "upload pageable");
    for (const auto& d : p.devices)
        std::printf("  %-8s %-34s %10s %10s %10s GB/s %10s GB/s\n", d.backend.c_str(), d.name.c_str(),
                    gib(d.totalMemory).c_str(), gib(d.freeMemory).c_str(), gbps(d.hostToDevicePinned).c_str(),
                    gbps(d.hostToDevicePageable).c_str());
    if (p.devices.size() == 1 && p.devices[0].backend == "cpu")
        std::printf("  (no GPU usable: the CPU is the only device; its upload is a memcpy)\n");
    for (const auto& b : gpu::backendStatus())  // why a backend is missing above
        if (!b.usable) std::printf("  %-8s not usable: %s\n", b.name.c_str(), b.reason.c_str());
    for (const auto& d : p.devices)
        if (d.sharedHostReadBytesPerSecond > 0)
            std::printf("  %-8s the CPU reading RAM while the device copies from it: %s GB/s together\n", d.backend.c_str(),
                        gbps(d.sharedHostReadBytesPerSecond).c_str());

    std::printf("\nMatvec, weight GB/s (y = W x, W bigger than the caches)\n  %-8s", "device");
    for (gpu::DType t : {gpu::DType::F32, gpu::DType::F16, gpu::DType::BF16, gpu::DType::Q8_0, gpu::DType::Q4_0})
        std::printf(" %8s", gpu::dtypeName(t));
    std::printf("\n");
    for (const auto& d : p.devices) {
        std::printf("  %-8s", d.backend.c_str());
        for (gpu::DType t : {gpu::DType::F32, gpu::DType::F16, gpu::DType::BF16, gpu::DType::Q8_0, gpu::DType::Q4_0}) {
            std::string v = "-";
            for (const auto& m : d.matvec)
                if (m.type == t) v = gbps(m.bytesPerSecond);
            std::printf(" %8s", v.c_str());
        }
        std::printf("\n");
    }

    const hw::StorageProfile& s = p.storage;
    std::printf("\nDisk\n");
    std::printf("  %-26s %s\n", "folder", s.path.c_str());
    std::printf("  %-26s %s\n", "filesystem", s.filesystem.empty() ? "?" : s.filesystem.c_str());
    std::printf("  %-26s %s free of %s\n", "space", gib(s.freeBytes).c_str(), gib(s.totalBytes).c_str());
    std::printf("  %-26s %s, %s, test file %s\n", "reads", s.directIo ? "O_DIRECT" : "buffered (no O_DIRECT here)",
                s.ioEngine.c_str(), gib(s.testFileBytes).c_str());
    auto bw = [](const hw::ReadBandwidth& r) { return gbps(r.bytesPerSecond); };
    auto iops = [](const hw::ReadBandwidth& r) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1fk", r.iops / 1e3);
        return std::string(buf);
    };
    printSweepHeader("sequential reads", s.sequential, 1u << 20);
    printSweep("  1 MiB requests, GB/s", s.sequential, 1u << 20, bw);
    printSweep("  4 MiB requests, GB/s", s.sequential, 4u << 20, bw);
    printSweepHeader("random 32 KiB reads", s.random32k, 32u << 10);
    printSweep("  GB/s", s.random32k, 32u << 10, bw);
    printSweep("  IOPS", s.random32k, 32u << 10, iops);
    std::printf("  %-26s %s GB/s (median of 3 reads of the best configuration)\n", "sequential",
                gbps(s.sequentialBytesPerSecond).c_str());

    if (!p.spreads.empty()) {
        // The probe knows its noise: each measurement's repeats, and how far apart they were.
        std::printf("\nRepeats (quartiles from 5 repeats up, else the extremes; more than %.0f %% apart: busy)\n",
                    100 * hw::kSpreadLimit);
        std::printf("  %-34s %7s %12s %12s %12s %7s\n", "measurement", "repeats", "low", "median", "high", "spread");
        for (const hw::Spread& r : p.spreads) {
            const bool seconds = r.what.find("overhead") != std::string::npos;
            auto v = [&](double x) { return seconds ? (std::to_string(int(x * 1e6 + 0.5)) + " us") : gbps(x) + " GB/s"; };
            std::printf("  %-34s %7d %12s %12s %12s %6.0f%%%s\n", r.what.c_str(), r.repeats, v(r.low).c_str(),
                        v(r.median).c_str(), v(r.high).c_str(), 100 * r.relative(), r.judged ? "" : " (not judged)");
        }
    }
}

int runProbe(const ProbeCommand& c)
{
    hw::ProbeOptions o;
    o.storagePath = c.path;
    o.threads = c.threads;
    o.remeasure = c.remeasure;
    o.quick = c.quick;
    const std::string started = utcNow();
    const auto t0 = std::chrono::steady_clock::now();
    auto profile = hw::probeHardware(o);
    if (!profile) return reportError(profile.error());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (c.json) {
        std::printf("%s\n", hw::profileToJson(*profile).c_str());
        return ExitOk;
    }
    printTable(*profile);
    // measuredAt is ISO 8601 UTC: earlier than the start of this command means it came from the cache.
    const bool cached = profile->measuredAt.substr(0, started.size()) < started;
    std::printf("\n%s %s, fingerprint %s%s\n", cached ? "From the cache, measured" : "Measured now",
                profile->measuredAt.c_str(), profile->fingerprint.c_str(), profile->quick ? " (quick: rough figures)" : "");
    if (cached && !profile->busy.empty())
        std::printf("(%s, marked busy: %s; --remeasure to measure again)\n", hw::probeCacheFileFor("", c.threads).c_str(),
                    profile->busy.c_str());
    else if (cached) std::printf("(%s; --remeasure to measure again)\n", hw::probeCacheFileFor("", c.threads).c_str());
    else if (!profile->busy.empty() && profile->busyTries >= hw::kBusyTries)
        std::printf("(%.1f s; saved to %s marked busy: %s; busy %d times in a row, so it is kept: --remeasure "
                    "measures again)\n",
                    seconds, hw::probeCacheFileFor("", c.threads).c_str(), profile->busy.c_str(), profile->busyTries);
    else if (!profile->busy.empty())
        std::printf("(%.1f s; saved to %s marked busy: %s; the first probe that finds the machine quiet measures "
                    "it again)\n",
                    seconds, hw::probeCacheFileFor("", c.threads).c_str(), profile->busy.c_str());
    else std::printf("(%.1f s; saved to %s)\n", seconds, hw::probeCacheFileFor("", c.threads).c_str());
    if (!profile->suspect.empty()) std::printf("Suspect: %s\n", profile->suspect.c_str());
    if (int runs = int(profile->observed.size()); runs > 0)
        std::printf("Calibrated by runs since: %d rows of measured/predicted (the planner scales its predictions by them)\n", runs);
    return ExitOk;
}

}  // namespace

void addProbeCommand(CLI::App& app, int& exitCode)
{
    auto c = std::make_shared<ProbeCommand>();
    auto* cmd = app.add_subcommand("probe", "Measure this machine: disk read bandwidth, memory, devices, matvec "
                                            "throughput (cached; the planner uses these figures)");
    cmd->add_flag("--json", c->json, "Print the profile as JSON instead of a table");
    cmd->add_flag("--remeasure", c->remeasure, "Measure again even when the cached profile fits this machine");
    cmd->add_option("--path", c->path,
                    "Folder whose disk is measured (a temporary test file is written there and removed). "
                    "Default: the models folder, $XDG_DATA_HOME/spillway/models (~/.local/share/spillway/"
                    "models) when it exists, else the current directory")
        ->check(CLI::ExistingDirectory);
    cmd->add_flag("--quick", c->quick, "Small sizes and short timings (rough figures; for tests)");
    cmd->add_option("-t,--threads", c->threads, "CPU threads (default: one per core)")->check(CLI::Range(0, 1024));
    cmd->callback([c, &exitCode] { exitCode = runProbe(*c); });
}

}  // namespace spillway::cli
