#pragma once
// Internal to the weight streamer: the per-unit layout and the loader (issuer and completer
// threads). weight_streamer.cpp builds the layout from a placement.

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

namespace streamer_detail {

constexpr size_t kAlign = 4096;             // direct I/O granularity and slot alignment

inline size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
constexpr size_t kVectorAlign = plan::kResidentVectorAlign;  // floats: the resident vectors start 64 bytes apart

using LayerMember = gpu::MatrixView LlamaLayerWeights::*;
// Every matrix of a layer (llama_model.h).
constexpr const auto& kMembers = kLayerMatrices;

using gpu::matrixBytes;

}  // namespace streamer_detail
using namespace streamer_detail;

// One streaming unit: a layer's matrices or the output head.
struct Unit {
    LlamaLayerWeights layer;    // resident views filled in; streamed ones patched per slot
    gpu::MatrixView head;
    using Range = SsdRead;  // one direct read
    struct HostCopy { const void* host; size_t bytes; size_t slotOffset; size_t allBytes; };  // one upload
    struct Patch { LayerMember member; size_t slotOffset; };                  // member == nullptr: head
    struct Split { LayerMember member; int64_t deviceRows; size_t hostCopy; };  // index into hostCopies
    std::vector<Range> ranges;
    std::vector<Split> splits;
    std::vector<HostCopy> hostCopies;
    std::vector<Patch> patches;
    size_t slotBytes = 0;
    bool streamed() const { return !patches.empty(); }
};

// The reads of one streamed unit between the issuer and the completer (one per slot).
struct UnitReads {
    std::vector<storage::DirectReader::Ticket> tickets;  // one per SSD range; capacity reserved
    uint64_t enqueuedNs = 0;
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
    std::vector<gpu::Buffer> staging;    // pinned, one per slot; empty when SSD reads go into the slot
    std::vector<UnitReads> reads;        // one per slot
    gpu::Buffer embeddingRow;            // one row of a non-resident embedding, device memory
    bool embeddingRowUsed = false;       // a getRow may still read embeddingRow
    gpu::MatrixView embedding;           // resident or mapped
    // Declared after the slots and staging: destroyed first, it waits for reads still in flight.
    std::vector<std::unique_ptr<storage::DirectFile>> files;  // by the model's dataFiles() index; open where read
    std::unique_ptr<storage::DirectReader> reader;
    bool directToDevice = false;

    // Working views of the unit most recently acquired.
    LlamaLayerWeights current;
    gpu::MatrixView currentHead;
    std::vector<HostRows> currentSplits;
    bool anySplit = false;

    // Prefetching (depth k > 0, k + 1 slots): the issuer enqueues unit seq's SSD reads as soon
    // as its slot is free (use seq - slots released), so the reader's queue never drains between
    // units; the completer waits for them in order, does the uploads and marks the unit ready.
    // Sequence numbers count streamed-unit uses from 0.
    std::mutex mutex;
    std::condition_variable changed;
    int64_t issuedSeq = -1;    // reads enqueued up to here (issuer)
    bool issuerStopped = false;
    int64_t readySeq = -1;     // loads done up to here (completer, in order)
    int64_t releasedSeq = -1;  // uses finished up to here
    int64_t useSeq = 0;        // next use
    bool stopping = false;
    Status failure;            // sticky loader error
    bool prefetching = false;
    std::thread issuer, completer;
    uint64_t lastReadEndNs = 0;  // end of the last SsdRead span (completer, or compute when naive)
    std::atomic<uint32_t> pass{0};
    std::atomic<uint64_t> ssdBytes{0}, uploadBytes{0}, stallNs{0}, unitLoads{0};

    ~Impl()
    {
        {
            std::lock_guard lock(mutex);
            stopping = true;
        }
        changed.notify_all();
        // The completer may be waiting for a read; reads always finish, so the join does too.
        if (issuer.joinable()) issuer.join();
        if (completer.joinable()) completer.join();
    }

    void span(trace::Lane lane, int layer, const char* op, uint64_t bytes, uint64_t t0, uint64_t t1)
    {
        if (options.trace)
            options.trace->record({lane, layer, op, bytes, t0, t1, pass.load(std::memory_order_relaxed)});
    }

    // Enqueues unit u's SSD ranges, into slot `si` or its staging buffer.
    Status issue(int u, size_t si)
    {
        const Unit& unit = units[size_t(u)];
        UnitReads& r = reads[si];
        r.tickets.clear();
        r.enqueuedNs = trace::nowNs();
        if (unit.ranges.empty()) return {};
        // The reader zero-fills past the end of the file (an aligned range may pass it), so a
        // file truncated under us must be caught here rather than read as zeros.
        for (const auto& range : unit.ranges) {
            struct stat st {};
            if (fstat(files[range.file]->fd(), &st) != 0 || uint64_t(st.st_size) < range.needEnd)
                return makeError(ErrorCode::ModelFileInvalid,
                                 model->dataFiles()[range.file] + ": the file changed size while the model was "
                                                                  "running (truncated?); stop and reload the model");
        }
        uint8_t* base = directToDevice ? slots[si].as<uint8_t>() : staging[si].as<uint8_t>();
        for (const auto& range : unit.ranges) {
            const storage::ReadRequest request{range.fileOffset, range.bytes, base + range.slotOffset};
            r.tickets.push_back(reader->enqueue(*files[range.file], {&request, 1}));
        }
        return {};
    }

    // Waits for unit u's reads (issued into slot `si`), copies staged ranges and the RAM-tier
    // weights into the slot. Returns only once none of the unit's reads is in flight.
    Status complete(int u, size_t si)
    {
        const Unit& unit = units[size_t(u)];
        const UnitReads& r = reads[si];
        uint8_t* base = slots[si].as<uint8_t>();
        const int layer = u < layers ? u : -1;
        Status status;
        for (size_t i = 0; i < r.tickets.size(); ++i) {
            const auto& range = unit.ranges[i];
            Status st = reader->wait(r.tickets[i]);
            if (!status) continue;  // failed already: only let the rest finish
            if (!st) {
                status = std::move(st);
                continue;
            }
            // The disk worked on this range from its enqueue or the previous range's end.
            const uint64_t t1 = trace::nowNs();
            const uint64_t t0 = std::max(r.enqueuedNs, lastReadEndNs);
            span(trace::Lane::SsdRead, layer, "read", range.bytes, t0, t1);
            lastReadEndNs = t1;
            ssdBytes.fetch_add(range.bytes, std::memory_order_relaxed);
            if (!directToDevice) {
                const uint8_t* staged = staging[si].as<uint8_t>() + range.slotOffset;
                device->upload(base + range.slotOffset, staged, range.bytes);
                span(trace::Lane::HostToDevice, layer, "copy", range.bytes, t1, trace::nowNs());
                uploadBytes.fetch_add(range.bytes, std::memory_order_relaxed);
            }
        }
        if (!status) return status;
        for (const auto& c : unit.hostCopies) {
            const uint64_t t0 = trace::nowNs();
            device->upload(base + c.slotOffset, c.host, c.bytes);
            span(trace::Lane::HostToDevice, layer, "copy", c.bytes, t0, trace::nowNs());
            uploadBytes.fetch_add(c.bytes, std::memory_order_relaxed);
        }
        unitLoads.fetch_add(1, std::memory_order_relaxed);
        return {};
    }

    void issuerLoop()
    {
        const int64_t n = int64_t(order.size());
        const int64_t s = int64_t(slots.size());
        for (int64_t seq = 0;; ++seq) {
            {
                std::unique_lock lock(mutex);
                changed.wait(lock, [&] { return stopping || !failure.ok() || releasedSeq >= seq - s; });
                if (stopping || !failure.ok()) break;
            }
            Status st = issue(order[size_t(seq % n)], size_t(seq % s));
            std::lock_guard lock(mutex);
            if (!st) {
                failure = std::move(st);
                break;
            }
            issuedSeq = seq;
            changed.notify_all();
        }
        std::lock_guard lock(mutex);
        issuerStopped = true;
        changed.notify_all();
    }

    void completerLoop()
    {
        const int64_t n = int64_t(order.size());
        const int64_t s = int64_t(slots.size());
        for (int64_t seq = 0;; ++seq) {
            {
                std::unique_lock lock(mutex);
                changed.wait(lock, [&] { return stopping || issuedSeq >= seq || issuerStopped; });
                if (stopping || issuedSeq < seq) return;
            }
            Status st = complete(order[size_t(seq % n)], size_t(seq % s));
            std::lock_guard lock(mutex);
            if (!st) {
                if (failure.ok()) failure = std::move(st);
                changed.notify_all();
                return;
            }
            readySeq = seq;
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
        const size_t si = size_t(seq) % slots.size();
        if (prefetching) {
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
            SPILLWAY_TRY(issue(u, si));  // naive: load now, on this thread
            SPILLWAY_TRY(complete(u, si));
        }
        uint8_t* base = slots[si].as<uint8_t>();
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


}  // namespace spillway
