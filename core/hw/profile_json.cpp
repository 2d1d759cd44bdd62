// HardwareProfile <-> JSON (the probe's cache file, and `spillway-cli probe --json`).
// Doubles are written with round-trip precision, so a profile read back compares equal.

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/hw/probe.h"

namespace spillway::hw {

namespace {

// Keys in the order of the structs (not sorted), so the file reads like probe.h.
using json = nlohmann::ordered_json;

json throughputsToJson(const std::vector<FormatThroughput>& v)
{
    json a = json::array();
    for (const auto& t : v) a.push_back({{"type", gpu::dtypeName(t.type)}, {"bytesPerSecond", t.bytesPerSecond}});
    return a;
}

json readsToJson(const std::vector<ReadBandwidth>& v)
{
    json a = json::array();
    for (const auto& r : v)
        a.push_back({{"queueDepth", r.queueDepth}, {"requestBytes", r.requestBytes},
                     {"bytesPerSecond", r.bytesPerSecond}, {"iops", r.iops}});
    return a;
}

gpu::DType dtypeFromName(const std::string& name)
{
    for (int i = 0; i < gpu::kDTypeCount; ++i)
        if (name == gpu::dtypeName(gpu::DType(i))) return gpu::DType(i);
    throw std::runtime_error("unknown weight type \"" + name + "\"");
}

std::vector<FormatThroughput> throughputsFromJson(const json& a)
{
    std::vector<FormatThroughput> v;
    for (const auto& t : a) v.push_back({dtypeFromName(t.at("type").get<std::string>()), t.at("bytesPerSecond").get<double>()});
    return v;
}

std::vector<ReadBandwidth> readsFromJson(const json& a)
{
    std::vector<ReadBandwidth> v;
    for (const auto& r : a)
        v.push_back({r.at("queueDepth").get<int>(), r.at("requestBytes").get<size_t>(),
                     r.at("bytesPerSecond").get<double>(), r.at("iops").get<double>()});
    return v;
}

}  // namespace

bool operator==(const DeviceProfile& a, const DeviceProfile& b)
{
    return a.backend == b.backend && a.name == b.name && a.totalMemory == b.totalMemory &&
           a.freeMemory == b.freeMemory && a.caps.hostPointers == b.caps.hostPointers &&
           a.caps.asyncCopy == b.caps.asyncCopy && a.caps.pinnedHostMemory == b.caps.pinnedHostMemory &&
           a.caps.events == b.caps.events && a.hostToDevicePinned == b.hostToDevicePinned &&
           a.hostToDevicePageable == b.hostToDevicePageable && a.matvec == b.matvec && a.kernels == b.kernels &&
           a.layerOverheadSeconds == b.layerOverheadSeconds &&
           a.sharedHostReadBytesPerSecond == b.sharedHostReadBytesPerSecond;
}

std::string profileToJson(const HardwareProfile& p)
{
    const HostProfile& h = p.host;
    const StorageProfile& s = p.storage;
    json devices = json::array();
    for (const DeviceProfile& d : p.devices)
        devices.push_back({
            {"backend", d.backend},
            {"name", d.name},
            {"kernels", d.kernels},
            {"totalMemory", d.totalMemory},
            {"freeMemory", d.freeMemory},
            {"caps", {{"hostPointers", d.caps.hostPointers}, {"asyncCopy", d.caps.asyncCopy},
                      {"pinnedHostMemory", d.caps.pinnedHostMemory}, {"events", d.caps.events}}},
            {"hostToDevicePinned", d.hostToDevicePinned},
            {"hostToDevicePageable", d.hostToDevicePageable},
            {"layerOverheadSeconds", d.layerOverheadSeconds},
            {"sharedHostReadBytesPerSecond", d.sharedHostReadBytesPerSecond},
            {"matvec", throughputsToJson(d.matvec)},
        });
    const json j = {
        {"version", p.version},
        {"fingerprint", p.fingerprint},
        {"measuredAt", p.measuredAt},
        {"quick", p.quick},
        {"host",
         {{"cpuName", h.cpuName}, {"cores", h.cores}, {"threads", h.threads}, {"ramTotal", h.ramTotal},
          {"ramAvailable", h.ramAvailable}, {"memoryReadBytesPerSecond", h.memoryReadBytesPerSecond},
          {"cpuMatvec", throughputsToJson(h.cpuMatvec)}}},
        {"storage",
         {{"path", s.path}, {"filesystem", s.filesystem}, {"totalBytes", s.totalBytes},
          {"freeBytes", s.freeBytes}, {"directIo", s.directIo}, {"ioEngine", s.ioEngine},
          {"testFileBytes", s.testFileBytes}, {"sequentialBytesPerSecond", s.sequentialBytesPerSecond},
          {"sequential", readsToJson(s.sequential)}, {"random32k", readsToJson(s.random32k)}}},
        {"devices", devices},
    };
    json out = j;
    if (!p.spreads.empty()) {
        json rows = json::array();
        for (const Spread& r : p.spreads)
            rows.push_back({{"what", r.what}, {"repeats", r.repeats}, {"low", r.low}, {"median", r.median},
                            {"high", r.high}, {"judged", r.judged}});
        out["spreads"] = rows;
    }
    if (!p.observed.empty()) {
        json rows = json::array();
        for (const Observation& o : p.observed)
            rows.push_back({{"backend", o.backend}, {"lane", o.lane}, {"sizeClass", o.sizeClass}, {"format", o.format}, {"ratio", o.ratio},
                            {"tokens", o.tokens}, {"atMs", o.atMs}});
        out["observed"] = rows;
    }
    if (!p.suspect.empty()) out["suspect"] = p.suspect;
    if (!p.busy.empty()) out["busy"] = p.busy;
    if (p.busyTries > 0) out["busyTries"] = p.busyTries;
    return out.dump(2);
}

Result<HardwareProfile> profileFromJson(const std::string& text)
{
    try {
        const json j = json::parse(text);
        HardwareProfile p;
        p.version = j.at("version").get<int>();
        if (p.version != HardwareProfile{}.version)
            return makeError(ErrorCode::InvalidArgument,
                             "hardware profile: layout version " + std::to_string(p.version) + ", expected " +
                                 std::to_string(HardwareProfile{}.version));
        p.fingerprint = j.at("fingerprint").get<std::string>();
        p.measuredAt = j.at("measuredAt").get<std::string>();
        p.quick = j.value("quick", false);
        const json& h = j.at("host");
        p.host.cpuName = h.at("cpuName").get<std::string>();
        p.host.cores = h.at("cores").get<int>();
        p.host.threads = h.at("threads").get<int>();
        p.host.ramTotal = h.at("ramTotal").get<uint64_t>();
        p.host.ramAvailable = h.at("ramAvailable").get<uint64_t>();
        p.host.memoryReadBytesPerSecond = h.at("memoryReadBytesPerSecond").get<double>();
        p.host.cpuMatvec = throughputsFromJson(h.at("cpuMatvec"));
        const json& s = j.at("storage");
        p.storage.path = s.at("path").get<std::string>();
        p.storage.filesystem = s.at("filesystem").get<std::string>();
        p.storage.totalBytes = s.at("totalBytes").get<uint64_t>();
        p.storage.freeBytes = s.at("freeBytes").get<uint64_t>();
        p.storage.directIo = s.at("directIo").get<bool>();
        p.storage.ioEngine = s.at("ioEngine").get<std::string>();
        p.storage.testFileBytes = s.value("testFileBytes", uint64_t{0});
        p.storage.sequentialBytesPerSecond = s.at("sequentialBytesPerSecond").get<double>();
        p.storage.sequential = readsFromJson(s.at("sequential"));
        p.storage.random32k = readsFromJson(s.at("random32k"));
        for (const json& d : j.at("devices")) {
            DeviceProfile dp;
            dp.backend = d.at("backend").get<std::string>();
            dp.name = d.at("name").get<std::string>();
            dp.kernels = d.value("kernels", std::string());
            dp.totalMemory = d.at("totalMemory").get<uint64_t>();
            dp.freeMemory = d.at("freeMemory").get<uint64_t>();
            const json& c = d.at("caps");
            dp.caps.hostPointers = c.at("hostPointers").get<bool>();
            dp.caps.asyncCopy = c.at("asyncCopy").get<bool>();
            dp.caps.pinnedHostMemory = c.at("pinnedHostMemory").get<bool>();
            dp.caps.events = c.at("events").get<bool>();
            dp.hostToDevicePinned = d.at("hostToDevicePinned").get<double>();
            dp.hostToDevicePageable = d.at("hostToDevicePageable").get<double>();
            dp.matvec = throughputsFromJson(d.at("matvec"));
            dp.layerOverheadSeconds = d.value("layerOverheadSeconds", 0.0);
            dp.sharedHostReadBytesPerSecond = d.value("sharedHostReadBytesPerSecond", 0.0);
            p.devices.push_back(std::move(dp));
        }
        for (const json& r : j.value("spreads", json::array()))
            p.spreads.push_back({r.at("what").get<std::string>(), r.at("repeats").get<int>(), r.at("low").get<double>(),
                                 r.at("median").get<double>(), r.at("high").get<double>(), r.value("judged", true)});
        for (const json& o : j.value("observed", json::array())) {
            Observation row;
            row.backend = o.at("backend").get<std::string>();
            row.lane = o.at("lane").get<std::string>();
            row.sizeClass = o.at("sizeClass").get<int>();
            row.format = o.value("format", std::string());
            row.ratio = o.at("ratio").get<double>();
            row.tokens = o.at("tokens").get<double>();
            row.atMs = o.at("atMs").get<int64_t>();
            if (row.ratio > 0 && std::isfinite(row.ratio)) p.observed.push_back(row);
        }
        p.suspect = j.value("suspect", std::string());
        p.busy = j.value("busy", std::string());
        p.busyTries = j.value("busyTries", 0);
        return p;
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidArgument, std::string("hardware profile: ") + e.what());
    }
}

}  // namespace spillway::hw
