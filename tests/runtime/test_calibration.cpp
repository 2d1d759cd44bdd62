// Every run calibrates (issue 33, core/hw/calibration.h), with injected measurements on made-up
// hardware: a profile probed under load (its SSD measured 3x too slow) is corrected by one run
// and flagged as suspect; a tiny model's fixed per-token cost, which no bandwidth figure has, is
// learned from one run and applied to its size class only; recent and longer runs weigh more;
// the rows live in the probe's cache file and survive a round trip through it.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/engine/engine.h"
#include "core/hw/calibration.h"
#include "core/model/llama_model.h"
#include "core/plan/planner.h"
#include "../common/made_up_hardware.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

plan::PlannerInput input(const LlamaModel& m, const hw::HardwareProfile& profile, uint64_t vram, uint64_t ram)
{
    plan::PlannerInput in;
    in.model = &m;
    in.profile = profile;
    in.vramBudget = vram;
    in.ramBudget = ram;
    in.contextLength = 64;
    in.batch = 4;
    return in;
}

// What a run on the machine `truth` describes would measure for the plan `p` made from another
// profile: the time per token and each lane as `truth`'s figures predict that same placement.
hw::RunMeasurement runOn(const plan::PlanResult& p, const plan::PlanResult& truth, int tokens)
{
    hw::RunMeasurement run;
    run.backend = "cpu";
    run.format = p.weightFormat;
    for (const auto& t : p.placement.tensors) run.weightBytes += t.bytes;
    run.tokens = tokens;
    run.bottleneck = p.bottleneck;
    run.predictedSecondsPerToken = p.probeSecondsPerToken;
    run.measuredSecondsPerToken = truth.probeSecondsPerToken;
    run.lanes = {{"ssd", p.probeLanes.ssdRead, truth.probeLanes.ssdRead},
                 {"device", p.probeLanes.deviceCompute, truth.probeLanes.deviceCompute}};
    return run;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The made-up machine as the probe's cache file `file` holds it.
hw::HardwareProfile cachedProfile(const std::string& file)
{
    hw::HardwareProfile profile = testing_support::madeUpHardware();
    profile.fingerprint = "test";
    profile.measuredAt = "2026-11-28T10:00:00.000Z";
    std::ofstream(file) << hw::profileToJson(profile);
    return profile;
}

}  // namespace

TEST(Calibration, AProfileProbedUnderLoadIsCorrectedByOneRun)
{
    auto m = LlamaModel::load(kModel);
    ASSERT_TRUE(m) << m.error().message;
    hw::HardwareProfile machine = testing_support::madeUpHardware();  // the SSD reads 1 GB/s
    hw::HardwareProfile underLoad = machine;
    underLoad.storage.sequentialBytesPerSecond = machine.storage.sequentialBytesPerSecond / 3;  // probed while busy
    underLoad.measuredAt = "2026-11-28T00:00:00.000Z";
    // Budgets that leave most of the weights on the SSD: the SSD is the bottleneck.
    auto slow = plan::planPlacement(input(**m, underLoad, 600 << 10, 64 << 10));
    ASSERT_TRUE(slow) << slow.error().message;
    ASSERT_EQ(slow->bottleneck, "ssd");
    ASSERT_EQ(slow->calibrationRuns, 0);
    EXPECT_EQ(slow->secondsPerToken, slow->probeSecondsPerToken);
    auto truth = plan::predictPlacement(input(**m, machine, 600 << 10, 64 << 10), slow->placement);
    ASSERT_TRUE(truth) << truth.error().message;
    const double miss = slow->secondsPerToken / truth->secondsPerToken;
    EXPECT_GT(miss, 2.0) << "the loaded probe's prediction is far off before any run";

    hw::RunMeasurement run = runOn(*slow, *truth, 64);
    run.measuredSsdBytesPerSecond = machine.storage.sequentialBytesPerSecond;
    hw::addObservations(underLoad, hw::observationsOf(run, 1000));
    underLoad.suspect = hw::suspicionOf(underLoad, run);
    EXPECT_NE(underLoad.suspect.find("1.00 GB/s"), std::string::npos) << underLoad.suspect;
    EXPECT_NE(underLoad.suspect.find("0.33 GB/s"), std::string::npos) << underLoad.suspect;
    EXPECT_NE(underLoad.suspect.find("--remeasure"), std::string::npos) << underLoad.suspect;

    auto again = plan::planPlacement(input(**m, underLoad, 600 << 10, 64 << 10));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->calibrationRuns, 1);
    EXPECT_EQ(again->probeSecondsPerToken, slow->probeSecondsPerToken) << "the probe's figures stay as they were";
    const double error = std::abs(again->secondsPerToken / truth->secondsPerToken - 1.0);
    std::printf("[ INFO     ] probe under load: predicted %.3f ms/token before, %.3f after one run; the machine %.3f "
                "(off by %.1fx, then %.1f%%)\n",
                slow->secondsPerToken * 1e3, again->secondsPerToken * 1e3, truth->secondsPerToken * 1e3, miss, 100 * error);
    EXPECT_LT(error, 0.15);
    EXPECT_NEAR(again->lanes.ssdRead, truth->lanes.ssdRead, 1e-9 + 0.01 * truth->lanes.ssdRead);
    bool noted = false, suspect = false;
    for (const auto& n : again->notes) {
        noted |= n.find("calibrated by 1 run") != std::string::npos;
        suspect |= n.find("looks wrong") != std::string::npos;
    }
    EXPECT_TRUE(noted);
    EXPECT_TRUE(suspect);
    // plan's text and JSON give both figures: calibrated, and the probe's alone.
    const std::string text = plan::planText(*again, false);
    EXPECT_NE(text.find("calibrated by runs | the probe's figures alone"), std::string::npos) << text;
    EXPECT_NE(text.find("(1 run)"), std::string::npos) << text;
    EXPECT_EQ(plan::planText(*slow, false).find("calibrated by runs"), std::string::npos);
    EXPECT_NE(plan::planJson(*again).find("\"probe_only\""), std::string::npos);
    // A run whose SSD kept to the probe's figure raises no suspicion.
    run.measuredSsdBytesPerSecond = underLoad.storage.sequentialBytesPerSecond * 1.5;
    EXPECT_EQ(hw::suspicionOf(underLoad, run), "");
}

TEST(Calibration, ATinyModelsFixedCostIsLearnedForItsSizeClass)
{
    auto m = LlamaModel::load(kModel);
    ASSERT_TRUE(m) << m.error().message;
    hw::HardwareProfile profile = testing_support::madeUpHardware();
    auto resident = plan::planPlacement(input(**m, profile, 64 << 20, 64 << 20));
    ASSERT_TRUE(resident) << resident.error().message;
    ASSERT_EQ(resident->ssdBytes, 0u);
    ASSERT_EQ(resident->bottleneck, "device");
    // The run: 40x the bandwidth's time per token (launches, sampling, wake-ups: fixed costs).
    hw::RunMeasurement run;
    run.backend = "cpu";
    run.format = resident->weightFormat;
    for (const auto& t : resident->placement.tensors) run.weightBytes += t.bytes;
    run.tokens = 128;
    run.bottleneck = resident->bottleneck;
    run.predictedSecondsPerToken = resident->probeSecondsPerToken;
    run.measuredSecondsPerToken = 40 * resident->probeSecondsPerToken;
    run.lanes = {{"device", resident->probeLanes.deviceCompute, 40 * resident->probeLanes.deviceCompute}};
    hw::addObservations(profile, hw::observationsOf(run, 1000));
    auto after = plan::planPlacement(input(**m, profile, 64 << 20, 64 << 20));
    ASSERT_TRUE(after) << after.error().message;
    EXPECT_NEAR(after->secondsPerToken, run.measuredSecondsPerToken, 1e-6 * run.measuredSecondsPerToken);
    EXPECT_NEAR(after->lanes.deviceCompute, 40 * resident->probeLanes.deviceCompute, 1e-12 + 1e-6 * after->lanes.deviceCompute);
    // Another size class, another device, another weight format: nothing learned there.
    const int size = hw::modelSizeClass(run.weightBytes);
    const std::string f = resident->weightFormat;
    EXPECT_EQ(f, "F32");  // stories260K
    EXPECT_EQ(hw::calibrationFor(profile, "cpu", "token/device", size, f).runs, 1);
    EXPECT_EQ(hw::calibrationFor(profile, "cpu", "token/device", size + 1, f).runs, 0);
    EXPECT_EQ(hw::calibrationFor(profile, "cuda", "token/device", size, f).runs, 0);
    EXPECT_EQ(hw::calibrationFor(profile, "cpu", "token/ssd", size, f).runs, 0);
    EXPECT_EQ(hw::calibrationFor(profile, "cpu", "token/device", size, "BITMAP").runs, 0);
    EXPECT_EQ(hw::calibrationFor(profile, "cpu", "token/device", size, "F32+neuron-cache").runs, 0);
    EXPECT_EQ(hw::modelSizeClass(uint64_t(1) << 20), 0);
    EXPECT_EQ(hw::modelSizeClass(uint64_t(4) << 20), 1);
    EXPECT_EQ(hw::modelSizeClass(uint64_t(2200) << 20), 5);  // TinyLlama-1.1B F16
}

TEST(Calibration, RecentAndLongerRunsWeighMore)
{
    hw::HardwareProfile p;
    auto row = [](double ratio, double tokens) {
        hw::Observation o;
        o.backend = "cpu";
        o.lane = "token/ssd";
        o.ratio = ratio;
        o.tokens = tokens;
        return o;
    };
    hw::addObservations(p, {row(2.0, 256)});
    EXPECT_DOUBLE_EQ(hw::calibrationFor(p, "cpu", "token/ssd", 0).ratio, 2.0);
    hw::addObservations(p, {row(1.0, 256)});  // newer: twice the weight
    EXPECT_NEAR(hw::calibrationFor(p, "cpu", "token/ssd", 0).ratio, std::pow(2.0, 1.0 / 3.0), 1e-12);
    hw::addObservations(p, {row(8.0, 8)});  // newest, but a short run
    const hw::Calibration c = hw::calibrationFor(p, "cpu", "token/ssd", 0);
    EXPECT_EQ(c.runs, 3);
    EXPECT_LT(c.ratio, 1.5);
    hw::addObservations(p, {row(0.0, 10), row(std::nan(""), 10), row(1.0, 0)});  // not runs: ignored
    EXPECT_EQ(hw::calibrationFor(p, "cpu", "token/ssd", 0).runs, 3);
    for (int i = 0; i < 20; ++i) hw::addObservations(p, {row(1.0, 100)});
    EXPECT_EQ(hw::calibrationFor(p, "cpu", "token/ssd", 0).runs, hw::kCalibrationRows);
    EXPECT_EQ(int(p.observed.size()), hw::kCalibrationRows);
}

TEST(Calibration, RunsAreKeptInTheProbesCacheFile)
{
    testing_support::TempDir dir;
    const std::string file = dir.path() + "/hardware-profile.json";
    hw::HardwareProfile profile = cachedProfile(file);
    hw::RunMeasurement run;
    run.backend = "cpu";
    run.weightBytes = 1 << 20;
    run.tokens = 32;
    run.bottleneck = "ssd";
    run.predictedSecondsPerToken = 0.003;
    run.measuredSecondsPerToken = 0.001;
    run.measuredSsdBytesPerSecond = 3 * profile.storage.sequentialBytesPerSecond;
    auto c = hw::recordRun(profile, run, file);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->runs, 1);
    EXPECT_NEAR(c->ratio, 1.0 / 3.0, 1e-12);
    auto back = hw::profileFromJson(readText(file));
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_EQ(back->observed.size(), 1u);
    EXPECT_EQ(back->observed[0].lane, "token/ssd");
    EXPECT_NE(back->suspect.find("3.00 GB/s"), std::string::npos) << back->suspect;
    hw::HardwareProfile expected = *back;
    EXPECT_EQ(hw::profileFromJson(hw::profileToJson(expected)).value(), expected) << "a round trip keeps the rows";
    // A file that holds another measurement now (re-measured since): left alone.
    hw::HardwareProfile older = profile;
    older.measuredAt = "2026-11-01T10:00:00.000Z";
    const std::string before = readText(file);
    auto refused = hw::recordRun(older, run, file);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("another measurement"), std::string::npos) << refused.error().message;
    EXPECT_EQ(readText(file), before);
}

// engine::calibrateFromRun: a decode's trace summary (lanes busy per token) against the plan's
// probe-only figures, into the cache file; a quick profile (tests' rough figures) is not calibrated.
TEST(Calibration, ADecodesTraceCalibratesThroughTheEngine)
{
    auto m = LlamaModel::load(kModel);
    ASSERT_TRUE(m) << m.error().message;
    testing_support::TempDir dir;
    const std::string file = dir.path() + "/hardware-profile.json";
    hw::HardwareProfile profile = cachedProfile(file);
    auto p = plan::planPlacement(input(**m, profile, 600 << 10, 64 << 10));
    ASSERT_TRUE(p) << p.error().message;
    ASSERT_EQ(p->bottleneck, "ssd");
    trace::Summary s;
    const int tokens = 32;
    s.windowNs = uint64_t(tokens * 2 * p->probeSecondsPerToken * 1e9);  // twice the prediction
    s.tokens = tokens;
    s.lanes[size_t(trace::Lane::SsdRead)].busyNs = uint64_t(tokens * 2 * p->probeLanes.ssdRead * 1e9);
    auto c = engine::calibrateFromRun(*p, profile, s, tokens, 2 * p->probeSecondsPerToken, 0.0, file);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->runs, 1);
    EXPECT_NEAR(c->ratio, 2.0, 1e-9);
    auto back = hw::profileFromJson(readText(file));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_NEAR(hw::calibrationFor(*back, "cpu", "ssd", p->sizeClass, p->weightFormat).ratio, 2.0, 1e-3);
    EXPECT_EQ(hw::calibrationFor(*back, "cpu", "ssd", p->sizeClass, p->weightFormat + "+neuron-cache").runs, 0);
    EXPECT_EQ(back->suspect, "");  // the SSD's rate was not measured (0): no suspicion
    auto again = plan::planPlacement(input(**m, *back, 600 << 10, 64 << 10));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_NEAR(again->secondsPerToken, 2 * p->probeSecondsPerToken, 1e-9 * again->secondsPerToken);

    // An engine given its plan has no profile of its own: the cached one takes the run.
    auto third = engine::calibrateFromRun(*p, hw::HardwareProfile{}, s, tokens, 2 * p->probeSecondsPerToken, 0.0, file);
    ASSERT_TRUE(third) << third.error().message;
    EXPECT_EQ(third->runs, 2);

    hw::HardwareProfile quick = profile;
    quick.quick = true;
    EXPECT_FALSE(engine::calibrateFromRun(*p, quick, s, tokens, 2 * p->probeSecondsPerToken, 0.0, file));
}

// A run judges the probe's disk figure only by reads of the probe's size (1 MiB and up): a tiny
// model's reads of a few hundred KiB wait on latency, and their slow rate says nothing of the disk.
TEST(Calibration, OnlyReadsOfTheProbesSizeJudgeItsDiskFigure)
{
    auto m = LlamaModel::load(kModel);
    ASSERT_TRUE(m) << m.error().message;
    for (const double spanBytes : {256.0 * 1024, 2.0 * 1024 * 1024}) {
        SCOPED_TRACE(spanBytes);
        testing_support::TempDir dir;
        const std::string file = dir.path() + "/hardware-profile.json";
        hw::HardwareProfile profile = cachedProfile(file);
        auto p = plan::planPlacement(input(**m, profile, 600 << 10, 64 << 10));
        ASSERT_TRUE(p) << p.error().message;
        trace::Summary s;
        const int tokens = 32;
        s.windowNs = uint64_t(tokens * p->probeSecondsPerToken * 1e9);
        s.tokens = tokens;
        trace::LaneStats& ssd = s.lanes[size_t(trace::Lane::SsdRead)];
        ssd.busyNs = s.windowNs / 2;
        ssd.spans = uint64_t(tokens) * 4;
        ssd.bytes = double(ssd.spans) * spanBytes;
        const double slow = profile.storage.sequentialBytesPerSecond / 4;  // 4x slower than the probe
        ASSERT_TRUE(engine::calibrateFromRun(*p, profile, s, tokens, p->probeSecondsPerToken, slow, file));
        auto back = hw::profileFromJson(readText(file));
        ASSERT_TRUE(back) << back.error().message;
        if (spanBytes < 1 << 20) EXPECT_EQ(back->suspect, "");
        else EXPECT_NE(back->suspect.find("the probe measured"), std::string::npos) << back->suspect;
    }
}

// The probe knows when the machine was busy: other processes' CPU time or time stolen by the
// hypervisor while it measured; this process's own work does not count.
TEST(ProbeNoise, ABusyMachineIsNamed)
{
    hw::CpuSample a;
    a.total = 1000;
    a.idle = 600;
    hw::CpuSample b = a;
    b.total = 1020;  // 20 s of CPU time over the probe (2 cores, 10 s)
    b.idle = 600 + 9;
    b.self = 10;     // the probe itself kept one core busy: quiet
    EXPECT_EQ(hw::busyReason(a, b, 2), "");
    b.self = 2;      // others used 9 of the 20 s
    EXPECT_NE(hw::busyReason(a, b, 2).find("other processes kept 45 %"), std::string::npos) << hw::busyReason(a, b, 2);
    b.self = 11;
    b.steal = a.steal + 2;
    EXPECT_NE(hw::busyReason(a, b, 2).find("hypervisor took 10 %"), std::string::npos) << hw::busyReason(a, b, 2);
    // The real machine: a sample reads sane figures.
    const hw::CpuSample now = hw::sampleCpu();
    EXPECT_GT(now.total, 0);
    EXPECT_GE(now.total, now.idle);
    EXPECT_GT(now.self, 0);
}

// Host-memory contention: on a device with memory of its own, HeteGen's split has the CPU read its
// rows from RAM while the copies read the device's; where the probe measured the two together
// reaching less than their sum, both slow alike and the prediction of the split placement drops.
TEST(Contention, TheSharedHostBandwidthLowersASplitPlacementsPrediction)
{
    auto m = LlamaModel::load(kModel);
    ASSERT_TRUE(m) << m.error().message;
    hw::HardwareProfile profile = testing_support::madeUpHardware();
    profile.host.cpuMatvec = {{gpu::DType::F32, 20e9}};
    profile.devices[0].caps.hostPointers = false;  // a GPU: copies into its own memory
    profile.devices[0].caps.asyncCopy = true;
    auto alone = plan::planPlacement(input(**m, profile, 400 << 10, 64 << 20));
    ASSERT_TRUE(alone) << alone.error().message;
    bool split = false;
    for (const auto& t : alone->placement.tensors) split |= t.tier == plan::Tier::Host && t.deviceFraction < 1.0;
    ASSERT_TRUE(split) << "some RAM-tier rows are split between the CPU and the device";
    ASSERT_GT(alone->lanes.cpuCompute, 0);
    // Measured together: 15 GB/s, where alone they read 20 (CPU) + 10 (copies): 2x slower.
    profile.devices[0].sharedHostReadBytesPerSecond = 15e9;
    auto shared = plan::predictPlacement(input(**m, profile, 400 << 10, 64 << 20), alone->placement);
    ASSERT_TRUE(shared) << shared.error().message;
    EXPECT_NEAR(shared->lanes.cpuCompute, 2 * alone->lanes.cpuCompute, 1e-12 + 1e-9 * alone->lanes.cpuCompute);
    EXPECT_GT(shared->lanes.hostToDevice, alone->lanes.hostToDevice);
    EXPECT_GT(shared->secondsPerToken, alone->secondsPerToken);
    std::printf("[ INFO     ] split placement: %.3f ms/token with the copies and the CPU reading RAM at once, %.3f "
                "without the contention\n",
                shared->secondsPerToken * 1e3, alone->secondsPerToken * 1e3);
    // The same split everywhere: the device's share of rows is chosen as before (both slow alike).
    auto replanned = plan::planPlacement(input(**m, profile, 400 << 10, 64 << 20));
    ASSERT_TRUE(replanned) << replanned.error().message;
    for (size_t i = 0; i < replanned->placement.tensors.size() && i < alone->placement.tensors.size(); ++i) {
        if (replanned->placement.tensors[i].tier == plan::Tier::Host && alone->placement.tensors[i].tier == plan::Tier::Host) {
            EXPECT_DOUBLE_EQ(replanned->placement.tensors[i].deviceFraction, alone->placement.tensors[i].deviceFraction);
        }
    }
    // A bandwidth measured above the sum: no contention.
    profile.devices[0].sharedHostReadBytesPerSecond = 40e9;
    auto roomy = plan::predictPlacement(input(**m, profile, 400 << 10, 64 << 20), alone->placement);
    ASSERT_TRUE(roomy) << roomy.error().message;
    EXPECT_DOUBLE_EQ(roomy->probeSecondsPerToken, alone->probeSecondsPerToken);
}
