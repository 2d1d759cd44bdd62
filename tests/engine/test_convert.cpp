// Hugging Face folders and spillway-cli convert: stories260K.gguf written as a Hugging Face
// folder and back gives llama.cpp's reference text from both, and the same tensor bytes as the
// original; the folder holds Hugging Face's Q/K row order; bad folders and outputs are refused
// with messages that name them, leaving nothing behind.

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "core/formats/safetensors.h"
#include "core/model/convert_model.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "gpu/cpu/cpu_device.h"
#include "../common/greedy_text.h"
#include "../common/same_tensors.h"
#include "../common/temp_dir.h"

using namespace spillway;
using testing_support::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;
const std::string kStories = kData + "/models/stories260K.gguf";

std::vector<testing_support::ReferenceText> references()
{
    return testing_support::readReferenceTexts(kData + "/reference/stories260K.greedy48.tsv");
}

std::string greedy(const LlamaModel& model, const std::string& prompt)
{
    auto device = gpu::createCpuDevice(2);
    return testing_support::greedyText(model, *device, prompt);
}

ConvertOptions to(ConvertTarget t)
{
    ConvertOptions o;
    o.target = t;
    return o;
}

void writeFile(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The file's bytes; "" and a test failure when it cannot be opened.
std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ADD_FAILURE() << "cannot read " << path;
        return {};
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(Convert, Stories260KThroughAHuggingFaceFolderAndBack)
{
    auto original = LlamaModel::load(kStories);
    ASSERT_TRUE(original.ok()) << original.error().message;
    TempDir dir("spillway-convert");
    ASSERT_TRUE(convertModel(**original, dir / "hf", to(ConvertTarget::HuggingFace)).ok());
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"})
        EXPECT_TRUE(fs::exists(dir / ("hf/" + std::string(f)))) << f;
    auto hf = LlamaModel::load(dir / "hf");
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    EXPECT_TRUE((*hf)->config().ropeNeox) << "Hugging Face rows are rotated as halves";
    ASSERT_NE((*hf)->tensor("blk.0.attn_q.weight"), nullptr);
    EXPECT_EQ((*hf)->tensor("blk.0.attn_q.weight")->file, 0u) << "used in place from model.safetensors";

    ASSERT_TRUE(convertModel(**hf, dir / "back.gguf", to(ConvertTarget::Gguf)).ok());
    auto back = LlamaModel::load(dir / "back.gguf");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_FALSE((*back)->config().ropeNeox);

    const auto refs = references();
    ASSERT_EQ(refs.size(), 3u);
    for (const auto& ref : refs) {
        EXPECT_EQ(greedy(**hf, ref.prompt), ref.text) << "Hugging Face folder";
        EXPECT_EQ(greedy(**back, ref.prompt), ref.text) << "GGUF from the folder";
    }
    // Every tensor comes back byte for byte (the Q/K permutation and its inverse included).
    testing_support::expectSameTensors(**back, **original);
    // In the folder, Q's rows are in Hugging Face's order: GGUF's row 2i + s of head h is the
    // folder's row s * r/2 + i of that head (r rows per head; llama.cpp's permute).
    auto st = safetensors::openSingle(dir / "hf/model.safetensors");
    ASSERT_TRUE(st.ok()) << st.error().message;
    const safetensors::Tensor* q = st->find("model.layers.0.self_attn.q_proj.weight");
    ASSERT_NE(q, nullptr);
    const ModelTensor* gq = (*original)->tensor("blk.0.attn_q.weight");
    ASSERT_NE(gq, nullptr);
    const int heads = (*original)->config().nHeads, r = int(gq->dims[1]) / heads;
    const size_t rowBytes = size_t(gq->dims[0]) * 4;
    for (int h = 0; h < heads; ++h)
        for (int i = 0; i < r / 2; ++i)
            for (int s = 0; s < 2; ++s)
                ASSERT_EQ(0, std::memcmp(gq->data + size_t(h * r + 2 * i + s) * rowBytes,
                                         q->data + size_t(h * r + s * r / 2 + i) * rowBytes, rowBytes))
                    << "head " << h << " pair " << i;
}

// Shards as transformers writes them: model-0000i-of-0000N.safetensors + the index, none over the
// limit unless one tensor alone is; the folder loads with every tensor in place.
TEST(Convert, ShardedHuggingFaceFolder)
{
    auto original = LlamaModel::load(kStories);
    ASSERT_TRUE(original.ok()) << original.error().message;
    TempDir dir("spillway-convert");
    ConvertOptions o = to(ConvertTarget::HuggingFace);
    o.shardBytes = 200 * 1024;  // stories260K holds ~1 MB of F32 weights: several shards
    ASSERT_TRUE(convertModel(**original, dir / "hf", o).ok());
    EXPECT_FALSE(fs::exists(dir / "hf/model.safetensors"));
    ASSERT_TRUE(fs::exists(dir / "hf/model.safetensors.index.json"));
    int shards = 0;
    uint64_t largestTensor = 0;
    for (const ModelTensor& t : (*original)->tensors()) largestTensor = std::max(largestTensor, t.bytes);
    for (const auto& e : fs::directory_iterator(dir / "hf")) {
        const std::string name = e.path().filename().string();
        if (name.rfind("model-", 0) != 0) continue;
        ++shards;
        auto st = safetensors::openSingle(e.path().string());
        ASSERT_TRUE(st.ok()) << name << ": " << st.error().message;
        uint64_t data = 0;
        for (const auto& t : st->tensors) data += t.bytes;
        EXPECT_LE(data, std::max<uint64_t>(o.shardBytes, largestTensor)) << name;
    }
    EXPECT_GE(shards, 4);
    EXPECT_TRUE(fs::exists(dir / ("hf/model-00001-of-0000" + std::to_string(shards) + ".safetensors")));
    auto hf = LlamaModel::load(dir / "hf");
    ASSERT_TRUE(hf.ok()) << hf.error().message;
    EXPECT_EQ((*hf)->tensors().size(), (*original)->tensors().size());
    const auto refs = references();
    ASSERT_FALSE(refs.empty());
    EXPECT_EQ(greedy(**hf, refs[0].prompt), refs[0].text);
}

TEST(Convert, ExistingOutputsAndImpossibleTargetsAreRefused)
{
    auto original = LlamaModel::load(kStories);
    ASSERT_TRUE(original.ok()) << original.error().message;
    TempDir dir("spillway-convert");
    writeFile(dir / "taken.gguf", "keep me");
    auto taken = convertModel(**original, dir / "taken.gguf", to(ConvertTarget::Gguf));
    ASSERT_FALSE(taken.ok());
    EXPECT_NE(taken.error().message.find("exists"), std::string::npos);
    EXPECT_EQ(readFile(dir / "taken.gguf"), "keep me");
    ConvertOptions force = to(ConvertTarget::Gguf);
    force.overwrite = true;
    EXPECT_TRUE(convertModel(**original, dir / "taken.gguf", force).ok());

    // A folder that cannot be made: an error, and nothing left beside it.
    writeFile(dir / "file", "x");
    auto blocked = convertModel(**original, dir / "file/hf", to(ConvertTarget::HuggingFace));
    ASSERT_FALSE(blocked.ok());
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 2u) << "only taken.gguf and file";

    auto relu = LlamaModel::load(kData + "/models/relu-stories-260K/model_qint80.bin", {"relu-llama", ""});
    ASSERT_TRUE(relu.ok()) << relu.error().message;
    auto refused = convertModel(**relu, dir / "relu.gguf", to(ConvertTarget::Gguf));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("relu-llama"), std::string::npos);
    EXPECT_FALSE(fs::exists(dir / "relu.gguf"));
}

TEST(Convert, BadHuggingFaceFoldersAreNamed)
{
    auto original = LlamaModel::load(kStories);
    ASSERT_TRUE(original.ok()) << original.error().message;
    TempDir dir("spillway-convert");
    ASSERT_TRUE(convertModel(**original, dir / "hf", to(ConvertTarget::HuggingFace)).ok());
    auto expectError = [](const std::string& path, const std::string& fragment) {
        auto m = LlamaModel::load(path);
        ASSERT_FALSE(m.ok()) << path;
        EXPECT_NE(m.error().message.find(fragment), std::string::npos) << m.error().message;
    };
    const std::string hf = dir / "hf";
    // The safetensors file alone (no config.json beside it).
    fs::copy_file(hf + "/model.safetensors", dir / "alone.safetensors");
    expectError(dir / "alone.safetensors", "config.json");
    // The file inside its folder opens the folder.
    EXPECT_TRUE(LlamaModel::load(hf + "/model.safetensors").ok());
    // Pickles only.
    fs::rename(hf + "/model.safetensors", dir / "model.safetensors");
    writeFile(hf + "/pytorch_model.bin", "PK");
    expectError(hf, "pickle");
    fs::remove(hf + "/pytorch_model.bin");
    expectError(hf, "no weights");
    fs::rename(dir / "model.safetensors", hf + "/model.safetensors");
    // No tokenizer.
    fs::rename(hf + "/tokenizer.json", dir / "tokenizer.json");
    expectError(hf, "no tokenizer");
    fs::rename(dir / "tokenizer.json", hf + "/tokenizer.json");
    // A truncated weights file.
    const std::string weights = readFile(hf + "/model.safetensors");
    writeFile(hf + "/model.safetensors", weights.substr(0, weights.size() / 2));
    expectError(hf, "model.safetensors");
    writeFile(hf + "/model.safetensors", weights);
    // An architecture this version does not run.
    std::string config = readFile(hf + "/config.json");
    const auto at = config.find("LlamaForCausalLM");
    ASSERT_NE(at, std::string::npos);
    std::string mamba = config;
    mamba.replace(at, std::strlen("LlamaForCausalLM"), "MambaForCausalLM");
    const auto type = mamba.find("\"llama\"");
    if (type != std::string::npos) mamba.replace(type, 7, "\"mamba\"");
    writeFile(hf + "/config.json", mamba);
    expectError(hf, "MambaForCausalLM");
    writeFile(hf + "/config.json", config);
    EXPECT_TRUE(LlamaModel::load(hf).ok());
}
