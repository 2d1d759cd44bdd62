// probeHardware: measure (or load the cached measurement of) this machine.

#include "core/hw/probe.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <thread>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hw/measure.h"
#include "gpu/host.h"
#include "gpu/registry.h"
#include "storage/atomic_file.h"

namespace spillway::hw {

namespace {

namespace fs = std::filesystem;

std::string homeDir()
{
    const char* home = std::getenv("HOME");
    return home && *home ? home : ".";
}

std::string envDir(const char* name, const std::string& fallback)
{
    const char* v = std::getenv(name);
    return v && *v == '/' ? v : fallback;
}

// UTC, ISO 8601 with milliseconds: two measurements in one second still differ.
std::string utcNow()
{
    const auto now = std::chrono::system_clock::now();
    const std::time_t secs = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm {};
    gmtime_r(&secs, &tm);
    char buf[80];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
    return buf;
}

struct FingerprintInput {
    std::string cpuName;
    int cores = 0;
    uint64_t ramTotal = 0;
    std::vector<std::pair<std::string, uint64_t>> devices;  // name, memory; GPU backends only
    uint64_t storageDevice = 0;                              // st_dev of the storage folder
};

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull)
{
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string fingerprintOf(const FingerprintInput& in)
{
    // The CPU device is left out of the device list: its name carries the thread count, and the
    // CPU model and RAM above describe it already.
    std::string text = "cpu=" + in.cpuName + "\ncores=" + std::to_string(in.cores) +
                       "\nram=" + std::to_string(in.ramTotal) + "\nstorage-dev=" + std::to_string(in.storageDevice);
    for (const auto& [name, memory] : in.devices) text += "\ndevice=" + name + "/" + std::to_string(memory);
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)fnv1a(text));
    return buf;
}

uint64_t storageDeviceId(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_dev) : 0;
}

std::string resolveStoragePath(const std::string& path)
{
    std::error_code ec;
    const fs::path p = path.empty() ? fs::path(defaultStoragePath()) : fs::path(path);
    const fs::path abs = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return abs.empty() ? p.string() : abs.string();
}

}  // namespace

std::string defaultProbeCacheFile()
{
    return envDir("XDG_CACHE_HOME", homeDir() + "/.cache") + "/spillway/hardware-profile.json";
}

std::string probeCacheFileFor(const std::string& cacheFile, int threads)
{
    const std::string file = cacheFile.empty() ? defaultProbeCacheFile() : cacheFile;
    if (threads <= 0 || threads == gpu::cpu::onlineCores()) return file;
    const std::string tail = "-t" + std::to_string(threads);
    const size_t dot = file.rfind(".json");
    return dot != std::string::npos && dot + 5 == file.size() ? file.substr(0, dot) + tail + ".json" : file + tail;
}

std::string defaultStoragePath()
{
    const std::string models = envDir("XDG_DATA_HOME", homeDir() + "/.local/share") + "/spillway/models";
    std::error_code ec;
    if (fs::is_directory(models, ec)) return models;
    const fs::path cwd = fs::current_path(ec);
    return ec ? "." : cwd.string();
}

std::string hardwareFingerprint(const std::string& storagePath)
{
    FingerprintInput in;
    in.cpuName = gpu::cpu::cpuModelName();
    in.cores = gpu::cpu::onlineCores();
    in.ramTotal = gpu::cpu::readHostMemoryInfo().total;
    in.storageDevice = storageDeviceId(resolveStoragePath(storagePath));
    for (const auto& b : gpu::backendStatus()) {
        if (!b.usable || b.name == "cpu") continue;
        auto device = gpu::createDevice(b.name, {});
        if (device) in.devices.emplace_back((*device)->info().name, (*device)->info().totalMemory);
    }
    return fingerprintOf(in);
}

gpu::DType measuredStandIn(gpu::DType type)
{
    using gpu::DType;
    switch (type) {
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1: return DType::Q4_0;
    case DType::Q8_G64: return DType::Q8_0;
    case DType::Q5_K:
    case DType::Q6_K: return DType::Q4_K;
    case DType::Q2_K: return DType::Q3_K;
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M: return DType::IQ2_XXS;
    case DType::IQ4_NL:
    case DType::MXFP4: return DType::IQ4_XS;
    default: return type;
    }
}

double matvecRate(const std::vector<FormatThroughput>& rates, gpu::DType type)
{
    for (gpu::DType t : {type, measuredStandIn(type)})
        for (const FormatThroughput& f : rates)
            if (f.type == t && f.bytesPerSecond > 0) return f.bytesPerSecond;
    return 0;
}

std::string spreadReason(const std::vector<Spread>& spreads)
{
    const Spread* widest = nullptr;
    for (const Spread& s : spreads)
        if (s.judged && s.relative() > kSpreadLimit && (!widest || s.relative() > widest->relative())) widest = &s;
    if (!widest) return {};
    char why[240];
    std::snprintf(why, sizeof why, "%s varied by %.0f %% between its %d repeats (more than %.0f %%)",
                  widest->what.c_str(), 100 * widest->relative(), widest->repeats, 100 * kSpreadLimit);
    return why;
}

namespace {

double widestSpread(const std::vector<Spread>& spreads)
{
    double w = 0;
    for (const Spread& s : spreads)
        if (s.judged) w = std::max(w, s.relative());
    return w;
}

// One whole measurement (measureHardware repeats it when its spread is too wide).
Result<HardwareProfile> measureOnce(const ProbeOptions& o)
{
    const std::string storagePath = resolveStoragePath(o.storagePath);
    std::error_code ec;
    if (!fs::is_directory(storagePath, ec))
        return makeError(ErrorCode::Io, storagePath + ": not a folder (the probe measures the disk "
                                                      "where models live)");
    auto cpuDevice = gpu::createDevice("cpu", {o.threads, 0});
    if (!cpuDevice) return cpuDevice.error();
    gpu::Device& cpu = **cpuDevice;

    HardwareProfile p;
    p.quick = o.quick;
    FingerprintInput fp;
    const CpuSample before = sampleCpu();

    const auto stage = [&](double fraction, const char* what) {
        if (o.progress) o.progress(fraction, what);
    };
    const auto cancelled = [&] { return o.cancelled && o.cancelled(); };
    const Error cancel = makeError(ErrorCode::Cancelled, "the hardware probe was cancelled");
    // Storage first: a full disk is refused before anything else is measured.
    stage(0.0, "disk reads");
    std::vector<Spread>* spreads = &p.spreads;  // kept for quick ones too, but not judged then
    auto storageProfile = detail::measureStorage(storagePath, o.testFileBytes, o.quick, spreads);
    if (!storageProfile) return storageProfile.error();
    p.storage = std::move(*storageProfile);
    fp.storageDevice = storageDeviceId(storagePath);

    // Host: CPU, RAM, memory bandwidth, CPU matvec (the ceiling the matvec is compared with).
    const gpu::cpu::HostMemoryInfo mem = gpu::cpu::readHostMemoryInfo();
    p.host.cpuName = fp.cpuName = gpu::cpu::cpuModelName();
    p.host.cores = fp.cores = gpu::cpu::onlineCores();
    p.host.threads = cpu.info().threads;
    p.host.ramTotal = fp.ramTotal = mem.total;
    p.host.ramAvailable = mem.available;
    if (cancelled()) return cancel;
    stage(0.5, "memory bandwidth");
    {
        std::vector<double> passes;  // the best is the figure (the ceiling the kernels are compared with)
        p.host.memoryReadBytesPerSecond = gpu::measureHostReadBandwidth(
            p.host.threads, o.quick ? size_t{32} << 20 : size_t{512} << 20, o.quick ? 2 : 5, &passes);
        spreads->push_back(detail::spreadOf("memory reads", std::move(passes)));
    }
    if (cancelled()) return cancel;
    stage(0.65, "CPU matrix-vector speed");
    p.host.cpuMatvec = detail::measureMatvec(cpu, o.quick, spreads);
    if (cancelled()) return cancel;
    stage(0.8, "devices");

    // Devices: every usable backend. The CPU device is the host measured above; its "upload"
    // is a memcpy.
    for (const auto& b : gpu::backendStatus()) {
        if (!b.usable) continue;
        if (cancelled()) return cancel;
        std::unique_ptr<gpu::Device> owned;
        gpu::Device* device = &cpu;
        if (b.name != "cpu") {
            auto created = gpu::createDevice(b.name, {o.threads, 0});
            if (!created) continue;  // listed usable, yet refused: leave it out
            owned = std::move(*created);
            device = owned.get();
        }
        const gpu::DeviceInfo& info = device->info();
        DeviceProfile d;
        d.backend = info.backend;
        d.name = info.name;
        d.kernels = info.kernels;
        d.totalMemory = info.totalMemory;
        d.freeMemory = info.freeMemory;
        d.caps = info.caps;
        const bool quick = o.quick || info.caps.emulated;  // see probeHardware in probe.h
        // An emulated device's figures are rough by design (quick sizes): their spread is not asked.
        std::vector<Spread>* deviceSpreads = info.caps.emulated ? nullptr : spreads;
        const detail::UploadBandwidth up = detail::measureUpload(*device, quick, deviceSpreads);
        d.hostToDevicePinned = up.pinned;
        d.hostToDevicePageable = up.pageable;
        d.matvec = device == &cpu ? p.host.cpuMatvec : detail::measureMatvec(*device, quick, deviceSpreads);
        d.layerOverheadSeconds = detail::measureLayerOverhead(*device, quick, deviceSpreads);
        if (!info.caps.hostPointers) {
            // The CPU reads host memory while the device copies from it: what they reach together.
            double cpuRate = 0;
            std::thread reader([&] {
                cpuRate = gpu::measureHostReadBandwidth(p.host.threads, quick ? size_t{32} << 20 : size_t{512} << 20,
                                                        quick ? 2 : 5);
            });
            const detail::UploadBandwidth during = detail::measureUpload(*device, quick);
            reader.join();
            d.sharedHostReadBytesPerSecond = cpuRate + during.pinned;
        }
        if (b.name != "cpu") fp.devices.emplace_back(info.name, info.totalMemory);
        p.devices.push_back(std::move(d));
    }
    p.fingerprint = fingerprintOf(fp);
    p.measuredAt = utcNow();
    if (!o.quick) p.busy = busyReason(before, sampleCpu(), p.host.cores);
    return p;
}

}  // namespace

Result<HardwareProfile> measureHardware(const ProbeOptions& o)
{
    // The progress only goes forward: a second measurement (below) fills what the first left.
    double reached = 0;
    ProbeOptions first = o;
    if (o.progress)
        first.progress = [&o, &reached](double fraction, const std::string& stage) {
            reached = std::max(reached, fraction);
            o.progress(reached, stage);
        };
    auto result = measureOnce(first);
    if (result && !o.quick && !spreadReason(result->spreads).empty()) {
        // Too noisy: once more, and the narrower of the two is kept (a cancel ends it; another
        // failure keeps the first). Still too noisy: that is why it counts as busy.
        ProbeOptions again = o;
        const double from = std::min(reached, 0.95);
        if (o.progress)
            again.progress = [&o, from](double fraction, const std::string& stage) {
                o.progress(from + (0.99 - from) * std::clamp(fraction, 0.0, 1.0), "again (the first readings varied): " + stage);
            };
        auto second = measureOnce(again);
        if (!second && second.error().code == ErrorCode::Cancelled) return second;
        if (second && widestSpread(second->spreads) < widestSpread(result->spreads)) result = std::move(second);
        if (result->busy.empty()) result->busy = spreadReason(result->spreads);
    }
    if (result && o.progress) o.progress(1.0, "done");
    return result;
}

CpuSample sampleCpu()
{
    CpuSample c;
    const double tick = double(::sysconf(_SC_CLK_TCK));
    std::ifstream stat("/proc/stat");
    std::string cpu;
    double v[8] = {};  // user nice system idle iowait irq softirq steal
    if (stat >> cpu && cpu == "cpu") {
        for (double& x : v) stat >> x;
        for (double x : v) c.total += x / tick;
        c.idle = (v[3] + v[4]) / tick;
        c.steal = v[7] / tick;
    }
    struct rusage self {};
    if (::getrusage(RUSAGE_SELF, &self) == 0)
        c.self = double(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                 double(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
    return c;
}

std::string busyReason(const CpuSample& before, const CpuSample& after, int cores)
{
    const double total = after.total - before.total;
    if (total <= 0 || cores <= 0) return {};
    const double busy = total - (after.idle - before.idle) - (after.steal - before.steal);
    const double others = std::max(0.0, busy - (after.self - before.self)) / total;
    const double stolen = (after.steal - before.steal) / total;
    char why[200];
    if (others > 0.25)
        std::snprintf(why, sizeof why, "other processes kept %.0f %% of the CPUs busy while it measured", 100 * others);
    else if (stolen > 0.05)
        std::snprintf(why, sizeof why, "the hypervisor took %.0f %% of the CPU time while it measured", 100 * stolen);
    else
        return {};
    return why;
}

Result<std::string> detail::readCacheText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return makeError(ErrorCode::Io, path + ": cannot open");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

Status detail::saveProfileCache(const std::string& path, const HardwareProfile& p)
{
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    auto file = storage::AtomicFile::create(path);
    if (!file) return file.error();
    const std::string text = profileToJson(p) + "\n";
    SPILLWAY_TRY(file->write(text.data(), text.size()));
    return file->commit();
}

Result<HardwareProfile> probeHardware(const ProbeOptions& o)
{
    const std::string cacheFile = probeCacheFileFor(o.cacheFile, o.threads);
    int previousBusyTries = 0;  // busy measurements in a row before this one
    if (!o.remeasure) {
        auto text = detail::readCacheText(cacheFile);
        auto cached = text ? profileFromJson(*text) : Result<HardwareProfile>(text.error());
        // A missing, corrupt or stale cache is simply measured again.
        if (cached) {
            const HardwareProfile& c = *cached;
            const int threads = o.threads > 0 ? o.threads : gpu::cpu::onlineCores();
            const bool sameMachine = c.fingerprint == hardwareFingerprint(o.storagePath) && c.host.threads == threads;
            bool fits = sameMachine && (!c.quick || o.quick);
            // Measured on a busy machine: kept only until a probe finds it quiet (a quarter second
            // of sampling); under lasting load the busy figures are all there is.
            if (fits && !c.quick && !c.busy.empty() && c.busyTries < kBusyTries) {
                const CpuSample a = sampleCpu();
                std::this_thread::sleep_for(std::chrono::milliseconds(250));
                const CpuSample b = sampleCpu();
                if (busyReason(a, b, c.host.cores).empty()) fits = false;
            }
            if (fits) return cached;
            if (sameMachine && !c.busy.empty()) previousBusyTries = c.busyTries;
        }
    }
    auto measured = measureHardware(o);
    if (!measured) return measured;
    if (!measured->busy.empty()) measured->busyTries = previousBusyTries + 1;
    // A cache that cannot be written costs a re-measure next time, nothing more.
    (void)detail::saveProfileCache(cacheFile, *measured);
    return measured;
}

}  // namespace spillway::hw
