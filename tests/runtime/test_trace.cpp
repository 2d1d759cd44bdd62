// core/trace: the span ring under concurrent producers and a concurrent drainer, Chrome-trace
// export, and bottleneck attribution on hand-built timelines with known answers.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "core/trace/trace.h"

namespace fs = std::filesystem;
using namespace spillway;
using namespace spillway::trace;

namespace {

const char* const kOps[] = {"read", "copy", "ffn", "attn"};

// A span whose every field follows from (producer, sequence), so a torn copy (fields from two
// different writes) fails checkSpan.
uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

Span makeSpan(int producer, uint32_t sequence)
{
    const uint64_t key = (static_cast<uint64_t>(producer) << 32) | sequence;
    const uint64_t h = mix(key + 1);
    Span s;
    s.lane = static_cast<Lane>(h % kLaneCount);
    s.layer = producer;
    s.op = kOps[(h >> 8) % 4];
    s.bytes = h;
    s.startNs = mix(h);
    s.endNs = s.startNs + (h & 0xffff);
    s.token = sequence;
    s.lookups = uint32_t(mix(h + 7) % (uint64_t{1} << 28));  // the 28 bits the ring keeps
    s.hits = uint32_t(mix(h + 9) % (s.lookups + 1));
    return s;
}

bool sameSpan(const Span& a, const Span& b)
{
    return a.lane == b.lane && a.layer == b.layer && a.op == b.op && a.bytes == b.bytes &&
           a.startNs == b.startNs && a.endNs == b.endNs && a.token == b.token && a.lookups == b.lookups &&
           a.hits == b.hits;
}

bool checkSpan(const Span& s) { return s.layer >= 0 && sameSpan(s, makeSpan(s.layer, s.token)); }

Span span(Lane lane, uint64_t start, uint64_t end, uint32_t token = 0, uint64_t bytes = 0,
          int layer = -1, const char* op = "op")
{
    Span s;
    s.lane = lane;
    s.layer = layer;
    s.op = op;
    s.bytes = bytes;
    s.startNs = start;
    s.endNs = end;
    s.token = token;
    return s;
}

struct TempDir {
    fs::path path;
    TempDir()
    {
        path = fs::temp_directory_path() /
               ("spillway-trace-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    std::vector<std::string> names() const
    {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename());
        return out;
    }
};

// Runs `producers` threads recording `perProducer` spans each while another thread drains;
// returns everything drained (including a final drain after the producers finish).
std::vector<Span> produceWhileDraining(Recorder& recorder, int producers, uint32_t perProducer,
                                       bool alsoSnapshot)
{
    std::atomic<int> running{producers};
    std::vector<Span> drained;
    std::atomic<bool> snapshotsOk{true};
    std::thread drainer([&] {
        while (running.load() > 0) {
            recorder.drain(drained);
            std::this_thread::yield();
        }
    });
    std::thread snapshotter([&] {
        while (alsoSnapshot && running.load() > 0) {
            for (const Span& s : recorder.snapshot())
                if (!checkSpan(s)) snapshotsOk = false;
        }
    });
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            for (uint32_t i = 0; i < perProducer; ++i) {
                recorder.record(makeSpan(p, i));
                // Give the drainer a turn now and then, as real producers do between reads.
                if (i % 512 == 511) std::this_thread::yield();
            }
            running.fetch_sub(1);
        });
    }
    for (auto& t : threads) t.join();
    drainer.join();
    snapshotter.join();
    recorder.drain(drained);
    EXPECT_TRUE(snapshotsOk.load()) << "snapshot() returned a torn span";
    return drained;
}

// Every drained span intact, each producer's spans in its own recording order, no repeats.
void expectIntactAndOrdered(const std::vector<Span>& drained, int producers)
{
    std::vector<int64_t> last(producers, -1);
    size_t torn = 0, outOfOrder = 0;
    for (const Span& s : drained) {
        if (!checkSpan(s) || s.layer >= producers) {
            ++torn;
            continue;
        }
        if (static_cast<int64_t>(s.token) <= last[s.layer]) ++outOfOrder;
        last[s.layer] = s.token;
    }
    EXPECT_EQ(torn, 0u);
    EXPECT_EQ(outOfOrder, 0u);
}

}  // namespace

TEST(TraceRecorder, LaneNames)
{
    EXPECT_STREQ(laneName(Lane::SsdRead), "SSD read");
    EXPECT_STREQ(laneName(Lane::HostToDevice), "host→device");
    EXPECT_STREQ(laneName(Lane::Decompress), "decompress");
    EXPECT_STREQ(laneName(Lane::DeviceCompute), "device compute");
    EXPECT_STREQ(laneName(Lane::CpuCompute), "CPU compute");
    EXPECT_STREQ(laneName(Lane::Stall), "stall");
}

TEST(TraceRecorder, RecordsInWriteOrder)
{
    Recorder r(16);
    EXPECT_EQ(r.capacity(), 16u);
    for (uint32_t i = 0; i < 5; ++i) r.record(makeSpan(0, i));
    const std::vector<Span> snap = r.snapshot();
    ASSERT_EQ(snap.size(), 5u);
    for (uint32_t i = 0; i < 5; ++i) EXPECT_TRUE(sameSpan(snap[i], makeSpan(0, i))) << i;

    std::vector<Span> drained;
    EXPECT_EQ(r.drain(drained), 5u);
    EXPECT_EQ(r.drain(drained), 0u) << "a second drain repeats nothing";
    r.record(makeSpan(0, 5));
    EXPECT_EQ(r.drain(drained), 1u);
    ASSERT_EQ(drained.size(), 6u);
    for (uint32_t i = 0; i < 6; ++i) EXPECT_TRUE(sameSpan(drained[i], makeSpan(0, i))) << i;
    EXPECT_EQ(r.recorded(), 6u);
    EXPECT_EQ(r.dropped(), 0u);
    EXPECT_EQ(r.snapshot().size(), 6u) << "drain does not remove spans from the ring";
}

TEST(TraceRecorder, NegativeLayerAndLargeTokenSurvivePacking)
{
    Recorder r(4);
    Span s = span(Lane::Stall, 10, 20, 0xfffffffeu, ~uint64_t{0}, -1, "wait");
    r.record(s);
    const auto snap = r.snapshot();
    ASSERT_EQ(snap.size(), 1u);
    EXPECT_TRUE(sameSpan(snap[0], s));
}

TEST(TraceRecorder, DisabledRecordsNothing)
{
    Recorder r(8);
    r.setEnabled(false);
    EXPECT_FALSE(r.enabled());
    r.record(makeSpan(0, 0));
    { ScopedSpan scoped(&r, Lane::DeviceCompute, 3, "ffn", 64, 1); }
    std::vector<Span> drained;
    EXPECT_EQ(r.drain(drained), 0u);
    EXPECT_TRUE(r.snapshot().empty());
    EXPECT_EQ(r.recorded(), 0u);

    r.setEnabled(true);
    r.record(makeSpan(0, 1));
    EXPECT_EQ(r.snapshot().size(), 1u);
}

TEST(TraceRecorder, CapacityRoundsUpToPowerOfTwo)
{
    EXPECT_EQ(Recorder(5).capacity(), 8u);
    EXPECT_EQ(Recorder(1).capacity(), 2u);
    EXPECT_EQ(Recorder().capacity(), size_t{1} << 18);
}

TEST(TraceRecorder, WrapAroundKeepsNewestAndCountsDropped)
{
    Recorder r(8);
    for (uint32_t i = 0; i < 20; ++i) r.record(makeSpan(0, i));
    EXPECT_EQ(r.recorded(), 20u);
    EXPECT_EQ(r.dropped(), 12u);

    const auto snap = r.snapshot();
    ASSERT_EQ(snap.size(), 8u);
    for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(snap[i].token, 12 + i);

    std::vector<Span> drained;
    EXPECT_EQ(r.drain(drained), 8u);
    ASSERT_EQ(drained.size(), 8u);
    EXPECT_EQ(drained.front().token, 12u);
    EXPECT_EQ(drained.back().token, 19u);
    EXPECT_EQ(r.dropped(), 12u) << "draining does not change what was lost";

    // Drain keeps up: nothing more lost, and only the new spans come out.
    for (uint32_t i = 20; i < 23; ++i) r.record(makeSpan(0, i));
    drained.clear();
    EXPECT_EQ(r.drain(drained), 3u);
    EXPECT_EQ(drained[0].token, 20u);
    EXPECT_EQ(drained[2].token, 22u);
    EXPECT_EQ(r.dropped(), 12u);

    // Lapping the drainer again: 10 new spans in an 8-slot ring lose the 2 oldest.
    for (uint32_t i = 23; i < 33; ++i) r.record(makeSpan(0, i));
    EXPECT_EQ(r.dropped(), 14u);
    drained.clear();
    EXPECT_EQ(r.drain(drained), 8u);
    EXPECT_EQ(drained.front().token, 25u);
    EXPECT_EQ(r.dropped(), 14u);

    r.clear();
    EXPECT_TRUE(r.snapshot().empty());
    EXPECT_EQ(r.dropped(), 0u);
    EXPECT_EQ(r.recorded(), 0u);
    drained.clear();
    EXPECT_EQ(r.drain(drained), 0u);
    r.record(makeSpan(0, 99));
    EXPECT_EQ(r.drain(drained), 1u);
    EXPECT_EQ(drained[0].token, 99u);
}

TEST(TraceRecorder, ConcurrentProducersRingLargeEnoughLoseNothing)
{
    constexpr int kProducers = 4;
    constexpr uint32_t kPer = 100000;
    Recorder r(size_t{1} << 19);  // > 400k spans: nothing can be overwritten
    const auto drained = produceWhileDraining(r, kProducers, kPer, false);
    EXPECT_EQ(drained.size(), size_t{kProducers} * kPer);
    EXPECT_EQ(r.dropped(), 0u);
    EXPECT_EQ(r.recorded(), uint64_t{kProducers} * kPer);
    expectIntactAndOrdered(drained, kProducers);
    EXPECT_EQ(r.snapshot().size(), size_t{kProducers} * kPer);
}

TEST(TraceRecorder, ConcurrentProducersSmallRingCountsAddUp)
{
    constexpr int kProducers = 4;
    constexpr uint32_t kPer = 100000;
    Recorder r(4096);  // laps many times: the drainer cannot keep up with everything
    const auto drained = produceWhileDraining(r, kProducers, kPer, true);
    expectIntactAndOrdered(drained, kProducers);
    std::printf("drained %zu spans while producing, %llu dropped\n", drained.size(),
                static_cast<unsigned long long>(r.dropped()));
    EXPECT_GT(drained.size(), 0u);
    EXPECT_EQ(drained.size() + r.dropped(), size_t{kProducers} * kPer)
        << "drained " << drained.size() << ", dropped " << r.dropped();
    // The newest spans are still in the ring after the producers stop.
    const auto snap = r.snapshot();
    EXPECT_GT(snap.size(), 4096u - 64u);
    for (const Span& s : snap) ASSERT_TRUE(checkSpan(s));
}

TEST(TraceRecorder, ConcurrentProducersTinyRingNeverTear)
{
    // Two slots for four producers: producers lap each other inside one record() all the
    // time, so slots are contended and some producers must give their span up.
    constexpr int kProducers = 4;
    constexpr uint32_t kPer = 100000;
    Recorder r(2);
    const auto drained = produceWhileDraining(r, kProducers, kPer, true);
    expectIntactAndOrdered(drained, kProducers);
    EXPECT_EQ(drained.size() + r.dropped(), size_t{kProducers} * kPer)
        << "drained " << drained.size() << ", dropped " << r.dropped();
    for (const Span& s : r.snapshot()) ASSERT_TRUE(checkSpan(s));
}

TEST(TraceRecorder, ScopedSpanRecordsDuration)
{
    Recorder r(8);
    {
        ScopedSpan scoped(&r, Lane::HostToDevice, 7, "copy", 4096, 3);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    { ScopedSpan nothing(nullptr, Lane::SsdRead, 0, "read", 1, 0); }
    const auto snap = r.snapshot();
    ASSERT_EQ(snap.size(), 1u);
    EXPECT_EQ(snap[0].lane, Lane::HostToDevice);
    EXPECT_EQ(snap[0].layer, 7);
    EXPECT_STREQ(snap[0].op, "copy");
    EXPECT_EQ(snap[0].bytes, 4096u);
    EXPECT_EQ(snap[0].token, 3u);
    EXPECT_GE(snap[0].endNs - snap[0].startNs, 2'000'000u);
    EXPECT_LE(snap[0].endNs, nowNs());
}

TEST(TraceChrome, WritesParsableEventsWithDurationsAndLaneNames)
{
    TempDir dir;
    const std::string path = (dir.path / "trace.json").string();
    const std::vector<Span> spans = {
        span(Lane::SsdRead, 1000, 2500, 0, 1 << 20, 4, "read"),
        span(Lane::DeviceCompute, 3001, 3002, 1, 0, 12, "ffn"),
        span(Lane::Stall, 4000, 4000, 1, 0, -1, "wait \"x\""),
    };
    const CounterSample counters[] = {{"staging MiB", 2000, 48.5}};
    ChromeTraceOptions options;
    options.counters = counters;
    const Status st = writeChromeTrace(spans, path, options);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(dir.names(), std::vector<std::string>{"trace.json"}) << "no temporary left";

    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot read " << path;
    const nlohmann::json doc = nlohmann::json::parse(in);
    const auto& events = doc.at("traceEvents");
    std::map<int, std::string> threadNames;
    std::vector<nlohmann::json> complete, counterEvents;
    for (const auto& e : events) {
        if (e.at("ph") == "M" && e.at("name") == "thread_name")
            threadNames[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
        if (e.at("ph") == "X") complete.push_back(e);
        if (e.at("ph") == "C") counterEvents.push_back(e);
    }
    ASSERT_EQ(threadNames.size(), kLaneCount);
    for (size_t i = 0; i < kLaneCount; ++i)
        EXPECT_EQ(threadNames[static_cast<int>(i) + 1], laneName(static_cast<Lane>(i)));

    ASSERT_EQ(complete.size(), 3u);
    // Origin = earliest time (the counter at 2000 ns is later than the read at 1000 ns).
    EXPECT_EQ(complete[0].at("name"), "read L4");
    EXPECT_EQ(complete[0].at("cat"), "SSD read");
    EXPECT_EQ(complete[0].at("pid"), 1);
    EXPECT_EQ(complete[0].at("tid"), 1);
    EXPECT_DOUBLE_EQ(complete[0].at("ts").get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(complete[0].at("dur").get<double>(), 1.5);
    EXPECT_EQ(complete[0].at("args").at("bytes").get<uint64_t>(), 1u << 20);
    EXPECT_EQ(complete[0].at("args").at("layer"), 4);
    EXPECT_EQ(complete[0].at("args").at("token"), 0);

    EXPECT_EQ(complete[1].at("name"), "ffn L12");
    EXPECT_EQ(complete[1].at("cat"), "device compute");
    EXPECT_EQ(complete[1].at("tid"), static_cast<int>(Lane::DeviceCompute) + 1);
    EXPECT_DOUBLE_EQ(complete[1].at("ts").get<double>(), 2.001);
    EXPECT_DOUBLE_EQ(complete[1].at("dur").get<double>(), 0.001);
    EXPECT_EQ(complete[1].at("args").at("token"), 1);

    EXPECT_EQ(complete[2].at("name"), "wait \"x\"") << "escaped and read back";
    EXPECT_EQ(complete[2].at("args").at("layer"), -1);
    EXPECT_DOUBLE_EQ(complete[2].at("dur").get<double>(), 0.0);

    ASSERT_EQ(counterEvents.size(), 1u);
    EXPECT_EQ(counterEvents[0].at("name"), "staging MiB");
    EXPECT_DOUBLE_EQ(counterEvents[0].at("ts").get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(counterEvents[0].at("args").at("value").get<double>(), 48.5);
}

TEST(TraceChrome, ExplicitOriginAndLargeTraceRoundTrip)
{
    TempDir dir;
    const std::string path = (dir.path / "big.json").string();
    std::vector<Span> spans;
    for (uint32_t i = 0; i < 50000; ++i)  // several 1 MiB flushes
        spans.push_back(span(Lane::HostToDevice, 1'000'000 + i * 100, 1'000'050 + i * 100, i,
                             i, static_cast<int>(i % 32), "copy"));
    ChromeTraceOptions options;
    options.originNs = 500'000;
    const Status st = writeChromeTrace(spans, path, options);
    ASSERT_TRUE(st.ok()) << st.error().message;
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot read " << path;
    const nlohmann::json doc = nlohmann::json::parse(in);
    size_t count = 0;
    for (const auto& e : doc.at("traceEvents")) {
        if (e.at("ph") != "X") continue;
        const auto token = e.at("args").at("token").get<uint32_t>();
        ASSERT_EQ(token, count);
        EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 500.0 + token * 0.1);
        EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 0.05);
        ++count;
    }
    EXPECT_EQ(count, spans.size());
}

TEST(TraceChrome, UnwritablePathGivesErrorAndLeavesNoTemporary)
{
    TempDir dir;
    const std::vector<Span> spans = {span(Lane::SsdRead, 0, 10)};

    // The parent "folder" is a regular file: cannot even create the temporary.
    const fs::path notDir = dir.path / "plain-file";
    std::ofstream(notDir) << "x";
    const std::string bad = (notDir / "trace.json").string();
    const Status a = writeChromeTrace(spans, bad);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().code, ErrorCode::Io);
    EXPECT_NE(a.error().message.find(bad), std::string::npos) << a.error().message;

    // The target is an existing folder: the temporary is written, the rename fails, and the
    // temporary must be removed again.
    const fs::path target = dir.path / "occupied";
    fs::create_directory(target);
    const Status b = writeChromeTrace(spans, target.string());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().code, ErrorCode::Io);
    EXPECT_NE(b.error().message.find(target.string()), std::string::npos) << b.error().message;
    auto names = dir.names();
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"occupied", "plain-file"}));
    EXPECT_TRUE(fs::is_empty(target));
}

// Window [100, 200). Lanes (offsets from 100):
//   SSD read   [0,40) [20,60)  and [-50,20) clipped    → union [0,60)  = 60
//   host→dev   [50,70)                                 → 20
//   decompress [65,75)                                 → 10
//   device     [70,90); CPU [85,95)                    → compute union [70,95) = 25
//   stall      [95,100)                                → 5
// Attribution by priority: compute 25, decompress [65,70) 5, host→device [50,65) 15,
// SSD read [0,50) 50, stalls 5.
TEST(TraceSummary, UnionAndPriorityAttributionExact)
{
    const std::vector<Span> spans = {
        span(Lane::SsdRead, 100, 140, 7, 600),
        span(Lane::SsdRead, 120, 160, 7, 400),
        span(Lane::SsdRead, 50, 120, 7, 700),   // 20 of 70 ns inside: 200 bytes count
        span(Lane::HostToDevice, 150, 170, 7, 300),
        span(Lane::Decompress, 165, 175, 8),
        span(Lane::DeviceCompute, 170, 190, 8),
        span(Lane::CpuCompute, 185, 195, 8),
        span(Lane::Stall, 195, 200, 8),
        span(Lane::SsdRead, 300, 400, 9, 5000),  // outside: ignored
    };
    const Summary s = summarize(spans, 100, 200);
    EXPECT_EQ(s.windowNs, 100u);
    EXPECT_EQ(s.lane(Lane::SsdRead).busyNs, 60u);
    EXPECT_EQ(s.lane(Lane::SsdRead).spans, 3u);
    EXPECT_DOUBLE_EQ(s.lane(Lane::SsdRead).busyFraction, 0.6);
    EXPECT_DOUBLE_EQ(s.lane(Lane::SsdRead).bytes, 1200.0);
    EXPECT_DOUBLE_EQ(s.lane(Lane::SsdRead).bytesPerSecond, 1200.0 / 60e-9);
    EXPECT_EQ(s.lane(Lane::HostToDevice).busyNs, 20u);
    EXPECT_DOUBLE_EQ(s.lane(Lane::HostToDevice).bytesPerSecond, 300.0 / 20e-9);
    EXPECT_EQ(s.lane(Lane::Decompress).busyNs, 10u);
    EXPECT_EQ(s.lane(Lane::DeviceCompute).busyNs, 20u);
    EXPECT_EQ(s.lane(Lane::CpuCompute).busyNs, 10u);
    EXPECT_EQ(s.lane(Lane::Stall).busyNs, 5u);

    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::Compute)], 25u);
    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::Decompress)], 5u);
    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::HostToDevice)], 15u);
    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::SsdRead)], 50u);
    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::Stalls)], 5u);
    double total = 0;
    for (size_t c = 0; c < kCategoryCount; ++c) total += s.share(static_cast<Category>(c));
    EXPECT_DOUBLE_EQ(total, 1.0);

    EXPECT_EQ(s.tokens, 2u);
    EXPECT_EQ(s.firstToken, 7u);
    EXPECT_EQ(s.lastToken, 8u);
    EXPECT_DOUBLE_EQ(s.nsPerToken, 50.0);
    EXPECT_EQ(s.bottleneck(), Category::SsdRead);
    EXPECT_EQ(s.text(), "SSD read 50%, compute 25%, host→device 15%, decompress 5%, stalls 5%");
}

TEST(TraceSummary, IdleGapsCountAsStallsAndTextAddsUpTo100)
{
    // Thirds: 33.3% each; whole percents must still add up to 100.
    const std::vector<Span> thirds = {span(Lane::CpuCompute, 0, 1), span(Lane::SsdRead, 1, 2),
                                      span(Lane::HostToDevice, 2, 3)};
    EXPECT_EQ(summarize(thirds, 0, 3).text(), "compute 34%, host→device 33%, SSD read 33%");

    // Nothing but an idle gap and a host→device copy.
    const std::vector<Span> gap = {span(Lane::HostToDevice, 10, 40)};
    const Summary s = summarize(gap, 0, 100);
    EXPECT_EQ(s.attributedNs[static_cast<size_t>(Category::Stalls)], 70u);
    EXPECT_EQ(s.bottleneck(), Category::HostToDevice);
    EXPECT_EQ(s.text(), "stalls 70%, host→device 30%");

    const Summary empty = summarize({}, 5, 5);
    EXPECT_EQ(empty.windowNs, 0u);
    EXPECT_EQ(empty.bottleneck(), Category::Stalls);
    EXPECT_EQ(empty.text(), "no time measured");
}

TEST(TraceSummary, PerTokenSplit)
{
    const std::vector<Span> spans = {
        span(Lane::SsdRead, 10, 20, 0),       span(Lane::DeviceCompute, 0, 10, 0),
        span(Lane::Stall, 50, 60, 1),         span(Lane::SsdRead, 20, 50, 1),
        span(Lane::HostToDevice, 30, 40, 1),  // overlaps the read: host→device wins there
    };
    const auto perToken = summarizePerToken(spans);
    ASSERT_EQ(perToken.size(), 2u);

    EXPECT_EQ(perToken[0].beginNs, 0u);
    EXPECT_EQ(perToken[0].endNs, 20u);
    EXPECT_EQ(perToken[0].tokens, 1u);
    EXPECT_EQ(perToken[0].firstToken, 0u);
    EXPECT_EQ(perToken[0].text(), "compute 50%, SSD read 50%");

    EXPECT_EQ(perToken[1].beginNs, 20u);
    EXPECT_EQ(perToken[1].endNs, 60u);
    EXPECT_EQ(perToken[1].firstToken, 1u);
    EXPECT_DOUBLE_EQ(perToken[1].nsPerToken, 40.0);
    EXPECT_DOUBLE_EQ(perToken[1].share(Category::SsdRead), 0.5);
    EXPECT_DOUBLE_EQ(perToken[1].share(Category::HostToDevice), 0.25);
    EXPECT_DOUBLE_EQ(perToken[1].share(Category::Stalls), 0.25);
    EXPECT_EQ(perToken[1].lane(Lane::SsdRead).busyNs, 30u);
    EXPECT_EQ(perToken[1].bottleneck(), Category::SsdRead);
    EXPECT_EQ(perToken[1].text(), "SSD read 50%, host→device 25%, stalls 25%");
}

TEST(TraceSummary, CompareWithPrediction)
{
    constexpr uint64_t ms = 1'000'000;
    const std::vector<Span> spans = {span(Lane::SsdRead, 0, 20 * ms, 0),
                                     span(Lane::SsdRead, 20 * ms, 40 * ms, 1),
                                     span(Lane::DeviceCompute, 40 * ms, 45 * ms, 1)};
    const Summary s = summarize(spans, 0, 45 * ms);
    const LanePrediction predicted[] = {{Lane::SsdRead, 0.010}, {Lane::DeviceCompute, 0.005}};
    const std::string table = compareWithPrediction(s, predicted);
    // Header plus one line per prediction.
    EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
    const auto ssd = table.find("SSD read");
    ASSERT_NE(ssd, std::string::npos) << table;
    const std::string ssdLine = table.substr(ssd, table.find('\n', ssd) - ssd);
    EXPECT_NE(ssdLine.find("0.020000"), std::string::npos) << ssdLine;  // 40 ms / 2 tokens
    EXPECT_NE(ssdLine.find("0.010000"), std::string::npos) << ssdLine;
    EXPECT_NE(ssdLine.find("2.00x"), std::string::npos) << ssdLine;
    const auto dev = table.find("device compute");
    ASSERT_NE(dev, std::string::npos) << table;
    EXPECT_NE(table.find("0.50x", dev), std::string::npos) << table;  // 2.5 ms vs 5 ms
}
