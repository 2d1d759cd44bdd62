// The architecture families of core/model/families against ik_llama.cpp: small random-weight
// GGUFs of tests/data/models/families (their README says how they and their references were
// made) with the peer's prompt ids, greedy ids and first logits; every part of an architecture
// shown to matter by breaking it in a copy of the file; the same tokens with the experts on the
// SSD behind a cache of a quarter of them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/plan/session_memory.h"
#include "core/runtime/generator.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/forwarding_device.h"
#include "../common/kernel_sets.h"
#include "../common/llama_references.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kFamilies = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/families/";
using Reference = testing_support::LlamaReference;

// The references were made with f32 weights, f16 K and V caches (ik_llama.cpp takes no f32 V cache
// without flash attention) and no flash attention; the sessions here keep their caches in f16 too.
// The peer also rounds each query and each row of attention weights to f16 before multiplying them
// with the f16 cache, which moves its first logits (of order 10) by up to about 0.01: on
// tests/data/models/moe/tiny-qwen2moe.gguf its logits this way differ from llama.cpp's f32-cache
// reference by 0.0050-0.0136. Hence a tolerance of 0.02, with the greedy ids held exact.
constexpr float kLogitTolerance = 2e-2f;
// A greedy step where the peer's top two logits were closer than this is a tie (random weights
// have many), where either choice is right.
constexpr float kTieMargin = 0.005f;

struct Run {
    std::vector<int32_t> promptIds, greedy;
    float firstLogitsOff = 0.0f;  // the largest difference from the reference's
    int partings = 0;             // steps whose argmax was not the reference's, beyond ties
};

// The prompt, then the reference's greedy ids fed back one at a time (teacher forcing: a tie
// taken the other way does not send the rest elsewhere), counting the steps where our argmax is
// not the peer's and the peer's margin was no tie; `greedy` is our own choice at each step.
Run runAgainst(const LlamaModel& model, gpu::Device& device, const Reference& ref, SessionOptions options)
{
    Run r;
    r.promptIds = model.tokenizer().encode(ref.prompt, true);
    options.contextLength = 256;
    options.kvType = gpu::KvType::F16;
    auto session = LlamaSession::create(model, device, options);
    EXPECT_TRUE(session) << (session ? "" : session.error().message);
    if (!session) return r;
    const size_t vocab = size_t(model.config().vocabSize);
    auto logits = (*session)->forward(r.promptIds, 0);
    EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
    if (!logits) return r;
    for (size_t i = 0; i < vocab && i < ref.firstLogits.size(); ++i)
        r.firstLogitsOff = std::max(r.firstLogitsOff, std::fabs((*logits)[i] - ref.firstLogits[i]));
    int pos = int(r.promptIds.size());
    for (size_t s = 0; s < ref.greedyIds.size(); ++s) {
        const int32_t ours = argmax({*logits, vocab});
        r.greedy.push_back(ours);
        const float margin = s < ref.margins.size() ? ref.margins[s] : 1.0f;
        if (ours != ref.greedyIds[s] && margin >= kTieMargin) ++r.partings;
        logits = (*session)->forward(ref.greedyIds[s], pos++);
        EXPECT_TRUE(logits) << (logits ? "" : logits.error().message);
        if (!logits) return r;
    }
    return r;
}

void expectMatches(const LlamaModel& model, gpu::Device& device, const Reference& ref, const SessionOptions& options,
                   const std::string& what)
{
    const Run r = runAgainst(model, device, ref, options);
    EXPECT_EQ(r.promptIds, ref.promptIds) << what;
    EXPECT_LT(r.firstLogitsOff, kLogitTolerance) << what << ": first logits differ by up to " << r.firstLogitsOff;
    EXPECT_EQ(r.partings, 0) << what << ": greedy ids part from the peer's away from ties";
}

// expectMatches on every kernel set this CPU runs, the prompt in one batch and one token at a time.
void expectMatchesOnEveryKernelSet(const LlamaModel& model, const std::vector<Reference>& refs, const std::string& name)
{
    for (const std::string& set : testing_support::kernelSetNamesThisCpuRuns()) {
        setenv("SPILLWAY_CPU_KERNELS", set.c_str(), 1);
        auto device = gpu::createCpuDevice(2);
        for (const Reference& ref : refs)
            for (int batch : {1, 32}) {
                SessionOptions o;
                o.batch = batch;
                expectMatches(model, *device, ref, o,
                              name + " '" + ref.prompt + "' kernels " + set + ", batch " + std::to_string(batch));
            }
        unsetenv("SPILLWAY_CPU_KERNELS");
    }
}

// A copy of `from` in `dir` with `patch` applied to its bytes.
std::string patchedCopy(const std::filesystem::path& dir, const std::string& from, const std::string& name,
                        const std::function<void(std::vector<char>&)>& patch)
{
    std::ifstream in(from, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    patch(bytes);
    const std::string to = (dir / name).string();
    std::ofstream(to, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return to;
}

// The value bytes of metadata key `key` (its string, then a 4-byte type, then the value).
size_t valueAt(const std::vector<char>& bytes, const std::string& key)
{
    const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
    EXPECT_NE(at, bytes.end()) << key;
    return size_t(at - bytes.begin()) + key.size() + 4;
}

// Every float of each tensor named `suffix` in every layer (or `layers` of them) set to `value`.
void fillTensors(const LlamaModel& model, std::vector<char>& bytes, const std::string& suffix, float value,
                 int layers = -1)
{
    int found = 0;
    for (const ModelTensor& t : model.tensors()) {
        if (t.name.size() < suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        ASSERT_EQ(t.type, gpu::DType::F32) << t.name;
        for (uint64_t i = 0; i < t.bytes / 4; ++i) std::memcpy(&bytes[t.fileOffset + 4 * i], &value, 4);
        ++found;
    }
    EXPECT_EQ(found, layers < 0 ? model.config().nLayers : layers) << suffix;
}

// Everything on the device but the experts' stacks, which are on the SSD (behind the expert cache).
plan::Placement expertsOnTheSsd(const LlamaModel& model)
{
    plan::Placement placement = plan::uniformPlacement(model, plan::Tier::Device);
    for (auto& t : placement.tensors)
        if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
    return placement;
}

// A part of an architecture broken in a copy of the file: its name and the patch of the bytes.
struct Break {
    const char* what;
    std::function<void(std::vector<char>&)> patch;
};

// Each break, applied to a copy of `original` in `dir`, parts the greedy ids from the peer's: so
// matching the peer checks that part.
void expectEachBreakPartsFromThePeer(const std::filesystem::path& dir, const std::string& original,
                                     const std::vector<Reference>& refs, const std::vector<Break>& breaks)
{
    auto device = gpu::createCpuDevice(2);
    for (const Break& br : breaks) {
        const std::string path = patchedCopy(dir, original, "broken.gguf", br.patch);
        auto broken = LlamaModel::load(path);
        ASSERT_TRUE(broken) << br.what << ": " << broken.error().message;
        int partings = 0;
        for (const Reference& ref : refs) partings += runAgainst(**broken, *device, ref, {}).partings;
        EXPECT_GT(partings, 0) << br.what << " gives the peer's tokens: the test would not see it broken";
    }
}

// A reference's prompt and greedy ids (`tokens`), and the same with one id changed at `back`, five
// ids into the reply (`edited`): an edit that goes back into a reply.
struct EditedSequence {
    std::vector<int32_t> tokens, edited;
    int back = 0;
};
EditedSequence editInsideTheReply(const Reference& ref)
{
    EditedSequence e;
    e.tokens = ref.promptIds;
    e.tokens.insert(e.tokens.end(), ref.greedyIds.begin(), ref.greedyIds.end());
    e.back = int(ref.promptIds.size()) + 5;
    e.edited.assign(e.tokens.begin(), e.tokens.begin() + e.back);
    e.edited.push_back(e.tokens[size_t(e.back)] == 7 ? 8 : 7);
    e.edited.insert(e.edited.end(), e.tokens.begin() + e.back + 1, e.tokens.end());
    return e;
}

// The last logits of running `t` from `pos` (empty, and a failure, on an error).
std::vector<float> logitsOf(LlamaSession& s, std::span<const int32_t> t, int pos)
{
    auto l = s.forward(t, pos);
    EXPECT_TRUE(l) << (l ? "" : l.error().message);
    const size_t vocab = size_t(s.model().config().vocabSize);
    return l ? std::vector<float>(*l, *l + vocab) : std::vector<float>{};
}

}  // namespace

TEST(GptOss, ReadsItsLayerKinds)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    EXPECT_EQ(c.architecture, "gpt-oss");
    ASSERT_EQ(c.nLayers, 4);
    using Kind = LlamaConfig::AttentionKind;
    EXPECT_EQ(c.attentionKinds, (std::vector<Kind>{Kind::SlidingWindow, Kind::Full, Kind::SlidingWindow, Kind::Full}));
    EXPECT_EQ(c.slidingWindow, 8);
    EXPECT_TRUE(c.attentionSinks);
    EXPECT_TRUE(c.ropeNeox);
    EXPECT_TRUE(c.yarn);
    EXPECT_FLOAT_EQ(c.ropeFactor, 4.0f);
    EXPECT_EQ(c.ropeOriginalContext, 32);
    EXPECT_NEAR(c.yarnAttnFactor, 1.0 + 0.1 * std::log(4.0), 1e-6);
    EXPECT_TRUE(c.clampedSwiglu);
    EXPECT_EQ(c.routerWeights, LlamaConfig::RouterWeights::SoftmaxOfChosen);
    EXPECT_EQ(c.nExperts, 8);
    EXPECT_EQ(c.nExpertsUsed, 2);
    EXPECT_EQ(c.expertFfnDim, 32);
    EXPECT_EQ(c.headDim, 16);
    const LlamaLayerWeights& L = (*model)->weights().layers[0];
    EXPECT_TRUE(L.attnSinks && L.routerBias && L.expertGateBias && L.expertUpBias && L.expertDownBias && L.qBias &&
                L.oBias && L.ffnNorm);
}

// The ids, first logits and greedy ids of ik_llama.cpp, on every kernel set, the prompt in one
// batch and one token at a time (the third prompt is longer than the window: its batch crosses it).
TEST(GptOss, MatchesIkLlamaCppOnEveryKernelSet)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-gpt-oss.reference.json");
    ASSERT_EQ(refs.size(), 3u);
    ASSERT_GT(refs[2].promptIds.size(), size_t((*model)->config().slidingWindow));
    expectMatchesOnEveryKernelSet(**model, refs, "gpt-oss");
}

// The experts on the SSD, two slots per layer of the eight (a quarter): the same tokens.
TEST(GptOss, MatchesWithAQuarterOfTheExpertsCached)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const plan::Placement placement = expertsOnTheSsd(**model);
    auto device = gpu::createCpuDevice(2);
    for (const Reference& ref : testing_support::readLlamaReferences(kFamilies + "tiny-gpt-oss.reference.json"))
        for (int batch : {1, 32}) {
            SessionOptions o;
            o.batch = batch;
            o.placement = placement;
            o.experts.slotsPerLayer = 2;
            expectMatches(**model, *device, ref, o, "'" + ref.prompt + "' experts cached, batch " + std::to_string(batch));
        }
}

// A sliding-window layer's cache is a ring of window + batch - 1 positions (never more than the
// context): the planner, the session and the device's memory count that, not the context.
TEST(GptOss, SlidingWindowLayersKeepOnlyARingOfTheirWindow)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    const uint64_t perPosition = uint64_t(2) * uint64_t(c.kvDim()) * 2;  // K and V, f16
    const int ring = c.slidingWindow + 32 - 1;
    EXPECT_EQ(c.kvPositions(0, 4096, 32), ring);
    EXPECT_EQ(c.kvPositions(1, 4096, 32), 4096);
    EXPECT_EQ(c.kvPositions(0, 4096, 1), c.slidingWindow);
    EXPECT_EQ(c.kvPositions(0, 16, 32), 16);  // a context shorter than the ring: no ring
    EXPECT_EQ(plan::kvCacheBytes(c, 4096, gpu::KvType::F16, 32), (2 * 4096 + 2 * uint64_t(ring)) * perPosition);
    EXPECT_EQ(plan::kvCacheBytes(c, 16, gpu::KvType::F16, 32), 4 * 16 * perPosition);
    // The snapshots keep each ring layer's window before their position (window - 1 positions),
    // eight of them by default, in the RAM the planner sets aside; no ring, no snapshots.
    EXPECT_EQ(plan::stateSnapshotEach(c, 4096, 32, gpu::KvType::F16), 2 * uint64_t(c.slidingWindow - 1) * perPosition);
    EXPECT_EQ(plan::stateSnapshotBytes(c, 4096, 32, gpu::KvType::F16), 8 * 2 * uint64_t(c.slidingWindow - 1) * perPosition);
    EXPECT_EQ(plan::stateSnapshotBytes(c, 16, 32, gpu::KvType::F16), 0u);
    auto device = gpu::createCpuDevice(1);
    SessionOptions o;
    o.contextLength = 4096;
    o.kvType = gpu::KvType::F16;
    auto session = LlamaSession::create(**model, *device, o);
    ASSERT_TRUE(session) << session.error().message;
    EXPECT_EQ((*session)->kvCacheBytes(), (2 * 4096 + 2 * uint64_t(ring)) * perPosition);
    EXPECT_EQ(plan::sessionBuffers(c, 4096, 32, gpu::KvType::F16, false)[8], (2 * 4096 + 2 * uint64_t(ring)) * perPosition / 2);
}

// Going back to an earlier position: while the rings still hold the window before it, the
// session goes on from there (nothing run again); further back, it puts back the latest snapshot
// of the windows before it (or starts over) and runs the ids between again. The logits equal
// those of a session that ran the new sequence from the start.
TEST(GptOss, GoingBackPastTheRingRestoresTheWindowFromASnapshot)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-gpt-oss.reference.json");
    const auto [tokens, edited, back] = editInsideTheReply(refs[2]);
    auto device = gpu::createCpuDevice(2);
    // A context of 4096: full-attention layers keep every position, so only the rings differ.
    SessionOptions fresh;
    fresh.contextLength = 4096;
    auto reference = LlamaSession::create(**model, *device, fresh);
    ASSERT_TRUE(reference) << reference.error().message;
    const std::vector<float> expected = logitsOf(**reference, edited, 0);
    const int window = (*model)->config().slidingWindow;
    for (int batch : {1, 32})
        for (int snapshots : {8, 0}) {
            SCOPED_TRACE("batch " + std::to_string(batch) + ", " + std::to_string(snapshots) + " snapshots");
            SessionOptions o;
            o.contextLength = 4096;
            o.batch = batch;
            o.stateSnapshots = snapshots;
            o.stateSnapshotInterval = 16;
            auto session = LlamaSession::create(**model, *device, o);
            ASSERT_TRUE(session) << session.error().message;
            logitsOf(**session, tokens, 0);
            const std::vector<float> got = logitsOf(**session, std::span(edited).subspan(size_t(back)), back);
            ASSERT_EQ(got.size(), expected.size());
            float off = 0.0f;
            for (size_t i = 0; i < got.size(); ++i) off = std::max(off, std::fabs(got[i] - expected[i]));
            EXPECT_LT(off, 1e-3f);
            // Batches of 32 leave rings of window + 31 rows: the window before `back` is still in
            // them. A ring of the window alone (batch 1) has gone round since.
            const bool inRing = int(tokens.size()) - back <= batch;
            ASSERT_EQ(inRing, batch == 32) << "the test's sequence is " << tokens.size() << " long, window " << window;
            EXPECT_EQ((*session)->rerunTokens(), uint64_t(inRing ? 0 : snapshots > 0 ? back % 16 : back));
        }
}

// Each part of the architecture, broken in a copy of the file, moves the greedy tokens away from
// the peer's: so matching the peer checks that part.
TEST(GptOss, BreakingAnyPartChangesTheTokens)
{
    const std::string original = kFamilies + "tiny-gpt-oss.gguf";
    auto model = LlamaModel::load(original);
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-gpt-oss.reference.json");
    testing_support::TempDir dir("spillway-gpt-oss-broken");
    const LlamaModel& m = **model;
    const std::vector<Break> breaks = {
        {"no sinks", [&](std::vector<char>& b) { fillTensors(m, b, ".attn_sinks.weight", -1e4f); }},
        {"no sliding window",
         [&](std::vector<char>& b) {
             const uint32_t wide = 100000;
             std::memcpy(&b[valueAt(b, "gpt-oss.attention.sliding_window")], &wide, 4);
         }},
        {"no YaRN",
         [&](std::vector<char>& b) {
             const float one = 1.0f;
             std::memcpy(&b[valueAt(b, "gpt-oss.rope.scaling.factor")], &one, 4);
         }},
        {"no router bias", [&](std::vector<char>& b) { fillTensors(m, b, ".ffn_gate_inp.bias", 0.0f); }},
        {"no expert gate bias", [&](std::vector<char>& b) { fillTensors(m, b, ".ffn_gate_exps.bias", 0.0f); }},
        {"no expert up bias", [&](std::vector<char>& b) { fillTensors(m, b, ".ffn_up_exps.bias", 0.0f); }},
        {"no expert down bias", [&](std::vector<char>& b) { fillTensors(m, b, ".ffn_down_exps.bias", 0.0f); }},
    };
    expectEachBreakPartsFromThePeer(dir.path(), original, refs, breaks);
}

// A session on a backend without the ops gpt-oss needs is refused with the reason (the engine
// then opens it on the CPU, as for a block type a backend lacks); the CPU device has them.
TEST(GptOss, DevicesWithoutItsOpsSayWhatTheyLack)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    auto cpu = gpu::createCpuDevice(1);
    const gpu::DeviceCapabilities& caps = cpu->info().caps;
    EXPECT_TRUE(caps.attentionSinks && caps.slidingWindow && caps.clampedSwiglu);
    // The CPU device as a backend that has none of them.
    struct Lacking : gpu::ForwardingDevice {
        explicit Lacking(gpu::Device& inner) : ForwardingDevice(inner), m_info(inner.info())
        {
            m_info.backend = "lacking";
            m_info.caps.attentionSinks = m_info.caps.slidingWindow = m_info.caps.clampedSwiglu = false;
        }
        const gpu::DeviceInfo& info() const override { return m_info; }
        gpu::DeviceInfo m_info;
    } lacking(*cpu);
    auto session = LlamaSession::create(**model, lacking, 64);
    ASSERT_FALSE(session);
    EXPECT_EQ(session.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(session.error().message.find("gpt-oss needs attention sinks, which the lacking device does not have"),
              std::string::npos)
        << session.error().message;
}

// ---- Qwen3.5 / Qwen3-Next: Gated DeltaNet layers beside gated attention ------------------------

namespace {

const char* const kHybrids[] = {"tiny-qwen35moe", "tiny-qwen35", "tiny-qwen3next"};

std::unique_ptr<LlamaModel> loadHybrid(const std::string& name)
{
    auto model = LlamaModel::load(kFamilies + name + ".gguf");
    EXPECT_TRUE(model) << (model ? "" : model.error().message);
    return model ? std::move(*model) : nullptr;
}

}  // namespace

TEST(Qwen35, ReadsItsLayerKinds)
{
    using Kind = LlamaConfig::AttentionKind;
    auto moe = loadHybrid("tiny-qwen35moe");
    ASSERT_TRUE(moe);
    const LlamaConfig& c = moe->config();
    EXPECT_EQ(c.architecture, "qwen35moe");
    EXPECT_EQ(c.nLayers, 4);      // the multi-token-prediction layer (blk.4) is not run...
    EXPECT_EQ(c.nextnLayers, 1);  // ...but kept in the file's tensor table
    EXPECT_NE(moe->tensor("blk.4.nextn.eh_proj.weight"), nullptr);
    EXPECT_EQ(c.attentionKinds, (std::vector<Kind>{Kind::Linear, Kind::Full, Kind::Linear, Kind::Full}));
    EXPECT_EQ(c.kvLayers(), 2);
    EXPECT_EQ(c.kvSlot(3), 1);
    EXPECT_TRUE(c.attentionOutputGate && c.ropeNeox && c.ssmTiledHeads && !c.ssmFusedInput);
    EXPECT_EQ(c.ropeDims, 8);
    EXPECT_EQ(std::vector<int>(c.ropeSections, c.ropeSections + 4), (std::vector<int>{2, 1, 1, 0}));
    EXPECT_EQ(c.ssmConvKernel, 4);
    EXPECT_EQ(c.ssmKHeads, 2);
    EXPECT_EQ(c.ssmVHeads, 4);
    EXPECT_EQ(c.ssmStateDim, 64);
    EXPECT_EQ(c.ssmHeadVDim, 64);
    // A linear layer's state: 3 inputs of the 512 convolved channels, 4 heads of 64 x 64.
    EXPECT_EQ(c.recurrentStateFloats(), uint64_t(3 * 512 + 4 * 64 * 64));
    EXPECT_EQ(c.sharedExpertFfnDim, 32);
    EXPECT_TRUE(c.expertWeightsNormalized);
    const LlamaLayerWeights& linear = moe->weights().layers[0];
    EXPECT_TRUE(linear.ssmQkv.data && linear.ssmGate.data && linear.ssmBeta.data && linear.ssmAlpha.data &&
                linear.ssmOut.data && linear.ssmConv && linear.ssmDtBias && linear.ssmA && linear.ssmNorm);
    EXPECT_FALSE(linear.wq.data);
    const LlamaLayerWeights& full = moe->weights().layers[1];
    EXPECT_EQ(full.wq.rows, 2 * c.qDim());  // each head's q and its gate
    EXPECT_TRUE(full.qNorm && full.kNorm && full.sharedRouter.data);

    auto next = loadHybrid("tiny-qwen3next");
    ASSERT_TRUE(next);
    const LlamaConfig& n = next->config();
    EXPECT_EQ(n.attentionKinds, (std::vector<Kind>{Kind::Linear, Kind::Linear, Kind::Linear, Kind::Full}));
    EXPECT_TRUE(n.ssmFusedInput && !n.ssmTiledHeads);
    EXPECT_EQ(next->weights().layers[0].ssmQkv.rows, n.ssmConvDim() + n.ssmValueDim());  // ssm_in: q k v z
    EXPECT_EQ(next->weights().layers[0].ssmBeta.rows, 2 * n.ssmVHeads);                 // ssm_ba
    EXPECT_EQ(next->matrixName(0, kLayerMatrices[15]), "blk.0.ssm_in.weight");
}

// The ids, first logits and greedy ids of ik_llama.cpp, on every kernel set, the prompt in one
// batch and one token at a time.
TEST(Qwen35, MatchesIkLlamaCppOnEveryKernelSet)
{
    for (const char* name : kHybrids) {
        auto model = loadHybrid(name);
        ASSERT_TRUE(model);
        const auto refs = testing_support::readLlamaReferences(kFamilies + name + ".reference.json");
        ASSERT_EQ(refs.size(), 3u);
        expectMatchesOnEveryKernelSet(*model, refs, name);
    }
}

// The experts on the SSD, two slots per layer of the eight: the same tokens.
TEST(Qwen35, MatchesWithAQuarterOfTheExpertsCached)
{
    for (const char* name : {"tiny-qwen35moe", "tiny-qwen3next"}) {
        auto model = loadHybrid(name);
        ASSERT_TRUE(model);
        const plan::Placement placement = expertsOnTheSsd(*model);
        auto device = gpu::createCpuDevice(2);
        for (const Reference& ref : testing_support::readLlamaReferences(kFamilies + name + ".reference.json")) {
            SessionOptions o;
            o.batch = 32;
            o.placement = placement;
            o.experts.slotsPerLayer = 2;
            expectMatches(*model, *device, ref, o, std::string(name) + " '" + ref.prompt + "' experts cached");
        }
    }
}

// Each part of the mixer and of the gated attention, broken in a copy of the file, moves the greedy
// tokens away from the peer's.
TEST(Qwen35, BreakingAnyPartChangesTheTokens)
{
    const std::string original = kFamilies + "tiny-qwen35moe.gguf";
    auto model = loadHybrid("tiny-qwen35moe");
    ASSERT_TRUE(model);
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-qwen35moe.reference.json");
    testing_support::TempDir dir("spillway-qwen35-broken");
    const LlamaModel& m = *model;
    const std::vector<Break> breaks = {
        {"no convolution", [&](std::vector<char>& b) { fillTensors(m, b, ".ssm_conv1d.weight", 0.25f, 2); }},
        {"no decay", [&](std::vector<char>& b) { fillTensors(m, b, ".ssm_a", 0.0f, 2); }},
        {"no dt bias", [&](std::vector<char>& b) { fillTensors(m, b, ".ssm_dt.bias", 0.0f, 2); }},
        {"no output norm weight", [&](std::vector<char>& b) { fillTensors(m, b, ".ssm_norm.weight", 1.0f, 2); }},
        {"no QK norm weights", [&](std::vector<char>& b) { fillTensors(m, b, ".attn_q_norm.weight", 1.0f, 3); }},
        {"no shared expert", [&](std::vector<char>& b) { fillTensors(m, b, ".ffn_gate_inp_shexp.weight", 0.0f, 5); }},
        {"no rotated sections",
         [&](std::vector<char>& b) {
             // [2, 1, 1, 0] -> [0, 0, 0, 4]: every pair in the e section, which text does not rotate.
             const size_t at = valueAt(b, "qwen35moe.rope.dimension_sections") + 4 + 8;
             const int32_t none[4] = {0, 0, 0, 4};
             std::memcpy(&b[at], none, sizeof(none));
         }},
    };
    expectEachBreakPartsFromThePeer(dir.path(), original, refs, breaks);
}

// A recurrent state cannot be cut back: going back to an earlier position (an edited or
// regenerated turn) puts back the latest snapshot before it and runs the ids between again. The
// logits then equal those of a session that ran the new sequence from the start, with
// snapshots and without any (everything run again).
TEST(Qwen35, GoingBackRestoresTheStateFromASnapshot)
{
    auto model = loadHybrid("tiny-qwen35moe");
    ASSERT_TRUE(model);
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-qwen35moe.reference.json");
    const auto [tokens, edited, back] = editInsideTheReply(refs[2]);
    auto device = gpu::createCpuDevice(2);
    SessionOptions fresh;
    fresh.contextLength = 256;
    auto reference = LlamaSession::create(*model, *device, fresh);
    ASSERT_TRUE(reference) << reference.error().message;
    const std::vector<float> expected = logitsOf(**reference, edited, 0);
    for (int snapshots : {8, 0}) {
        SessionOptions o;
        o.contextLength = 256;
        o.stateSnapshots = snapshots;
        o.stateSnapshotInterval = 16;
        auto session = LlamaSession::create(*model, *device, o);
        ASSERT_TRUE(session) << session.error().message;
        logitsOf(**session, tokens, 0);
        if (snapshots > 0) {
            const std::vector<int> kept = (*session)->stateSnapshots();
            ASSERT_FALSE(kept.empty());
            EXPECT_EQ(kept.back(), int(tokens.size()) / 16 * 16);
        }
        // Back to `back`, with the rest of the edited sequence.
        const std::vector<float> got = logitsOf(**session, std::span(edited).subspan(size_t(back)), back);
        ASSERT_EQ(got.size(), expected.size());
        float off = 0.0f;
        for (size_t i = 0; i < got.size(); ++i) off = std::max(off, std::fabs(got[i] - expected[i]));
        EXPECT_LT(off, 1e-3f) << snapshots << " snapshots";
        // From the snapshot at or before `back` (a multiple of 16), or from the start.
        EXPECT_EQ((*session)->rerunTokens(), uint64_t(snapshots > 0 ? back % 16 : back)) << snapshots << " snapshots";
        // A position past what the state holds is refused, not guessed.
        auto ahead = (*session)->forward(int32_t(1), int(edited.size()) + 3);
        ASSERT_FALSE(ahead);
        EXPECT_EQ(ahead.error().code, ErrorCode::InvalidArgument);
    }
}

// Regenerate: the same prompt again goes back to the snapshot the generator asked for at its last
// token, so nothing is run again, and greedy decoding gives the same reply.
TEST(Qwen35, RegenerateRunsNothingAgain)
{
    auto model = loadHybrid("tiny-qwen3next");
    ASSERT_TRUE(model);
    auto device = gpu::createCpuDevice(2);
    auto session = LlamaSession::create(*model, *device, 256);
    ASSERT_TRUE(session) << session.error().message;
    SamplerSettings greedy;
    greedy.temperature = 0.0f;
    Sampler sampler(model->config().vocabSize, greedy);
    GenerationRequest request;
    request.prompt = "Once upon a time";
    request.maxNewTokens = 12;
    auto first = generate(**session, sampler, request);
    ASSERT_TRUE(first) << first.error().message;
    request.cachedTokens = first->promptTokens;
    Sampler again(model->config().vocabSize, greedy);
    auto second = generate(**session, again, request);
    ASSERT_TRUE(second) << second.error().message;
    EXPECT_EQ(second->tokens, first->tokens);
    EXPECT_EQ(second->cachedTokens, first->promptTokens - 1);
    EXPECT_EQ((*session)->rerunTokens(), 0u);
}

// The planner's memory: the KV cache of the attention layers alone, and the recurrent state a
// fixed cost per linear layer, the same at every context length.
TEST(Qwen35, SessionMemoryCountsTheStateOnceAndTheKvCacheOfAttentionLayers)
{
    auto model = loadHybrid("tiny-qwen35moe");
    ASSERT_TRUE(model);
    const LlamaConfig& c = model->config();
    const uint64_t perPosition = uint64_t(2) * 2 * uint64_t(c.kvDim()) * 2;  // 2 attention layers, K and V, f16
    EXPECT_EQ(plan::kvCacheBytes(c, 128, gpu::KvType::F16, 1), perPosition * 128);
    EXPECT_EQ(plan::recurrentStateBytes(c), uint64_t(2) * c.recurrentStateFloats() * 4);
    EXPECT_EQ(plan::sessionBuffers(c, 128, 1, gpu::KvType::F16, false).back(), plan::recurrentStateBytes(c));
    EXPECT_EQ(plan::sessionBuffers(c, 4096, 1, gpu::KvType::F16, false).back(), plan::recurrentStateBytes(c));
    auto device = gpu::createCpuDevice(1);
    auto session = LlamaSession::create(*model, *device, 128);
    ASSERT_TRUE(session) << session.error().message;
    EXPECT_EQ((*session)->recurrentStateBytes(), plan::recurrentStateBytes(c));
}

// A backend without the delta net or the attention gate is refused with the reason.
TEST(Qwen35, DevicesWithoutItsOpsSayWhatTheyLack)
{
    auto model = loadHybrid("tiny-qwen35");
    ASSERT_TRUE(model);
    auto cpu = gpu::createCpuDevice(1);
    EXPECT_TRUE(cpu->info().caps.deltaNet && cpu->info().caps.sigmoidGate);
    struct Lacking : gpu::ForwardingDevice {
        explicit Lacking(gpu::Device& inner) : ForwardingDevice(inner), m_info(inner.info())
        {
            m_info.backend = "lacking";
            m_info.caps.deltaNet = false;
        }
        const gpu::DeviceInfo& info() const override { return m_info; }
        gpu::DeviceInfo m_info;
    } lacking(*cpu);
    auto session = LlamaSession::create(*model, lacking, 64);
    ASSERT_FALSE(session);
    EXPECT_EQ(session.error().code, ErrorCode::UnsupportedModel);
    EXPECT_NE(session.error().message.find("qwen35 needs Gated DeltaNet (linear attention), which the lacking device"),
              std::string::npos)
        << session.error().message;
}
