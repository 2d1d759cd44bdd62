// The engine's fallbacks, each driven through the engine layer with a device that fails on cue
// (gpu/opaque_device.h, made by the engine from SPILLWAY_TEST_DEVICE): weights that do not fit
// stream from RAM; a device that cannot hold the session hands it to the CPU; a device lost
// during the prompt or some tokens into the reply is left for the CPU, which goes on from the
// tokens so far. Each time the engine in this process and spillway-cli give the greedy text of an
// uninterrupted CPU run (llama.cpp's reference) and report the same notice, once.
// test_generation_worker checks the app's worker against the same notices.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../common/cli_run.h"
#include "../common/reference_texts.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"

using namespace spillway;

namespace {

const std::string kModel = SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf";
const std::string kCli = std::string(SPILLWAY_BIN_DIR) + "/spillway-cli";
const char* const kPrompt = "Once upon a time";

std::string referenceText()
{
    for (const auto& r : spillway::testing_support::readReferenceTexts(SPILLWAY_TEST_DATA_DIR "/reference/stories260K.greedy48.tsv"))
        if (r.prompt == kPrompt) return r.text;
    return {};
}

struct EngineRun {
    std::string text;  // the prompt and its greedy continuation
    std::vector<engine::Notice> notices;
    uint64_t peakBytes = 0;  // the device's
    std::string backend;     // the device computing at the end
};

// 48 greedy tokens after the prompt through an engine whose device SPILLWAY_TEST_DEVICE=`device`
// describes ("" = the plain CPU device).
EngineRun runEngine(const std::string& device)
{
    EngineRun run;
    if (device.empty()) unsetenv("SPILLWAY_TEST_DEVICE");
    else setenv("SPILLWAY_TEST_DEVICE", device.c_str(), 1);
    auto model = LlamaModel::load(kModel);
    if (!model) {
        ADD_FAILURE() << model.error().message;
        return run;
    }
    engine::EngineOptions options;
    options.backend = "cpu";
    options.threads = 1;
    auto engine = engine::Engine::open(std::move(*model), options,
                                       [&](const engine::Notice& n) { run.notices.push_back(n); });
    unsetenv("SPILLWAY_TEST_DEVICE");
    if (!engine) {
        ADD_FAILURE() << engine.error().message;
        return run;
    }
    {
        auto conversation = (*engine)->conversation();
        engine::ReplyOptions o;
        o.maxNewTokens = 48;
        o.sampling.temperature = 0;
        o.onToken = [&](std::string_view text, int32_t) {
            run.text += text;
            return true;
        };
        auto stats = conversation->complete(kPrompt, true, o);
        if (!stats) {
            ADD_FAILURE() << stats.error().message;
            return run;
        }
        run.text = kPrompt + run.text;
        run.peakBytes = (*engine)->device().memoryStats().peak;
        run.backend = (*engine)->device().info().backend;
    }
    return run;
}

::testing_support::CliRun runCli(const std::string& device)
{
    const std::string dir = testing::TempDir() + "/test_engine_fallbacks-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    return ::testing_support::runProgram(
        kCli, "generate -m '" + kModel + "' -p '" + kPrompt + "' -n 48 --temp 0 -t 1 --seed 1", dir,
        "SPILLWAY_TEST_DEVICE='" + device + "' ");
}

class Fallback : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_expected = referenceText();
        const EngineRun cpu = runEngine("");
        s_cpuText = cpu.text;
        const EngineRun opaque = runEngine("opaque");  // all on the device: how much it takes
        s_peak = opaque.peakBytes;
        auto model = LlamaModel::load(kModel);
        if (model) s_weights = (*model)->weightBytesPerToken();
    }
    // The engine and spillway-cli on `device`: the reference text and one notice of `kind`, the
    // same in both. Returns the notice.
    engine::Notice check(const std::string& device, engine::Notice::Kind kind, const std::string& backendAfter)
    {
        const EngineRun run = runEngine(device);
        EXPECT_EQ(run.text, s_expected);
        EXPECT_EQ(run.backend, backendAfter);
        EXPECT_EQ(run.notices.size(), size_t(1));
        if (run.notices.empty()) return {};
        const engine::Notice notice = run.notices.front();
        EXPECT_EQ(int(notice.kind), int(kind)) << notice.message;

        const auto cli = runCli(device);
        EXPECT_EQ(cli.exitCode, 0) << cli.err;
        EXPECT_EQ(cli.out, s_expected + "\n");
        EXPECT_NE(cli.err.find("spillway-cli: " + notice.message + "\n"), std::string::npos)
            << "stderr:\n" << cli.err << "\nnotice: " << notice.message;
        size_t count = 0;
        for (size_t at = cli.err.find("spillway-cli: "); at != std::string::npos; at = cli.err.find("spillway-cli: ", at + 1))
            ++count;
        EXPECT_EQ(count, size_t(1)) << cli.err;
        return notice;
    }
    static inline std::string s_expected, s_cpuText;
    static inline uint64_t s_peak = 0, s_weights = 0;
};

}  // namespace

TEST_F(Fallback, TheUninterruptedCpuRunIsTheReference)
{
    ASSERT_FALSE(s_expected.empty()) << "no reference line for the prompt";
    EXPECT_EQ(s_cpuText, s_expected);
    ASSERT_GT(s_weights, 0u);
    ASSERT_GT(s_peak, s_weights);
}

TEST_F(Fallback, WeightsThatDoNotFitStreamFromRam)
{
    // Room for the KV cache, the activations and a few layers, not for every weight.
    const uint64_t limit = s_peak - s_weights / 2;
    const engine::Notice n = check("opaque,memory=" + std::to_string(limit), engine::Notice::Kind::StreamsFromRam,
                                   "opaque-cpu");
    EXPECT_NE(n.message.find("does not fit"), std::string::npos) << n.message;
    EXPECT_NE(n.message.find("stream from RAM"), std::string::npos) << n.message;
}

TEST_F(Fallback, ADeviceThatCannotHoldTheSessionHandsItToTheCpu)
{
    const engine::Notice n = check("opaque,memory=4096", engine::Notice::Kind::ComputedOnCpu, "opaque-cpu");
    EXPECT_NE(n.message.find("opaque-cpu device cannot run"), std::string::npos) << n.message;
    EXPECT_NE(n.message.find("computed on the CPU"), std::string::npos) << n.message;
}

TEST_F(Fallback, ADeviceLostDuringThePromptIsLeftForTheCpu)
{
    const engine::Notice n = check("opaque,lost-after=1", engine::Notice::Kind::DeviceLost, "cpu");
    EXPECT_NE(n.message.find("opaque-cpu device failed (test device: lost)"), std::string::npos) << n.message;
    EXPECT_EQ(n.detail, "test device: lost");
}

TEST_F(Fallback, ADeviceLostMidReplyIsLeftForTheCpuWhichGoesOnFromTheTokensSoFar)
{
    // The demo model runs 11 RMSNorms a token: lost 20 tokens in.
    const engine::Notice n = check("opaque,lost-after=" + std::to_string(11 * 20), engine::Notice::Kind::DeviceLost, "cpu");
    EXPECT_NE(n.message.find("the reply goes on on the CPU"), std::string::npos) << n.message;
}

TEST_F(Fallback, AMalformedTestDeviceIsRefusedWithTheSyntax)
{
    setenv("SPILLWAY_TEST_DEVICE", "opaque,memory=lots", 1);
    auto model = LlamaModel::load(kModel);
    ASSERT_TRUE(model.ok());
    auto engine = engine::Engine::open(std::move(*model), {});
    unsetenv("SPILLWAY_TEST_DEVICE");
    ASSERT_FALSE(engine.ok());
    EXPECT_NE(engine.error().message.find("expected opaque[,memory=BYTES]"), std::string::npos) << engine.error().message;
}
