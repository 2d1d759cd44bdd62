// llama2.c checkpoints: the thesis' ReLU model (export v2) against its own runtime's greedy text,
// stories260K rewritten here as v0, v1 and v2 files (with its tokenizer.bin) against llama.cpp's
// text, and damaged checkpoints giving messages that name the problem.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/formats/llama2c.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/greedy_text.h"
#include "../common/kernel_sets.h"
#include "../common/temp_dir.h"

using namespace spillway;
using testing_support::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;
const std::string kRelu = kData + "/models/relu-stories-260K/model_qint80.bin";

class KernelSet : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { setenv("SPILLWAY_CPU_KERNELS", GetParam().c_str(), 1); }
    void TearDown() override { unsetenv("SPILLWAY_CPU_KERNELS"); }
};

// Writes a llama2.c checkpoint of stories260K's weights (the test's own writer, from the
// format's description: export.py's legacy_export, version1_export and version2_export).
void writeCheckpoint(const LlamaModel& m, int version, const std::string& path)
{
    const LlamaConfig& c = m.config();
    std::ofstream out(path, std::ios::binary);
    auto i32 = [&](int32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    auto floats = [&](const std::string& name) {
        const ModelTensor* t = m.tensor(name);
        ASSERT_NE(t, nullptr) << name;
        if (t->type == gpu::DType::Q8_G64) {  // blocks of (fp32 scale, 64 x int8): s * q
            std::vector<float> x;
            for (uint64_t b = 0; b < t->bytes / 68; ++b) {
                float scale;
                std::memcpy(&scale, t->data + b * 68, 4);
                for (int i = 0; i < 64; ++i) x.push_back(scale * float(int8_t(t->data[b * 68 + 4 + i])));
            }
            out.write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * 4));
            return;
        }
        ASSERT_EQ(t->type, gpu::DType::F32);
        out.write(reinterpret_cast<const char*>(t->data), std::streamsize(t->bytes));
    };
    auto q8 = [&](const std::string& name) {  // all int8 values, then one fp32 scale per 64
        const ModelTensor* t = m.tensor(name);
        ASSERT_NE(t, nullptr) << name;
        const float* x = reinterpret_cast<const float*>(t->data);
        const size_t n = t->bytes / 4;
        std::vector<int8_t> q(n);
        std::vector<float> s(n / 64);
        for (size_t g = 0; g < n / 64; ++g) {
            float mx = 0;
            for (size_t i = 0; i < 64; ++i) mx = std::max(mx, std::fabs(x[g * 64 + i]));
            s[g] = mx / 127.0f;
            for (size_t i = 0; i < 64; ++i) q[g * 64 + i] = int8_t(s[g] ? std::round(x[g * 64 + i] / s[g]) : 0);
        }
        out.write(reinterpret_cast<const char*>(q.data()), std::streamsize(n));
        out.write(reinterpret_cast<const char*>(s.data()), std::streamsize(s.size() * 4));
    };
    auto layers = [&](const std::string& suffix, bool quantized) {
        for (int l = 0; l < c.nLayers; ++l) {
            const std::string name = "blk." + std::to_string(l) + "." + suffix;
            if (quantized)
                q8(name);
            else
                floats(name);
        }
    };
    const bool shared = m.tensor("output.weight") == nullptr;  // stories260K has a separate copy
    if (version == 0) {
        for (int v : {c.dim, c.ffnDim, c.nLayers, c.nHeads, c.nKvHeads, shared ? c.vocabSize : -c.vocabSize, 512}) i32(v);
        floats("token_embd.weight");
        layers("attn_norm.weight", false);
        for (const char* s : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) layers(s, false);
        layers("ffn_norm.weight", false);
        for (const char* s : {"ffn_gate.weight", "ffn_down.weight", "ffn_up.weight"}) layers(s, false);
        floats("output_norm.weight");
        const std::vector<float> rope(size_t(512) * c.headDim / 2, 0.5f);  // unused by readers
        out.write(reinterpret_cast<const char*>(rope.data()), std::streamsize(rope.size() * 4));
        out.write(reinterpret_cast<const char*>(rope.data()), std::streamsize(rope.size() * 4));
        if (!shared) floats("output.weight");
        return;
    }
    i32(0x616b3432);
    i32(version);
    for (int v : {c.dim, c.ffnDim, c.nLayers, c.nHeads, c.nKvHeads, c.vocabSize, 512}) i32(v);
    out.put(char(shared ? 1 : 0));
    if (version == 2) i32(64);
    const auto written = out.tellp();
    out.write(std::string(size_t(256 - written), '\0').data(), std::streamsize(256 - written));
    layers("attn_norm.weight", false);
    layers("ffn_norm.weight", false);
    floats("output_norm.weight");
    const bool q = version == 2;
    if (q) q8("token_embd.weight"); else floats("token_embd.weight");
    for (const char* s : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                          "ffn_down.weight", "ffn_up.weight"})
        layers(s, q);
    if (!shared) {
        if (q) q8("output.weight"); else floats("output.weight");
    }
}

// Call inside ASSERT_NO_FATAL_FAILURE: a missing source is a test failure, not an exception.
void copyFile(const std::string& from, const std::string& to)
{
    std::error_code ec;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    ASSERT_FALSE(ec) << "cannot copy " << from << " to " << to << ": " << ec.message();
}

}  // namespace

TEST_P(KernelSet, ReluStoriesMatchesTheThesisRuntime)
{
    auto model = LlamaModel::load(kRelu, {"relu-llama", ""});
    ASSERT_TRUE(model.ok()) << model.error().message;
    const LlamaConfig& c = (*model)->config();
    EXPECT_EQ(c.architecture, "relu-llama");
    EXPECT_EQ(c.dim, 64);
    EXPECT_EQ(c.ffnDim, 192);
    EXPECT_EQ(c.nLayers, 4);
    EXPECT_EQ(c.vocabSize, 1024);
    EXPECT_EQ(c.trainedContext, 64);
    ASSERT_NE((*model)->tensor("blk.0.attn_q.weight"), nullptr);
    EXPECT_EQ((*model)->tensor("blk.0.attn_q.weight")->type, gpu::DType::Q8_G64);
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    for (int threads : {1, 2}) {
        auto device = gpu::createCpuDevice(threads);
        ASSERT_EQ(device->info().kernels, GetParam()) << "SPILLWAY_CPU_KERNELS did not pick the set";
        for (const auto& ref : refs) {
            const std::string text = testing_support::greedyText(**model, *device, ref.prompt, 48);
            EXPECT_EQ(text.substr(0, ref.text.size()), ref.text) << "kernels " << GetParam() << ", threads " << threads;
        }
    }
}

// Every set this CPU runs, named in the test's name (Cpu/KernelSet.X/avx2).
INSTANTIATE_TEST_SUITE_P(Cpu, KernelSet, ::testing::ValuesIn(testing_support::kernelSetNamesThisCpuRuns()),
                         [](const auto& info) { return info.param; });

TEST(Llama2c, TheSameModelAsLlamaDiffersFromTheReluText)
{
    // The file does not record its activations: read as plain Llama it is another model.
    auto model = LlamaModel::load(kRelu);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ((*model)->config().architecture, "llama");
    auto device = gpu::createCpuDevice(1);
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_FALSE(refs.empty());
    EXPECT_NE(testing_support::greedyText(**model, *device, refs[0].prompt, 48).substr(0, refs[0].text.size()), refs[0].text);
}

// The thesis' decode-only tables: decode1024.tok gives back tok1024.bin exactly (texts, scores,
// types), so relu-stories-2M, which ships only decode4096.tok, gets its real tokenizer.
TEST(Llama2c, DecodeTableGivesBackTheTokenizer)
{
    const std::string dir = kData + "/models/relu-stories-260K/";
    gguf::Metadata fromBin("bin"), fromTable("table");
    ASSERT_TRUE(llama2c::tokenizerMetadata(dir + "tok1024.bin", 1024, fromBin).ok());
    const Status s = llama2c::decodeTableMetadata(dir + "decode1024.tok", 1024, fromTable);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_EQ(fromTable.entries().size(), fromBin.entries().size());
    for (const gguf::KeyValue& kv : fromBin.entries()) {
        const gguf::Value* v = fromTable.find(kv.key);
        ASSERT_NE(v, nullptr) << kv.key;
        EXPECT_TRUE(*v == kv.value) << kv.key;
    }
    gguf::Metadata wrongSize("x");
    const Status mismatch = llama2c::decodeTableMetadata(dir + "decode1024.tok", 512, wrongSize);
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.error().message.find("holds 1024 tokens"), std::string::npos);

    // relu-stories-2M finds its table beside it, and greedy text from BOS reads as a story.
    auto big = LlamaModel::load(kData + "/models/relu-stories-2M/model_qint80.bin",
                                ModelLoadOptions{"relu-llama", ""});
    ASSERT_TRUE(big.ok()) << big.error().message;
    EXPECT_EQ((*big)->config().dim, 128);
    EXPECT_EQ((*big)->tokenizer().size(), 4096);
    auto device = gpu::createCpuDevice(1);
    const std::string text = testing_support::greedyText(**big, *device, "Once upon a time", 24);
    EXPECT_EQ(text.rfind("Once upon a time", 0), 0u) << text;
    EXPECT_GT(text.size(), std::string("Once upon a time").size() + 40) << text;
    // The prompt encodes to the pieces tokenizer.bin's merges would make.
    const auto ids = (*big)->tokenizer().encode("Once upon a time", true);
    EXPECT_LE(ids.size(), 6u);
}

TEST(Llama2c, Fp32CheckpointsOfStories260KGiveLlamaCppsText)
{
    auto gguf = LlamaModel::load(kData + "/models/stories260K.gguf");
    ASSERT_TRUE(gguf.ok()) << gguf.error().message;
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
    ASSERT_EQ(refs.size(), 3u);
    TempDir dir("spillway-llama2c");
    ASSERT_NO_FATAL_FAILURE(copyFile(kData + "/models/tok512.bin", dir.path() + "/tok512.bin"));
    auto device = gpu::createCpuDevice(2);
    for (int version : {0, 1}) {
        const std::string path = dir.path() + "/v" + std::to_string(version) + ".bin";
        ASSERT_NO_FATAL_FAILURE(writeCheckpoint(**gguf, version, path));
        ASSERT_TRUE(llama2c::looksLikeCheckpoint(path)) << version;
        auto model = LlamaModel::load(path);
        ASSERT_TRUE(model.ok()) << model.error().message;
        ASSERT_NE((*model)->tensor("blk.1.ffn_down.weight"), nullptr);
        EXPECT_EQ((*model)->tensor("blk.1.ffn_down.weight")->type, gpu::DType::F32);
        EXPECT_EQ((*model)->tensor("blk.1.ffn_down.weight")->file, 0u) << "fp32 tensors are used from the file";
        for (const auto& ref : refs) EXPECT_EQ(testing_support::greedyText(**model, *device, ref.prompt, 48), ref.text) << "v" << version;
    }
}

TEST(Llama2c, QuantizedV2AgreesWithItsFp32Rewrite)
{
    // The ReLU model's v2 file read as plain Llama, against the same weights dequantized into a
    // v1 file: the regrouped int8 blocks must hold what the file says (int8 activations aside).
    auto v2 = LlamaModel::load(kRelu);
    ASSERT_TRUE(v2.ok()) << v2.error().message;
    ASSERT_NE((*v2)->tensor("token_embd.weight"), nullptr);
    EXPECT_EQ((*v2)->tensor("token_embd.weight")->type, gpu::DType::Q8_G64);
    EXPECT_EQ((*v2)->tensor("token_embd.weight")->file, kInMemoryTensor);
    EXPECT_EQ((*v2)->tensor("output.weight"), nullptr) << "plain Llama keeps the classifier shared";
    TempDir dir("spillway-llama2c");
    ASSERT_NO_FATAL_FAILURE(copyFile(kData + "/models/relu-stories-260K/tok1024.bin", dir.path() + "/tok1024.bin"));
    const std::string path = dir.path() + "/v1.bin";
    ASSERT_NO_FATAL_FAILURE(writeCheckpoint(**v2, 1, path));
    auto v1 = LlamaModel::load(path);
    ASSERT_TRUE(v1.ok()) << v1.error().message;
    auto device = gpu::createCpuDevice(1);
    auto a = LlamaSession::create(**v1, *device, 32);
    auto b = LlamaSession::create(**v2, *device, 32);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    const int vocab = (*v1)->config().vocabSize;
    const int tokens[] = {1, 403, 407, 261, 378};
    for (int pos = 0; pos < 5; ++pos) {
        auto fa = (*a)->forward(tokens[pos], pos);
        ASSERT_TRUE(fa.ok()) << fa.error().message;
        auto fb = (*b)->forward(tokens[pos], pos);
        ASSERT_TRUE(fb.ok()) << fb.error().message;
        const float* la = *fa;
        const float* lb = *fb;
        double dot = 0, na = 0, nb = 0;
        for (int i = 0; i < vocab; ++i) {
            dot += double(la[i]) * lb[i];
            na += double(la[i]) * la[i];
            nb += double(lb[i]) * lb[i];
        }
        EXPECT_GT(dot / std::sqrt(na * nb), 0.99) << "position " << pos;
    }
}

TEST(Llama2c, DamagedCheckpointsAreNamed)
{
    TempDir dir("spillway-llama2c");
    const std::string dst = dir.path() + "/model.bin";
    auto expectError = [&](const std::string& path, const std::string& fragment, ModelLoadOptions o = {}) {
        auto model = LlamaModel::load(path, o);
        ASSERT_FALSE(model.ok());
        EXPECT_NE(model.error().message.find(fragment), std::string::npos) << model.error().message;
        EXPECT_NE(model.error().message.find(path), std::string::npos) << model.error().message;
    };
    std::ifstream in(kRelu, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << kRelu;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 256u) << kRelu << " is shorter than its header";
    auto write = [&](const std::string& b) {
        std::ofstream(dst, std::ios::binary | std::ios::trunc).write(b.data(), std::streamsize(b.size()));
    };
    ASSERT_NO_FATAL_FAILURE(copyFile(kData + "/models/relu-stories-260K/tok1024.bin", dir.path() + "/tok1024.bin"));
    write(bytes.substr(0, bytes.size() - 100));
    expectError(dst, "truncated");
    write(bytes + std::string(8, '\0'));
    expectError(dst, "should be");
    std::string v = bytes;
    v[4] = 3;
    write(v);
    expectError(dst, "version 3");
    v = bytes;
    v[37] = 32;  // group size
    write(v);
    expectError(dst, "group size 32");
    v = bytes;
    v[8] = v[9] = v[10] = char(0x7f);  // dim
    write(v);
    expectError(dst, "out of range");
    v = bytes;
    v[12] = 100;  // hidden_dim
    write(v);
    expectError(dst, "multiples of 64");
    write(bytes);
    expectError(dst, "'mamba'", {"mamba", ""});
    fs::remove(dir.path() + "/tok1024.bin");
    expectError(dst, "tok1024.bin");
    std::string tok;
    {
        const std::string tokPath = kData + "/models/relu-stories-260K/tok1024.bin";
        std::ifstream t(tokPath, std::ios::binary);
        ASSERT_TRUE(t) << "cannot read " << tokPath;
        tok.assign((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
    }
    std::ofstream(dir.path() + "/tokenizer.bin", std::ios::binary).write(tok.data(), std::streamsize(tok.size() / 2));
    auto model = LlamaModel::load(dst);
    ASSERT_FALSE(model.ok());
    EXPECT_NE(model.error().message.find(dir.path() + "/tokenizer.bin: truncated at token"), std::string::npos)
        << model.error().message;
}

// A descriptor (what the app writes when a checkpoint is added) loads the checkpoint with the
// architecture and tokenizer it names, and the model keeps the descriptor's path; a broken one
// says what is wrong.
TEST(Llama2c, DescriptorNamesTheArchitectureAndTokenizer)
{
    TempDir dir;
    const std::string path = (std::filesystem::path(dir.path()) / "relu.llama2c.json").string();
    llama2c::Descriptor d;
    d.checkpoint = kRelu;
    d.architecture = "relu-llama";
    d.tokenizer = kData + "/models/relu-stories-260K/tok1024.bin";
    ASSERT_TRUE(llama2c::writeDescriptor(path, d));
    EXPECT_TRUE(llama2c::isDescriptor(path));
    EXPECT_EQ(llama2c::tokenizerBeside(kRelu), kData + "/models/relu-stories-260K/tok1024.bin");
    EXPECT_EQ(llama2c::tokenizerBeside(kData + "/models/stories260K.gguf"), "");  // not a checkpoint
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ((*model)->path(), path);
    EXPECT_EQ((*model)->config().architecture, "relu-llama");
    auto device = gpu::createCpuDevice(1);
    const auto refs = testing_support::readReferenceTexts(kData + "/reference/relu-stories-260K.greedy48.tsv");
    ASSERT_FALSE(refs.empty());
    EXPECT_EQ(testing_support::greedyText(**model, *device, refs[0].prompt, 48).substr(0, refs[0].text.size()), refs[0].text);

    {
        std::ofstream(path) << "{\"architecture\": \"llama\"}";
    }
    auto broken = LlamaModel::load(path);
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.error().message.find("not a llama2.c checkpoint descriptor"), std::string::npos) << broken.error().message;
    d.checkpoint = dir.path() + "/gone.bin";
    ASSERT_TRUE(llama2c::writeDescriptor(path, d));
    auto gone = LlamaModel::load(path);
    ASSERT_FALSE(gone.ok());
    EXPECT_NE(gone.error().message.find("is gone"), std::string::npos) << gone.error().message;
}
