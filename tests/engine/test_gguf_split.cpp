// Split GGUF (issue 50): a model in parts as llama.cpp's llama-gguf-split writes them. The small
// MoE models of tests/data/models/moe are split here into three parts (gguf::writeSplit); the
// parts load from any of them as one model whose tensors each come from the part that holds it,
// and give the same logits and tokens as the whole file with every tier (resident, RAM, SSD, mixed)
// and through the expert cache. Then each kind of bad input, with the message it gets; and
// `convert`'s split and join.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/formats/gguf_split.h"
#include "core/model/convert_model.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/cli_run.h"
#include "../common/same_tensors.h"
#include "../common/session_logits.h"
#include "../common/temp_dir.h"

using namespace spillway;

namespace {

const std::string kMoe = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/moe/";

// `source` (one GGUF file) written as `parts` parts PREFIX-0000i-of-0000N.gguf, the tensors
// shared out evenly in table order: the parts' paths.
std::vector<std::string> writeParts(const std::string& source, const std::string& prefix, int parts)
{
    auto file = gguf::File::open(source);
    EXPECT_TRUE(file) << (file ? "" : file.error().message);
    if (!file) return {};
    std::vector<gguf::TensorSource> tensors;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
        const uint8_t* data = t.data;
        tensors.push_back({t.name, t.type, t.dims, [data](std::span<uint8_t> out) { std::memcpy(out.data(), data, out.size()); }});
    }
    gguf::SplitPlan plan;
    plan.maxTensors = int((tensors.size() + size_t(parts) - 1) / size_t(parts));
    auto written = gguf::writeSplit((*file)->metadata(), tensors, prefix, plan);
    EXPECT_TRUE(written) << (written ? "" : written.error().message);
    return written ? *written : std::vector<std::string>{};
}

std::vector<int32_t> greedyOf(const std::vector<float>& logits, int vocab)
{
    std::vector<int32_t> ids;
    for (size_t at = 0; at + size_t(vocab) <= logits.size(); at += size_t(vocab))
        ids.push_back(argmax({logits.data() + at, size_t(vocab)}));
    return ids;
}

// The message of a load that must fail, which must name `file` and say `problem`.
void expectRefused(const std::string& open, const std::string& file, const std::string& problem)
{
    auto model = LlamaModel::load(open);
    ASSERT_FALSE(model) << open << " loaded";
    const std::string& m = model.error().message;
    EXPECT_NE(m.find(file), std::string::npos) << "the message does not name " << file << ": " << m;
    EXPECT_NE(m.find(problem), std::string::npos) << "the message does not say '" << problem << "': " << m;
}

// A small GGUF part written by hand: `keys` set as given (split.* included), tensors "a", "b"...
// of 32 f32 values each.
void writePart(const std::string& path, const std::vector<std::pair<std::string, gguf::Value>>& keys,
               const std::vector<std::string>& tensorNames)
{
    gguf::Writer w;
    for (const auto& [k, v] : keys) w.setValue(k, v);
    for (const std::string& n : tensorNames)
        w.addTensor(n, gpu::DType::F32, {32}, [](std::span<uint8_t> out) { std::memset(out.data(), 0, out.size()); });
    const Status s = w.write(path);
    ASSERT_TRUE(s) << s.error().message;
}

gguf::Value u16(uint64_t v) { return gguf::Value::ofUInt(gguf::ValueType::UInt16, v); }
gguf::Value i32(int64_t v) { return gguf::Value::ofInt(gguf::ValueType::Int32, v); }

}  // namespace

TEST(GgufSplit, NamesAreLlamaCppsPattern)
{
    const auto n = gguf::parseSplitName("dir/model-Q4_K_M-00002-of-00003.gguf");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->prefix, "dir/model-Q4_K_M");
    EXPECT_EQ(n->number, 2);
    EXPECT_EQ(n->count, 3);
    EXPECT_EQ(gguf::splitPartPath("dir/model-Q4_K_M", 2, 3), "dir/model-Q4_K_M-00002-of-00003.gguf");
    EXPECT_FALSE(gguf::parseSplitName("model.gguf"));
    EXPECT_FALSE(gguf::parseSplitName("model-00004-of-00003.gguf")) << "a part past the count";
    EXPECT_FALSE(gguf::parseSplitName("model-00000-of-00003.gguf")) << "parts count from 1";
    EXPECT_FALSE(gguf::parseSplitName("model-0001-of-00003.gguf")) << "five digits";
    EXPECT_FALSE(gguf::parseSplitName("model-00001-of-00003.safetensors"));
    EXPECT_FALSE(gguf::parseSplitName("dir/-00001-of-00003.gguf")) << "no name before the numbers";
    // llama-gguf-split's rule: a part is full when the next (padded) tensor would take it past
    // the limit; a tensor larger than the limit gets a part of its own.
    const std::vector<uint64_t> bytes = {10, 20, 100, 5, 5, 31};
    EXPECT_EQ(gguf::assignParts(bytes, {64, 0}), (std::vector<int>{0, 0, 1, 2, 2, 3}));
    EXPECT_EQ(gguf::assignParts(bytes, {0, 4}), (std::vector<int>{0, 0, 0, 0, 1, 1}));
}

// Three parts from any of them: one model, the parts its data files in order, each tensor in
// the part it was written to, every byte the whole file's.
TEST(GgufSplit, AnyPartOpensTheWholeModel)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::vector<std::string> parts = writeParts(kMoe + "tiny-qwen2moe.gguf", dir / "tiny-qwen2moe", 3);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0], dir / "tiny-qwen2moe-00001-of-00003.gguf");
    auto whole = LlamaModel::load(kMoe + "tiny-qwen2moe.gguf");
    ASSERT_TRUE(whole) << whole.error().message;
    for (const std::string& open : parts) {
        auto model = LlamaModel::load(open);
        ASSERT_TRUE(model) << model.error().message;
        EXPECT_EQ((*model)->path(), parts[0]) << "the first part stands for the model";
        EXPECT_EQ((*model)->dataFiles(), parts);
        spillway::testing_support::expectSameTensors(**model, **whole);
        std::vector<int> perPart(3);
        for (const ModelTensor& t : (*model)->tensors()) {
            ASSERT_LT(t.file, 3u) << t.name;
            ++perPart[t.file];
            // The offset is where the bytes are in that part's file.
            std::ifstream in(parts[t.file], std::ios::binary);
            in.seekg(std::streamoff(t.fileOffset));
            std::vector<char> bytes(std::min<size_t>(t.bytes, 64));
            in.read(bytes.data(), std::streamsize(bytes.size()));
            ASSERT_TRUE(in) << t.name;
            EXPECT_EQ(0, std::memcmp(bytes.data(), t.data, bytes.size())) << t.name << " in part " << t.file;
        }
        for (int n : perPart) EXPECT_GT(n, 0);
        EXPECT_EQ((*model)->metadata().getInt("split.count"), 3);
    }
}

// The same logits bit for bit (so the same tokens) as the whole file: resident, in RAM, streamed
// from the SSD (directly and through staging), mixed tier by tensor, and with the experts on
// the SSD through the expert cache, which reads each expert from its part.
TEST(GgufSplit, ThreePartsGiveTheWholeFilesTokensOnEveryTier)
{
    for (const char* name : {"tiny-mixtral", "tiny-qwen2moe"}) {
        spillway::testing_support::TempDir dir("gguf-split");
        const std::vector<std::string> parts = writeParts(kMoe + name + ".gguf", dir / name, 3);
        ASSERT_EQ(parts.size(), 3u);
        auto whole = LlamaModel::load(kMoe + name + ".gguf");
        ASSERT_TRUE(whole) << whole.error().message;
        auto split = LlamaModel::load(parts[1]);
        ASSERT_TRUE(split) << split.error().message;
        ASSERT_EQ((*split)->dataFiles().size(), 3u);
        auto device = gpu::createCpuDevice(2);
        const std::vector<int32_t> prompt = (*whole)->tokenizer().encode("Lily and Tom went to the park", true);
        ASSERT_EQ((*split)->tokenizer().encode("Lily and Tom went to the park", true), prompt);
        SessionOptions base;
        base.contextLength = 64;
        base.batch = 1;
        const int vocab = (*whole)->config().vocabSize;
        const std::vector<float> reference = spillway::testing_support::sessionLogits(**whole, *device, base, prompt, 12);
        ASSERT_FALSE(reference.empty());
        const std::vector<int32_t> referenceIds = greedyOf(reference, vocab);

        std::vector<std::pair<std::string, plan::Placement>> cases;
        for (plan::Tier tier : {plan::Tier::Device, plan::Tier::Host, plan::Tier::Ssd})
            cases.emplace_back(plan::tierName(tier), plan::uniformPlacement(**split, tier));
        plan::Placement staged = plan::uniformPlacement(**split, plan::Tier::Ssd);
        staged.directToDevice = false;
        cases.emplace_back("ssd via staging", staged);
        std::mt19937 rng(11);
        plan::Placement mixed = plan::uniformPlacement(**split, plan::Tier::Device);
        for (auto& t : mixed.tensors) t.tier = static_cast<plan::Tier>(rng() % 3);
        cases.emplace_back("mixed", mixed);
        plan::Placement experts = plan::uniformPlacement(**split, plan::Tier::Device);
        for (auto& t : experts.tensors)
            if (t.name.find("_exps") != std::string::npos) t.tier = plan::Tier::Ssd;
        cases.emplace_back("experts on the ssd", experts);
        for (const auto& [what, placement] : cases) {
            SessionOptions o = base;
            o.placement = placement;
            if (what == "experts on the ssd") o.experts.slotsPerLayer = 2;
            auto session = LlamaSession::create(**split, *device, o);
            ASSERT_TRUE(session) << name << " " << what << ": " << session.error().message;
            const std::vector<float> got = spillway::testing_support::sessionLogits(**session, prompt, 12);
            ASSERT_EQ(got.size(), reference.size()) << name << " " << what;
            EXPECT_EQ(greedyOf(got, vocab), referenceIds) << name << " " << what;
            EXPECT_EQ(0, std::memcmp(got.data(), reference.data(), got.size() * sizeof(float))) << name << " " << what;
            if (what == "experts on the ssd") {
                const ExpertCacheReport r = (*session)->expertCacheReport();
                EXPECT_EQ(r.layers, (*split)->config().nLayers) << name;
                EXPECT_GT(r.misses, 0u) << name;
                EXPECT_GT(r.ssdBytes, 0u) << name << ": the experts were read from the parts";
            }
        }
    }
}

// llama.cpp's own split (tests/data/models/moe/split: llama-gguf-split --split-max-tensors 11 of
// tiny-mixtral.gguf) reads as the whole file: the same tensors, and its greedy tokens streamed
// from the SSD are the whole file's. Our writer cuts the model as llama-gguf-split does: the
// same tensors in each part, the same split keys with the same types and values.
TEST(GgufSplit, LlamaCppsSplitReadsAsTheWholeFileAndOursMatchesIt)
{
    const std::string dir = kMoe + "split/";
    auto whole = LlamaModel::load(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(whole) << whole.error().message;
    auto theirs = LlamaModel::load(dir + "tiny-mixtral-00003-of-00003.gguf");
    ASSERT_TRUE(theirs) << theirs.error().message;
    ASSERT_EQ((*theirs)->dataFiles().size(), 3u);
    spillway::testing_support::expectSameTensors(**theirs, **whole);
    auto device = gpu::createCpuDevice(2);
    const std::vector<int32_t> prompt = (*whole)->tokenizer().encode("Lily and Tom went to the park", true);
    SessionOptions o;
    o.contextLength = 64;
    const std::vector<float> reference = spillway::testing_support::sessionLogits(**whole, *device, o, prompt, 8);
    o.placement = plan::uniformPlacement(**theirs, plan::Tier::Ssd);
    const std::vector<float> got = spillway::testing_support::sessionLogits(**theirs, *device, o, prompt, 8);
    ASSERT_EQ(got.size(), reference.size());
    EXPECT_EQ(0, std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)));

    spillway::testing_support::TempDir out("gguf-split");
    auto file = gguf::File::open(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(file) << file.error().message;
    std::vector<gguf::TensorSource> tensors;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
        const uint8_t* data = t.data;
        tensors.push_back({t.name, t.type, t.dims, [data](std::span<uint8_t> b) { std::memcpy(b.data(), data, b.size()); }});
    }
    auto ours = gguf::writeSplit((*file)->metadata(), tensors, out / "tiny-mixtral", {0, 11});
    ASSERT_TRUE(ours) << ours.error().message;
    ASSERT_EQ(ours->size(), 3u);
    for (int i = 0; i < 3; ++i) {
        auto a = gguf::File::open((*ours)[size_t(i)]);
        auto b = gguf::File::open(gguf::splitPartPath(dir + "tiny-mixtral", i + 1, 3));
        ASSERT_TRUE(a) << a.error().message;
        ASSERT_TRUE(b) << b.error().message;
        EXPECT_EQ(std::filesystem::path((*a)->path()).filename(), std::filesystem::path((*b)->path()).filename());
        ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size()) << "part " << i + 1;
        for (size_t t = 0; t < (*a)->tensors().size(); ++t)
            EXPECT_EQ((*a)->tensors()[t].name, (*b)->tensors()[t].name) << "part " << i + 1;
        for (std::string_view key : {gguf::kSplitNo, gguf::kSplitCount, gguf::kSplitTensorsCount}) {
            const gguf::Value* va = (*a)->find(key);
            const gguf::Value* vb = (*b)->find(key);
            ASSERT_NE(va, nullptr) << key;
            ASSERT_NE(vb, nullptr) << key;
            EXPECT_TRUE(*va == *vb) << key << " of part " << i + 1;
        }
        // Every other key of llama.cpp's part is ours too, with its value.
        for (const gguf::KeyValue& kv : (*b)->metadata()) {
            const gguf::Value* mine = (*a)->find(kv.key);
            ASSERT_NE(mine, nullptr) << kv.key << " of part " << i + 1;
            if (kv.key != "general.alignment") EXPECT_TRUE(*mine == kv.value) << kv.key;
        }
    }
}

TEST(GgufSplit, AMissingPartIsNamed)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::vector<std::string> parts = writeParts(kMoe + "tiny-mixtral.gguf", dir / "m", 3);
    ASSERT_EQ(parts.size(), 3u);
    std::filesystem::remove(parts[1]);
    expectRefused(parts[0], parts[1], "missing: part 2 of 3");
    expectRefused(parts[2], parts[1], "missing: part 2 of 3");
}

TEST(GgufSplit, PartsOfTwoModelsAreRefused)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::vector<std::string> a = writeParts(kMoe + "tiny-mixtral.gguf", dir / "a", 3);
    const std::vector<std::string> b = writeParts(kMoe + "tiny-qwen2moe.gguf", dir / "b", 3);
    ASSERT_EQ(a.size(), 3u);
    ASSERT_EQ(b.size(), 3u);
    // The third part of another model with as many parts, under this model's name.
    std::filesystem::copy_file(b[2], a[2], std::filesystem::copy_options::overwrite_existing);
    expectRefused(a[0], a[2], "parts of two different models");
    // A part of a model cut in another number of parts, renamed into this one's.
    const std::vector<std::string> c = writeParts(kMoe + "tiny-mixtral.gguf", dir / "c", 2);
    ASSERT_EQ(c.size(), 2u);
    std::filesystem::copy_file(c[1], b[1], std::filesystem::copy_options::overwrite_existing);
    expectRefused(b[0], b[1], "says it is one of 2 parts");
    // Two models whose parts hold different metadata.
    writePart(dir / "d-00001-of-00002.gguf",
              {{"general.architecture", gguf::Value::ofString("llama")}, {"split.no", u16(0)}, {"split.count", u16(2)},
               {"split.tensors.count", i32(2)}},
              {"a"});
    writePart(dir / "d-00002-of-00002.gguf",
              {{"general.architecture", gguf::Value::ofString("qwen2moe")}, {"split.no", u16(1)},
               {"split.count", u16(2)}, {"split.tensors.count", i32(2)}},
              {"b"});
    expectRefused(dir / "d-00001-of-00002.gguf", dir / "d-00002-of-00002.gguf", "a part of another model");
}

TEST(GgufSplit, APartNumberOutOfRangeIsRefused)
{
    spillway::testing_support::TempDir dir("gguf-split");
    writePart(dir / "m-00002-of-00003.gguf", {{"split.no", u16(7)}, {"split.count", u16(3)}, {"split.tensors.count", i32(1)}},
              {"a"});
    expectRefused(dir / "m-00002-of-00003.gguf", dir / "m-00002-of-00003.gguf",
                  "part number out of range: split.no is 7 but split.count is 3");
    writePart(dir / "n-00001-of-00002.gguf", {{"split.no", u16(0)}, {"split.count", u16(0)}}, {"a"});
    expectRefused(dir / "n-00001-of-00002.gguf", dir / "n-00001-of-00002.gguf", "split.count is 0");
    // A part whose name hides where it belongs.
    writePart(dir / "renamed.gguf", {{"split.no", u16(1)}, {"split.count", u16(3)}, {"split.tensors.count", i32(1)}}, {"a"});
    expectRefused(dir / "renamed.gguf", dir / "renamed.gguf", "does not end in -00002-of-00003.gguf");
}

TEST(GgufSplit, ATensorListedTwiceOrInNoPartIsRefused)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::vector<std::pair<std::string, gguf::Value>> first = {
        {"split.no", u16(0)}, {"split.count", u16(2)}, {"split.tensors.count", i32(3)}};
    const std::vector<std::pair<std::string, gguf::Value>> second = {
        {"split.no", u16(1)}, {"split.count", u16(2)}, {"split.tensors.count", i32(3)}};
    writePart(dir / "t-00001-of-00002.gguf", first, {"a", "blk.0.attn_q.weight"});
    writePart(dir / "t-00002-of-00002.gguf", second, {"blk.0.attn_q.weight"});
    auto twice = gguf::SplitFile::open(dir / "t-00001-of-00002.gguf");
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("tensor 'blk.0.attn_q.weight' is also in " + (dir / "t-00001-of-00002.gguf")),
              std::string::npos)
        << twice.error().message;
    EXPECT_NE(twice.error().message.find(dir / "t-00002-of-00002.gguf"), std::string::npos) << twice.error().message;
    expectRefused(dir / "t-00002-of-00002.gguf", "'blk.0.attn_q.weight'", "listed twice");

    // split.tensors.count says 3, the parts hold 2.
    writePart(dir / "u-00001-of-00002.gguf", first, {"a"});
    writePart(dir / "u-00002-of-00002.gguf", second, {"b"});
    expectRefused(dir / "u-00002-of-00002.gguf", dir / "u-00001-of-00002.gguf", "a tensor in no part");

    // A real model with one tensor in no part (its count adjusted to match): the load names it.
    auto file = gguf::File::open(kMoe + "tiny-mixtral.gguf");
    ASSERT_TRUE(file) << file.error().message;
    std::vector<gguf::TensorSource> tensors;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
        if (t.name == "blk.1.ffn_up_exps.weight") continue;
        const uint8_t* data = t.data;
        tensors.push_back({t.name, t.type, t.dims, [data](std::span<uint8_t> out) { std::memcpy(out.data(), data, out.size()); }});
    }
    auto parts = gguf::writeSplit((*file)->metadata(), tensors, dir / "v", {0, int(tensors.size() / 3 + 1)});
    ASSERT_TRUE(parts) << parts.error().message;
    ASSERT_EQ(parts->size(), 3u);
    expectRefused((*parts)[2], (*parts)[0], "missing tensor 'blk.1.ffn_up_exps.weight'");
}

TEST(GgufSplit, ATruncatedPartNamesItsFileAndTensor)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::vector<std::string> parts = writeParts(kMoe + "tiny-mixtral.gguf", dir / "m", 3);
    ASSERT_EQ(parts.size(), 3u);
    auto last = gguf::File::open(parts[2]);
    ASSERT_TRUE(last) << last.error().message;
    const std::string lastTensor = (*last)->tensors().back().name;
    last->reset();
    std::filesystem::resize_file(parts[2], std::filesystem::file_size(parts[2]) - 100);
    expectRefused(parts[0], parts[2], "truncated: tensor '" + lastTensor + "'");
}

// convert writes a split GGUF (llama-gguf-split's names and keys) and joins one into a file that
// holds no split keys; both hold the whole model's tensors byte for byte.
TEST(GgufSplit, ConvertSplitsAndJoins)
{
    spillway::testing_support::TempDir dir("gguf-split");
    auto whole = LlamaModel::load(kMoe + "tiny-olmoe.gguf");
    ASSERT_TRUE(whole) << whole.error().message;
    ConvertOptions split;
    split.splitMaxBytes = 400'000;  // the model holds about 1 MB of tensors
    std::vector<uint64_t> bytes;
    for (const ModelTensor& t : (*whole)->tensors()) bytes.push_back(t.bytes);
    const int count = gguf::assignParts(bytes, {split.splitMaxBytes, 0}).back() + 1;
    ASSERT_GE(count, 3);
    ASSERT_TRUE(convertModel(**whole, dir / "olmoe.gguf", split));
    EXPECT_FALSE(std::filesystem::exists(dir / "olmoe.gguf"));
    ASSERT_TRUE(std::filesystem::exists(gguf::splitPartPath(dir / "olmoe", 1, count)));
    auto parts = gguf::SplitFile::open(gguf::splitPartPath(dir / "olmoe", count, count));
    ASSERT_TRUE(parts) << parts.error().message;
    ASSERT_EQ((*parts)->parts().size(), size_t(count));
    for (size_t i = 0; i < size_t(count); ++i) {
        const gguf::File& p = *(*parts)->parts()[i];
        EXPECT_EQ(p.find("split.no")->type, gguf::ValueType::UInt16);
        EXPECT_EQ(p.getInt("split.no"), int64_t(i));
        EXPECT_EQ(p.getInt("split.count"), count);
        EXPECT_EQ(p.find("split.tensors.count")->type, gguf::ValueType::Int32);
        EXPECT_EQ(p.getInt("split.tensors.count"), int64_t((*whole)->tensors().size()));
        uint64_t data = 0;
        for (const gguf::TensorInfo& t : p.tensors()) data += (t.bytes + 31) / 32 * 32;
        EXPECT_LE(data, 400'000u) << p.path();
        // The model's metadata is in the first part only, as llama-gguf-split writes it.
        EXPECT_EQ(p.find("general.architecture") != nullptr, i == 0) << p.path();
    }
    EXPECT_FALSE(convertModel(**whole, dir / "olmoe.gguf", split)) << "existing parts are kept without --force";
    auto model = LlamaModel::load(gguf::splitPartPath(dir / "olmoe", 2, count));
    ASSERT_TRUE(model) << model.error().message;
    spillway::testing_support::expectSameTensors(**model, **whole);

    ASSERT_TRUE(convertModel(**model, dir / "joined.gguf", {}));
    auto joined = gguf::File::open(dir / "joined.gguf");
    ASSERT_TRUE(joined) << joined.error().message;
    EXPECT_EQ((*joined)->find("split.count"), nullptr);
    EXPECT_EQ((*joined)->find("split.no"), nullptr);
    joined->reset();
    auto joinedModel = LlamaModel::load(dir / "joined.gguf");
    ASSERT_TRUE(joinedModel) << joinedModel.error().message;
    EXPECT_EQ((*joinedModel)->dataFiles().size(), 1u);
    spillway::testing_support::expectSameTensors(**joinedModel, **whole);
}

// The same from the command line: convert --split-max-size with llama-gguf-split's decimal units
// (0.4M = 400,000 bytes of tensor data at most per part), generate from a part streaming every
// weight from the SSD gives the whole file's text, and convert of a part joins the model.
TEST(GgufSplit, TheCliSplitsGeneratesAndJoins)
{
    spillway::testing_support::TempDir dir("gguf-split");
    const std::string cli = std::string(SPILLWAY_BIN_DIR) + "/spillway-cli";
    const std::string source = kMoe + "tiny-qwen2moe.gguf";
    auto whole = LlamaModel::load(source);
    ASSERT_TRUE(whole) << whole.error().message;
    std::vector<uint64_t> bytes;
    for (const ModelTensor& t : (*whole)->tensors()) bytes.push_back(t.bytes);
    const int count = gguf::assignParts(bytes, {400'000, 0}).back() + 1;
    ASSERT_GE(count, 3);
    auto r = ::testing_support::runProgram(
        cli, "convert -m '" + source + "' -o '" + (dir / "q.gguf") + "' --to gguf --split-max-size 0.4M", dir.path());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("wrote " + std::to_string(count) + " parts"), std::string::npos) << r.err;
    for (int i = 1; i <= count; ++i) {
        const std::string part = gguf::splitPartPath(dir / "q", i, count);
        EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
        EXPECT_TRUE(std::filesystem::exists(part)) << part;
    }
    // info from any part describes the model: every part, every tensor with its part.
    r = ::testing_support::runProgram(cli, "info -m '" + gguf::splitPartPath(dir / "q", count, count) + "'", dir.path());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("file: " + gguf::splitPartPath(dir / "q", 1, count)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("split into " + std::to_string(count) + " parts"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string((*whole)->tensors().size()) + " tensors"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("output.weight"), std::string::npos) << r.out;
    const std::string env = "XDG_CACHE_HOME='" + (dir / "cache") + "' ";
    const std::string args = " -p 'Lily and Tom' -n 12 --temp 0 --tier ssd --quick-probe";
    const auto fromWhole = ::testing_support::runProgram(cli, "generate -m '" + source + "'" + args, dir.path(), env);
    ASSERT_EQ(fromWhole.exitCode, 0) << fromWhole.err;
    const auto fromParts = ::testing_support::runProgram(
        cli, "generate -m '" + gguf::splitPartPath(dir / "q", 2, count) + "'" + args, dir.path(), env);
    ASSERT_EQ(fromParts.exitCode, 0) << fromParts.err;
    EXPECT_FALSE(fromWhole.out.empty());
    EXPECT_EQ(fromParts.out, fromWhole.out);

    r = ::testing_support::runProgram(
        cli, "convert -m '" + gguf::splitPartPath(dir / "q", count, count) + "' -o '" + (dir / "joined.gguf") + "' --to gguf",
        dir.path());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto joined = LlamaModel::load(dir / "joined.gguf");
    ASSERT_TRUE(joined) << joined.error().message;
    EXPECT_EQ((*joined)->dataFiles().size(), 1u);
    spillway::testing_support::expectSameTensors(**joined, **whole);

    r = ::testing_support::runProgram(
        cli, "convert -m '" + source + "' -o '" + (dir / "x.gguf") + "' --to gguf --split-max-size 12parsecs", dir.path());
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_NE(r.err.find("--split-max-size"), std::string::npos) << r.err;
}
