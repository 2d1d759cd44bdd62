#include "core/runtime/expert_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/compress/linalg.h"
#include "core/formats/ggml_quants.h"
#include "core/trace/trace.h"
#include "storage/direct_io.h"

namespace spillway {

namespace {

constexpr const char* kStacks[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
constexpr size_t kPartAlign = 256;  // each matrix of a slot starts on this many bytes

size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string stackName(int layer, int part) { return "blk." + std::to_string(layer) + "." + kStacks[part]; }

}  // namespace

struct ExpertCache::Layer {
    int layer = 0;
    const ModelTensor* tensors[3] = {};
    size_t partBytes[3] = {};       // one expert's rows of each stack
    size_t partOffset[3] = {};      // within a slot
    gpu::MatrixView stacks[3];      // the layer's views (rows of every expert; data in the mapping)
    int slotCount = 0;              // its slots (the placement's count, or the session's)
    uint8_t* slots = nullptr;       // slotCount slots of expertBytes, device memory
    std::vector<int> slotExpert;    // slot -> expert, or -1
    std::vector<uint64_t> lastUse;  // slot -> clock of its last use
    std::vector<int> expertSlot;    // expert -> slot, or -1
    std::vector<int> hostIndex;     // expert -> its place in the RAM's experts, or -1
    std::vector<int> host, warm;    // the placement's experts in RAM and for the first slots
    uint8_t* hostExperts = nullptr; // their copies (expertBytes each, laid out as a slot)
    const float* router = nullptr;  // (nExperts, dim) F32: the lookahead's (the mapping, or routerF32)
    std::vector<float> routerF32;   // a router stored in another type, decoded once
    double aheadScore = 1.0;        // the lookahead's recent share of right guesses (kLookaheadFloor)
};

size_t ExpertCache::queueReads(const Layer& L, int expert, uint8_t* staging, size_t at, size_t* skip)
{
    for (int part = 0; part < 3; ++part) {
        const ModelTensor& t = *L.tensors[part];
        const storage::AlignedRange r =
            storage::alignRange(t.fileOffset + uint64_t(expert) * L.partBytes[part], L.partBytes[part]);
        m_requests[t.file].push_back({r.offset, r.bytes, staging + at});
        skip[part] = at + r.skip;
        at += r.bytes;
    }
    return at;
}

void ExpertCache::startReads(std::vector<uint64_t>& tickets)
{
    for (size_t f = 0; f < m_requests.size(); ++f) {
        if (!m_requests[f].empty()) tickets.push_back(m_reader->enqueue(m_files[f], m_requests[f]));
        m_requests[f].clear();
    }
}

Status ExpertCache::waitReads(std::vector<uint64_t>& tickets)
{
    Status failed;
    for (uint64_t ticket : tickets) {
        Status s = m_reader->wait(ticket);
        if (!s && failed) failed = std::move(s);
    }
    tickets.clear();
    return failed;
}

std::vector<int> ExpertCache::servedLayers(const LlamaModel& model, const plan::Placement& placement)
{
    std::vector<int> layers;
    const LlamaConfig& c = model.config();
    if (!c.moe()) return layers;
    for (int l = 0; l < c.nLayers; ++l) {
        // All three stacks on the SSD and in a file (an importer's converted tensors have none:
        // the streamer keeps those in RAM).
        bool onSsd = true;
        for (int part = 0; part < 3; ++part) {
            const plan::TensorPlacement* t = placement.find(stackName(l, part));
            const ModelTensor* info = model.tensor(stackName(l, part));
            onSsd = onSsd && t && t->tier == plan::Tier::Ssd && info && info->file != kInMemoryTensor;
        }
        if (onSsd) layers.push_back(l);
    }
    return layers;
}

std::vector<std::string> ExpertCache::servedTensors(const LlamaModel& model, const plan::Placement& placement)
{
    std::vector<std::string> names;
    for (int l : servedLayers(model, placement))
        for (int part = 0; part < 3; ++part) names.push_back(stackName(l, part));
    return names;
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::create(const LlamaModel& model, gpu::Device& device,
                                                         std::vector<int> layers, const ExpertCacheOptions& options)
{
    const LlamaConfig& c = model.config();
    if (!c.moe() || layers.empty())
        return makeError(ErrorCode::InvalidArgument, "expert cache: no layers of experts to serve");
    auto cache = std::unique_ptr<ExpertCache>(new ExpertCache(model, device));
    ExpertCache& self = *cache;
    self.m_options = options;
    const int sessionSlots = c.expertSlots(options.slotsPerLayer);
    self.m_inPlace = device.info().caps.hostPointers;
    self.m_layerIndex.assign(size_t(c.nLayers), -1);
    for (int l : layers) {
        if (l < 0 || l >= c.nLayers || self.m_layerIndex[size_t(l)] >= 0)
            return makeError(ErrorCode::InvalidArgument, "expert cache: layer " + std::to_string(l) + " out of range or twice");
        Layer L;
        L.layer = l;
        const LlamaLayerWeights& w = model.weights().layers[size_t(l)];
        const gpu::MatrixView* views[3] = {&w.expertGate, &w.expertUp, &w.expertDown};
        size_t offset = 0, staging = 0;
        for (int part = 0; part < 3; ++part) {
            const ModelTensor* t = model.tensor(stackName(l, part));
            if (!t || t->file == kInMemoryTensor || !views[part]->data)
                return makeError(ErrorCode::UnsupportedModel, model.path() + ": " + stackName(l, part) +
                                                                  " is not a tensor of a file the SSD tier can read");
            L.tensors[part] = t;
            L.stacks[part] = *views[part];
            L.partBytes[part] = size_t(t->bytes / uint64_t(c.nExperts));
            L.partOffset[part] = offset;
            offset += alignUp(L.partBytes[part], kPartAlign);
            staging += alignUp(L.partBytes[part], storage::kDirectIoAlignment) + storage::kDirectIoAlignment;
        }
        if (self.m_expertBytes && (offset != self.m_expertBytes || staging != self.m_stagingPerExpert))
            return makeError(ErrorCode::UnsupportedModel,
                             model.path() + ": the experts of layer " + std::to_string(l) +
                                 " are of other types than those of the layers before (the expert cache needs one size)");
        self.m_expertBytes = offset;
        self.m_stagingPerExpert = staging;
        // The lookahead's copy of the router, F32 (llama.cpp's GGUFs keep routers F32: no copy).
        const gpu::MatrixView& router = w.router;
        if (router.type == gpu::DType::F32 && router.rowStride == size_t(router.cols) * sizeof(float)) {
            L.router = static_cast<const float*>(router.data);
        } else if (gguf::hasRowCodec(router.type)) {
            L.routerF32.resize(size_t(router.rows * router.cols));
            for (int64_t e = 0; e < router.rows; ++e)
                gguf::dequantizeRow(router.type, static_cast<const uint8_t*>(router.data) + size_t(e) * router.rowStride,
                                    router.cols, L.routerF32.data() + size_t(e * router.cols));
            L.router = L.routerF32.data();
        }
        // The placement's slots for the layer where it sizes them and no count was asked for.
        L.slotCount = sessionSlots;
        for (const plan::ExpertPlacement& p : options.experts)
            if (p.layer == l && p.slotCount > 0 && options.slotsPerLayer <= 0) L.slotCount = c.expertSlots(p.slotCount);
        L.slotExpert.assign(size_t(L.slotCount), -1);
        L.lastUse.assign(size_t(L.slotCount), 0);
        L.expertSlot.assign(size_t(c.nExperts), -1);
        L.hostIndex.assign(size_t(c.nExperts), -1);
        for (const plan::ExpertPlacement& p : options.experts) {
            if (p.layer != l) continue;
            for (int e : p.host)
                if (e >= 0 && e < c.nExperts && L.hostIndex[size_t(e)] < 0) {
                    L.hostIndex[size_t(e)] = int(L.host.size());
                    L.host.push_back(e);
                }
            for (int e : p.device)
                if (e >= 0 && e < c.nExperts && int(L.warm.size()) < L.slotCount &&
                    std::find(L.warm.begin(), L.warm.end(), e) == L.warm.end())
                    L.warm.push_back(e);
        }
        self.m_hostExperts += int(L.host.size());
        self.m_slots = std::max(self.m_slots, L.slotCount);
        self.m_fewestSlots = self.m_fewestSlots ? std::min(self.m_fewestSlots, L.slotCount) : L.slotCount;
        self.m_slotTotal += L.slotCount;
        self.m_layerIndex[size_t(l)] = int(self.m_layers.size());
        self.m_layers.push_back(std::move(L));
    }

    auto slots = device.allocate(self.m_expertBytes * size_t(self.m_slotTotal));
    if (!slots) return slots.error();
    self.m_slotMemory = std::move(*slots);
    size_t first = 0;
    for (Layer& L : self.m_layers) {
        L.slots = self.m_slotMemory.as<uint8_t>() + first * self.m_expertBytes;
        first += size_t(L.slotCount);
    }
    auto staging = device.allocateHost(self.m_stagingPerExpert * size_t(self.m_slots));
    if (!staging) return staging.error();
    self.m_staging = std::move(*staging);
    auto prefetch = device.allocateHost(self.m_stagingPerExpert * size_t(c.nExpertsUsed));
    if (!prefetch) return prefetch.error();
    self.m_prefetchStaging = std::move(*prefetch);
    for (const std::string& file : model.dataFiles()) {
        auto f = storage::DirectFile::open(file);
        if (!f) return f.error();
        self.m_files.push_back(std::move(*f));
    }
    storage::DirectReaderOptions ro;
    ro.queueDepth = std::clamp(options.ioQueueDepth, 1, 1024);
    ro.chunkBytes = options.ioChunkBytes;
    auto reader = storage::DirectReader::create(ro);
    if (!reader) return reader.error();
    self.m_reader = std::move(*reader);
    self.m_missing.reserve(size_t(self.m_slots));
    self.m_requests.resize(self.m_files.size());
    if (self.m_hostExperts > 0) {
        auto host = device.allocateHost(self.m_expertBytes * size_t(self.m_hostExperts));
        if (!host) return host.error();
        self.m_hostMemory = std::move(*host);
        size_t at = 0;
        for (Layer& L : self.m_layers) {
            L.hostExperts = self.m_hostMemory.as<uint8_t>() + at * self.m_expertBytes;
            at += L.host.size();
        }
    }
    SPILLWAY_TRY(self.fillAtStart());
    return cache;
}

Status ExpertCache::fillAtStart()
{
    uint8_t* staging = m_staging.as<uint8_t>();
    std::vector<int> experts;
    std::vector<size_t> skip;
    for (Layer& L : m_layers) {
        experts = L.host;
        for (int e : L.warm)
            if (L.hostIndex[size_t(e)] < 0) experts.push_back(e);
        // In batches of the staging's size (one expert per slot).
        for (size_t first = 0; first < experts.size(); first += size_t(m_slots)) {
            const size_t n = std::min(experts.size() - first, size_t(m_slots));
            skip.assign(n * 3, 0);
            size_t at = 0;
            for (size_t i = 0; i < n; ++i) at = queueReads(L, experts[first + i], staging, at, &skip[3 * i]);
            startReads(m_tickets);
            SPILLWAY_TRY(waitReads(m_tickets));
            m_startBytes += at;
            for (size_t i = 0; i < n; ++i) {
                const int h = L.hostIndex[size_t(experts[first + i])];
                if (h < 0) continue;
                uint8_t* copy = L.hostExperts + size_t(h) * m_expertBytes;
                for (int part = 0; part < 3; ++part)
                    std::memcpy(copy + L.partOffset[part], staging + skip[3 * i + size_t(part)], L.partBytes[part]);
            }
            // The first slots: from RAM where the expert is kept there, else from the staging.
            for (size_t i = 0; i < n; ++i) {
                const int e = experts[first + i];
                const auto w = std::find(L.warm.begin(), L.warm.end(), e);
                if (w == L.warm.end()) continue;
                const int slot = int(w - L.warm.begin());
                const int h = L.hostIndex[size_t(e)];
                for (int part = 0; part < 3; ++part)
                    m_device.upload(L.slots + size_t(slot) * m_expertBytes + L.partOffset[part],
                                    h >= 0 ? L.hostExperts + size_t(h) * m_expertBytes + L.partOffset[part]
                                           : staging + skip[3 * i + size_t(part)],
                                    L.partBytes[part]);
                L.slotExpert[size_t(slot)] = e;
                L.expertSlot[size_t(e)] = slot;
            }
            m_device.synchronize();  // the staging is read again by the next batch
        }
    }
    return {};
}

ExpertCache::ExpertCache(const LlamaModel& model, gpu::Device& device) : m_model(model), m_device(device) {}

ExpertCache::~ExpertCache() { (void)waitReads(m_pending.tickets); }

void ExpertCache::lookahead(int layer, const float* x)
{
    const LlamaConfig& c = m_model.config();
    const int next = layer + 1;
    if (!serves(next) || m_pending.layer >= 0) return;
    const Layer& L = m_layers[size_t(m_layerIndex[size_t(next)])];
    if (!L.router) return;
    // The next layer's router on this layer's input: its top experts are the guess.
    m_logits.resize(size_t(c.nExperts));
    compress::linalg::matvec(L.router, c.nExperts, c.dim, x, nullptr, m_logits.data());
    m_order.resize(size_t(c.nExperts));
    for (int e = 0; e < c.nExperts; ++e) m_order[size_t(e)] = e;
    std::partial_sort(m_order.begin(), m_order.begin() + c.nExpertsUsed, m_order.end(),
                      [&](int a, int b) { return m_logits[size_t(a)] > m_logits[size_t(b)]; });
    m_pending.layer = next;
    m_pending.experts.assign(m_order.begin(), m_order.begin() + c.nExpertsUsed);
    m_pending.skip.assign(m_pending.experts.size() * 3, SIZE_MAX);  // SIZE_MAX: in a slot, not read
    m_pending.bytes = 0;
    const bool readAhead = L.aheadScore >= kLookaheadFloor;
    size_t at = 0;
    for (size_t g = 0; g < m_pending.experts.size(); ++g) {
        const int e = m_pending.experts[g];
        if (L.expertSlot[size_t(e)] >= 0 || L.hostIndex[size_t(e)] >= 0) continue;  // no read to start
        if (!readAhead) {
            ++m_unreadGuesses;
            continue;
        }
        const size_t before = at;
        at = queueReads(L, e, m_prefetchStaging.as<uint8_t>(), at, &m_pending.skip[3 * g]);
        m_pending.bytes += at - before;
    }
    m_pending.startNs = m_options.trace ? trace::nowNs() : 0;
    startReads(m_pending.tickets);
}

bool ExpertCache::serves(int layer) const
{
    return layer >= 0 && size_t(layer) < m_layerIndex.size() && m_layerIndex[size_t(layer)] >= 0;
}

int ExpertCache::slotsOf(int layer) const
{
    return serves(layer) ? m_layers[size_t(m_layerIndex[size_t(layer)])].slotCount : 0;
}

Status ExpertCache::fetch(int layer, std::span<const int> chosen, std::span<ExpertViews> out)
{
    if (!serves(layer) || chosen.size() > size_t(slotsOf(layer)) || out.size() < chosen.size())
        return makeError(ErrorCode::InvalidArgument, "expert cache: layer " + std::to_string(layer) + " with " +
                                                         std::to_string(chosen.size()) + " experts to fetch");
    Layer& L = m_layers[size_t(m_layerIndex[size_t(layer)])];
    const uint64_t now = ++m_clock;
    // Hits keep their slots (stamped with this fetch, so no miss of it evicts them).
    m_missing.clear();
    size_t inPlace = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
        const int e = chosen[i];
        if (e < 0 || size_t(e) >= L.expertSlot.size())
            return makeError(ErrorCode::InvalidArgument, "expert cache: expert " + std::to_string(e) + " out of range");
        const int slot = L.expertSlot[size_t(e)];
        if (slot >= 0 && L.lastUse[size_t(slot)] != now) {
            L.lastUse[size_t(slot)] = now;
            ++m_hits;
        } else if (slot < 0 && m_inPlace && L.hostIndex[size_t(e)] >= 0) {
            ++m_misses;      // not in a slot, and needs none: the device computes on the RAM's copy
            ++m_hostCopies;
            ++inPlace;
        } else if (slot < 0) {
            m_missing.push_back(int(i));
        }
    }
    trace::Recorder* rec = m_options.trace;
    // The lookahead's guess for this layer: count it, and let the misses it read skip the SSD.
    std::vector<size_t>& ahead = m_ahead;  // per miss: index into m_pending.experts, or SIZE_MAX
    ahead.clear();
    if (m_pending.layer >= 0) {
        Status waited = waitReads(m_pending.tickets);
        m_ssdBytes += m_pending.bytes;  // read, whether used or not
        m_aheadBytes += m_pending.bytes;
        // The lookahead's reads on the SSD lane, counted to the layer they were for (no lookups:
        // the layer's own span below counts its choices).
        if (m_options.trace && m_pending.bytes > 0) recordSpan(m_pending.layer, 0, 0, m_pending.bytes, m_pending.startNs);
        if (m_pending.layer == layer && waited) {
            m_guessed += m_pending.experts.size();
            size_t right = 0;
            for (int e : m_pending.experts) right += std::find(chosen.begin(), chosen.end(), e) != chosen.end();
            m_guessedRight += right;
            if (!m_pending.experts.empty())  // about the last 8 tokens' share
                L.aheadScore += (double(right) / double(m_pending.experts.size()) - L.aheadScore) / 8.0;
        } else {
            m_pending.experts.clear();  // another layer's (or failed): nothing of it is used
        }
        m_pending.layer = -1;
    } else {
        m_pending.experts.clear();  // an earlier fetch's guess, used up
    }
    for (int i : m_missing) {
        size_t k = SIZE_MAX;
        for (size_t g = 0; g < m_pending.experts.size(); ++g)
            if (m_pending.experts[g] == chosen[size_t(i)] && m_pending.skip[3 * g] != SIZE_MAX) k = g;
        ahead.push_back(k);
    }
    const uint64_t t0 = rec ? trace::nowNs() : 0;
    uint64_t bytes = 0;
    if (!m_missing.empty()) {
        // Earlier ops may still read the slots about to be refilled.
        m_device.synchronize();
        uint8_t* staging = m_staging.as<uint8_t>();
        std::vector<size_t>& skip = m_skip;
        skip.assign(m_missing.size() * 3, 0);
        size_t at = 0;
        for (size_t m = 0; m < m_missing.size(); ++m)
            if (ahead[m] == SIZE_MAX && L.hostIndex[size_t(chosen[size_t(m_missing[m])])] < 0)  // to read
                at = queueReads(L, chosen[size_t(m_missing[m])], staging, at, &skip[m * 3]);
        bytes = at;
        if (at > 0) {
            startReads(m_tickets);
            if (Status failed = waitReads(m_tickets); !failed) return failed;
        }
        m_ssdBytes += bytes;
        // Victims: the least recently used slots this fetch does not use.
        for (size_t m = 0; m < m_missing.size(); ++m) {
            int victim = -1;
            for (int s = 0; s < L.slotCount; ++s)
                if (L.lastUse[size_t(s)] != now && (victim < 0 || L.lastUse[size_t(s)] < L.lastUse[size_t(victim)]))
                    victim = s;
            const int e = chosen[size_t(m_missing[m])];
            if (L.slotExpert[size_t(victim)] >= 0) L.expertSlot[size_t(L.slotExpert[size_t(victim)])] = -1;
            L.slotExpert[size_t(victim)] = e;
            L.expertSlot[size_t(e)] = victim;
            L.lastUse[size_t(victim)] = now;
            uint8_t* slot = L.slots + size_t(victim) * m_expertBytes;
            const int h = L.hostIndex[size_t(e)];
            for (int part = 0; part < 3; ++part) {
                const uint8_t* from =
                    h >= 0               ? L.hostExperts + size_t(h) * m_expertBytes + L.partOffset[part]
                    : ahead[m] != SIZE_MAX ? m_prefetchStaging.as<uint8_t>() + m_pending.skip[3 * ahead[m] + size_t(part)]
                                           : staging + skip[m * 3 + size_t(part)];
                m_device.upload(slot + L.partOffset[part], from, L.partBytes[part]);
            }
            if (h >= 0) ++m_hostCopies;
            else if (ahead[m] != SIZE_MAX) ++m_prefetched;
            ++m_misses;
        }
    }
    if (rec) recordSpan(layer, chosen.size(), m_missing.size() + inPlace, bytes, t0);
    for (size_t i = 0; i < chosen.size(); ++i) {
        const int at = L.expertSlot[size_t(chosen[i])];
        const uint8_t* slot = at >= 0 ? L.slots + size_t(at) * m_expertBytes
                                      : L.hostExperts + size_t(L.hostIndex[size_t(chosen[i])]) * m_expertBytes;
        ExpertViews& v = out[i];
        gpu::MatrixView* parts[3] = {&v.gate, &v.up, &v.down};
        for (int part = 0; part < 3; ++part) {
            *parts[part] = expertMatrix(L.stacks[part], int(L.expertSlot.size()), 0);
            parts[part]->data = slot + L.partOffset[part];
        }
    }
    return {};
}

void ExpertCache::recordSpan(int layer, size_t lookups, size_t misses, uint64_t bytes, uint64_t startNs)
{
    trace::Span span{trace::Lane::SsdRead, layer, trace::kExpertsOp, bytes, startNs, trace::nowNs(), m_pass};
    span.lookups = uint32_t(lookups);
    span.hits = uint32_t(lookups - misses);
    m_options.trace->record(span);
}

ExpertCacheReport ExpertCache::report() const
{
    ExpertCacheReport r;
    r.layers = int(m_layers.size());
    r.slotsPerLayer = m_slots;
    r.fewestSlots = m_fewestSlots;
    r.slotBytes = uint64_t(m_expertBytes) * uint64_t(m_slotTotal);
    r.hits = m_hits;
    r.misses = m_misses;
    r.ssdBytes = m_ssdBytes;
    r.guessed = m_guessed;
    r.guessedRight = m_guessedRight;
    r.prefetched = m_prefetched;
    r.aheadBytes = m_aheadBytes;
    r.unreadGuesses = m_unreadGuesses;
    r.hostExperts = m_hostExperts;
    r.hostBytes = uint64_t(m_hostExperts) * m_expertBytes;
    r.hostCopies = m_hostCopies;
    r.startBytes = m_startBytes;
    return r;
}

}  // namespace spillway
