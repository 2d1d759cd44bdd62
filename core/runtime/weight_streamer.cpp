#include "core/runtime/weight_streamer_impl.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/formats/gguf.h"
#include "storage/direct_io.h"

namespace spillway {

namespace {

struct TensorSource {
    std::string name;
    gpu::MatrixView view;   // into the mapping
    uint32_t file = 0;      // index into the model's dataFiles()
    uint64_t fileOffset = 0;
};

// Lays unit `unit`'s tensors out: resident ones go to `residentList`, streamed ones get slot
// offsets (SSD ranges first, merged when close in the file; then RAM-tier copies).
struct UnitBuilder {
    std::vector<std::pair<TensorSource, Unit::Patch>> ssd, host, device;
};


}  // namespace

std::vector<uint64_t> WeightStreamer::residentExtraAllocations(const LlamaModel& model)
{
    return plan::residentExtraAllocations(model);
}

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
        const ModelTensor* m = model.tensor(name);
        if (t->deviceFraction < 1.0 && m && m->type == gpu::DType::BitmapSparse)
            return makeError(ErrorCode::InvalidArgument,
                             "tensor '" + name + "' is bitmap sparse: its rows cannot be split between CPU and device");
        return t->tier;
    };
    auto fractionOf = [&](const std::string& name) {
        const auto* t = placement.find(name);
        return t ? t->deviceFraction : 1.0;
    };
    auto sourceOf = [&](const std::string& name, const gpu::MatrixView& view) {
        const ModelTensor* t = model.tensor(name);
        return TensorSource{name, view, t ? t->file : 0, t ? t->fileOffset : 0};
    };
    const bool tied = model.tiedEmbeddings();
    // Tensors converted at load have no file to read from: their SSD tier is RAM.
    auto inMemory = [&](const std::string& name) {
        const ModelTensor* t = model.tensor(name);
        return t && t->file == kInMemoryTensor;
    };

    // Group every matrix by unit and tier.
    std::vector<UnitBuilder> builders(im.units.size());
    for (int l = 0; l < c.nLayers; ++l) {
        const LlamaLayerWeights& L = w.layers[size_t(l)];
        im.units[size_t(l)].layer = L;
        for (const auto& m : kMembers) {
            if (!(L.*(m.member)).data) continue;  // absent (an ungated FFN's gate)
            const std::string name = model.matrixName(l, m);
            if (std::find(options.notStreamed.begin(), options.notStreamed.end(), name) != options.notStreamed.end()) {
                im.units[size_t(l)].layer.*(m.member) = gpu::MatrixView{};
                continue;
            }
            auto tier = tierOf(name);
            if (!tier) return tier.error();
            auto entry = std::make_pair(sourceOf(name, L.*(m.member)), Unit::Patch{m.member, 0});
            auto& b = builders[size_t(l)];
            (*tier == plan::Tier::Device ? b.device : *tier == plan::Tier::Host || inMemory(name) ? b.host : b.ssd)
                .push_back(entry);
        }
    }
    const std::string headName = tied ? "token_embd.weight" : "output.weight";
    auto headTier = tierOf(headName);
    if (!headTier) return headTier.error();
    {
        im.units.back().head = w.output;
        auto entry = std::make_pair(sourceOf(headName, w.output), Unit::Patch{nullptr, 0});
        auto& b = builders.back();
        (*headTier == plan::Tier::Device ? b.device
         : *headTier == plan::Tier::Host || inMemory(headName) ? b.host
                                                                : b.ssd)
            .push_back(entry);
    }
    auto embTier = tierOf("token_embd.weight");
    if (!embTier) return embTier.error();

    // RAM-tier weights, counted for the host budget (checked below, before any allocation).
    uint64_t hostBytes = 0;
    for (const UnitBuilder& b : builders)
        for (auto& e : b.host) hostBytes += matrixBytes(e.first.view);
    // SSD ranges and slot layout per unit. A staging buffer mirrors the SSD part of a slot.
    uint64_t maxSlot = 0, maxStaging = 0;
    size_t maxRanges = 0;
    for (size_t u = 0; u < builders.size(); ++u) {
        Unit& unit = im.units[u];
        auto& ssd = builders[u].ssd;
        std::vector<SsdPiece> pieces;
        pieces.reserve(ssd.size());
        for (const auto& e : ssd) pieces.push_back({e.first.file, e.first.fileOffset, matrixBytes(e.first.view)});
        const SsdLayout layout = layOutSsdReads(pieces);
        unit.ranges = layout.reads;
        for (size_t k = 0; k < ssd.size(); ++k) unit.patches.push_back({ssd[k].second.member, layout.pieceSlotOffsets[k]});
        size_t cursor = layout.slotBytes;
        maxStaging = std::max<uint64_t>(maxStaging, cursor);
        maxRanges = std::max(maxRanges, unit.ranges.size());
        for (auto& e : builders[u].host) {
            const gpu::MatrixView& v = e.first.view;
            const size_t bytes = size_t(matrixBytes(v));
            // HeteGen split: only the device's rows travel; the pinned copy keeps every row.
            const double f = fractionOf(e.first.name);
            const int64_t deviceRows = f >= 1.0 ? v.rows : std::clamp<int64_t>(int64_t(f * double(v.rows) + 0.5), 0, v.rows);
            // (A BitmapSparse blob is never split, and its rowStride is 0: it travels whole.)
            const size_t copyBytes = deviceRows == v.rows ? bytes : size_t(deviceRows) * v.rowStride;
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
    // Every unit in flight (one per slot) has its own staging buffer, so the reads of the next
    // units can land while this one is copied to the device.
    const int slotCount =
        im.order.empty() ? 0 : placement.prefetchDepth <= 0 ? 1 : placement.prefetchDepth + 1;
    const uint64_t stagingBytes = im.directToDevice ? 0 : maxStaging * uint64_t(slotCount);
    if (options.hostBudget && hostBytes + stagingBytes > options.hostBudget)
        return makeError(ErrorCode::OutOfMemory,
                         "placement needs " + std::to_string(hostBytes + stagingBytes) +
                             " bytes of pinned RAM (weights " + std::to_string(hostBytes) + ", staging " +
                             std::to_string(stagingBytes) + ") but the RAM budget is " +
                             std::to_string(options.hostBudget));

    // What creation copies (for options.loadProgress): device-tier matrices unless used in place,
    // OPT's positions and projections, a separately copied embedding, the RAM tier's pinned
    // copies (the norms and biases, a few KiB, are not counted).
    uint64_t loadTotal = 0, loadDone = 0;
    if (!inPlace)
        for (auto& b : builders)
            for (auto& e : b.device) loadTotal += matrixBytes(e.first.view);
    if (!inPlace && *embTier == plan::Tier::Device && !(tied && *headTier == plan::Tier::Device))
        loadTotal += matrixBytes(w.tokenEmbedding);
    if (!inPlace)
        for (const gpu::MatrixView* m : {&w.positionEmbedding, &w.projectIn, &w.projectOut})
            if (m->data) loadTotal += matrixBytes(*m);
    for (const Unit& unit : im.units)
        for (const auto& hc : unit.hostCopies) loadTotal += hc.allBytes;
    auto loaded = [&](uint64_t bytes) -> Status {
        loadDone += bytes;
        if (options.loadProgress && !options.loadProgress(loadDone, loadTotal))
            return makeError(ErrorCode::Cancelled, "loading the model was cancelled");
        return {};
    };
    if (auto st = loaded(0); !st) return st.error();

    // Device-resident weights: one buffer per unit (copied), or the mapping itself (in place).
    auto residentCopy = [&](const void* src, uint64_t bytes, bool counted = true) -> Result<const void*> {
        auto b = device.allocate(size_t(bytes));
        if (!b) return b.error();
        device.upload(b->data(), src, size_t(bytes));
        if (counted)
            if (auto st = loaded(bytes); !st) return st.error();
        const void* p = b->data();
        im.resident.push_back(std::move(b.value()));
        s->m_memory.residentDeviceBytes += bytes;
        return p;
    };
    // Matrices only matvec and getRow read: the device may reorder their rows for its kernels.
    auto residentMatrix = [&](const gpu::MatrixView& src) -> Result<gpu::MatrixView> {
        const uint64_t bytes = matrixBytes(src);
        auto m = device.uploadMatrix(src, size_t(bytes));
        if (!m) return m.error();
        const gpu::MatrixView view = m->view;
        im.resident.push_back(std::move(m->buffer));
        s->m_memory.residentDeviceBytes += bytes;
        if (auto st = loaded(bytes); !st) return st.error();
        return view;
    };
    for (size_t u = 0; u < builders.size(); ++u) {
        Unit& unit = im.units[u];
        for (auto& e : builders[u].device) {
            gpu::MatrixView& view = e.second.member ? unit.layer.*(e.second.member) : unit.head;
            if (inPlace) continue;  // the view already points into the mapping
            auto m = residentMatrix(e.first.view);
            if (!m) return m.error();
            view = *m;
        }
    }
    // Norms, biases and the other vectors: always resident, in one buffer (residentExtraAllocations
    // counts the same).
    {
        if (inPlace) {
            s->m_outputNorm = w.outputNorm;
            s->m_outputNormBias = w.outputNormBias;
        } else {
            std::vector<float> all;
            auto append = [&](const float* v, int n) {
                const size_t at = all.size();
                all.insert(all.end(), v, v + n);
                all.resize(alignUp(all.size(), kVectorAlign));  // 64-byte aligned vectors
                return at;
            };
            std::vector<std::pair<const float**, size_t>> patches;
            for (int l = 0; l < c.nLayers; ++l)
                for (const LayerVectorMember& v : kLayerVectors) {
                    const float*& p = im.units[size_t(l)].layer.*(v.member);
                    if (p) patches.push_back({&p, append(p, v.length(c))});
                }
            if (w.outputNorm) patches.push_back({&s->m_outputNorm, append(w.outputNorm, c.dim)});
            if (w.outputNormBias) patches.push_back({&s->m_outputNormBias, append(w.outputNormBias, c.dim)});
            auto p = residentCopy(all.data(), all.size() * sizeof(float), false);
            if (!p) return p.error();
            const float* base = static_cast<const float*>(*p);
            for (auto& [ptr, at] : patches) *ptr = base + at;
        }
    }
    // Learned positions and the embedding projections (OPT): resident.
    for (auto [from, to] : {std::pair{&w.positionEmbedding, &s->m_positions},
                            std::pair{&w.projectIn, &s->m_projectIn},
                            std::pair{&w.projectOut, &s->m_projectOut}}) {
        if (!from->data) continue;
        *to = *from;
        if (!inPlace) {
            auto p = residentCopy(from->data, matrixBytes(*from));
            if (!p) return p.error();
            to->data = *p;
        }
    }
    // Embedding: resident (shared with a tied, device-tier head when possible) or one row at a time.
    im.embedding = w.tokenEmbedding;
    if (*embTier == plan::Tier::Device) {
        if (!inPlace) {
            if (tied && *headTier == plan::Tier::Device) {
                im.embedding.data = im.units.back().head.data;
                im.embedding.layout = im.units.back().head.layout;  // getRow reads either layout
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
            if (auto st = loaded(hc.allBytes); !st) return st.error();
        }

    }
    size_t maxSplits = 0;
    for (const Unit& unit : im.units) maxSplits = std::max(maxSplits, unit.splits.size());
    im.currentSplits.reserve(maxSplits);
    // Slots and staging.
    if (!im.order.empty()) {
        for (int i = 0; i < slotCount; ++i) {
            auto b = device.allocate(size_t(maxSlot));
            if (!b) return b.error();
            im.slots.push_back(std::move(b.value()));
            if (stagingBytes) {
                auto st = device.allocateHost(size_t(maxStaging));
                if (!st) return st.error();
                im.staging.push_back(std::move(st.value()));
            }
            im.reads.emplace_back().tickets.reserve(maxRanges);
        }
        s->m_memory.slotBytes = maxSlot;
        s->m_memory.slotCount = slotCount;
        s->m_memory.stagingBytes = stagingBytes;
        bool needFile = false;
        for (const Unit& u : im.units)
            for (const Unit::Range& r : u.ranges) {
                needFile = true;
                if (im.files.size() <= r.file) im.files.resize(size_t(r.file) + 1);
                if (im.files[r.file]) continue;
                auto file = storage::DirectFile::open(model.dataFiles().at(r.file));
                if (!file) return file.error();
                im.files[r.file] = std::make_unique<storage::DirectFile>(std::move(file.value()));
            }
        if (needFile) {
            storage::DirectReaderOptions ro;
            ro.queueDepth = options.ioQueueDepth;
            ro.chunkBytes = options.ioChunkBytes;
            auto reader = storage::DirectReader::create(ro);
            if (!reader) return reader.error();
            im.reader = std::move(reader.value());
        }
        if (placement.prefetchDepth > 0) {
            im.prefetching = true;
            im.completer = std::thread([&im] { im.completerLoop(); });
            im.issuer = std::thread([&im] { im.issuerLoop(); });
        }
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
    // One row from the mapped file to device memory, then converted there. The getRow of the
    // previous row (a batch's tokens come one after another) may not have run yet on a GPU, and
    // copies do not wait for ops (CUDA's copy stream): let it finish before the row is replaced.
    const size_t stride = im.embedding.rowStride;
    const auto* src = static_cast<const uint8_t*>(im.embedding.data) + size_t(token) * stride;
    if (im.embeddingRowUsed) im.device->synchronize();
    im.embeddingRowUsed = true;
    im.device->upload(im.embeddingRow.data(), src, stride);
    gpu::MatrixView row = im.embedding;
    row.data = im.embeddingRow.data();
    row.rows = 1;
    im.device->getRow(row, 0, out);
}

std::vector<gpu::MatrixView> WeightStreamer::residentMatrices() const
{
    std::vector<gpu::MatrixView> out;
    for (const Unit& unit : m_impl->units) {
        auto resident = [&](LayerMember member) {
            for (const Unit::Patch& p : unit.patches)
                if (p.member == member) return false;
            for (const Unit::Split& s : unit.splits)
                if (s.member == member) return false;
            return true;
        };
        for (const LayerMatrixMember& m : kMembers)
            if ((unit.layer.*(m.member)).data && resident(m.member)) out.push_back(unit.layer.*(m.member));
        if (unit.head.data && resident(nullptr)) out.push_back(unit.head);
    }
    return out;
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
