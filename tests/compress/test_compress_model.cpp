// The one-click compression pipeline and the runtime reading its packages: a bitmap sparse
// package gives bitwise the logits of the same pruned weights stored dense (scalar kernels),
// from RAM or streamed from the SSD tier across several shards; presets, cancel, the source
// left untouched, quality in the manifest, corrupt packages refused.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/temp_dir.h"
#include "core/calibrate/compress_model.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/plan/model_tensors.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "gpu/sparse_format.h"
#include "storage/package.h"

namespace spillway::compress {
namespace {

using TempDir = spillway::testing_support::TempDir;

namespace fs = std::filesystem;

const std::string kModel = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";

std::string slurp(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::unique_ptr<LlamaModel> load(const std::string& path)
{
    auto m = LlamaModel::load(path);
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
}

CompressOptions quick(CompressOptions o)
{
    o.calibrationTokens = 16;
    o.quality.maxPromptTokens = 16;
    o.quality.perplexityTokens = 32;
    return o;
}

// Logits after each token of a fixed prompt, all of them (vocab floats per position).
std::vector<float> logits(const LlamaModel& m, gpu::Device& device, const SessionOptions& options = {})
{
    SessionOptions o = options;
    if (!o.contextLength) o.contextLength = 64;
    auto session = LlamaSession::create(m, device, o);
    EXPECT_TRUE(session) << (session ? "" : session.error().message);
    if (!session) return {};
    std::vector<float> all;
    const std::vector<int32_t> tokens = m.tokenizer().encode("Once upon a time, a cat sat", true);
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto out = (*session)->forward(tokens[i], int(i));
        EXPECT_TRUE(out) << (out ? "" : out.error().message);
        if (!out) return {};
        all.insert(all.end(), *out, *out + m.config().vocabSize);
    }
    return all;
}

// The package's layer matrices decoded and stored dense as F16 (their values are fp16, so
// exactly), everything else copied: the "dense pruned weights" of the package.
Status writeDenseTwin(const LlamaModel& package, const std::string& path)
{
    gguf::Writer w(4096);
    for (const auto& kv : package.metadata().entries()) w.setValue(kv.key, kv.value);
    for (const ModelTensor& t : package.tensors()) {
        if (t.type != gpu::DType::BitmapSparse) {
            w.addTensor(t.name, t.type, t.dims, [&t](std::span<uint8_t> out) { std::memcpy(out.data(), t.data, t.bytes); });
            continue;
        }
        w.addTensor(t.name, gpu::DType::F16, t.dims, [&t](std::span<uint8_t> out) {
            const gpu::BitmapSparseView v = gpu::viewBitmapBlob(t.data);
            std::vector<float> row(size_t(v.cols));
            for (int64_t r = 0; r < v.rows; ++r) {
                gpu::decodeBitmapSparseRow(v, r, row.data());
                for (int64_t c = 0; c < v.cols; ++c) {
                    const uint16_t h = gpu::fp32ToFp16(row[size_t(c)]);
                    std::memcpy(out.data() + 2 * (r * v.cols + c), &h, 2);
                }
            }
        });
    }
    return w.write(path);
}

TEST(CompressModel, BitmapPackageGivesTheLogitsOfItsDensePrunedTwin)
{
    TempDir dir;
    auto source = load(kModel);
    ASSERT_TRUE(source);
    auto cpu = gpu::createCpuDevice(2);
    CompressOptions o = quick(presetOptions(Preset::Balanced));
    o.shardBytes = 64 * 1024;  // several shards
    auto report = compressModel(*source, dir / "pkg", o, *cpu);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->bitmapTensors, 5 * 7);
    EXPECT_NEAR(report->sparsity, 0.5, 0.01);
    auto package = load(dir / "pkg");
    ASSERT_TRUE(package);
    EXPECT_TRUE(package->isPackage());
    EXPECT_GT(package->dataFiles().size(), 3u);
    ASSERT_NE(package->tensor("blk.2.ffn_up.weight"), nullptr);
    EXPECT_EQ(package->tensor("blk.2.ffn_up.weight")->type, gpu::DType::BitmapSparse);
    EXPECT_EQ(package->config().dim, source->config().dim);
    EXPECT_EQ(package->tokenizer().encode("Hello there", true), source->tokenizer().encode("Hello there", true));
    const Status twinWritten = writeDenseTwin(*package, dir / "twin.gguf");
    ASSERT_TRUE(twinWritten) << twinWritten.error().message;
    auto twin = load(dir / "twin.gguf");
    ASSERT_TRUE(twin);

    // Scalar kernels: the sparse sums are the dense sums without the zero products.
    auto scalar = gpu::createCpuDevice(2, gpu::CpuKernelSet::Scalar);
    const std::vector<float> dense = logits(*twin, *scalar), sparse = logits(*package, *scalar);
    ASSERT_FALSE(dense.empty());
    ASSERT_EQ(dense.size(), sparse.size());
    EXPECT_EQ(std::memcmp(dense.data(), sparse.data(), dense.size() * sizeof(float)), 0);

    // Every layer streamed from the SSD tier, through the shards, or copied from pinned RAM to
    // the device's slots before use: the same bits again. (RAM first: its slots must not be
    // memory just freed by a run that held the same blobs.)
    for (plan::Tier tier : {plan::Tier::Host, plan::Tier::Ssd}) {
        SessionOptions streamedOptions;
        streamedOptions.contextLength = 64;
        streamedOptions.placement = plan::uniformPlacement(*package, tier);
        streamedOptions.placement->prefetchDepth = 2;
        const std::vector<float> streamed = logits(*package, *scalar, streamedOptions);
        ASSERT_EQ(streamed.size(), sparse.size()) << plan::tierName(tier);
        EXPECT_EQ(std::memcmp(streamed.data(), sparse.data(), sparse.size() * sizeof(float)), 0)
            << plan::tierName(tier);
    }

    // The vector kernels sum in another order: close, not equal.
    auto best = gpu::createCpuDevice(2);
    const std::vector<float> fast = logits(*package, *best);
    ASSERT_EQ(fast.size(), dense.size());
    double worst = 0;
    for (size_t i = 0; i < fast.size(); ++i) worst = std::max(worst, double(std::fabs(fast[i] - dense[i])));
    EXPECT_LT(worst, 1e-3);
}

TEST(CompressModel, SourceUntouchedQualityInManifestPresetsAndSizes)
{
    TempDir dir;
    const std::string before = slurp(kModel);
    auto source = load(kModel);
    ASSERT_TRUE(source);
    auto cpu = gpu::createCpuDevice(2);
    uint64_t layerWeights = 0;
    for (const ModelTensor& t : source->tensors())
        if (t.name.rfind("blk.", 0) == 0 && t.dims.size() == 2) layerWeights += uint64_t(t.dims[0] * t.dims[1]);

    // Bounds for this model's tiny rows (64 or 172 values: the per-row offset and the 64-byte
    // section alignment weigh more than on real matrices; test_compress_formats checks ENDOR's
    // 56% and 32% on real-sized ones).
    struct Case { Preset preset; const char* format; double maxOfFp16; };
    for (const Case& c : {Case{Preset::Fast, "q8_0", 0.56}, Case{Preset::Balanced, "bitmap-f16", 0.70},
                          Case{Preset::Smallest, "bitmap-int8-g64", 0.45}}) {
        SCOPED_TRACE(presetName(c.preset));
        const std::string out = dir / presetName(c.preset);
        auto r = compressModel(*source, out, quick(presetOptions(c.preset)), *cpu);
        ASSERT_TRUE(r) << r.error().message;
        auto pkg = storage::Package::open(out);
        ASSERT_TRUE(pkg) << pkg.error().message;
        EXPECT_TRUE(pkg->verify());
        const storage::PackageTensor* t = pkg->find("blk.0.attn_q.weight");
        ASSERT_TRUE(t);
        EXPECT_EQ(t->format, c.format);
        // The layer matrices against the same weights in dense fp16 (this source is F32).
        EXPECT_LE(double(r->layerOutputBytes), c.maxOfFp16 * 2.0 * double(layerWeights));
        const auto quality = nlohmann::json::parse(pkg->manifest().qualityJson);
        ASSERT_TRUE(r->quality);
        EXPECT_DOUBLE_EQ(quality.at("meanKl").get<double>(), r->quality->meanKl);
        EXPECT_GT(r->quality->meanKl, 0.0);
        EXPECT_GT(r->quality->top1Agreement, 0.0);
        const auto extra = nlohmann::json::parse(t->extraJson);
        EXPECT_GT(extra.at("relError").get<double>(), 0.0);
        auto model = load(out);
        ASSERT_TRUE(model);
        EXPECT_FALSE(logits(*model, *cpu).empty());
    }
    EXPECT_EQ(slurp(kModel), before);
    // No temporary folder is left beside the outputs.
    for (const auto& e : fs::directory_iterator(dir.path()))
        EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
}

TEST(CompressModel, CancelAndFailuresLeaveNothing)
{
    TempDir dir;
    auto source = load(kModel);
    ASSERT_TRUE(source);
    auto cpu = gpu::createCpuDevice(2);
    for (const char* stage : {"calibrating", "compressing", "checking quality"}) {
        SCOPED_TRACE(stage);
        CompressOptions o = quick(presetOptions(Preset::Smallest));
        int calls = 0;
        o.progress = [&](const CompressProgress& p) {
            EXPECT_GE(p.fraction, 0.0);
            EXPECT_LE(p.fraction, 1.0);
            return !(p.stage == stage && ++calls == 2);
        };
        auto r = compressModel(*source, dir / "out", o, *cpu);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().code, ErrorCode::Cancelled);
        EXPECT_TRUE(fs::is_empty(dir.path()));
    }
    // Bad options and an existing output are refused before anything is written.
    CompressOptions bad = quick(presetOptions(Preset::Fast));
    bad.quant.group = 48;
    auto r = compressModel(*source, dir / "out", bad, *cpu);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    fs::create_directory(dir / "exists");
    r = compressModel(*source, dir / "exists", quick(presetOptions(Preset::Fast)), *cpu);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
}

// A device without bitmap kernels (CUDA, Vulkan) computes every layer, streamed ones too: all
// stay dense (int8 as q8_0 where the width allows), and the plan's tiers become hints.
TEST(CompressModel, LayersStayDenseForADeviceWithoutBitmapKernels)
{
    TempDir dir;
    auto source = load(kModel);
    ASSERT_TRUE(source);
    auto cpu = gpu::createCpuDevice(2);
    CompressOptions o = quick(presetOptions(Preset::Smallest));
    o.qualityCheck = false;
    o.placement = plan::uniformPlacement(*source, plan::Tier::Ssd);
    for (auto& t : o.placement->tensors)
        if (t.name.rfind("blk.0.", 0) == 0) t.tier = plan::Tier::Device;
    o.deviceSupportsBitmap = false;
    auto r = compressModel(*source, dir / "pkg", o, *cpu);
    ASSERT_TRUE(r) << r.error().message;
    auto pkg = storage::Package::open(dir / "pkg");
    ASSERT_TRUE(pkg) << pkg.error().message;
    ASSERT_NE(pkg->find("blk.0.ffn_up.weight"), nullptr);
    ASSERT_NE(pkg->find("blk.1.ffn_up.weight"), nullptr);
    EXPECT_EQ(pkg->find("blk.0.ffn_up.weight")->format, "q8_0");
    EXPECT_EQ(pkg->find("blk.0.ffn_up.weight")->tierHint, "device");
    EXPECT_EQ(pkg->find("blk.1.ffn_up.weight")->format, "q8_0");
    EXPECT_EQ(pkg->find("blk.1.ffn_up.weight")->tierHint, "ssd");
    EXPECT_EQ(r->bitmapTensors, 0);
    EXPECT_EQ(r->denseTensors, 7 * source->config().nLayers);
    for (const auto& t : pkg->manifest().tensors)
        EXPECT_EQ(t.format.rfind("bitmap", 0), std::string::npos) << t.name;
}

TEST(CompressModel, CorruptOrUnknownPackageTensorsAreRefused)
{
    TempDir dir;
    auto source = load(kModel);
    ASSERT_TRUE(source);
    auto cpu = gpu::createCpuDevice(2);
    CompressOptions o = quick(presetOptions(Preset::Balanced));
    o.qualityCheck = false;
    auto compressed = compressModel(*source, dir / "pkg", o, *cpu);
    ASSERT_TRUE(compressed) << compressed.error().message;
    auto pkg = storage::Package::open(dir / "pkg");
    ASSERT_TRUE(pkg) << pkg.error().message;
    const storage::PackageTensor* t = pkg->find("blk.3.ffn_down.weight");
    ASSERT_TRUE(t);
    const std::string shard = pkg->shardPath(t->shard);
    const uint64_t at = t->offset + gpu::kBitmapBlobHeaderBytes + 8;  // row offset 1
    // Break the blob (a row offset), then the manifest's format name.
    {
        std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
        ASSERT_TRUE(f) << "cannot open " << shard;
        f.seekp(std::streamoff(at));
        const uint64_t wrong = 3;
        f.write(reinterpret_cast<const char*>(&wrong), 8);
    }
    auto broken = LlamaModel::load(dir / "pkg");
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(broken.error().message.find("blk.3.ffn_down.weight"), std::string::npos) << broken.error().message;
    EXPECT_FALSE(pkg->verifyTensor(*t));  // the checksum sees it too

    std::string manifest = slurp(dir / "pkg/manifest.json");
    const size_t pos = manifest.find("\"bitmap-f16\"");
    ASSERT_NE(pos, std::string::npos);
    manifest.replace(pos, 12, "\"bitmap-f99\"");
    std::ofstream(dir / "pkg/manifest.json", std::ios::trunc) << manifest;
    auto unknown = LlamaModel::load(dir / "pkg");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("bitmap-f99"), std::string::npos) << unknown.error().message;
}

}  // namespace
}  // namespace spillway::compress
