// Whole models in the quantizations people download, against llama.cpp: a small random-weight
// llama (tests/data/models/quants, README there) quantized by llama.cpp's own llama-quantize
// (with an importance matrix from its llama-imatrix) into the mixes Q2_K, Q3_K_M, IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_S, IQ2_M, IQ3_XXS, IQ4_XS, IQ4_NL and Q5_1, which between them hold every block type
// of gpu/dtype.h that ggml writes but MXFP4 (for which see MoeMxfp4 below). On every CPU kernel set: the prompt ids llama.cpp
// gives, its first-position logits within kLogitTolerance, and its 32 greedy ids with llama.cpp's
// tokens fed back (a step may choose otherwise only at a near-tie: see kLogitTolerance). And one
// that breaks a part: the same file with one matrix's block scales halved must fail both checks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/registry.h"
#include "../common/kernel_sets.h"
#include "../common/llama_references.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kDir = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/quants/";

using Reference = testing_support::LlamaReference;


// The references were made with an f32 KV cache (as ours) and x quantized per token to Q8_K / Q8
// (as ours, the same integer sums: tests/engine/test_quant_types.cpp), so what is left between the
// two is the order of float sums in norms, RoPE and attention: ulps. But x's quantization turns an
// ulp into a whole step now and then (a value that lands on a rounding boundary), and random
// weights at these coarse types carry such a step to the logits: measured here, most files agree
// to 1e-5, some by 0.08-0.18 (llama.cpp itself moves Q2_K's by 0.14 between its batched and its
// one-token-at-a-time prompt). So the first logits may differ by kLogitTolerance (they are of
// order 10; a wrong decoder or block layout moves them by several units), and the greedy ids are
// compared with llama.cpp's own tokens fed back (teacher forcing): a step may choose otherwise only
// where llama.cpp's top two were closer than kTieMargin (or twice the first logits' difference in
// this run, if more): a tie at the noise such a flip makes, which a later step can meet as well
// (measured: partings at margins of 0.008, 0.017 and 0.025 where the first logits agreed to 1e-5).
// At most kMostTies steps of 32 may part so: a bias cannot hide among ties.
constexpr float kLogitTolerance = 0.25f;
constexpr float kTieMargin = 0.05f;
constexpr int kMostTies = 3;

struct Outcome {
    bool idsEqual = false;
    float worstLogit = 0;
    int differing = 0;        // steps whose argmax is not llama.cpp's
    int untied = -1;          // the first of them at a margin above the tie margin, -1 for none
    float untiedMargin = 0, tieMargin = kTieMargin;
};

// kvType: the cache the reference kept (ik_llama.cpp's are fp16, llama.cpp's here f32).
Outcome run(const LlamaModel& model, gpu::Device& device, const Reference& ref, int batch,
            gpu::KvType kvType = gpu::KvType::F32)
{
    Outcome o;
    const std::vector<int32_t> ids = model.tokenizer().encode(ref.prompt, true);
    o.idsEqual = ids == ref.promptIds;
    SessionOptions options;
    options.contextLength = 64;
    options.batch = batch;
    options.kvType = kvType;
    auto session = LlamaSession::create(model, device, options);
    EXPECT_TRUE(session) << session.error().message;
    if (!session) return o;
    const size_t vocab = size_t(model.config().vocabSize);
    auto logits = (*session)->forward(ids, 0);
    EXPECT_TRUE(logits) << logits.error().message;
    if (!logits) return o;
    for (size_t i = 0; i < vocab; ++i) o.worstLogit = std::max(o.worstLogit, std::fabs((*logits)[i] - ref.firstLogits[i]));
    o.tieMargin = std::max(kTieMargin, 2.0f * o.worstLogit);
    int pos = int(ids.size());
    for (size_t s = 0; s < ref.greedyIds.size(); ++s) {
        if (argmax({*logits, vocab}) != ref.greedyIds[s]) {
            ++o.differing;
            if (o.untied < 0 && ref.margins[s] >= o.tieMargin) {
                o.untied = int(s);
                o.untiedMargin = ref.margins[s];
            }
        }
        logits = (*session)->forward(ref.greedyIds[s], pos++);
        EXPECT_TRUE(logits) << logits.error().message;
        if (!logits) break;
    }
    return o;
}

// The checks of one run (kLogitTolerance's comment), and what it measured.
void expectMatches(const Outcome& o, const std::string& what)
{
    EXPECT_TRUE(o.idsEqual) << what;
    EXPECT_LT(o.worstLogit, kLogitTolerance) << what << ": first logits differ by up to " << o.worstLogit;
    EXPECT_LE(o.differing, kMostTies) << what;
    EXPECT_LT(o.untied, 0) << what << ": step " << o.untied << " chose another token where llama.cpp's top two "
                           << "logits were " << o.untiedMargin << " apart (tie margin " << o.tieMargin << ")";
    std::printf("%s: first logits within %.5f, %d of 32 steps chose otherwise (all at ties under %.4f)\n", what.c_str(),
                o.worstLogit, o.differing, o.tieMargin);
}

class QuantModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(QuantModel, MatchesLlamaCppOnEveryKernelSet)
{
    auto model = LlamaModel::load(kDir + GetParam() + ".gguf");
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kDir + GetParam() + ".reference.json");
    ASSERT_EQ(refs.size(), 3u);
    for (const std::string& set : testing_support::kernelSetNamesThisCpuRuns()) {
        setenv("SPILLWAY_CPU_KERNELS", set.c_str(), 1);
        auto device = gpu::createCpuDevice(2);
        for (const Reference& ref : refs)
            for (int batch : {1, 32}) {
                const std::string what = GetParam() + " '" + ref.prompt + "' kernels " + set + ", batch " + std::to_string(batch);
                expectMatches(run(**model, *device, ref, batch), what);
            }
        unsetenv("SPILLWAY_CPU_KERNELS");
    }
}

// The same on the Vulkan device (lavapipe in CI: its shaders, tests/gpu for the ops one by one),
// where one is usable; the prompt one token at a time and as one batch.
TEST_P(QuantModel, MatchesLlamaCppOnVulkan)
{
    for (const auto& b : gpu::backendStatus())
        if (b.name == "vulkan" && !b.usable) GTEST_SKIP() << "no usable vulkan device: " << b.reason;
    auto device = gpu::createDevice("vulkan", {});
    if (!device) GTEST_SKIP() << "no vulkan device: " << device.error().message;
    auto model = LlamaModel::load(kDir + GetParam() + ".gguf");
    ASSERT_TRUE(model) << model.error().message;
    for (const Reference& ref : testing_support::readLlamaReferences(kDir + GetParam() + ".reference.json"))
        for (int batch : {1, 32}) {
            const std::string what = GetParam() + " '" + ref.prompt + "' vulkan, batch " + std::to_string(batch);
            expectMatches(run(**model, **device, ref, batch), what);
        }
}

INSTANTIATE_TEST_SUITE_P(Mixes, QuantModel,
                         ::testing::Values("tiny-quant-llama-Q2_K", "tiny-quant-llama-Q3_K_M", "tiny-quant-llama-IQ1_S",
                                           "tiny-quant-llama-IQ1_M", "tiny-quant-llama-IQ2_XXS", "tiny-quant-llama-IQ2_S",
                                           "tiny-quant-llama-IQ2_M", "tiny-quant-llama-IQ3_XXS", "tiny-quant-llama-IQ4_XS",
                                           "tiny-quant-llama-IQ4_NL", "tiny-quant-llama-Q5_1"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n)
                                 if (c == '-') c = '_';
                             return n;
                         });

// MXFP4 experts: tests/data/models/moe's Qwen2-MoE (shared expert, top-2 of 8) quantized by
// ik_llama.cpp's llama-quantize with its experts in MXFP4 and the rest in Q8_0, beside its twin
// with the experts in Q8_0 too, each with ik_llama.cpp's references (llama.cpp's tree of February
// 2025 has no MXFP4). ik_llama.cpp keeps K and V in fp16 (it takes no f32 V cache without flash
// attention), so these runs do too. This small MoE carries x's rounding further than the dense
// model: its router's top-2 of 8 is near a tie now and then, and a flip of one expert moves the
// logits by tenths. Measured: the Q8_0 twin (a type checked against llama.cpp since long) is
// 0.37-0.48 from ik_llama.cpp's first logits, where the float originals agree to 0.014. So MXFP4
// is held to its twin: its first logits no further from ik_llama.cpp's than twice the Q8_0 twin's
// (a wrong MXFP4 decoder moves them by units: halving one expert stack's scales does, below), and
// its teacher-forced greedy choices parting from ik_llama.cpp's at most twice as often as the
// twin's, plus 3.
TEST(MoeMxfp4, ExpertsInMxfp4AgreeWithIkLlamaCppAsWellAsInQ8_0)
{
    auto mx = LlamaModel::load(kDir + "tiny-qwen2moe-MXFP4.gguf");
    auto q8 = LlamaModel::load(kDir + "tiny-qwen2moe-Q8_0.gguf");
    ASSERT_TRUE(mx) << mx.error().message;
    ASSERT_TRUE(q8) << q8.error().message;
    const gpu::DType expertType = (*mx)->tensor("blk.0.ffn_up_exps.weight")->type;
    EXPECT_EQ(expertType, gpu::DType::MXFP4);
    const auto mxRefs = testing_support::readLlamaReferences(kDir + "tiny-qwen2moe-MXFP4.reference.json");
    const auto q8Refs = testing_support::readLlamaReferences(kDir + "tiny-qwen2moe-Q8_0.reference.json");
    ASSERT_EQ(mxRefs.size(), q8Refs.size());
    for (const std::string& set : testing_support::kernelSetNamesThisCpuRuns()) {
        setenv("SPILLWAY_CPU_KERNELS", set.c_str(), 1);
        auto device = gpu::createCpuDevice(2);
        float mxWorst = 0, q8Worst = 0;
        int mxDiffer = 0, q8Differ = 0;
        for (size_t i = 0; i < mxRefs.size(); ++i)
            for (int batch : {1, 32}) {
                const Outcome a = run(**mx, *device, mxRefs[i], batch, gpu::KvType::F16),
                              b = run(**q8, *device, q8Refs[i], batch, gpu::KvType::F16);
                EXPECT_TRUE(a.idsEqual && b.idsEqual);
                mxWorst = std::max(mxWorst, a.worstLogit);
                q8Worst = std::max(q8Worst, b.worstLogit);
                mxDiffer += a.differing;
                q8Differ += b.differing;
            }
        std::printf("kernels %s: MXFP4 experts within %.3f of ik_llama.cpp's first logits, %d of 192 steps chose "
                    "otherwise; the Q8_0 twin within %.3f, %d of 192\n",
                    set.c_str(), mxWorst, mxDiffer, q8Worst, q8Differ);
        EXPECT_LE(mxWorst, 2 * q8Worst) << set;
        EXPECT_LE(mxDiffer, 2 * q8Differ + 3) << set;
        unsetenv("SPILLWAY_CPU_KERNELS");
        if (set != "scalar") continue;
        // The same check fails for experts decoded at half their scale (each block's E8M0
        // exponent one less in blk.0.ffn_up_exps).
        testing_support::TempDir dir("spillway-mxfp4-broken");
        const std::filesystem::path copy = dir / "broken.gguf";
        std::filesystem::copy_file(kDir + "tiny-qwen2moe-MXFP4.gguf", copy);
        auto file = gguf::File::open(kDir + "tiny-qwen2moe-MXFP4.gguf");
        ASSERT_TRUE(file) << file.error().message;
        const gguf::TensorInfo* t = (*file)->tensor("blk.0.ffn_up_exps.weight");
        ASSERT_NE(t, nullptr);
        {
            std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
            for (uint64_t b = 0; b < t->bytes / 17; ++b) {
                const std::streamoff at = std::streamoff((*file)->dataOffset() + t->offset + b * 17);
                char e = 0;
                f.seekg(at);
                f.read(&e, 1);
                e = char(uint8_t(e) - 1);
                f.seekp(at);
                f.write(&e, 1);
            }
        }
        auto broken = LlamaModel::load(copy.string());
        ASSERT_TRUE(broken) << broken.error().message;
        float brokenWorst = 0;
        for (const Reference& ref : mxRefs)
            brokenWorst = std::max(brokenWorst, run(**broken, *device, ref, 1, gpu::KvType::F16).worstLogit);
        std::printf("MXFP4 experts of blk.0.ffn_up at half scale: within %.3f of ik_llama.cpp's first logits\n", brokenWorst);
        EXPECT_GT(brokenWorst, 2 * q8Worst);
    }
}

// The check can fail: halving the block scales of one matrix (blk.0.ffn_down, IQ2_XXS in that
// file) moves the first logits well past the tolerance.
TEST(QuantModelBroken, AChangedMatrixPartsFromLlamaCpp)
{
    const std::string name = "tiny-quant-llama-IQ2_XXS";
    auto model = LlamaModel::load(kDir + name + ".gguf");
    ASSERT_TRUE(model) << model.error().message;
    const auto refs = testing_support::readLlamaReferences(kDir + name + ".reference.json");
    testing_support::TempDir dir("spillway-quant-broken");
    const std::filesystem::path copy = dir / (name + ".gguf");
    std::filesystem::copy_file(kDir + name + ".gguf", copy);
    auto file = gguf::File::open(kDir + name + ".gguf");
    ASSERT_TRUE(file) << file.error().message;
    const gguf::TensorInfo* t = (*file)->tensor("blk.0.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, gpu::DType::IQ2_XXS);
    {
        std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
        const uint64_t at = (*file)->dataOffset() + t->offset;
        const uint64_t blocks = t->bytes / 66;
        for (uint64_t b = 0; b < blocks; ++b) {
            uint16_t h;
            f.seekg(std::streamoff(at + b * 66));
            f.read(reinterpret_cast<char*>(&h), 2);
            h = gpu::fp32ToFp16(gpu::fp16ToFp32(h) * 0.5f);
            f.seekp(std::streamoff(at + b * 66));
            f.write(reinterpret_cast<const char*>(&h), 2);
        }
    }
    auto broken = LlamaModel::load(copy.string());
    ASSERT_TRUE(broken) << broken.error().message;
    auto device = gpu::createCpuDevice(2);
    float worst = 0;
    int differing = 0;
    for (const Reference& ref : refs) {
        const Outcome o = run(**broken, *device, ref, 1);
        worst = std::max(worst, o.worstLogit);
        differing += o.differing;
    }
    std::printf("halved block scales of blk.0.ffn_down: first logits off by up to %.3f, %d of 96 steps chose otherwise\n",
                worst, differing);
    EXPECT_GT(worst, 2 * kLogitTolerance);
    EXPECT_GE(differing, 3);
}
