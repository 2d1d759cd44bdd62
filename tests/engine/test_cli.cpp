// spillway-cli as a user meets it: the reference text on stdout, and for corrupt model files a
// one-line message naming the file, exit code 1 or 2, never a crash.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "../common/cli_run.h"

namespace {

const std::string kData = SPILLWAY_TEST_DATA_DIR;
// The program under test: spillway-cli, or the one SPILLWAY_CLI_NAME names in the build's bin/
// (test_cli_asan runs this suite against spillway-cli-asan).
const std::string kCli = std::string(SPILLWAY_BIN_DIR) + "/" +
                         (std::getenv("SPILLWAY_CLI_NAME") ? std::getenv("SPILLWAY_CLI_NAME") : "spillway-cli");

using testing_support::CliRun;
using testing_support::slurp;

// A folder of this process's own: test_cli and test_cli_asan may run at once in one TempDir().
std::string tempDir()
{
    static const std::string dir = [] {
        const std::string d = testing::TempDir() + "/test_cli-" + std::to_string(getpid());
        std::filesystem::create_directories(d);
        return d;
    }();
    return dir;
}

// `env`: variable assignments put before the command ("NAME='value' ").
CliRun runCli(const std::string& args, const std::string& env = "")
{
    return testing_support::runProgram(kCli, args, tempDir(), env);
}

std::vector<uint8_t> readBytes(const std::string& path)
{
    const std::string s = slurp(path);
    return {s.begin(), s.end()};
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Position just after the name of tensor `name` in the tensor-info table (its n_dims field).
size_t tensorInfoAfterName(const std::vector<uint8_t>& file, const std::string& name)
{
    std::string key(8, '\0');
    const uint64_t len = name.size();
    std::memcpy(key.data(), &len, 8);
    key += name;
    const auto it = std::search(file.begin(), file.end(), key.begin(), key.end());
    EXPECT_NE(it, file.end());
    return size_t(it - file.begin()) + key.size();
}

void expectCleanFailure(const std::string& path, const std::string& what)
{
    for (const char* command : {"info -m", "generate -n 4 --temp 0 -p Hi -m"}) {
        const CliRun r = runCli(std::string(command) + " '" + path + "'");
        EXPECT_TRUE(r.exitCode == 1 || r.exitCode == 2)
            << what << ": " << command << " exited " << r.exitCode << "\n" << r.err;
        const auto firstNewline = r.err.find('\n');
        EXPECT_EQ(firstNewline, r.err.size() - 1) << what << ": expected one line, got:\n" << r.err;
        EXPECT_NE(r.err.find(path), std::string::npos) << what << ": message must name the file: " << r.err;
    }
}

}  // namespace

TEST(Cli, GenerateGreedyPrintsPromptAndReferenceText)
{
    const std::string refsPath = kData + "/reference/stories260K.greedy48.tsv";
    std::ifstream refs(refsPath);
    ASSERT_TRUE(refs) << "cannot read " << refsPath;
    std::string line;
    int checked = 0;
    while (std::getline(refs, line)) {
        const auto tab = line.find('\t');
        const std::string prompt = line.substr(0, tab), text = line.substr(tab + 1);
        const CliRun r = runCli("generate -m '" + kData + "/models/stories260K.gguf' -p '" + prompt +
                             "' -n 48 --temp 0 --threads 2");
        EXPECT_EQ(r.exitCode, 0) << r.err;
        EXPECT_EQ(r.out, text + "\n");
        EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << "timings go to stderr";
        ++checked;
    }
    EXPECT_EQ(checked, 3);
}

// Offloading from the command line: the hardware probe is cached in a folder of the test's own
// (XDG_CACHE_HOME), quick mode.
TEST(Cli, OffloadedGenerateAndPlan)
{
    const std::string cache = tempDir() + "/spillway-cli-cache";
    const std::string env = "XDG_CACHE_HOME='" + cache + "' ";
    const std::string model = "'" + kData + "/models/stories260K.gguf'";
    const std::string refsPath = kData + "/reference/stories260K.greedy48.tsv";
    std::ifstream refs(refsPath);
    ASSERT_TRUE(refs) << "cannot read " << refsPath;
    std::string line;
    ASSERT_TRUE(std::getline(refs, line)) << "no reference text in " << refsPath;
    const auto tab = line.find('\t');
    // Every weight from the SSD, prefetching, with a trace: the same text.
    const std::string trace = tempDir() + "/cli-trace.json";
    CliRun r = runCli("generate -m " + model + " -p '" + line.substr(0, tab) +
                      "' -n 48 --temp 0 --tier ssd --quick-probe --trace '" + trace + "'", env);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, line.substr(tab + 1) + "\n");
    EXPECT_NE(r.err.find("read from the SSD"), std::string::npos) << r.err;
    EXPECT_NE(slurp(trace).find("\"traceEvents\""), std::string::npos);
    // A plan under a budget names tiers and reasons; the JSON form parses as an object.
    r = runCli("plan -m " + model + " --vram-budget 3MiB --ram-budget 64KiB --ctx 64 --quick-probe", env);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("blk.0.ffn_down.weight"), std::string::npos);
    EXPECT_NE(r.out.find("predicted per token"), std::string::npos);
    r = runCli("plan -m " + model + " --json --quick-probe", env);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    ASSERT_FALSE(r.out.empty()) << r.err;
    EXPECT_EQ(r.out.front(), '{');
    // Budgets too small for the working set, or not a size: one line, no crash.
    r = runCli("plan -m " + model + " --vram-budget 64KiB --quick-probe", env);
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("budgets are too small"), std::string::npos) << r.err;
    r = runCli("generate -p x --vram-budget 12XB --quick-probe", env);
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("unknown unit"), std::string::npos) << r.err;
}

TEST(Cli, CompressThenGenerateFromThePackage)
{
    const std::string model = "'" + kData + "/models/stories260K.gguf'";
    const std::string out = tempDir() + "/compressed";
    std::filesystem::remove_all(out);
    CliRun r = runCli("compress -m " + model + " -o '" + out + "' --preset smallest --json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("\"meanKl\""), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("checking quality"), std::string::npos) << r.err;  // progress
    EXPECT_TRUE(std::filesystem::exists(out + "/manifest.json"));
    r = runCli("generate -m '" + out + "' -p 'Once upon a time' -n 12 --temp 0");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_GT(r.out.size(), std::string("Once upon a time").size());
    r = runCli("info --verify -m '" + out + "'");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    for (const char* s : {"Spillway model package", "bitmap-int8-g64", "quality vs source", "blk.4.ffn_down.weight",
                          "checksums: all"})
        EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
    // The package from the SSD tier too.
    r = runCli("generate -m '" + out + "' -p 'Once upon a time' -n 12 --temp 0 --tier ssd --quick-probe",
               "XDG_CACHE_HOME='" + tempDir() + "/cache' ");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    // An existing output, a bad --prune or --quant: exit 2, nothing written.
    EXPECT_EQ(runCli("compress -m " + model + " -o '" + out + "'").exitCode, 2);
    EXPECT_EQ(runCli("compress -m " + model + " -o '" + out + "-2' --prune wanda:1.5").exitCode, 2);
    EXPECT_EQ(runCli("compress -m " + model + " -o '" + out + "-2' --quant int3").exitCode, 2);
    EXPECT_FALSE(std::filesystem::exists(out + "-2"));
}

TEST(Cli, NeuronCacheBenchComparesWithDenseOffloading)
{
    // --neuron-cache alone takes bench to the offload path (it compares with dense offloading
    // there); where neither path moves a byte it says so, and the JSON's ratio is null, not a
    // division by zero.
    const std::string out = tempDir() + "/relu-bundles";
    std::filesystem::remove_all(out);
    CliRun r = runCli("compress -m '" + kData + "/models/relu-stories-260K/model_qint80.bin' --arch relu-llama -o '" +
                      out + "' --prune none --quant none --bundles --predictors 8 --no-quality");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string json = tempDir() + "/neuron-cache.json";
    // (2 MiB: the dense path's weights and a 256-token prompt batch's activations both fit.)
    r = runCli("bench -m '" + out + "' -n 4 --quick-probe --vram-budget 2MiB --ram-budget 64KiB --neuron-cache 32 "
               "--neuron-mode predicted --bundles-from ram --cold-neurons cpu --json '" + json + "'",
               "XDG_CACHE_HOME='" + tempDir() + "/cache' ");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("neither moved any bytes"), std::string::npos) << r.out;
    const std::string j = slurp(json);
    EXPECT_NE(j.find("\"bytes_moved_ratio\": null"), std::string::npos) << j;
    EXPECT_NE(j.find("\"tokens_per_s_ratio\""), std::string::npos) << j;
    // Without budgets: the machine's own, and still the comparison.
    r = runCli("bench -m '" + out + "' -n 2 --quick-probe --neuron-cache 32 --neuron-mode predicted",
               "XDG_CACHE_HOME='" + tempDir() + "/cache' ");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("neuron cache vs dense offload"), std::string::npos) << r.out;
    std::filesystem::remove_all(out);
}

// A mixture of experts from the command line: info names its experts; generate with every
// weight on the SSD reads the experts through the expert cache (its line in the summary) and
// gives the resident run's text; bench's offload path reports the cache (JSON included); plan
// says where the experts are; compress and sparsity, which know dense FFNs only, refuse it.
TEST(Cli, MixtureOfExpertsGenerateBenchAndPlan)
{
    const std::string env = "XDG_CACHE_HOME='" + tempDir() + "/moe-cache' ";
    const std::string model = "'" + kData + "/models/moe/tiny-qwen2moe.gguf'";
    CliRun r = runCli("info -m " + model);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("mixture of experts: 8 experts of ffn 32, 2 per token (weights as routed), a shared expert of "
                         "ffn 48"),
              std::string::npos)
        << r.out;
    const std::string args = "generate -m " + model + " -p 'Lily and Tom went to the park' -n 24 --temp 0 --quick-probe";
    const CliRun resident = runCli(args, env);
    ASSERT_EQ(resident.exitCode, 0) << resident.err;
    EXPECT_NE(resident.err.find("experts: 2 of 8 per token"), std::string::npos) << resident.err;
    r = runCli(args + " --tier ssd --expert-slots 3", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, resident.out);
    EXPECT_NE(r.err.find("expert cache: 3 slots in each of 3 layers"), std::string::npos) << r.err;
    // The baseline without the cache streams the stacks whole: the same text, no cache.
    r = runCli(args + " --tier ssd --no-expert-cache", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, resident.out);
    EXPECT_EQ(r.err.find("expert cache:"), std::string::npos) << r.err;
    const std::string json = tempDir() + "/moe-bench.json";
    r = runCli("bench -m " + model + " -n 8 --quick-probe --tier ssd --expert-slots 2 --json '" + json + "'", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("expert cache"), std::string::npos) << r.out;
    EXPECT_NE(slurp(json).find("\"expert_cache\""), std::string::npos) << slurp(json);
    r = runCli("plan -m " + model + " --tier ssd --quick-probe", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("through the expert cache in 3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("routing uniform"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("blk.2.ffn_down_exps.weight"), std::string::npos) << r.out;
    // What takes dense FFNs only says so, and writes nothing.
    const std::string out = tempDir() + "/moe-package";
    std::filesystem::remove_all(out);
    r = runCli("compress -m " + model + " -o '" + out + "' --no-quality");
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_NE(r.err.find("is a mixture of experts"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    // Its sparsity is its routing: measured on calibration text and kept where plan looks for it.
    r = runCli("sparsity -m " + model + " -n 24 --continue 8", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("Routing of"), std::string::npos) << r.out;
    const std::string kept = tempDir() + "/moe-cache/spillway/routing/tiny-qwen2moe.gguf-";
    EXPECT_NE(r.out.find("routing profile: " + kept), std::string::npos) << r.out;
    r = runCli("plan -m " + model + " --tier ssd --quick-probe", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("routing measured (calibration: "), std::string::npos) << r.out;
    for (const char* layer : {"layer 0 ", "layer 1 ", "layer 2 "})
        EXPECT_NE(r.out.find(std::string(layer) + "      expert cache: 4 slots on the device"), std::string::npos) << r.out;
    // One written elsewhere is taken with --routing; one of another model's shape is refused.
    const std::string mixtral = tempDir() + "/mixtral-routing.json";
    r = runCli("sparsity -m '" + kData + "/models/moe/tiny-mixtral.gguf' -n 8 --continue 0 --routing-out '" + mixtral + "'", env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    r = runCli("plan -m " + model + " --quick-probe --tier ssd --routing '" + mixtral + "'", env);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("up to 8 tokens each and 0 of the model's own"), std::string::npos) << r.out;
    const std::string other = tempDir() + "/four-experts-routing.json";
    {
        std::ofstream f(other);
        f << R"({"format": "spillway-routing-1", "layers": 3, "experts": 4, "used": 2, "tokens": 1,
                "counts": [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]})";
    }
    r = runCli("plan -m " + model + " --quick-probe --routing '" + other + "'", env);
    EXPECT_EQ(r.exitCode, 2) << r.out;
    EXPECT_NE(r.err.find("another model's shape"), std::string::npos) << r.err;
}

TEST(Cli, SameSeedSameText)
{
    const std::string args = "generate -p 'The dog' -n 24 --temp 0.9 --seed 42";
    const CliRun a = runCli(args), b = runCli(args), c = runCli("generate -p 'The dog' -n 24 --temp 0.9 --seed 43");
    EXPECT_EQ(a.exitCode, 0);
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);
}

TEST(Cli, InfoDescribesTheModel)
{
    const CliRun r = runCli("info -m '" + kData + "/models/stories260K.gguf'");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    for (const char* s : {"GGUF v3", "architecture: llama", "dim 64", "layers 5", "heads 8", "kv heads 4",
                          "ffn 172", "token_embd.weight", "blk.4.ffn_down.weight", "F32"})
        EXPECT_NE(r.out.find(s), std::string::npos) << "missing '" << s << "' in\n" << r.out;
}

TEST(Cli, UsageErrorsExitWithTwo)
{
    EXPECT_EQ(runCli("generate").exitCode, 2);  // no prompt
    EXPECT_EQ(runCli("frobnicate").exitCode, 2);
    EXPECT_EQ(runCli("generate -p x -m /nonexistent/model.gguf").exitCode, 2);
    const CliRun help = runCli("--help");
    EXPECT_EQ(help.exitCode, 0);
    EXPECT_NE(help.out.find("generate"), std::string::npos);
}

TEST(Cli, CorruptModelFilesFailCleanly)
{
    const std::string dir = tempDir() + "/corrupt";
    std::filesystem::create_directories(dir);
    const auto good = readBytes(kData + "/models/stories260K.gguf");
    ASSERT_GT(good.size(), 100000u);
    int n = 0;
    auto variant = [&](const std::string& what, std::vector<uint8_t> bytes) {
        const std::string path = dir + "/case" + std::to_string(n++) + ".gguf";
        writeBytes(path, bytes);
        expectCleanFailure(path, what);
    };
    for (size_t cut : {size_t(0), size_t(3), size_t(16), size_t(200), size_t(5000), good.size() / 2,
                       good.size() - 1})
        variant("truncated at " + std::to_string(cut), {good.begin(), good.begin() + long(cut)});
    {
        auto b = good;
        std::memcpy(b.data(), "GGML", 4);
        variant("bad magic", b);
    }
    {
        auto b = good;
        const uint64_t absurd = uint64_t(1) << 40;
        std::memcpy(b.data() + 8, &absurd, 8);
        variant("absurd tensor count", b);
    }
    {
        auto b = good;
        const uint64_t absurd = ~uint64_t(0);
        std::memcpy(b.data() + 16, &absurd, 8);
        variant("absurd metadata count", b);
    }
    // output.weight: n_dims (4) dims (2 x 8) type (4) offset (8)
    const size_t info = tensorInfoAfterName(good, "output.weight");
    ASSERT_LE(info + 4 + 16 + 4 + 8, good.size()) << "no tensor info of output.weight";
    {
        auto b = good;
        const uint64_t past = good.size() * 4;
        std::memcpy(b.data() + info + 4 + 16 + 4, &past, 8);
        variant("offset past the end", b);
    }
    {
        auto b = good;
        const uint32_t unknown = 77;
        std::memcpy(b.data() + info + 4 + 16, &unknown, 4);
        variant("unknown tensor type", b);
    }
    {
        auto b = good;
        const uint32_t q2k = 10;  // a ggml type Spillway does not run
        std::memcpy(b.data() + info + 4 + 16, &q2k, 4);
        variant("unsupported tensor type", b);
    }
    {
        auto b = good;
        const uint64_t huge = uint64_t(1) << 62;
        std::memcpy(b.data() + info + 4, &huge, 8);
        variant("absurd dimension", b);
    }
    const std::string notGguf = dir + "/text.gguf";
    writeBytes(notGguf, std::vector<uint8_t>(4096, 'x'));
    expectCleanFailure(notGguf, "text file");
    std::filesystem::remove_all(dir);
}

// convert and the formats it writes, from the command line: a Hugging Face folder of the demo
// model is described by info, generates the reference text (every weight streamed from its
// safetensors file), and an existing output is refused; the relu model runs with --arch.
TEST(Cli, ConvertInfoAndGenerateFromAHuggingFaceFolder)
{
    const std::string hf = tempDir() + "/cli-hf";
    std::filesystem::remove_all(hf);
    const std::string model = "'" + kData + "/models/stories260K.gguf'";
    CliRun r = runCli("convert -m " + model + " -o '" + hf + "' --to hf");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    r = runCli("convert -m " + model + " -o '" + hf + "' --to hf");
    EXPECT_EQ(r.exitCode, 2) << "an existing output is a usage error";
    EXPECT_NE(r.err.find("exists"), std::string::npos) << r.err;
    r = runCli("info -m '" + hf + "'");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("format: huggingface"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos) << r.out;
    const std::string refsPath = kData + "/reference/stories260K.greedy48.tsv";
    std::ifstream refs(refsPath);
    ASSERT_TRUE(refs) << "cannot read " << refsPath;
    std::string line;
    ASSERT_TRUE(std::getline(refs, line)) << "no reference text in " << refsPath;
    const auto tab = line.find('\t');
    const std::string env = "XDG_CACHE_HOME='" + tempDir() + "/spillway-cli-cache' ";
    r = runCli("generate -m '" + hf + "' -p '" + line.substr(0, tab) + "' -n 48 --temp 0 --tier ssd --quick-probe", env);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, line.substr(tab + 1) + "\n");

    const std::string reluPath = kData + "/reference/relu-stories-260K.greedy48.tsv";
    std::ifstream relu(reluPath);
    ASSERT_TRUE(relu) << "cannot read " << reluPath;
    ASSERT_TRUE(std::getline(relu, line)) << "no reference text in " << reluPath;
    const auto rtab = line.find('\t');
    r = runCli("generate -m '" + kData + "/models/relu-stories-260K/model_qint80.bin' --arch relu-llama -p '" +
               line.substr(0, rtab) + "' -n 48 --temp 0");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, line.size() - rtab - 1), line.substr(rtab + 1));
}
