#include "core/runtime/weight_streamer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <sys/stat.h>
#include <vector>

#include "core/formats/gguf.h"
#include "core/trace/trace.h"
#include "storage/direct_io.h"

namespace spillway {

namespace {

constexpr size_t kAlign = 4096;             // direct I/O granularity and slot alignment
constexpr uint64_t kMergeGap = 256 << 10;   // SSD tensors closer than this are read as one range

size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

using LayerMember = gpu::MatrixView LlamaLayerWeights::*;
struct MemberName {
    LayerMember member;
    const char* suffix;
};
constexpr MemberName kMembers[] = {
    {&LlamaLayerWeights::wq, "attn_q.weight"},     {&LlamaLayerWeights::wk, "attn_k.weight"},
    {&LlamaLayerWeights::wv, "attn_v.weight"},     {&LlamaLayerWeights::wo, "attn_output.weight"},
    {&LlamaLayerWeights::gate, "ffn_gate.weight"}, {&LlamaLayerWeights::up, "ffn_up.weight"},
    {&LlamaLayerWeights::down, "ffn_down.weight"},
};

uint64_t matrixBytes(const gpu::MatrixView& m) { return uint64_t(m.rowStride) * uint64_t(m.rows); }

}  // namespace

// One streaming unit: a layer's matrices or the output head.
struct Unit {
    LlamaLayerWeights layer;    // resident views filled in; streamed ones patched per slot
    gpu::MatrixView head;
    struct Range { uint64_t fileOffset; size_t bytes; size_t slotOffset; uint64_t needEnd; };  // one direct read
    struct HostCopy { const void* host; size_t bytes; size_t slotOffset; size_t allBytes; };  // one upload
    struct Patch { LayerMember member; size_t slotOffset; };                  // member == nullptr: head
    struct Split { LayerMember member; int64_t deviceRows; size_t hostCopy; };  // index into hostCopies
    std::vector<Range> ranges;
    std::vector<Split> splits;
    std::vector<HostCopy> hostCopies;
    std::vector<Patch> patches;
    size_t slotBytes = 0;
    uint64_t ssdBytes = 0;
    bool streamed() const { return !patches.empty(); }
};

struct WeightStreamer::Impl {
    const LlamaModel* model = nullptr;
    gpu::Device* device = nullptr;
    StreamerOptions options;
    int layers = 0;
    std::vector<Unit> units;             // layers..., head
    std::vector<int> order;              // streamed units in use order
    std::vector<gpu::Buffer> resident;   // device-tier weights and norms
    std::vector<gpu::Buffer> hostMemory; // RAM-tier weights (pinned)
    std::vector<gpu::Buffer> slots;
    gpu::Buffer staging;                 // pinned; empty when SSD reads go into the slot
    gpu::Buffer embeddingRow;            // one row of a non-resident embedding, device memory
    gpu::MatrixView embedding;           // resident or mapped
    bool embeddingResident = false;
    std::unique_ptr<storage::DirectFile> file;
    std::unique_ptr<storage::DirectReader> reader;
    bool directToDevice = false;

    // Working views of the unit most recently acquired.
    LlamaLayerWeights current;
    gpu::MatrixView currentHead;
    std::vector<HostRows> currentSplits;
    bool anySplit = false;

    // Loader/compute hand-off. Sequence numbers count streamed-unit uses from 0.
    std::mutex mutex;
    std::condition_variable changed;
    int64_t readySeq = -1;     // loads done up to here (the loader fills in order)
    int64_t releasedSeq = -1;  // uses finished up to here
    int64_t useSeq = 0;        // next use
    bool stopping = false;
    Status failure;            // sticky loader error
    std::thread loader;
    std::atomic<uint32_t> pass{0};
    std::atomic<uint64_t> ssdBytes{0}, uploadBytes{0}, stallNs{0}, unitLoads{0};

    ~Impl()
    {
        {
            std::lock_guard lock(mutex);
            stopping = true;
        }
        changed.notify_all();
        if (loader.joinable()) loader.join();
    }

    void span(trace::Lane lane, int layer, const char* op, uint64_t bytes, uint64_t t0)
    {
        if (options.trace)
            options.trace->record({lane, layer, op, bytes, t0, trace::nowNs(), pass.load(std::memory_order_relaxed)});
    }

    // Fills `slot` with unit u's streamed weights.
    Status load(int u, gpu::Buffer& slot)
    {
        Unit& unit = units[size_t(u)];
        uint8_t* base = slot.as<uint8_t>();
        const int layer = u < layers ? u : -1;
        if (!unit.ranges.empty()) {
            // The reader zero-fills past the end of the file (an aligned range may pass it), so a
            // file truncated under us must be caught here rather than read as zeros.
            struct stat st {};
            if (fstat(file->fd(), &st) != 0 || uint64_t(st.st_size) < unit.ranges.back().needEnd)
                return makeError(ErrorCode::ModelFileInvalid,
                                 model->path() + ": the file changed size while the model was running "
                                                 "(truncated?); stop and reload the model");
        }
        for (const auto& r : unit.ranges) {
            uint8_t* dst = directToDevice ? base + r.slotOffset : staging.as<uint8_t>();
            uint64_t t0 = trace::nowNs();
            SPILLWAY_TRY(reader->read(*file, r.fileOffset, r.bytes, dst));
            span(trace::Lane::SsdRead, layer, "read", r.bytes, t0);
            ssdBytes.fetch_add(r.bytes, std::memory_order_relaxed);
            if (!directToDevice) {
                t0 = trace::nowNs();
                device->upload(base + r.slotOffset, dst, r.bytes);
                span(trace::Lane::HostToDevice, layer, "copy", r.bytes, t0);
                uploadBytes.fetch_add(r.bytes, std::memory_order_relaxed);
            }
        }
        for (const auto& c : unit.hostCopies) {
            const uint64_t t0 = trace::nowNs();
            device->upload(base + c.slotOffset, c.host, c.bytes);
            span(trace::Lane::HostToDevice, layer, "copy", c.bytes, t0);
            uploadBytes.fetch_add(c.bytes, std::memory_order_relaxed);
        }
        unitLoads.fetch_add(1, std::memory_order_relaxed);
        return {};
    }

    void loaderLoop()
    {
        const int64_t n = int64_t(order.size());
        const int64_t s = int64_t(slots.size());
        for (int64_t seq = 0;; ++seq) {
            {
                std::unique_lock lock(mutex);
                changed.wait(lock, [&] { return stopping || releasedSeq >= seq - s; });
                if (stopping) return;
            }
            Status st = load(order[size_t(seq % n)], slots[size_t(seq % s)]);
            {
                std::lock_guard lock(mutex);
                if (!st) {
                    failure = st;
                    changed.notify_all();
                    return;
                }
                readySeq = seq;
            }
            changed.notify_all();
        }
    }

    // Waits for the next streamed unit (which must be u) and patches its views.
    Status acquire(int u)
    {
        Unit& unit = units[size_t(u)];
        current = unit.layer;
        currentHead = unit.head;
        currentSplits.clear();  // capacity reserved at creation: no allocation here
        if (!unit.streamed()) return {};
        const int64_t seq = useSeq;
        const size_t n = order.size();
        if (order[size_t(seq) % n] != u)
            return makeError(ErrorCode::Internal, "weight streamer: unit " + std::to_string(u) +
                                                      " acquired out of order");
        gpu::Buffer& slot = slots[size_t(seq) % slots.size()];
        if (loader.joinable()) {
            std::unique_lock lock(mutex);
            if (readySeq < seq) {
                const uint64_t t0 = trace::nowNs();
                changed.wait(lock, [&] { return readySeq >= seq || bool(!failure); });
                const uint64_t waited = trace::nowNs() - t0;
                stallNs.fetch_add(waited, std::memory_order_relaxed);
                if (options.trace)
                    options.trace->record({trace::Lane::Stall, u < layers ? u : -1, "wait", 0, t0,
                                           t0 + waited, pass.load(std::memory_order_relaxed)});
                if (readySeq < seq) return failure;
            }
        } else {
            SPILLWAY_TRY(load(u, slot));  // naive: load now, on this thread
        }
        uint8_t* base = slot.as<uint8_t>();
        for (const auto& p : unit.patches) {
            gpu::MatrixView& view = p.member ? current.*(p.member) : currentHead;
            view.data = base + p.slotOffset;
        }
        for (const auto& sp : unit.splits) {
            gpu::MatrixView& view = sp.member ? current.*(sp.member) : currentHead;
            HostRows h;
            h.deviceRows = sp.deviceRows;
            h.host = view;
            h.host.data = static_cast<const uint8_t*>(unit.hostCopies[sp.hostCopy].host) +
                          size_t(sp.deviceRows) * view.rowStride;
            h.host.rows = view.rows - sp.deviceRows;
            view.rows = sp.deviceRows;
            h.deviceData = view.data;
            currentSplits.push_back(h);
        }
        return {};
    }

    void releaseUnit(int u)
    {
        if (!units[size_t(u)].streamed()) return;
        device->synchronize();  // the slot's ops must finish before it is refilled
        {
            std::lock_guard lock(mutex);
            releasedSeq = useSeq;
            ++useSeq;
        }
        changed.notify_all();
    }
};

namespace {

struct TensorSource {
    std::string name;
    gpu::MatrixView view;   // into the mapping
    uint64_t fileOffset = 0;
};

// Lays unit `unit`'s tensors out: resident ones go to `residentList`, streamed ones get slot
// offsets (SSD ranges first, merged when close in the file; then RAM-tier copies).
struct UnitBuilder {
    std::vector<std::pair<TensorSource, Unit::Patch>> ssd, host, device;
};

}  // namespace

Result<std::unique_ptr<WeightStreamer>> WeightStreamer::create(const LlamaModel& model, gpu::Device& device,
                                                               const plan::Placement& placement,
                                                               const StreamerOptions& options)
{
    auto s = std::unique_ptr<WeightStreamer>(new WeightStreamer());
    s->m_impl = std::make_unique<Impl>();
    Impl& im = *s->m_impl;
    im.model = &model;
    im.device = &device;
    im.options = options;
    const LlamaConfig& c = model.config();
    const LlamaWeights& w = model.weights();
    const gguf::File& f = model.file();
    im.layers = c.nLayers;
    im.units.resize(size_t(c.nLayers) + 1);
    const bool hostPointers = device.info().caps.hostPointers;
    const bool inPlace = placement.mapInPlace && hostPointers;
    im.directToDevice = placement.directToDevice && hostPointers;

    auto tierOf = [&](const std::string& name) -> Result<plan::Tier> {
        const auto* t = placement.find(name);
        if (!t) return makeError(ErrorCode::InvalidArgument, "placement has no entry for tensor '" + name + "'");
        if (t->deviceFraction < 1.0 && (t->tier != plan::Tier::Host || !(t->deviceFraction >= 0.0)))
            return makeError(ErrorCode::InvalidArgument,
                             "tensor '" + name + "': only RAM-tier tensors can be split between CPU and device");
        return t->tier;
    };
    auto fractionOf = [&](const std::string& name) {
        const auto* t = placement.find(name);
        return t ? t->deviceFraction : 1.0;
    };
    auto sourceOf = [&](const std::string& name, const gpu::MatrixView& view) {
        const auto* info = f.tensor(name);
        return TensorSource{name, view, f.dataOffset() + (info ? info->offset : 0)};
    };
    const bool tied = f.tensor("output.weight") == nullptr;

    // Group every matrix by unit and tier.
    std::vector<UnitBuilder> builders(im.units.size());
    for (int l = 0; l < c.nLayers; ++l) {
        const LlamaLayerWeights& L = w.layers[size_t(l)];
        im.units[size_t(l)].layer = L;
        for (const auto& m : kMembers) {
            const std::string name = "blk." + std::to_string(l) + "." + m.suffix;
            auto tier = tierOf(name);
            if (!tier) return tier.error();
            auto entry = std::make_pair(sourceOf(name, L.*(m.member)), Unit::Patch{m.member, 0});
            auto& b = builders[size_t(l)];
            (*tier == plan::Tier::Device ? b.device : *tier == plan::Tier::Host ? b.host : b.ssd).push_back(entry);
        }
    }
    const std::string headName = tied ? "token_embd.weight" : "output.weight";
    auto headTier = tierOf(headName);
    if (!headTier) return headTier.error();
    {
        im.units.back().head = w.output;
        auto entry = std::make_pair(sourceOf(headName, w.output), Unit::Patch{nullptr, 0});
        auto& b = builders.back();
        (*headTier == plan::Tier::Device ? b.device : *headTier == plan::Tier::Host ? b.host : b.ssd).push_back(entry);
    }
    auto embTier = tierOf("token_embd.weight");
    if (!embTier) return embTier.error();

    // Host budget first (nothing allocated yet): RAM-tier weights and the staging buffer.
    uint64_t hostBytes = 0, maxSsdBytes = 0;
    for (size_t u = 0; u < builders.size(); ++u) {
        uint64_t ssd = 0;
        for (auto& e : builders[u].host) hostBytes += matrixBytes(e.first.view);
        for (auto& e : builders[u].ssd) ssd += matrixBytes(e.first.view) + 2 * kAlign;
        maxSsdBytes = std::max(maxSsdBytes, ssd);
    }
    // SSD ranges and slot layout per unit.
    uint64_t maxSlot = 0;
    for (size_t u = 0; u < builders.size(); ++u) {
        Unit& unit = im.units[u];
        auto& ssd = builders[u].ssd;
        std::sort(ssd.begin(), ssd.end(), [](const auto& a, const auto& b) { return a.first.fileOffset < b.first.fileOffset; });
        size_t cursor = 0;
        for (size_t i = 0; i < ssd.size();) {
            uint64_t begin = ssd[i].first.fileOffset;
            uint64_t end = begin + matrixBytes(ssd[i].first.view);
            size_t j = i + 1;
            while (j < ssd.size() && ssd[j].first.fileOffset <= end + kMergeGap) {
                end = std::max(end, ssd[j].first.fileOffset + matrixBytes(ssd[j].first.view));
                ++j;
            }
            const storage::AlignedRange r = storage::alignRange(begin, size_t(end - begin), kAlign);
            unit.ranges.push_back({r.offset, r.bytes, cursor, end});
            unit.ssdBytes += r.bytes;
            for (size_t k = i; k < j; ++k)
                unit.patches.push_back({ssd[k].second.member, cursor + size_t(ssd[k].first.fileOffset - r.offset)});
            cursor += alignUp(r.bytes, kAlign);
            i = j;
        }
        for (auto& e : builders[u].host) {
            const gpu::MatrixView& v = e.first.view;
            const size_t bytes = size_t(matrixBytes(v));
            // HeteGen split: only the device's rows travel; the pinned copy keeps every row.
            const double f = fractionOf(e.first.name);
            const int64_t deviceRows = f >= 1.0 ? v.rows : std::clamp<int64_t>(int64_t(f * double(v.rows) + 0.5), 0, v.rows);
            const size_t copyBytes = size_t(deviceRows) * v.rowStride;
            if (deviceRows < v.rows) {
                unit.splits.push_back({e.second.member, deviceRows, unit.hostCopies.size()});
                im.anySplit = true;
            }
            unit.hostCopies.push_back({v.data, copyBytes, cursor, bytes});  // host pointer fixed below
            unit.patches.push_back({e.second.member, cursor});
            cursor += std::max(alignUp(copyBytes, kAlign), kAlign);  // distinct slot addresses
        }
        unit.slotBytes = cursor;
        maxSlot = std::max<uint64_t>(maxSlot, cursor);
        if (unit.streamed()) im.order.push_back(int(u));
    }
    uint64_t maxRange = 0;
    for (const Unit& u : im.units)
        for (const auto& r : u.ranges) maxRange = std::max<uint64_t>(maxRange, r.bytes);
    const uint64_t stagingBytes = im.directToDevice ? 0 : maxRange;
    (void)maxSsdBytes;
    if (options.hostBudget && hostBytes + stagingBytes > options.hostBudget)
        return makeError(ErrorCode::OutOfMemory,
                         "placement needs " + std::to_string(hostBytes + stagingBytes) +
                             " bytes of pinned RAM (weights " + std::to_string(hostBytes) + ", staging " +
                             std::to_string(stagingBytes) + ") but the RAM budget is " +
                             std::to_string(options.hostBudget));

    // Device-resident weights: one buffer per unit (copied), or the mapping itself (in place).
    auto residentCopy = [&](const void* src, uint64_t bytes) -> Result<const void*> {
        auto b = device.allocate(size_t(bytes));
        if (!b) return b.error();
        device.upload(b->data(), src, size_t(bytes));
        const void* p = b->data();
        im.resident.push_back(std::move(b.value()));
        s->m_memory.residentDeviceBytes += bytes;
        return p;
    };
    for (size_t u = 0; u < builders.size(); ++u) {
        Unit& unit = im.units[u];
        for (auto& e : builders[u].device) {
            gpu::MatrixView& view = e.second.member ? unit.layer.*(e.second.member) : unit.head;
            if (inPlace) continue;  // the view already points into the mapping
            auto p = residentCopy(e.first.view.data, matrixBytes(e.first.view));
            if (!p) return p.error();
            view.data = *p;
        }
    }
    // Norm vectors: always resident.
    {
        const size_t dim = size_t(c.dim);
        if (inPlace) {
            s->m_outputNorm = w.outputNorm;
        } else {
            std::vector<float> all;
            all.reserve((size_t(c.nLayers) * 2 + 1) * dim);
            for (const auto& L : w.layers) {
                all.insert(all.end(), L.attnNorm, L.attnNorm + dim);
                all.insert(all.end(), L.ffnNorm, L.ffnNorm + dim);
            }
            all.insert(all.end(), w.outputNorm, w.outputNorm + dim);
            auto p = residentCopy(all.data(), all.size() * sizeof(float));
            if (!p) return p.error();
            const float* base = static_cast<const float*>(*p);
            for (int l = 0; l < c.nLayers; ++l) {
                im.units[size_t(l)].layer.attnNorm = base + size_t(2 * l) * dim;
                im.units[size_t(l)].layer.ffnNorm = base + size_t(2 * l + 1) * dim;
            }
            s->m_outputNorm = base + size_t(2 * c.nLayers) * dim;
        }
    }
    // Embedding: resident (shared with a tied, device-tier head when possible) or one row at a time.
    im.embedding = w.tokenEmbedding;
    if (*embTier == plan::Tier::Device) {
        im.embeddingResident = true;
        if (!inPlace) {
            if (tied && *headTier == plan::Tier::Device) {
                im.embedding.data = im.units.back().head.data;
            } else {
                auto p = residentCopy(w.tokenEmbedding.data, matrixBytes(w.tokenEmbedding));
                if (!p) return p.error();
                im.embedding.data = *p;
            }
        }
    } else if (!hostPointers || !inPlace) {
        auto b = device.allocate(alignUp(w.tokenEmbedding.rowStride, 64));
        if (!b) return b.error();
        im.embeddingRow = std::move(b.value());
    }

    // RAM tier: pinned copies of the mapped weights.
    for (Unit& unit : im.units) {
        for (auto& hc : unit.hostCopies) {
            auto b = device.allocateHost(hc.allBytes);
            if (!b) return b.error();
            std::memcpy(b->data(), hc.host, hc.allBytes);
            hc.host = b->data();
            im.hostMemory.push_back(std::move(b.value()));
            s->m_memory.hostBytes += hc.allBytes;
        }

    }
    size_t maxSplits = 0;
    for (const Unit& unit : im.units) maxSplits = std::max(maxSplits, unit.splits.size());
    im.currentSplits.reserve(maxSplits);
    // Slots and staging.
    if (!im.order.empty()) {
        const int slotCount = placement.prefetchDepth <= 0 ? 1 : placement.prefetchDepth + 1;
        for (int i = 0; i < slotCount; ++i) {
            auto b = device.allocate(size_t(maxSlot));
            if (!b) return b.error();
            im.slots.push_back(std::move(b.value()));
        }
        s->m_memory.slotBytes = maxSlot;
        s->m_memory.slotCount = slotCount;
        if (stagingBytes) {
            auto b = device.allocateHost(size_t(stagingBytes));
            if (!b) return b.error();
            im.staging = std::move(b.value());
            s->m_memory.stagingBytes = stagingBytes;
        }
        bool needFile = false;
        for (const Unit& u : im.units) needFile = needFile || !u.ranges.empty();
        if (needFile) {
            auto file = storage::DirectFile::open(model.path());
            if (!file) return file.error();
            im.file = std::make_unique<storage::DirectFile>(std::move(file.value()));
            storage::DirectReaderOptions ro;
            ro.queueDepth = options.ioQueueDepth;
            ro.chunkBytes = options.ioChunkBytes;
            auto reader = storage::DirectReader::create(ro);
            if (!reader) return reader.error();
            im.reader = std::move(reader.value());
        }
        if (placement.prefetchDepth > 0) im.loader = std::thread([&im] { im.loaderLoop(); });
    }
    return s;
}

WeightStreamer::~WeightStreamer() = default;

Result<const LlamaLayerWeights*> WeightStreamer::acquireLayer(int layer)
{
    SPILLWAY_TRY(m_impl->acquire(layer));
    return &m_impl->current;
}

Result<const gpu::MatrixView*> WeightStreamer::acquireHead()
{
    SPILLWAY_TRY(m_impl->acquire(m_impl->layers));
    return &m_impl->currentHead;
}

void WeightStreamer::release(int unit) { m_impl->releaseUnit(unit); }

const std::vector<HostRows>& WeightStreamer::hostRows() const { return m_impl->currentSplits; }
bool WeightStreamer::hasSplits() const { return m_impl->anySplit; }

void WeightStreamer::embedding(int token, float* out)
{
    Impl& im = *m_impl;
    if (!im.embeddingRow) {
        im.device->getRow(im.embedding, token, out);
        return;
    }
    // One row from the mapped file to device memory, then converted there.
    const size_t stride = im.embedding.rowStride;
    const auto* src = static_cast<const uint8_t*>(im.embedding.data) + size_t(token) * stride;
    im.device->upload(im.embeddingRow.data(), src, stride);
    gpu::MatrixView row = im.embedding;
    row.data = im.embeddingRow.data();
    row.rows = 1;
    im.device->getRow(row, 0, out);
}

StreamerStats WeightStreamer::stats() const
{
    StreamerStats s;
    s.ssdBytes = m_impl->ssdBytes.load();
    s.uploadBytes = m_impl->uploadBytes.load();
    s.stallNs = m_impl->stallNs.load();
    s.unitLoads = m_impl->unitLoads.load();
    return s;
}

void WeightStreamer::setPass(uint32_t pass) { m_impl->pass.store(pass, std::memory_order_relaxed); }

}  // namespace spillway
