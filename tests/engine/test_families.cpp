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

// Every float of each tensor named `suffix` in every layer set to `value`.
void fillTensors(const LlamaModel& model, std::vector<char>& bytes, const std::string& suffix, float value)
{
    int found = 0;
    for (const ModelTensor& t : model.tensors()) {
        if (t.name.size() < suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        ASSERT_EQ(t.type, gpu::DType::F32) << t.name;
        for (uint64_t i = 0; i < t.bytes / 4; ++i) std::memcpy(&bytes[t.fileOffset + 4 * i], &value, 4);
        ++found;
    }
    EXPECT_EQ(found, model.config().nLayers) << suffix;
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
    for (const std::string& set : testing_support::kernelSetNamesThisCpuRuns()) {
        setenv("SPILLWAY_CPU_KERNELS", set.c_str(), 1);
        auto device = gpu::createCpuDevice(2);
        for (const Reference& ref : refs)
            for (int batch : {1, 32}) {
                SessionOptions o;
                o.batch = batch;
                expectMatches(**model, *device, ref, o,
                              "'" + ref.prompt + "' kernels " + set + ", batch " + std::to_string(batch));
            }
        unsetenv("SPILLWAY_CPU_KERNELS");
    }
}

// The experts on the SSD, two slots per layer of the eight (a quarter): the same tokens.
TEST(GptOss, MatchesWithAQuarterOfTheExpertsCached)
{
    auto model = LlamaModel::load(kFamilies + "tiny-gpt-oss.gguf");
    ASSERT_TRUE(model) << model.error().message;
    plan::Placement placement = plan::uniformPlacement(**model, plan::Tier::Device);
    for (auto& t : placement.tensors)
        if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
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

// Each part of the architecture, broken in a copy of the file, moves the greedy tokens away from
// the peer's: so matching the peer checks that part.
TEST(GptOss, BreakingAnyPartChangesTheTokens)
{
    const std::string original = kFamilies + "tiny-gpt-oss.gguf";
    auto model = LlamaModel::load(original);
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kFamilies + "tiny-gpt-oss.reference.json");
    testing_support::TempDir dir("spillway-gpt-oss-broken");
    struct Break {
        const char* what;
        std::function<void(std::vector<char>&)> patch;
    };
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
    auto device = gpu::createCpuDevice(2);
    for (const Break& br : breaks) {
        const std::string path = patchedCopy(dir.path(), original, "broken.gguf", br.patch);
        auto broken = LlamaModel::load(path);
        ASSERT_TRUE(broken) << br.what << ": " << broken.error().message;
        int partings = 0;
        for (const Reference& ref : refs) partings += runAgainst(**broken, *device, ref, {}).partings;
        EXPECT_GT(partings, 0) << br.what << " gives the peer's tokens: the test would not see it broken";
    }
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
