#include "core/plan/planner.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <numeric>

#include "core/formats/gguf.h"
#include "core/hw/calibration.h"
#include "core/plan/model_tensors.h"
#include "core/plan/session_memory.h"
#include "core/plan/streamer_layout.h"

namespace spillway::plan {

namespace {

constexpr uint64_t kAlign = 4096;
uint64_t alignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The hardware figures the cost model uses, from the probe.
struct Hardware {
    std::string deviceName;
    double ssd = 0;          // sequential direct-read bytes/s
    double copy = 0;         // host→device bytes/s (pinned)
    double cpuMatvec = 0;    // host CPU matvec bytes/s (for HeteGen's α)
    double sharedRead = 0;   // host memory read by the CPU and the copies at once (0: not measured)
    std::map<gpu::DType, double> matvec;  // device matvec weight bytes/s
    bool directToDevice = false;          // SSD reads land in device memory (CPU device)
    double layerOverhead = 0;             // seconds per layer per token besides the weights' bytes
    uint64_t deviceFree = 0, ramAvailable = 0;
};

Result<Hardware> hardwareFrom(const PlannerInput& in)
{
    Hardware h;
    const hw::DeviceProfile* dev = nullptr;
    for (const auto& d : in.profile.devices)
        if (d.backend == in.backend) { dev = &d; break; }
    if (!dev)
        return makeError(ErrorCode::BackendUnavailable,
                         "the hardware profile has no '" + in.backend + "' device (run `spillway-cli probe`)");
    if (in.profile.storage.sequentialBytesPerSecond <= 0 || dev->hostToDevicePinned <= 0)
        return makeError(ErrorCode::InvalidArgument, "the hardware profile lacks SSD or copy bandwidth figures");
    h.deviceName = dev->name;
    h.ssd = in.profile.storage.sequentialBytesPerSecond;
    h.copy = dev->hostToDevicePinned;
    h.directToDevice = dev->caps.hostPointers;
    h.deviceFree = dev->freeMemory;
    h.ramAvailable = in.profile.host.ramAvailable;
    for (int t = 0; t < gpu::kDTypeCount; ++t)  // measured, or the family's stand-in (probe.h)
        if (const double rate = hw::matvecRate(dev->matvec, gpu::DType(t)); rate > 0) h.matvec[gpu::DType(t)] = rate;
    h.layerOverhead = dev->layerOverheadSeconds;
    h.sharedRead = dev->sharedHostReadBytesPerSecond;
    // HeteGen's split divides dense rows: the bitmap figure (per blob byte) is not their speed.
    for (const auto& f : in.profile.host.cpuMatvec)
        if (f.type != gpu::DType::BitmapSparse) h.cpuMatvec = std::max(h.cpuMatvec, f.bytesPerSecond);
    return h;
}

struct Tensor {
    int unit = 0;            // -1 embedding, 0..L-1 layers, L head
    uint64_t bytes = 0;
    double compute = 0;      // device seconds per token
    std::string role;        // suffix after "blk.N." or the full name
    bool splittable = true;  // rows can be split CPU/device (dense types; not bitmap sparse)
    SsdPiece piece;          // where it lies in the model's files
    bool inMemory = false;   // converted at load: no file to read, so the SSD tier keeps it in RAM
    // A mixture of experts' stack (ffn_*_exps): a token computes with `share` of it (the experts
    // it uses); on the SSD it goes through the expert cache, which keeps `cacheBytes` of it in
    // device memory and reads `missBytes` per token from the SSD (its misses, by the routing
    // profile's rates or uniform), `hostMissBytes` from the experts of it kept in RAM
    // (`hostBytes` of them).
    bool expertStack = false;
    bool cacheable = true;   // the runtime's expert cache is on
    double share = 1.0;
    uint64_t cacheBytes = 0;
    double missBytes = 0;
    double hostMissBytes = 0;
    uint64_t hostBytes = 0;
};

// One expert's rows of a stack as the expert cache lays them out in a slot or in RAM (each part
// on 256 bytes: expert_cache.cpp).
uint64_t expertPartBytes(const Tensor& stack, int experts)
{
    constexpr uint64_t kPartAlign = 256;
    return (stack.bytes / uint64_t(experts) + kPartAlign - 1) / kPartAlign * kPartAlign;
}

// The input's routing profile where it is measured and of the model's shape, else nullptr.
const RoutingProfile* usableRouting(const PlannerInput& in)
{
    return in.routing && !in.routing->empty() && in.routing->fits(in.model->config()) ? in.routing.get() : nullptr;
}

// A layer's per-token choice rates of its experts: measured, or uniform.
std::vector<double> choiceRates(const PlannerInput& in, int layer)
{
    if (const RoutingProfile* r = usableRouting(in)) return r->choiceRates(layer);
    const LlamaConfig& c = in.model->config();
    return std::vector<double>(size_t(c.nExperts), double(c.nExpertsUsed) / double(c.nExperts));
}

// Per unit: whether the runtime's expert cache takes it (every expert stack of it on the SSD, in
// a file); a layer with some elsewhere streams them whole.
std::vector<char> expertCacheUnits(const std::vector<Tensor>& tensors, const std::vector<Tier>& tiers, int units)
{
    std::vector<char> cached(size_t(units), 1);
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].expertStack && tensors[i].unit >= 0 &&
            (tiers[i] != Tier::Ssd || tensors[i].inMemory || !tensors[i].cacheable))
            cached[size_t(tensors[i].unit)] = 0;
    return cached;
}

// The cost model: a simulation of the runtime's loader and compute over a few passes.
struct Evaluation {
    double secondsPerToken = 0;
    LaneTimes lanes;
    double loadSum = 0;
    uint64_t residentBytes = 0, slotBytes = 0, hostBytes = 0, stagingBytes = 0, ssdBytes = 0;
    int slots = 0;
};

// A unit's work that no placement changes: the neuron cache's fetches and FFN compute.
struct UnitExtra {
    double read = 0, copy = 0, compute = 0;  // seconds per token
    double cpu = 0;  // the CPU's cold neurons, at the same time as the device's compute
    uint64_t ssdBytes = 0;
};

class CostModel {
public:
    CostModel(const Hardware& hw, std::vector<Tensor> tensors, int units, uint64_t fixedDevice, uint64_t fixedHost,
              std::vector<UnitExtra> extra = {})
        : m_hw(hw), m_tensors(std::move(tensors)), m_units(units), m_fixed(fixedDevice), m_fixedHost(fixedHost),
          m_extra(std::move(extra)) {}

    Evaluation evaluate(const std::vector<Tier>& tiers, int slots) const
    {
        Evaluation e;
        e.slots = slots;
        std::vector<double> load(size_t(m_units), 0.0), compute(size_t(m_units), 0.0);
        std::vector<uint64_t> slotBytes(size_t(m_units), 0), ssdSlotBytes(size_t(m_units), 0);
        std::vector<std::vector<SsdPiece>> pieces(static_cast<size_t>(m_units));
        const std::vector<char> cached = expertCacheUnits(m_tensors, tiers, m_units);
        for (size_t i = 0; i < m_tensors.size(); ++i) {
            const Tensor& t = m_tensors[i];
            const Tier tier = tiers[i];
            if (t.unit < 0) {  // the embedding: resident, or one row from the mapped file per token
                if (tier == Tier::Device) e.residentBytes += alignUp(t.bytes);
                continue;
            }
            const size_t u = size_t(t.unit);
            const double alpha = tier == Tier::Host ? splitAlpha(t) : 1.0;
            // What the streamer does with it: a matrix with no file is kept in RAM.
            const Tier loadedFrom = tier == Tier::Ssd && t.inMemory ? Tier::Host : tier;
            if (alpha < 1.0) {
                // HeteGen: the device computes α of the rows after copying them; the CPU computes
                // the rest from RAM at the same time. Both read host memory: where their rates
                // together exceed its bandwidth, each gets its share of it (issue 33).
                const double shared = contention();
                const double cpu = shared * (1.0 - alpha) * double(t.bytes) / m_hw.cpuMatvec;
                compute[u] += std::max(alpha * t.compute, cpu);
                e.lanes.deviceCompute += alpha * t.compute;
                e.lanes.cpuCompute += cpu;
                const double copy = shared * alpha * double(t.bytes) / m_hw.copy;
                slotBytes[u] += alignUp(uint64_t(alpha * double(t.bytes))) + kAlign;
                e.hostBytes += t.bytes;
                load[u] += copy;
                e.lanes.hostToDevice += copy;
                continue;
            }
            compute[u] += t.compute;
            e.lanes.deviceCompute += t.compute;
            if (t.expertStack && loadedFrom == Tier::Ssd && cached[u]) {
                // The expert cache: its slots resident, its misses read inside the layer (on the
                // compute path), through staging and a copy where the device has its own memory;
                // the misses it keeps in RAM are copies.
                e.residentBytes += alignUp(t.cacheBytes);
                e.hostBytes += t.hostBytes;
                const double read = t.missBytes / m_hw.ssd;
                // (A device that computes on host memory uses the RAM's experts where they are.)
                const double copy = m_hw.directToDevice ? 0.0 : (t.missBytes + t.hostMissBytes) / m_hw.copy;
                compute[u] += read + copy;
                e.lanes.ssdRead += read;
                e.lanes.hostToDevice += copy;
                e.ssdBytes += uint64_t(t.missBytes);
                continue;
            }
            if (tier == Tier::Device) {
                e.residentBytes += alignUp(t.bytes);
                continue;
            }
            const double copy = double(t.bytes) / m_hw.copy;
            if (loadedFrom == Tier::Host) {
                slotBytes[u] += alignUp(t.bytes);
                e.hostBytes += alignUp(t.bytes);
                load[u] += copy;
                e.lanes.hostToDevice += copy;
            } else {
                pieces[u].push_back(t.piece);
                if (!m_hw.directToDevice) {
                    load[u] += copy;
                    e.lanes.hostToDevice += copy;
                }
            }
        }
        // The SSD reads as the streamer lays them out: the slot bytes, staging and read bytes
        // include the alignment and the gaps it reads through to save requests.
        for (size_t u = 0; u < pieces.size(); ++u) {
            if (pieces[u].empty()) continue;
            const SsdLayout layout = layOutSsdReads(pieces[u]);
            slotBytes[u] += layout.slotBytes;
            ssdSlotBytes[u] = layout.slotBytes;
            const double read = double(layout.readBytes) / m_hw.ssd;
            e.ssdBytes += layout.readBytes;
            load[u] += read;
            e.lanes.ssdRead += read;
        }
        // Every layer's ops cost their issue and finish besides their bytes (the probe's measured
        // per-layer overhead): on the compute path, whatever the placement.
        for (int u = 0; u + 1 < m_units; ++u) {
            compute[size_t(u)] += m_hw.layerOverhead;
            e.lanes.deviceCompute += m_hw.layerOverhead;
        }
        for (size_t u = 0; u < m_extra.size() && u < size_t(m_units); ++u) {
            // Fetched synchronously inside the layer: on its compute path.
            const UnitExtra& x = m_extra[u];
            compute[u] += x.read + x.copy + std::max(x.compute, x.cpu);
            e.lanes.ssdRead += x.read;
            e.lanes.hostToDevice += x.copy;
            e.lanes.deviceCompute += x.compute;
            e.lanes.cpuCompute += x.cpu;
            e.ssdBytes += x.ssdBytes;
        }
        bool anyStreamed = false;
        for (int u = 0; u < m_units; ++u) {
            e.slotBytes = std::max(e.slotBytes, slotBytes[size_t(u)]);
            if (!m_hw.directToDevice) e.stagingBytes = std::max(e.stagingBytes, ssdSlotBytes[size_t(u)] * uint64_t(std::max(slots, 1)));
            e.loadSum += load[size_t(u)];
            anyStreamed = anyStreamed || slotBytes[size_t(u)] > 0;
        }
        if (!anyStreamed) e.slots = 0;
        e.secondsPerToken = simulate(load, compute, slotBytes, slots);
        return e;
    }

    // How much slower the CPU's rows and the copies run while both read host memory: their rates
    // alone, together, over what the probe measured them to reach at once; at least 1 (1 where it
    // was not measured). Both slow alike, so HeteGen's α, the ratio of their times, stays the
    // best split under the shared budget.
    double contention() const
    {
        if (m_hw.sharedRead <= 0) return 1.0;
        return std::max(1.0, (m_hw.cpuMatvec + m_hw.copy) / m_hw.sharedRead);
    }

    // HeteGen Eq. 9 for a RAM-tier tensor: the device's share of rows, when the device cannot
    // compute on host memory itself (otherwise splitting gains nothing: 1).
    double splitAlpha(const Tensor& t) const
    {
        if (m_hw.directToDevice || m_hw.cpuMatvec <= 0 || t.bytes == 0 || !t.splittable) return 1.0;
        const double cpu = double(t.bytes) / m_hw.cpuMatvec;
        const double copy = double(t.bytes) / m_hw.copy;
        return cpu / (cpu + copy);
    }

    uint64_t deviceTotal(const Evaluation& e) const { return m_fixed + e.residentBytes + e.slotBytes * uint64_t(e.slots); }
    uint64_t hostTotal(const Evaluation& e) const { return m_fixedHost + e.hostBytes + e.stagingBytes; }
    const std::vector<Tensor>& tensors() const { return m_tensors; }
    // An expert stack's bytes in the device's slots.
    void setExpertSlots(size_t i, uint64_t cacheBytes) { m_tensors[i].cacheBytes = cacheBytes; }
    // An expert stack's misses per token from the SSD and from RAM, and its RAM bytes.
    void setExpertSplit(size_t i, double ssdMissBytes, double hostMissBytes, uint64_t hostBytes)
    {
        m_tensors[i].missBytes = ssdMissBytes;
        m_tensors[i].hostMissBytes = hostMissBytes;
        m_tensors[i].hostBytes = hostBytes;
    }

private:
    // One loader fills slots in unit order (prefetching up to `slots - 1` units ahead, or right
    // before use when slots == 1 and naive); compute runs units in order. Steady state of the
    // third pass.
    double simulate(const std::vector<double>& load, const std::vector<double>& compute,
                    const std::vector<uint64_t>& slotBytes, int slots) const
    {
        const int passes = 3;
        std::vector<double> releaseAt;  // per streamed use: when compute released its slot
        double loaderFree = 0, computeFree = 0, passStart = 0, lastPass = 0;
        for (int p = 0; p < passes; ++p) {
            passStart = computeFree;
            for (int u = 0; u < m_units; ++u) {
                double ready = computeFree;
                if (slotBytes[size_t(u)] > 0) {
                    const size_t use = releaseAt.size();
                    double start = loaderFree;
                    if (slots <= 1) start = std::max(start, computeFree);  // naive: load on demand
                    if (use >= size_t(std::max(slots, 1))) start = std::max(start, releaseAt[use - size_t(std::max(slots, 1))]);
                    loaderFree = start + load[size_t(u)];
                    ready = std::max(ready, loaderFree);
                }
                computeFree = ready + compute[size_t(u)];
                if (slotBytes[size_t(u)] > 0) releaseAt.push_back(computeFree);
            }
            lastPass = computeFree - passStart;
        }
        return lastPass;
    }

    Hardware m_hw;
    std::vector<Tensor> m_tensors;
    int m_units;
    uint64_t m_fixed;
    uint64_t m_fixedHost;  // the state snapshots (PlacementResult::stateSnapshotBytes)
    std::vector<UnitExtra> m_extra;
};

std::string mib(uint64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}
struct Setup {
    Hardware hw;
    std::vector<TensorPlacement> list;
    std::unique_ptr<CostModel> model;
    uint64_t vram = 0, ram = 0, fixed = 0, fixedHost = 0;
    // Mixtures of experts, per layer: each expert's choice rate per token (measured, or uniform),
    // the expert cache's slots and each expert's expected misses per token in them.
    std::vector<std::vector<double>> expertRates, expertMisses;
    std::vector<int> expertSlots;
};

// The expert cache's slots for `layers`: `--expert-slots` (or the default) in each, or, where the
// routing is measured and no count was asked for, the same slots in all divided among them by
// their routing (allotSlots) when that is expected to miss at least 2 % less.
std::vector<int> divideExpertSlots(const Setup& s, const PlannerInput& in, const std::vector<int>& layers)
{
    const LlamaConfig& c = in.model->config();
    const int uniform = c.expertSlots(in.expertSlots);
    std::vector<int> even(layers.size(), uniform);
    if (!usableRouting(in) || in.expertSlots > 0 || layers.empty()) return even;
    std::vector<std::vector<double>> rates;
    for (int l : layers) rates.push_back(s.expertRates[size_t(l)]);
    const std::vector<int> allotted = allotSlots(rates, c.nExpertsUsed, c.nExperts, uniform * int(layers.size()));
    double flat = 0, shaped = 0;
    for (size_t k = 0; k < layers.size(); ++k) {
        for (double m : expectedMisses(rates[k], uniform)) flat += m;
        for (double m : expectedMisses(rates[k], allotted[k])) shaped += m;
    }
    return shaped < 0.98 * flat ? allotted : even;
}

// Every layer's slots for the placement search: the same count in each, so that the layers it
// ends up serving can divide theirs by the routing afterwards (placeExperts) in the same device
// memory; and the expected misses in them.
void sizeExpertSlots(Setup& s, const PlannerInput& in)
{
    const LlamaConfig& c = in.model->config();
    s.expertSlots.assign(size_t(c.nLayers), c.expertSlots(in.expertSlots));
    s.expertMisses.clear();
    for (int l = 0; l < c.nLayers; ++l)
        s.expertMisses.push_back(expectedMisses(s.expertRates[size_t(l)], s.expertSlots[size_t(l)]));
}

Result<Setup> setUp(const PlannerInput& in)
{
    if (!in.model) return makeError(ErrorCode::InvalidArgument, "planner: no model");
    auto hw = hardwareFrom(in);
    if (!hw) return hw.error();
    Setup s;
    s.hw = *hw;
    const LlamaModel& m = *in.model;
    const LlamaConfig& c = m.config();
    s.list = modelTensors(m);
    if (!in.served.empty())
        std::erase_if(s.list, [&](const TensorPlacement& t) {
            return std::find(in.served.begin(), in.served.end(), t.name) != in.served.end();
        });
    if (c.moe()) {
        for (int l = 0; l < c.nLayers; ++l) s.expertRates.push_back(choiceRates(in, l));
        sizeExpertSlots(s, in);
    }
    std::vector<Tensor> tensors;
    const double fallback = in.profile.host.memoryReadBytesPerSecond > 0 ? in.profile.host.memoryReadBytesPerSecond : 1e10;
    for (const auto& t : s.list) {
        const ModelTensor* info = m.tensor(t.name);
        const gpu::DType type = info ? info->type : gpu::DType::F32;
        const auto it = s.hw.matvec.find(type);
        const double rate = it != s.hw.matvec.end() && it->second > 0 ? it->second : fallback;
        Tensor x;
        x.unit = t.unit;
        x.bytes = t.bytes;
        x.compute = t.unit < 0 ? 0.0 : double(t.bytes) / rate;
        if (c.moe() && t.name.find("_exps.weight") != std::string::npos) {
            const int slots = s.expertSlots[size_t(t.unit)];
            const double expert = double(t.bytes) / double(c.nExperts);
            x.expertStack = true;
            x.cacheable = in.expertCache;
            x.share = double(c.nExpertsUsed) / double(c.nExperts);
            x.compute *= x.share;
            x.cacheBytes = uint64_t(expert * double(slots));
            // The slots' misses by the routing's rates (uniform: a chosen expert is in a slot with
            // probability slots / experts).
            const std::vector<double>& misses = s.expertMisses[size_t(t.unit)];
            x.missBytes = std::accumulate(misses.begin(), misses.end(), 0.0) * expert;
        }
        x.splittable = type != gpu::DType::BitmapSparse;
        if (info) x.piece = {info->file, info->fileOffset, info->bytes};
        x.inMemory = info && info->file == kInMemoryTensor;
        const size_t dot = t.name.find('.', 4);
        x.role = t.name.rfind("blk.", 0) == 0 && dot != std::string::npos ? t.name.substr(dot + 1) : t.name;
        tensors.push_back(x);
    }
    // Norms, biases, OPT's learned positions: resident whatever the placement.
    uint64_t vectors = 0;
    for (uint64_t bytes : residentExtraAllocations(m)) vectors += alignUp(bytes);
    s.fixed = sessionWorkingBytes(c, in.contextLength, in.batch, in.kvType) + vectors + kAlign * 16 +
              alignUp(in.reservedDeviceBytes);
    s.fixedHost = stateSnapshotBytes(c, in.contextLength, in.batch, in.kvType);
    s.vram = in.vramBudget ? in.vramBudget : s.hw.deviceFree;
    s.ram = in.ramBudget ? in.ramBudget : s.hw.ramAvailable / 2;
    std::vector<UnitExtra> extra;
    for (const NeuronCacheLayerCost& n : in.neuronCache) {
        UnitExtra x;
        const auto it = s.hw.matvec.find(n.rowType);
        const double rate = it != s.hw.matvec.end() && it->second > 0 ? it->second : fallback;
        x.compute = n.computeBytes / rate;
        // Cold neurons computed on the CPU: by the same cores on the CPU device, else beside it.
        if (s.hw.directToDevice) x.compute += n.cpuComputeBytes / rate;
        else if (n.cpuComputeBytes > 0) x.cpu = n.cpuComputeBytes / (s.hw.cpuMatvec > 0 ? s.hw.cpuMatvec : fallback);
        if (n.fromSsd) {
            x.read = n.loadBytes / s.hw.ssd;
            x.ssdBytes = uint64_t(n.loadBytes);
            if (!s.hw.directToDevice && n.toDevice) x.copy = n.loadBytes / s.hw.copy;
        } else if (n.toDevice) {
            x.copy = n.loadBytes / s.hw.copy;
        }
        extra.push_back(x);
    }
    s.model = std::make_unique<CostModel>(s.hw, std::move(tensors), c.nLayers + 1, s.fixed, s.fixedHost, std::move(extra));
    return s;
}

// Per layer of a mixture of experts: where its experts are and the hits expected.
void describeExperts(PlanResult& r, const PlannerInput& in, const Setup& s)
{
    const std::vector<Tensor>& ts = s.model->tensors();
    const LlamaConfig& c = in.model->config();
    std::vector<Tier> tiers;
    for (const TensorPlacement& t : r.placement.tensors) tiers.push_back(t.tier);
    const std::vector<char> cached = expertCacheUnits(ts, tiers, c.nLayers + 1);
    int perTier[3] = {}, split = 0, servedLayers = 0, hostExperts = 0, fewest = 0, most = 0;
    double hits = 0, fromHost = 0;
    for (int l = 0; l < c.nLayers; ++l) {
        ExpertLayerPlan x;
        x.layer = l;
        int tier = -1;
        for (size_t i = 0; i < ts.size(); ++i)
            if (ts[i].unit == l && ts[i].expertStack)
                tier = tier == -1 || tier == int(tiers[i]) ? int(tiers[i]) : 3;
        if (tier < 0) continue;
        x.cached = cached[size_t(l)] != 0;
        if (x.cached) {
            const std::vector<double>& q = s.expertRates[size_t(l)];
            const std::vector<double>& misses = s.expertMisses[size_t(l)];
            const ExpertPlacement* p = r.placement.expertsOf(l);
            x.deviceSlots = s.expertSlots[size_t(l)];
            fewest = servedLayers ? std::min(fewest, x.deviceSlots) : x.deviceSlots;
            most = std::max(most, x.deviceSlots);
            x.hostExperts = p ? int(p->host.size()) : 0;
            x.ssdExperts = c.nExperts - x.hostExperts;
            x.hitRate = hitRate(q, misses);
            if (p)
                for (int e : p->host) x.hostRate += misses[size_t(e)] / double(c.nExpertsUsed);
            ++servedLayers;
            hostExperts += x.hostExperts;
            hits += x.hitRate;
            fromHost += x.hostRate;
        } else if (tier < 3) {
            x.tier = Tier(tier);
            ++perTier[tier];
        } else {
            x.split = true;
            ++split;
        }
        r.expertLayers.push_back(x);
    }
    const RoutingProfile* routing = usableRouting(in);
    r.routing = routing ? "measured (" + routing->source + ", " + std::to_string(routing->tokens) + " tokens)"
                        : "uniform (no routing profile: the worst case for a cache)";
    const std::string slots =
        fewest == most ? std::to_string(servedLayers ? most : c.expertSlots(in.expertSlots)) + " slots per layer"
                       : std::to_string(fewest) + " to " + std::to_string(most) + " slots per layer, by the routing";
    char note[700];
    std::snprintf(note, sizeof note,
                  "experts (%d per token of %d per layer): all on the device in %d layers, in RAM (streamed whole) in "
                  "%d, split across tiers (streamed whole) in %d, through the expert cache in %d (%s; "
                  "%d experts in RAM in all; %.1f%% of the choices expected in slots, %.1f%% in RAM); routing %s",
                  c.nExpertsUsed, c.nExperts, perTier[int(Tier::Device)], perTier[int(Tier::Host)], split,
                  servedLayers, slots.c_str(), hostExperts, servedLayers ? 100.0 * hits / servedLayers : 0.0,
                  servedLayers ? 100.0 * fromHost / servedLayers : 0.0, r.routing.c_str());
    r.notes.push_back(note);
}

// Scales the probe's prediction by what earlier runs of this regime measured (calibration.h): the
// whole token by the rows of its bottleneck lane, each lane by its own rows.
void calibrate(PlanResult& r, const PlannerInput& in)
{
    r.probeLanes = r.lanes;
    r.probeSecondsPerToken = r.secondsPerToken;
    uint64_t weights = 0;
    for (const auto& t : r.placement.tensors) weights += t.bytes;
    r.sizeClass = hw::modelSizeClass(weights);
    std::map<gpu::DType, uint64_t> byType;
    for (const auto& t : r.placement.tensors)
        if (const ModelTensor* m = in.model->tensor(t.name)) byType[m->type] += t.bytes;
    const auto most = std::max_element(byType.begin(), byType.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    r.weightFormat = most == byType.end() ? std::string() : gpu::dtypeName(most->first);
    if (!in.neuronCache.empty()) r.weightFormat += "+neuron-cache";
    if (in.model->config().moe()) r.weightFormat += "+experts";
    const std::pair<const char*, double LaneTimes::*> lanes[] = {
        {"ssd", &LaneTimes::ssdRead},      {"copy", &LaneTimes::hostToDevice}, {"decompress", &LaneTimes::decompress},
        {"device", &LaneTimes::deviceCompute}, {"cpu", &LaneTimes::cpuCompute}};
    double slowest = -1;
    for (const auto& [name, lane] : lanes)
        if (r.lanes.*lane > slowest) {
            slowest = r.lanes.*lane;
            r.bottleneck = name;
        }
    for (const auto& [name, lane] : lanes)
        r.lanes.*lane *= hw::calibrationFor(in.profile, in.backend, name, r.sizeClass, r.weightFormat).ratio;
    const hw::Calibration token =
        hw::calibrationFor(in.profile, in.backend, "token/" + r.bottleneck, r.sizeClass, r.weightFormat);
    r.secondsPerToken *= token.ratio;
    r.calibrationRuns = token.runs;
    if (token.runs > 0) {
        auto rate = [](double tps) {
            char t[32];
            std::snprintf(t, sizeof t, tps >= 100 ? "%.0f" : "%.3g", tps);
            return std::string(t);
        };
        char note[200];
        std::snprintf(note, sizeof note, "calibrated by %d run%s on this machine: %s tokens/s, the probe alone says %s",
                      token.runs, token.runs == 1 ? "" : "s", rate(r.tokensPerSecond()).c_str(),
                      rate(r.probeSecondsPerToken > 0 ? 1.0 / r.probeSecondsPerToken : 0.0).c_str());
        r.notes.push_back(note);
    }
    if (!in.profile.suspect.empty()) r.notes.push_back("the hardware profile looks wrong: " + in.profile.suspect);
    if (!in.profile.busy.empty())
        r.notes.push_back("the hardware was measured on a busy machine (" + in.profile.busy +
                          "): it is measured again once the machine is quiet");
}

PlanResult finish(const Setup& s, const PlannerInput& in, std::vector<TensorPlacement> list, const Evaluation& e,
                  std::vector<ExpertPlacement> experts = {})
{
    PlanResult r;
    r.placement.tensors = std::move(list);
    r.placement.experts = std::move(experts);
    r.placement.prefetchDepth = std::max(0, e.slots - 1);
    if (in.prefetchDepth == 0) r.placement.prefetchDepth = 0;
    r.placement.directToDevice = true;
    r.placement.mapInPlace = false;
    r.deviceName = s.hw.deviceName;
    r.vramBudget = s.vram;
    r.ramBudget = s.ram;
    r.deviceWeightBytes = e.residentBytes;
    r.slotCount = e.slots;
    r.deviceSlotBytes = e.slotBytes * uint64_t(e.slots);
    r.deviceWorkingBytes = s.fixed;
    r.kvType = in.kvType;
    r.kvCacheBytes = kvCacheBytes(in.model->config(), in.contextLength, in.kvType, in.batch);
    r.recurrentStateBytes = recurrentStateBytes(in.model->config());
    r.stateSnapshotBytes = s.fixedHost;
    r.hostWeightBytes = e.hostBytes;
    r.stagingBytes = e.stagingBytes;
    r.ssdBytes = e.ssdBytes;
    r.lanes = e.lanes;
    r.secondsPerToken = e.secondsPerToken;
    const auto& ts = s.model->tensors();
    for (size_t i = 0; i < r.placement.tensors.size(); ++i) {
        TensorCost cost;
        const Tensor& t = ts[i];
        cost.computeSeconds = t.compute;
        cost.copySeconds = double(t.bytes) / s.hw.copy;
        cost.ssdSeconds = double(t.bytes) / s.hw.ssd;
        if (t.expertStack) cost.ssdSeconds = t.missBytes / s.hw.ssd;  // through the expert cache
        // HeteGen Eq. 9: α ≈ T'cpu / (T'cpu + max(T'pin, T'trans)), the device's share of rows.
        if (s.hw.cpuMatvec > 0 && !s.hw.directToDevice && t.splittable) {
            const double cpu = double(t.bytes) / s.hw.cpuMatvec;
            cost.hetegenAlpha = cpu / (cpu + cost.copySeconds);
        }
        r.costs.push_back(cost);
        auto& placed = r.placement.tensors[i];
        if (placed.tier == Tier::Host && !s.hw.directToDevice && cost.hetegenAlpha < 1.0)
            placed.deviceFraction = cost.hetegenAlpha;
    }
    if (in.model->config().moe()) describeExperts(r, in, s);
    calibrate(r, in);
    if (s.hw.directToDevice)
        r.notes.push_back("the device computes on host memory: SSD reads land in device slots directly, and a "
                          "CPU/device split (HeteGen α) gains nothing, so α = 1 everywhere");
    if (!in.served.empty())
        r.notes.push_back(std::to_string(in.served.size()) + " FFN matrices are served by the neuron cache (" +
                          std::to_string(in.reservedDeviceBytes >> 20) +
                          " MiB of device memory set aside for its slots), not placed");
    return r;
}

int slotsFor(int prefetchDepth) { return prefetchDepth <= 0 ? 1 : prefetchDepth + 1; }

// How an error names a given placement: "every weight in RAM" when it is uniform.
std::string placementName(const std::vector<Tier>& tiers)
{
    if (tiers.empty() || std::any_of(tiers.begin(), tiers.end(), [&](Tier t) { return t != tiers.front(); }))
        return "the given placement";
    switch (tiers.front()) {
    case Tier::Device: return "every weight on the device";
    case Tier::Host: return "every weight in RAM";
    case Tier::Ssd: return "streaming every weight from the SSD";
    }
    return "the given placement";
}

// Evaluates `tiers`, lowering `slots` (the prefetch depth, one slot at a time; one note) until the
// memory fits the budgets; an error naming what `what` needs when even one slot does not fit.
Result<Evaluation> fitToBudgets(const Setup& s, const std::vector<Tier>& tiers, int& slots, const std::string& what,
                                std::vector<std::string>& notes)
{
    const CostModel& cm = *s.model;
    auto fits = [&](const Evaluation& e) { return cm.deviceTotal(e) <= s.vram && cm.hostTotal(e) <= s.ram; };
    const int asked = slots;
    Evaluation e = cm.evaluate(tiers, slots);
    while (!fits(e) && slots > 1) {
        --slots;
        e = cm.evaluate(tiers, slots);
    }
    if (slots < asked)
        notes.push_back("prefetch depth lowered from " + std::to_string(asked - 1) + " to " + std::to_string(slots - 1) +
                        " to fit the budgets");
    if (fits(e)) return e;
    std::string parts = "KV cache and activations " + mib(s.fixed);
    if (e.residentBytes) parts += ", resident weights " + mib(e.residentBytes);
    if (e.slotBytes) parts += ", one slot " + mib(e.slotBytes);
    return makeError(ErrorCode::OutOfDeviceMemory,
                     "the budgets are too small for this model: " + what + " needs " + mib(cm.deviceTotal(e)) +
                         " of device memory (" + parts + ") and " + mib(cm.hostTotal(e)) +
                         " of RAM; the budgets are " + mib(s.vram) + " and " + mib(s.ram));
}

// The experts of the layers the expert cache serves under `tiers`: each layer's slots (the same
// count in each, or divided among them by the routing where that is predicted faster and fits
// the device budget; a layer `given` names keeps its count), the hottest experts to fill them at
// start (where the routing is measured), and with `useRam`, the RAM left in the budget for the
// experts expected to miss most often (over all those layers; each one a copy instead of an SSD
// read when it misses); a layer `given` names keeps what it says. The cost model takes the
// slots and the split; `e` is evaluated again.
std::vector<ExpertPlacement> placeExperts(Setup& s, const PlannerInput& in, const std::vector<Tier>& tiers,
                                          int slots, bool useRam, Evaluation& e, const Placement* given = nullptr)
{
    const LlamaConfig& c = in.model->config();
    if (!c.moe()) return {};
    CostModel& cm = *s.model;
    const std::vector<Tensor>& ts = cm.tensors();
    const std::vector<char> cached = expertCacheUnits(ts, tiers, c.nLayers + 1);
    const RoutingProfile* routing = usableRouting(in);
    struct Layer {
        int layer = 0;
        std::vector<size_t> stacks;
        uint64_t expertBytes = 0;
        const ExpertPlacement* named = nullptr;
    };
    std::vector<Layer> layers;
    for (int l = 0; l < c.nLayers; ++l) {
        if (!cached[size_t(l)]) continue;
        Layer L;
        L.layer = l;
        for (size_t i = 0; i < ts.size(); ++i)
            if (ts[i].unit == l && ts[i].expertStack) {
                L.stacks.push_back(i);
                L.expertBytes += expertPartBytes(ts[i], c.nExperts);
            }
        if (L.stacks.empty()) continue;
        L.named = given ? given->expertsOf(l) : nullptr;
        layers.push_back(std::move(L));
    }
    if (layers.empty()) return {};

    // The placement of the served layers' experts under per-layer slot counts, costed in `e`.
    const auto place = [&](const std::vector<int>& counts) {
        std::vector<ExpertPlacement> out;
        for (size_t k = 0; k < layers.size(); ++k) {
            const Layer& L = layers[k];
            s.expertSlots[size_t(L.layer)] = counts[k];
            s.expertMisses[size_t(L.layer)] = expectedMisses(s.expertRates[size_t(L.layer)], counts[k]);
            for (size_t i : L.stacks)
                cm.setExpertSlots(i, uint64_t(double(ts[i].bytes) / double(c.nExperts) * double(counts[k])));
            ExpertPlacement p;
            p.layer = L.layer;
            if (L.named) {
                p = *L.named;
                std::erase_if(p.host, [&](int x) { return x < 0 || x >= c.nExperts; });
            } else {
                p.slotCount = counts[k];
                if (routing) {
                    const std::vector<int> hot = routing->hottest(L.layer);
                    p.device.assign(hot.begin(), hot.begin() + p.slotCount);
                }
            }
            out.push_back(std::move(p));
        }
        for (size_t k = 0; k < layers.size(); ++k)
            for (size_t i : layers[k].stacks) cm.setExpertSplit(i, 0, 0, 0);
        e = cm.evaluate(tiers, slots);
        if (useRam) {
            // Most expected misses first; among equal ones (uniform routing) the layers take turns,
            // so that no layer keeps all its experts in RAM while another keeps none.
            struct Candidate { double misses; int rank; size_t layer; int expert; };
            std::vector<Candidate> order;
            for (size_t k = 0; k < layers.size(); ++k) {
                const size_t first = order.size();
                for (int x = 0; x < c.nExperts; ++x)
                    if (const double m = s.expertMisses[size_t(layers[k].layer)][size_t(x)]; m > 0)
                        order.push_back({m, 0, k, x});
                std::stable_sort(order.begin() + long(first), order.end(),
                                 [](const Candidate& a, const Candidate& b) { return a.misses > b.misses; });
                for (size_t i = first; i < order.size(); ++i) order[i].rank = int(i - first);
            }
            std::stable_sort(order.begin(), order.end(), [](const Candidate& a, const Candidate& b) {
                return a.misses > b.misses || (a.misses == b.misses && a.rank < b.rank);
            });
            const uint64_t used = cm.hostTotal(e);
            uint64_t left = s.ram > used ? s.ram - used : 0;
            for (const Candidate& x : order) {
                if (left < layers[x.layer].expertBytes) break;
                out[x.layer].host.push_back(x.expert);
                left -= layers[x.layer].expertBytes;
            }
        }
        for (size_t k = 0; k < layers.size(); ++k) {
            std::sort(out[k].host.begin(), out[k].host.end());
            out[k].host.erase(std::unique(out[k].host.begin(), out[k].host.end()), out[k].host.end());
            std::vector<double>& misses = s.expertMisses[size_t(layers[k].layer)];
            if (s.hw.directToDevice && !out[k].host.empty()) {
                // A device that computes on host memory uses the RAM's experts where they are:
                // they never take a slot (every choice of one is served from RAM), and the slots
                // are a cache of the other experts alone, first filled with the hottest of those
                // (without a routing profile, with the first of them: where they fit in the
                // slots, no token reads one).
                if (!layers[k].named) {
                    std::vector<int>& warm = out[k].device;
                    warm.clear();
                    std::vector<int> order(size_t(c.nExperts));
                    std::iota(order.begin(), order.end(), 0);
                    if (routing) order = routing->hottest(layers[k].layer);
                    for (int x : order)
                        if (int(warm.size()) < out[k].slotCount &&
                            !std::binary_search(out[k].host.begin(), out[k].host.end(), x))
                            warm.push_back(x);
                }
                std::vector<double> others = s.expertRates[size_t(layers[k].layer)];
                for (int x : out[k].host) others[size_t(x)] = 0.0;
                const int slotCount = out[k].slotCount > 0 ? out[k].slotCount : counts[k];
                std::vector<double> slotMisses = expectedMisses(others, slotCount);
                for (int x : out[k].host) slotMisses[size_t(x)] = s.expertRates[size_t(layers[k].layer)][size_t(x)];
                misses = std::move(slotMisses);
            }
            double ssd = 0, ram = 0;
            for (int x = 0; x < c.nExperts; ++x)
                (std::binary_search(out[k].host.begin(), out[k].host.end(), x) ? ram : ssd) += misses[size_t(x)];
            for (size_t i : layers[k].stacks) {
                const double part = double(ts[i].bytes) / double(c.nExperts);
                cm.setExpertSplit(i, ssd * part, ram * part, expertPartBytes(ts[i], c.nExperts) * out[k].host.size());
            }
        }
        e = cm.evaluate(tiers, slots);
        return out;
    };

    // A named layer keeps its count (none: the session's, as the runtime takes it).
    std::vector<int> served, even;
    for (const Layer& L : layers) {
        served.push_back(L.layer);
        even.push_back(L.named && L.named->slotCount > 0 ? c.expertSlots(L.named->slotCount) : c.expertSlots(in.expertSlots));
    }
    std::vector<int> divided = divideExpertSlots(s, in, served);
    for (size_t k = 0; k < layers.size(); ++k)
        if (layers[k].named) divided[k] = even[k];
    std::vector<ExpertPlacement> out = place(even);
    if (divided != even) {
        const Evaluation evenCost = e;
        std::vector<ExpertPlacement> shaped = place(divided);
        if (cm.deviceTotal(e) <= s.vram && e.secondsPerToken <= evenCost.secondsPerToken) return shaped;
        out = place(even);
    }
    return out;
}

}  // namespace

Result<PlanResult> predictPlacement(const PlannerInput& in, const Placement& placement)
{
    auto s = setUp(in);
    if (!s) return s.error();
    std::vector<Tier> tiers;
    for (const auto& t : s->list) {
        const TensorPlacement* p = placement.find(t.name);
        tiers.push_back(p ? p->tier : Tier::Device);
    }
    std::vector<std::string> notes;
    int slots = slotsFor(placement.prefetchDepth);
    Result<Evaluation> e = fitToBudgets(*s, tiers, slots, placementName(tiers), notes);
    if (!e) return e.error();
    // A given placement keeps its experts' RAM as given (none where it names none).
    std::vector<ExpertPlacement> experts = placeExperts(*s, in, tiers, slots, false, *e, &placement);
    std::vector<TensorPlacement> list = s->list;
    for (size_t i = 0; i < list.size(); ++i) {
        list[i].tier = tiers[i];
        list[i].reason = "given";
    }
    PlannerInput copy = in;
    copy.prefetchDepth = placement.prefetchDepth;
    if (s->model->hostTotal(*e) > s->ram)
        return makeError(ErrorCode::InvalidArgument, "the given placement keeps more experts in RAM (" +
                                                         mib(s->model->hostTotal(*e)) + " in all) than the RAM budget (" +
                                                         mib(s->ram) + ")");
    PlanResult r = finish(*s, copy, std::move(list), *e, std::move(experts));
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    r.placement.prefetchDepth = placement.prefetchDepth > 0 ? slots - 1 : 0;
    r.placement.mapInPlace = placement.mapInPlace;
    r.placement.directToDevice = placement.directToDevice;
    return r;
}

Result<PlanResult> planPlacement(const PlannerInput& in)
{
    auto setup = setUp(in);
    if (!setup) return setup.error();
    Setup& s = *setup;
    const CostModel& cm = *s.model;
    const size_t n = s.list.size();
    std::vector<Tier> tiers(n, Tier::Ssd);
    std::vector<std::string> reasons(n);
    int slots = slotsFor(in.prefetchDepth);
    auto fits = [&](const Evaluation& e) { return cm.deviceTotal(e) <= s.vram && cm.hostTotal(e) <= s.ram; };

    std::vector<std::string> notes;
    Result<Evaluation> fitted = fitToBudgets(s, tiers, slots, "streaming everything from the SSD", notes);
    if (!fitted) return fitted.error();
    Evaluation base = *fitted;

    // Greedy by gain per byte. Tensors of one role (say ffn_gate) in different layers cost and
    // save the same, so one candidate per role and tier: the lowest layer still to move. A layer's
    // expert stacks move together: one alone would leave the other two streamed whole (the
    // expert cache takes a layer only with all three on the SSD), a loss no single move repays.
    const auto& ts = cm.tensors();
    const auto moveTogether = [&](std::vector<Tier>& into, size_t i, Tier to) {
        const Tier from = into[i];
        if (!ts[i].expertStack) {
            into[i] = to;
            return;
        }
        for (size_t j = 0; j < n; ++j)
            if (ts[j].expertStack && ts[j].unit == ts[i].unit && into[j] == from) into[j] = to;
    };
    for (int step = 1;; ++step) {
        struct Candidate { size_t index; Tier to; double perByte; double gain; uint64_t cost; };
        Candidate best{0, Tier::Ssd, 0, 0, 0};
        bool found = false;
        std::map<std::pair<std::string, int>, bool> tried;
        for (size_t i = 0; i < n; ++i) {
            if (tiers[i] == Tier::Device) continue;
            if (!tried.emplace(std::make_pair(ts[i].role, int(tiers[i])), true).second) continue;
            for (Tier to : {Tier::Device, Tier::Host}) {
                if (to == Tier::Host && tiers[i] != Tier::Ssd) continue;
                if (to == Tier::Host && ts[i].unit < 0) continue;  // the embedding gains nothing in RAM
                std::vector<Tier> next = tiers;
                moveTogether(next, i, to);
                const Evaluation e = cm.evaluate(next, slots);
                if (!fits(e)) continue;
                const double gain = (base.secondsPerToken - e.secondsPerToken) + 1e-3 * (base.loadSum - e.loadSum);
                if (gain <= 0) continue;
                const int64_t used = to == Tier::Device ? int64_t(cm.deviceTotal(e)) - int64_t(cm.deviceTotal(base))
                                                        : int64_t(cm.hostTotal(e)) - int64_t(cm.hostTotal(base));
                const uint64_t cost = uint64_t(std::max<int64_t>(used, 1));
                const double perByte = gain / double(cost);
                if (!found || perByte > best.perByte) {
                    best = {i, to, perByte, gain, cost};
                    found = true;
                }
            }
        }
        if (!found) break;
        const std::vector<Tier> before = tiers;
        moveTogether(tiers, best.index, best.to);
        base = cm.evaluate(tiers, slots);
        char buf[200];
        std::snprintf(buf, sizeof buf, "step %d: saves %.3g ms/token for %s of %s (%.3f ms per GiB)", step,
                      best.gain * 1e3, mib(best.cost).c_str(), best.to == Tier::Device ? "VRAM" : "RAM",
                      best.gain * 1e3 / (double(best.cost) / double(1 << 30)));
        for (size_t j = 0; j < n; ++j)
            if (tiers[j] != before[j]) reasons[j] = buf;  // with a layer's expert stacks, all three
    }
    // The experts the cache serves: the slots' first fill, and the RAM left to the likeliest misses.
    std::vector<ExpertPlacement> experts = placeExperts(s, in, tiers, slots, true, base);
    std::vector<TensorPlacement> list = s.list;
    for (size_t i = 0; i < n; ++i) {
        list[i].tier = tiers[i];
        if (!reasons[i].empty()) {
            list[i].reason = reasons[i];
        } else if (ts[i].unit < 0) {
            list[i].reason = "one row per token, read from the mapped file";
        } else {
            list[i].reason = "no budget left where it would save time (device " + mib(cm.deviceTotal(base)) + " of " +
                             mib(s.vram) + ", RAM " + mib(cm.hostTotal(base)) + " of " + mib(s.ram) + ")";
        }
    }
    PlanResult r = finish(s, in, std::move(list), base, std::move(experts));
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    return r;
}

}  // namespace spillway::plan
