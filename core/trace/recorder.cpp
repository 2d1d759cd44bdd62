// The span ring: a fixed array of one-cache-line slots indexed by a global write counter.
//
// Slot protocol. A slot's `seq` word says which write index occupies it and whether that
// producer is still writing:  0 = never written, (i+1)*2 + 1 = index i being written,
// (i+1)*2 = index i complete. A producer with index i claims its slot by compare-exchange from a
// complete (or empty) state of an older index to "i being written", stores the fields, then
// publishes "i complete". Claims only ever move to a newer index, so no seq value repeats.
// A reader loads seq, copies the fields, and loads seq again: the copy is good only if both
// loads saw the same "complete" value. All fields are atomics (stores release, loads acquire),
// which gives that guarantee without fences and keeps ThreadSanitizer quiet: a field value
// written by a later claimant makes the reader's second seq load see that claim.
//
// A producer that finds its slot still being written by an older index (the ring lapped while
// that producer was preempted) drops its own span and notes its index in `abandoned`, so the
// drainer can step over it instead of waiting for it.

#include <algorithm>
#include <bit>
#include <chrono>
#include <utility>

#include "core/trace/trace.h"

namespace spillway::trace {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelease = std::memory_order_release;

constexpr uint64_t doneSeq(uint64_t index) { return (index + 1) << 1; }
constexpr uint64_t writingSeq(uint64_t index) { return doneSeq(index) | 1; }
constexpr bool isWriting(uint64_t seq) { return (seq & 1) != 0; }
// Only meaningful for seq != 0.
constexpr uint64_t occupant(uint64_t seq) { return (seq >> 1) - 1; }
}  // namespace

uint64_t nowNs()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

const char* laneName(Lane lane)
{
    switch (lane) {
    case Lane::SsdRead: return "SSD read";
    case Lane::HostToDevice: return "host→device";
    case Lane::Decompress: return "decompress";
    case Lane::DeviceCompute: return "device compute";
    case Lane::CpuCompute: return "CPU compute";
    case Lane::Stall: return "stall";
    case Lane::Count: break;
    }
    return "unknown";
}

// Bits of each neuron-cache count (Span::lookups, hits) packed beside the lane (Slot::lane).
constexpr uint64_t kCountMask = (uint64_t{1} << 28) - 1;

// One cache line: the sequence word, the abandonment note, and the span packed in six words.
struct alignas(64) Recorder::Slot {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> abandoned{0};  // largest (index + 1) that gave up on this slot
    std::atomic<uint64_t> layerToken{0};  // low 32 bits: layer (as uint32), high 32: token
    std::atomic<uint64_t> lane{0};  // bits 0-7: lane; 8-35: lookups; 36-63: hits (28 bits each)
    std::atomic<const char*> op{nullptr};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> startNs{0};
    std::atomic<uint64_t> endNs{0};
};

Recorder::Recorder(size_t capacity)
{
    const size_t n = std::bit_ceil(std::max<size_t>(capacity, 2));
    m_mask = n - 1;
    m_slots = std::make_unique<Slot[]>(n);
}

Recorder::~Recorder() = default;

void Recorder::record(const Span& span) noexcept
{
    if (!m_enabled.load(kRelaxed)) return;
    const uint64_t index = m_write.fetch_add(1, kRelaxed);
    Slot& slot = m_slots[index & m_mask];

    uint64_t seq = slot.seq.load(kAcquire);
    for (;;) {
        if (seq != 0 && occupant(seq) >= index) return;  // lapped: a newer span owns the slot
        if (isWriting(seq)) {
            // An older producer is still writing here: give up rather than wait.
            uint64_t note = slot.abandoned.load(kRelaxed);
            while (note < index + 1 &&
                   !slot.abandoned.compare_exchange_weak(note, index + 1, kRelease, kRelaxed)) {
            }
            return;
        }
        // Acquire: the previous occupant's field stores come before ours.
        if (slot.seq.compare_exchange_weak(seq, writingSeq(index), std::memory_order_acq_rel,
                                           kAcquire))
            break;
    }

    const uint64_t layerToken =
        static_cast<uint32_t>(span.layer) | (static_cast<uint64_t>(span.token) << 32);
    slot.layerToken.store(layerToken, kRelease);
    const uint64_t lane = static_cast<uint64_t>(span.lane) | std::min<uint64_t>(span.lookups, kCountMask) << 8 |
                          std::min<uint64_t>(span.hits, kCountMask) << 36;
    slot.lane.store(lane, kRelease);
    slot.op.store(span.op, kRelease);
    slot.bytes.store(span.bytes, kRelease);
    slot.startNs.store(span.startNs, kRelease);
    slot.endNs.store(span.endNs, kRelease);
    slot.seq.store(doneSeq(index), kRelease);
}

bool Recorder::readSlot(const Slot& slot, uint64_t index, Span& out) const
{
    const uint64_t seq = slot.seq.load(kAcquire);
    if (seq != doneSeq(index)) return false;
    const uint64_t layerToken = slot.layerToken.load(kAcquire);
    const uint64_t lane = slot.lane.load(kAcquire);
    out.op = slot.op.load(kAcquire);
    out.bytes = slot.bytes.load(kAcquire);
    out.startNs = slot.startNs.load(kAcquire);
    out.endNs = slot.endNs.load(kAcquire);
    // The acquire loads above keep this load after them.
    if (slot.seq.load(kRelaxed) != seq) return false;
    out.layer = static_cast<int32_t>(static_cast<uint32_t>(layerToken));
    out.token = static_cast<uint32_t>(layerToken >> 32);
    out.lane = static_cast<Lane>(lane & 0xff);
    out.lookups = static_cast<uint32_t>((lane >> 8) & kCountMask);
    out.hits = static_cast<uint32_t>(lane >> 36);
    return true;
}

uint64_t Recorder::recorded() const
{
    return m_write.load(kRelaxed) - m_base.load(kRelaxed);
}

uint64_t Recorder::dropped() const
{
    const uint64_t lost = m_lost.load(kAcquire);
    const uint64_t read = m_read.load(kAcquire);
    const uint64_t write = m_write.load(kAcquire);
    const uint64_t pending = write > read ? write - read : 0;
    return lost + (pending > capacity() ? pending - capacity() : 0);
}

size_t Recorder::drain(std::vector<Span>& out)
{
    const uint64_t write = m_write.load(kAcquire);
    uint64_t read = m_read.load(kRelaxed);
    uint64_t lost = 0;
    if (write - read > capacity()) {  // everything older than one ring is overwritten
        lost += write - capacity() - read;
        read = write - capacity();
    }
    const size_t before = out.size();
    for (; read < write; ++read) {
        const Slot& slot = m_slots[read & m_mask];
        const uint64_t seq = slot.seq.load(kAcquire);
        if (seq != 0 && occupant(seq) > read) {  // overwritten by a newer span
            ++lost;
            continue;
        }
        if (seq == doneSeq(read)) {
            Span span;
            if (readSlot(slot, read, span)) {
                out.push_back(span);
            } else {
                ++lost;  // overwritten while we copied it
            }
            continue;
        }
        if (seq == writingSeq(read)) break;  // still being written: next time
        // The slot still holds an older span: our producer either has not claimed it yet
        // (wait for it) or gave up because an older producer was still writing there.
        if (slot.abandoned.load(kAcquire) == read + 1) {
            ++lost;
            continue;
        }
        break;
    }
    if (lost) m_lost.fetch_add(lost, kRelease);
    m_read.store(read, kRelease);
    return out.size() - before;
}

std::vector<Span> Recorder::snapshot() const
{
    const uint64_t base = m_base.load(kAcquire);
    std::vector<std::pair<uint64_t, Span>> found;
    found.reserve(std::min<uint64_t>(capacity(), m_write.load(kRelaxed) - base));
    for (size_t i = 0; i <= m_mask; ++i) {
        const Slot& slot = m_slots[i];
        const uint64_t seq = slot.seq.load(kAcquire);
        if (seq == 0 || isWriting(seq)) continue;
        const uint64_t index = occupant(seq);
        if (index < base) continue;
        Span span;
        if (readSlot(slot, index, span)) found.emplace_back(index, span);
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Span> spans;
    spans.reserve(found.size());
    for (const auto& [index, span] : found) spans.push_back(span);
    return spans;
}

void Recorder::clear()
{
    const uint64_t write = m_write.load(kAcquire);
    m_base.store(write, kRelease);
    m_lost.store(0, kRelease);
    m_read.store(write, kRelease);
}

ScopedSpan::ScopedSpan(Recorder* recorder, Lane lane, int layer, const char* op, uint64_t bytes,
                       uint32_t token)
    : m_recorder(recorder && recorder->enabled() ? recorder : nullptr)
{
    if (!m_recorder) return;
    m_span.lane = lane;
    m_span.layer = layer;
    m_span.op = op;
    m_span.bytes = bytes;
    m_span.token = token;
    m_span.startNs = nowNs();
}

ScopedSpan::~ScopedSpan()
{
    if (!m_recorder) return;
    m_span.endNs = nowNs();
    m_recorder->record(m_span);
}

}  // namespace spillway::trace
