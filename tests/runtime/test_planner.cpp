// The placement planner on made-up hardware figures: budgets are hard limits, more budget never
// means more SSD traffic, gain-per-byte order, the pipeline model, and the runtime's real
// memory use stays within what the plan promised.

#include <gtest/gtest.h>

#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/model_tensors.h"
#include "core/plan/planner.h"
#include "core/runtime/llama_session.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/made_up_hardware.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

using testing_support::madeUpHardware;

plan::PlannerInput input(const LlamaModel& m, uint64_t vram, uint64_t ram, int prefetch = 2)
{
    plan::PlannerInput in;
    in.model = &m;
    in.profile = madeUpHardware();
    in.vramBudget = vram;
    in.ramBudget = ram;
    in.contextLength = 64;
    in.batch = 4;
    in.prefetchDepth = prefetch;
    return in;
}

// The session runs the plan on a CPU device of `budget` bytes (context 64, batch 4: the
// planner's input above), and its peak stays within what the plan counted.
void expectRunsWithinThePlan(const LlamaModel& model, const plan::PlanResult& r, uint64_t budget)
{
    auto device = gpu::createCpuDevice(1, budget);
    SessionOptions o;
    o.contextLength = 64;
    o.batch = 4;
    o.placement = r.placement;
    auto session = LlamaSession::create(model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    ASSERT_TRUE((*session)->forward(1, 0));
    EXPECT_LE(device->memoryStats().peak, r.deviceTotal() + (64u << 10));
}

}  // namespace

TEST(Planner, BudgetsAreHardLimitsAndMoreBudgetMeansLessSsd)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const uint64_t working = LlamaSession::workingBytes((*model)->config(), 64, 4);
    uint64_t previousSsd = UINT64_MAX;
    for (uint64_t extra : {uint64_t(600) << 10, uint64_t(1) << 20, uint64_t(2) << 20, uint64_t(64) << 20}) {
        auto r = plan::planPlacement(input(**model, working + extra, 1));
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_LE(r->deviceTotal(), working + extra);
        EXPECT_LE(r->hostTotal(), 1u);
        EXPECT_LE(r->ssdBytes, previousSsd) << "budget " << extra;
        previousSsd = r->ssdBytes;
        for (const auto& t : r->placement.tensors) EXPECT_FALSE(t.reason.empty()) << t.name;

        // The runtime, given this plan and a device of exactly that budget, fits in it.
        expectRunsWithinThePlan(**model, *r, working + extra);
    }
    // With everything resident nothing is read from the SSD.
    auto all = plan::planPlacement(input(**model, uint64_t(1) << 30, uint64_t(1) << 30));
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(all->ssdBytes, 0u);
    ASSERT_NE(all->placement.find("token_embd.weight"), nullptr);
    EXPECT_EQ(all->placement.bytesOn(plan::Tier::Ssd), all->placement.find("token_embd.weight")->tier == plan::Tier::Ssd
                                                           ? all->placement.find("token_embd.weight")->bytes : 0u);
    // Too small: a clear error.
    auto none = plan::planPlacement(input(**model, working / 2, 0));
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code, ErrorCode::OutOfDeviceMemory);
    EXPECT_NE(none.error().message.find("budgets are too small"), std::string::npos);
}

// OPT keeps more than norms resident whatever the placement: the biases of every projection and
// its table of learned positions (3 MiB for OPT-125M's shape; its tied head streams through a
// 74 MiB slot). The plan counts them: the session fits a device of exactly the budget, and its
// peak stays within the plan's total.
TEST(Planner, OptsPositionsAndBiasesAreCounted)
{
    testing_support::TempDir dir("planner-opt");
    const std::string path = dir.path() + "/opt.gguf";
    SyntheticOptions so;
    so.preset = "opt-125m";
    so.layers = 2;
    ASSERT_TRUE(writeSyntheticModel(so, path));
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model) << model.error().message;
    const uint64_t working = LlamaSession::workingBytes((*model)->config(), 64, 4);
    for (uint64_t extra : {uint64_t(80) << 20, uint64_t(84) << 20, uint64_t(96) << 20, uint64_t(160) << 20}) {
        SCOPED_TRACE(extra);
        auto r = plan::planPlacement(input(**model, working + extra, uint64_t(64) << 20));
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_LE(r->deviceTotal(), working + extra);
        auto device = gpu::createCpuDevice(1, working + extra);
        SessionOptions o;
        o.contextLength = 64;
        o.batch = 4;
        o.placement = r->placement;
        o.streamer.hostBudget = uint64_t(64) << 20;
        auto session = LlamaSession::create(**model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        ASSERT_TRUE((*session)->forward(1, 0));
        EXPECT_LE(device->memoryStats().peak, r->deviceTotal() + (64u << 10));
    }
}

TEST(Planner, PipelineModelOverlapsLanesAndNaiveAddsThem)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    plan::Placement ssd = plan::uniformPlacement(**model, plan::Tier::Ssd);
    ssd.prefetchDepth = 0;
    auto naive = plan::predictPlacement(input(**model, 0, 0, 0), ssd);
    ssd.prefetchDepth = 2;
    auto prefetch = plan::predictPlacement(input(**model, 0, 0, 2), ssd);
    ASSERT_TRUE(naive && prefetch) << (naive ? "" : naive.error().message) << (prefetch ? "" : prefetch.error().message);
    const auto& l = naive->lanes;
    // Naive: every load and every compute in sequence.
    EXPECT_NEAR(naive->secondsPerToken, l.ssdRead + l.hostToDevice + l.deviceCompute, 1e-9);
    // Prefetching: bounded below by the busiest lane, and faster than naive.
    EXPECT_LT(prefetch->secondsPerToken, naive->secondsPerToken);
    EXPECT_GE(prefetch->secondsPerToken + 1e-12, std::max(l.ssdRead, l.deviceCompute));
    // The SSD lane follows the made-up 1 GB/s.
    EXPECT_NEAR(l.ssdRead, double(naive->ssdBytes) / 1e9, 1e-9);
}

TEST(Planner, EveryMoveIsRecordedWithAPositiveGain)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const uint64_t working = LlamaSession::workingBytes((*model)->config(), 64, 4);
    auto r = plan::planPlacement(input(**model, working + (3u << 20), 1));
    ASSERT_TRUE(r) << r.error().message;
    // Moves are numbered 1..k in the order taken (later moves can have a higher gain per byte
    // than earlier ones: a move that shrinks the largest streamed unit frees slot memory).
    std::vector<int> steps;
    for (const auto& t : r->placement.tensors) {
        int step = 0;
        double saved = 0, perGiB = 0;
        char budget[8] = {};
        if (std::sscanf(t.reason.c_str(), "step %d: saves %lf ms/token for %*f MiB of %7s (%lf ms per GiB)", &step,
                        &saved, budget, &perGiB) == 4) {
            steps.push_back(step);
            EXPECT_GT(saved, 0.0) << t.name;
            EXPECT_EQ(std::string(budget), t.tier == plan::Tier::Device ? "VRAM" : "RAM") << t.name;
        } else {
            EXPECT_NE(t.tier, plan::Tier::Device) << t.name << ": on the device without a recorded move";
        }
    }
    ASSERT_GT(steps.size(), 3u);
    std::sort(steps.begin(), steps.end());
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], int(i) + 1);
}

// A given placement (the CLI's --tier, the bench's baselines) is held to the budgets like a
// planned one: its prefetch depth is lowered until it fits (with a note), and when one slot does
// not fit it is refused before anything is allocated. Every layer's ffn_gate and ffn_down stay on
// the device, so each layer's SSD read runs through them to reach ffn_up (the streamer reads a
// small gap rather than issuing another request): the plan must count those 86 KiB, or the
// runtime overruns it.
TEST(Planner, GivenPlacementsFitTheirBudgetsOrAreRefused)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const uint64_t working = LlamaSession::workingBytes((*model)->config(), 64, 4);
    plan::Placement given = plan::uniformPlacement(**model, plan::Tier::Ssd);
    for (auto& t : given.tensors)
        if (t.name.ends_with(".ffn_gate.weight") || t.name.ends_with(".ffn_down.weight")) t.tier = plan::Tier::Device;
    int refused = 0, lowered = 0, ran = 0;
    for (int depth : {0, 2, 8}) {
        for (uint64_t extra = 64 << 10; extra <= (uint64_t(2) << 20); extra += 64 << 10) {
            SCOPED_TRACE(testing::Message() << "depth " << depth << ", budget working + " << extra);
            given.prefetchDepth = depth;
            const uint64_t budget = working + extra;
            auto r = plan::predictPlacement(input(**model, budget, 0, depth), given);
            if (!r) {
                EXPECT_EQ(r.error().code, ErrorCode::OutOfDeviceMemory);
                EXPECT_NE(r.error().message.find("the given placement needs"), std::string::npos) << r.error().message;
                ++refused;
                continue;
            }
            EXPECT_LE(r->deviceTotal(), budget);
            EXPECT_LE(r->placement.prefetchDepth, depth);
            if (r->placement.prefetchDepth < depth) {
                ++lowered;
                ASSERT_FALSE(r->notes.empty());
                EXPECT_NE(r->notes.front().find("prefetch depth lowered"), std::string::npos) << r->notes.front();
            }
            expectRunsWithinThePlan(**model, *r, budget);
            ++ran;
        }
    }
    EXPECT_GT(refused, 0);
    EXPECT_GT(lowered, 0);
    EXPECT_GT(ran, 0);
}

// The SSD read layout the streamer and the planner share.
TEST(Planner, SsdReadsMergeSmallGapsAndKeepFarPiecesApart)
{
    const uint64_t k = 4096;
    // Given out of order: piece 0 lies after piece 1; piece 2 is in another file.
    const std::vector<SsdPiece> pieces = {
        {0, 10 * k + 100, 5000}, {0, 3 * k + 10, 2 * k}, {1, 0, 100}, {0, (uint64_t(8) << 20), k}};
    const SsdLayout layout = layOutSsdReads(pieces);
    ASSERT_EQ(layout.reads.size(), 3u);
    // Pieces 1 and 0 are 5 pages apart: one read from page 3 to the end of piece 0.
    EXPECT_EQ(layout.reads[0].file, 0u);
    EXPECT_EQ(layout.reads[0].fileOffset, 3 * k);
    EXPECT_EQ(layout.reads[0].needEnd, 10 * k + 100 + 5000);
    EXPECT_EQ(layout.reads[0].bytes, 9 * k);  // pages 3..11
    EXPECT_EQ(layout.reads[0].slotOffset, 0u);
    EXPECT_EQ(layout.pieceSlotOffsets[1], 10u);
    EXPECT_EQ(layout.pieceSlotOffsets[0], 7 * k + 100);
    // 8 MiB away: a read of its own, at the next aligned place in the slot.
    EXPECT_EQ(layout.reads[1].fileOffset, uint64_t(8) << 20);
    EXPECT_EQ(layout.reads[1].bytes, k);
    EXPECT_EQ(layout.reads[1].slotOffset, 9 * k);
    EXPECT_EQ(layout.pieceSlotOffsets[3], 9 * k);
    // Another file: never merged.
    EXPECT_EQ(layout.reads[2].file, 1u);
    EXPECT_EQ(layout.reads[2].bytes, k);
    EXPECT_EQ(layout.pieceSlotOffsets[2], 10 * k);
    EXPECT_EQ(layout.slotBytes, 11 * k);
    EXPECT_EQ(layout.readBytes, 11 * k);
    EXPECT_TRUE(layOutSsdReads({}).reads.empty());
}

// The probe's per-layer overhead (ops issued and finished, whatever their bytes) is on every
// layer's compute path: all on the device, a token costs it once per layer more; a device that
// did not measure it (0) predicts as before.
TEST(Planner, EachLayerPaysTheMeasuredOpOverhead)
{
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model) << model.error().message;
    const plan::Placement resident = plan::uniformPlacement(**model, plan::Tier::Device);
    plan::PlannerInput in = input(**model, 0, 0);
    auto without = plan::predictPlacement(in, resident);
    constexpr double overhead = 20e-6;
    for (auto& d : in.profile.devices) d.layerOverheadSeconds = overhead;
    auto with = plan::predictPlacement(in, resident);
    ASSERT_TRUE(without && with);
    const int layers = (*model)->config().nLayers;
    EXPECT_NEAR(with->secondsPerToken - without->secondsPerToken, layers * overhead, 1e-12);
    EXPECT_NEAR(with->lanes.deviceCompute - without->lanes.deviceCompute, layers * overhead, 1e-12);
}
