#pragma once
// Timeline spans of the token path (SSD read, host→device copy, decompress, compute, stalls),
// a lock-free ring the engine's threads record into, Chrome-trace export, and bottleneck
// attribution: which tier each instant of a token's wall time was spent waiting on.
//
// Producers: I/O readers, copy/compute streams and the CPU pool call Recorder::record() (or use
// ScopedSpan). Consumers: the visualizer polls Recorder::drain() at ~60 Hz (every 16 ms) from the GUI side; a
// benchmark takes snapshot() at the end, then summarize() and writeChromeTrace().

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway::trace {

// One timeline row per lane. Values are exported (Chrome trace tid = lane + 1): never reuse.
enum class Lane : uint8_t {
    SsdRead,        // direct reads from the model package into pinned RAM
    HostToDevice,   // async copies pinned RAM → device memory
    Decompress,     // bitmap sparse → dense / dequantize on the device
    DeviceCompute,  // GPU kernels
    CpuCompute,     // the CPU's α share of a layer (HeteGen split)
    Stall,          // explicit waits (compute waiting on a transfer)
    Count
};
inline constexpr size_t kLaneCount = static_cast<size_t>(Lane::Count);

// "SSD read", "host→device", "decompress", "device compute", "CPU compute", "stall".
const char* laneName(Lane lane);

struct Span {
    Lane lane = Lane::Stall;
    int32_t layer = -1;        // model layer, -1 = not a layer (e.g. embedding, sampler)
    const char* op = "";       // static string: "ffn", "attn", "read", "copy"
    uint64_t bytes = 0;        // bytes moved or touched; 0 for pure waits
    uint64_t startNs = 0;      // nowNs() clock
    uint64_t endNs = 0;
    uint32_t token = 0;        // decode step index
    // Neuron-cache transfers ("neuron bundles"): the first span of each layer and token carries
    // how many of the layer's active neurons the cache was asked for, and how many were resident
    // (a span of 0 bytes and no length when nothing had to move). 0 elsewhere.
    uint32_t lookups = 0;
    uint32_t hits = 0;
};

// The op of the neuron cache's bundle transfers: the spans that carry lookups and hits.
inline constexpr const char* kNeuronBundlesOp = "neuron bundles";
// The op of the expert cache's reads (mixtures of experts): lookups are the experts a layer's
// tokens chose, hits those already in a slot.
inline constexpr const char* kExpertsOp = "experts";

// Steady clock, nanoseconds since an arbitrary epoch.
uint64_t nowNs();

// Fixed-capacity multi-producer ring of spans. record() is wait-free in practice (one fetch_add
// plus one compare-exchange on the slot, retried only when another producer made progress on
// that same slot) and never allocates. When the ring is full the oldest spans are overwritten.
//
// Each slot carries a sequence word (which write index occupies it, and whether it is still
// being written); readers copy a slot and re-check the word, so they never see a torn span.
// A producer that finds its slot still being written by a producer a whole ring earlier drops
// its own span rather than wait (only possible when the ring laps within one record()).
class Recorder {
public:
    static constexpr size_t kDefaultCapacity = size_t{1} << 18;  // spans; 64 bytes each = 16 MiB

    // capacity is rounded up to a power of two (at least 2).
    explicit Recorder(size_t capacity = kDefaultCapacity);
    ~Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    void record(const Span& span) noexcept;

    void setEnabled(bool on) { m_enabled.store(on, std::memory_order_relaxed); }
    bool enabled() const { return m_enabled.load(std::memory_order_relaxed); }

    size_t capacity() const { return m_mask + 1; }
    // Spans recorded since construction or clear() (including dropped ones).
    uint64_t recorded() const;
    // Spans lost before drain() could deliver them: overwritten by newer spans (or, rarely,
    // dropped by a producer whose slot was still busy). Without a drainer: spans overwritten.
    // Exact once producers are quiet; may lag by a few spans while they run.
    uint64_t dropped() const;

    // Appends every complete span recorded since the previous drain(), in write order, and
    // returns how many it appended. Stops at the first span still being written (it comes with
    // the next call). One drainer at a time; any thread.
    size_t drain(std::vector<Span>& out);
    // Every complete span still in the ring, in write order. Any thread, any time.
    std::vector<Span> snapshot() const;
    // Forgets all spans and the dropped count. Call from the drainer's thread (or with no
    // drainer running); concurrent producers are fine.
    void clear();

private:
    struct Slot;
    bool readSlot(const Slot& slot, uint64_t index, Span& out) const;

    size_t m_mask = 0;
    std::unique_ptr<Slot[]> m_slots;
    alignas(64) std::atomic<uint64_t> m_write{0};    // next write index (producers)
    alignas(64) std::atomic<uint64_t> m_read{0};     // next index drain() delivers (drainer)
    std::atomic<uint64_t> m_lost{0};                 // counted by drain(), see dropped()
    std::atomic<uint64_t> m_base{0};                 // write index of the last clear()
    std::atomic<bool> m_enabled{true};
};

// Records [construction, destruction) as one span. Null or disabled recorder: does nothing.
class ScopedSpan {
public:
    ScopedSpan(Recorder* recorder, Lane lane, int layer, const char* op, uint64_t bytes,
               uint32_t token);
    ~ScopedSpan();
    ScopedSpan(const ScopedSpan&) = delete;
    ScopedSpan& operator=(const ScopedSpan&) = delete;
    // For spans whose byte count is only known at the end (a short read).
    void setBytes(uint64_t bytes) { m_span.bytes = bytes; }

private:
    Recorder* m_recorder;
    Span m_span;
};

// ---- Chrome trace export ------------------------------------------------------------------

// An extra counter track ("ph":"C"), e.g. staging-ring fill or device memory in use.
struct CounterSample {
    const char* name;  // track name, static string
    uint64_t timeNs;   // nowNs() clock
    double value;
};

struct ChromeTraceOptions {
    uint64_t originNs = 0;         // time shown as 0; 0 = the earliest span or counter sample
    std::string processName = "Spillway";
    std::span<const CounterSample> counters;
};

// Writes Chrome trace event format JSON (chrome://tracing, Perfetto): one complete event per
// span (ts/dur in µs with ns precision, pid 1, tid = lane + 1, cat = lane name, name = op and
// layer, args {layer, bytes, token}), thread_name metadata naming the lanes, then the counters.
// Atomic: a temporary file beside `path` is renamed over it; on failure it is removed and the
// error (Io, or DiskFull on ENOSPC) names the file.
Status writeChromeTrace(std::span<const Span> spans, const std::string& path,
                        const ChromeTraceOptions& options = {});

// ---- Bottleneck attribution ---------------------------------------------------------------

// Where wall time goes. Each instant belongs to exactly one category, the first that is busy in
// this order: compute (device or CPU), decompress, host→device, SSD read; else stalls (explicit
// Stall spans and idle gaps).
enum class Category : uint8_t { Compute, Decompress, HostToDevice, SsdRead, Stalls, Count };
inline constexpr size_t kCategoryCount = static_cast<size_t>(Category::Count);
// "compute", "decompress", "host→device", "SSD read", "stalls".
const char* categoryName(Category category);

struct LaneStats {
    uint64_t busyNs = 0;           // union of this lane's spans inside the window
    double busyFraction = 0;       // busyNs / window
    double bytes = 0;              // span bytes, pro-rated to the part inside the window
    double bytesPerSecond = 0;     // bytes / busy time: achieved bandwidth while busy
    uint64_t spans = 0;            // spans that overlap the window
};

struct Summary {
    uint64_t beginNs = 0;
    uint64_t endNs = 0;
    uint64_t windowNs = 0;
    std::array<LaneStats, kLaneCount> lanes{};
    std::array<uint64_t, kCategoryCount> attributedNs{};  // sums to windowNs
    uint32_t tokens = 0;           // distinct Span::token values among spans in the window
    uint32_t firstToken = 0;       // smallest and largest of them (0 when tokens == 0)
    uint32_t lastToken = 0;
    double nsPerToken = 0;         // windowNs / tokens

    const LaneStats& lane(Lane l) const { return lanes[static_cast<size_t>(l)]; }
    // Fraction of the window attributed to a category, 0..1; the five add up to 1.
    double share(Category c) const;
    // "SSD read 61%, host→device 12%, compute 20%, stalls 7%": highest first, whole percents
    // that add up to 100, categories with no time left out.
    std::string text() const;
    // The compute or transfer category with the largest share; Stalls when none was busy.
    Category bottleneck() const;
};

// Spans are clipped to [beginNs, endNs); unordered input is fine.
Summary summarize(std::span<const Span> spans, uint64_t beginNs, uint64_t endNs);
// One Summary per distinct token (ascending), each over that token's own spans and window
// [earliest start, latest end].
std::vector<Summary> summarizePerToken(std::span<const Span> spans);

// What the planner's cost model expects a lane to take per token.
struct LanePrediction {
    Lane lane;
    double seconds;  // per token
};

// A table of measured vs predicted seconds per token for each predicted lane (measured = lane
// busy time / tokens), with the ratio; one line per lane plus a header.
std::string compareWithPrediction(const Summary& measured,
                                  std::span<const LanePrediction> predictions);

}  // namespace spillway::trace
