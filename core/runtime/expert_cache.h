#pragma once
// The experts of a mixture of experts that a placement leaves on the SSD, brought in one by one
// as tokens choose them, instead of streaming each layer's whole stack of experts every token
// (a token of Qwen3-30B-A3B reads 8 of its 128). Each served layer has its expert slots in
// device memory (as many as the placement sizes it by the routing profile, or one count for all),
// least recently used first out; an expert chosen and not in a slot is read from
// the model file with direct I/O (three contiguous reads: its rows of ffn_gate_exps, ffn_up_exps
// and ffn_down_exps; every miss of a layer queued at once) through pinned staging into a slot.
// Hits, misses and bytes are counted for the report.
//
// The placement may name, per layer, experts to keep in pinned RAM (a miss of one is a copy from
// there into a slot, no read; on a device that computes on host memory, the CPU device, it is
// used where it is and takes no slot) and experts to fill the slots with at start (the hottest by
// the routing profile); both are read from the file when the cache is created.
//
// Router lookahead: while a layer's experts compute, lookahead() applies the next served layer's
// router to this layer's FFN input (on the host: a router is a few hundred KiB) and starts reading
// the experts it would choose that are not in slots; the next fetch of that layer takes what was
// guessed right from there and only reads the rest. The residual stream changes slowly between
// layers, so the guess is often right; a wrong one costs reads, never results. Where a layer's
// guesses are mostly wrong (a recent accuracy below kLookaheadFloor: a model whose routing
// changes much between layers), its lookahead keeps guessing, to see whether that changes, but
// reads nothing ahead until it is right more often again: wrong reads take the SSD and the
// cores from the misses that are needed.
//
// Not thread-safe: the inference thread drives it, between the router and the experts' matvecs.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/model/llama_model.h"
#include "core/plan/placement.h"
#include "gpu/device.h"

namespace spillway {

namespace storage { class DirectFile; class DirectReader; struct ReadRequest; }
namespace trace { class Recorder; }

struct ExpertCacheOptions {
    bool enabled = true;    // false: stacks on the SSD stream whole each token (dense offloading, a baseline)
    // Every layer's slots; 0: the placement's count for each layer where it has one (the planner
    // divides the slots by the routing profile), else twice the experts a token uses (at most all).
    int slotsPerLayer = 0;
    int ioQueueDepth = 16;
    size_t ioChunkBytes = size_t{4} << 20;
    trace::Recorder* trace = nullptr;
    std::vector<plan::ExpertPlacement> experts;  // the placement's, per layer (others: none)
};

struct ExpertCacheReport {
    int layers = 0;            // layers whose experts it serves
    int slotsPerLayer = 0;     // the most of a layer
    int fewestSlots = 0;       // the fewest of a layer (less than slotsPerLayer: sized per layer)
    uint64_t slotBytes = 0;    // device bytes of all slots
    uint64_t hits = 0, misses = 0;
    uint64_t ssdBytes = 0;     // read for the misses (aligned ranges), prefetches included
    int hostExperts = 0;       // kept in RAM, all layers together
    uint64_t hostBytes = 0;    // their pinned RAM
    uint64_t hostCopies = 0;   // misses served from there (copied, or used in place) instead of read
    uint64_t startBytes = 0;   // read at creation (the RAM's experts and the slots' first fill)
    // Router lookahead: experts guessed for a layer (to be read ahead), of those the ones the
    // layer then chose, and the misses served by a read already started.
    uint64_t guessed = 0, guessedRight = 0, prefetched = 0;
    uint64_t aheadBytes = 0;   // read by the lookahead (in ssdBytes), whether used or not
    uint64_t unreadGuesses = 0;  // guesses not read ahead: their layer's lookahead was too often wrong
    // "8 slots in each of 48 layers", or "6 to 14 slots in each of 48 layers (by the routing)".
    std::string slotsText() const
    {
        const std::string each = " slots in each of " + std::to_string(layers) + " layers";
        return fewestSlots > 0 && fewestSlots < slotsPerLayer
                   ? std::to_string(fewestSlots) + " to " + std::to_string(slotsPerLayer) + each + " (by the routing)"
                   : std::to_string(slotsPerLayer) + each;
    }
    double hitRate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
    double hostRate() const { return hits + misses ? double(hostCopies) / double(hits + misses) : 0.0; }
    double lookaheadAccuracy() const { return guessed ? double(guessedRight) / double(guessed) : 0.0; }
    // The counts since `before`, an earlier report of the same cache (its sizes stay).
    ExpertCacheReport since(const ExpertCacheReport& before) const
    {
        ExpertCacheReport r = *this;
        r.hits -= before.hits;
        r.misses -= before.misses;
        r.ssdBytes -= before.ssdBytes;
        r.guessed -= before.guessed;
        r.guessedRight -= before.guessedRight;
        r.prefetched -= before.prefetched;
        r.aheadBytes -= before.aheadBytes;
        r.unreadGuesses -= before.unreadGuesses;
        r.hostCopies -= before.hostCopies;
        return r;
    }
};

// A layer's lookahead reads ahead while the recent share of its guesses that were right (an
// average over about the last 8 tokens) is at least this; below it, it only guesses.
inline constexpr double kLookaheadFloor = 0.5;

// One expert's three matrices, where matvec reads them.
struct ExpertViews {
    gpu::MatrixView gate, up, down;
};

class ExpertCache {
public:
    // The layers whose three expert stacks the placement puts on the SSD; none (nullptr) when
    // the model has no experts or none of them lie there.
    static std::vector<int> servedLayers(const LlamaModel& model, const plan::Placement& placement);
    // Their tensor names (the weight streamer leaves them to the cache).
    static std::vector<std::string> servedTensors(const LlamaModel& model, const plan::Placement& placement);

    static Result<std::unique_ptr<ExpertCache>> create(const LlamaModel& model, gpu::Device& device,
                                                       std::vector<int> layers, const ExpertCacheOptions& options);
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    bool serves(int layer) const;
    int slotsOf(int layer) const;  // a served layer's slots (0: not served)
    // Brings the experts `chosen` of `layer` (distinct, at most slotsOf(layer) of them) into
    // slots and writes their views to out[i] for chosen[i]. A failed read -> its error (the
    // slots it was to fill are left empty). Views stay valid until the next fetch of the layer.
    Status fetch(int layer, std::span<const int> chosen, std::span<ExpertViews> out);
    // The router lookahead after `layer`'s routing, x its FFN input on the host (dim floats):
    // guesses the next layer's experts (top nExpertsUsed of its router's logits) and starts
    // reading those not in slots. Does nothing where the next layer is not served (or its router
    // has a type without a row decoder).
    void lookahead(int layer, const float* x);
    ExpertCacheReport report() const;
    void setPass(uint32_t pass) { m_pass = pass; }

private:
    struct Layer;
    ExpertCache(const LlamaModel& model, gpu::Device& device);

    const LlamaModel& m_model;
    gpu::Device& m_device;
    ExpertCacheOptions m_options;
    int m_slots = 0, m_fewestSlots = 0;  // the most and fewest of a layer
    int m_slotTotal = 0;                 // all served layers'
    std::vector<Layer> m_layers;        // served ones
    std::vector<int> m_layerIndex;      // model layer -> index into m_layers, or -1
    std::vector<storage::DirectFile> m_files;
    std::unique_ptr<storage::DirectReader> m_reader;
    gpu::Buffer m_slotMemory;           // every served layer's slots
    gpu::Buffer m_staging;              // pinned, one layer's misses
    gpu::Buffer m_hostMemory;           // pinned, the experts kept in RAM
    uint64_t m_hostCopies = 0, m_startBytes = 0;
    bool m_inPlace = false;             // the device computes on host memory: RAM's experts need no slot
    int m_hostExperts = 0;
    size_t m_expertBytes = 0;           // one slot: gate | up | down
    size_t m_stagingPerExpert = 0;
    uint64_t m_hits = 0, m_misses = 0, m_ssdBytes = 0, m_clock = 0;
    uint32_t m_pass = 0;
    std::vector<int> m_missing;         // reused, as the vectors below
    std::vector<size_t> m_ahead, m_skip;
    std::vector<uint64_t> m_tickets;
    std::vector<std::vector<storage::ReadRequest>> m_requests;  // per data file, being queued
    // The lookahead's reads in flight: for `layer`, experts[i] at prefetchStaging + skip[3 i + part].
    struct Pending {
        int layer = -1;
        std::vector<int> experts;
        std::vector<size_t> skip;
        std::vector<uint64_t> tickets;
        uint64_t bytes = 0;
        uint64_t startNs = 0;  // when the reads started (the trace's span)
    } m_pending;
    gpu::Buffer m_prefetchStaging;
    std::vector<float> m_logits;
    std::vector<int> m_order;
    uint64_t m_guessed = 0, m_guessedRight = 0, m_prefetched = 0, m_aheadBytes = 0, m_unreadGuesses = 0;
    // Queues the reads of `expert`'s three parts into staging from `at` (m_requests, per file),
    // their starts in the staging to skip[0..2]; returns where the next read goes.
    size_t queueReads(const Layer& L, int expert, uint8_t* staging, size_t at, size_t* skip);
    void startReads(std::vector<uint64_t>& tickets);     // m_requests to the reader, emptied
    Status waitReads(std::vector<uint64_t>& tickets);    // every ticket (the first error), emptied
    void recordSpan(int layer, size_t lookups, size_t misses, uint64_t bytes, uint64_t startNs);
    // Reads the placement's experts of every layer: into RAM, and into the first slots.
    Status fillAtStart();
};

}  // namespace spillway
