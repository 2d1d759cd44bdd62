// The engine's conversation (core/engine/conversation.h) on the real stories260K.gguf: ten turns
// in which each evaluates only its new tokens (counted on the device: one attention call per
// token and layer), with the logits of a fresh session run over the whole history; a
// conversation longer than the context that goes on with its system prompt (and, once cut, reuses
// the cache on the next turns); an edited turn that
// keeps the cache up to the edit.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/conversation.h"
#include "../common/session_logits.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/runtime/llama_session.h"
#include "core/runtime/generator.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"
#include "gpu/forwarding_device.h"
#include "gpu/registry.h"

using namespace spillway;

namespace {

const std::string kModel = SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf";

// A template of the ChatML kind, for a model that has none: its markers are plain text to this
// vocabulary, which is all the conversation needs.
const char* const kTemplate =
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

// The CPU device, counting the tokens it runs (one attention query per token and layer).
class CountingDevice final : public gpu::ForwardingDevice {
public:
    using ForwardingDevice::ForwardingDevice;
    void attention(const gpu::AttentionArgs& a) override
    {
        ++attentionCalls;
        m_inner.attention(a);
    }
    void attentionBatch(const gpu::AttentionArgs& a, int queries, size_t rowStride) override
    {
        attentionCalls += uint64_t(queries);
        m_inner.attentionBatch(a, queries, rowStride);
    }
    uint64_t attentionCalls = 0;
};

struct Rig {
    explicit Rig(int context = 0, const std::string& path = kModel, int batch = 0)
    {
        auto model = LlamaModel::load(path);
        if (!model) {
            ADD_FAILURE() << model.error().message;
            return;
        }
        layers = (*model)->config().kvLayers();  // the layers that attend (a call per token each)
        auto cpu = gpu::createDevice("cpu", {1, 0});
        if (!cpu) {
            ADD_FAILURE() << cpu.error().message;
            return;
        }
        auto counting = std::make_unique<CountingDevice>(std::move(*cpu));
        device = counting.get();
        engine::EngineOptions options;
        options.contextLength = context;
        options.batch = batch;
        auto opened = engine::Engine::open(std::move(*model), options, {}, std::move(counting));
        if (!opened) {
            ADD_FAILURE() << opened.error().message;
            return;
        }
        engine = std::move(*opened);
        auto format = engine::ChatFormat::fromSource(kTemplate, "", "");
        if (!format) {
            ADD_FAILURE() << format.error().message;
            return;
        }
        engine->setChatFormat(std::move(*format));
        conversation = engine->conversation();
    }
    // Tokens the device ran since the last call.
    uint64_t tokensRun()
    {
        const uint64_t n = (device->attentionCalls - counted) / uint64_t(layers);
        counted = device->attentionCalls;
        return n;
    }
    int layers = 1;
    CountingDevice* device = nullptr;  // owned by the engine
    uint64_t counted = 0;
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<engine::Conversation> conversation;  // before the engine goes
    ~Rig() { conversation.reset(); }
};

engine::ReplyOptions greedy(int tokens, std::vector<float>* logits = nullptr)
{
    engine::ReplyOptions o;
    o.maxNewTokens = tokens;
    o.sampling.temperature = 0;
    o.firstLogits = logits;
    return o;
}

// The same, collecting the reply's text into *reply.
engine::ReplyOptions greedyInto(std::string* reply, int tokens, std::vector<float>* logits = nullptr)
{
    engine::ReplyOptions o = greedy(tokens, logits);
    o.onToken = [reply](std::string_view text, int32_t) {
        *reply += text;
        return true;
    };
    return o;
}

// The logits after `tokens`, run from position 0 in a fresh session on a fresh CPU device, as
// generation feeds a prompt (batches of the session's size).
std::vector<float> freshLogits(const LlamaModel& model, const std::vector<int32_t>& tokens, int context)
{
    auto cpu = gpu::createDevice("cpu", {1, 0});
    if (!cpu) return {};
    SessionOptions options;
    options.contextLength = context;
    auto session = LlamaSession::create(model, **cpu, options);
    if (!session) return {};
    const float* logits = nullptr;
    for (size_t done = 0; done < tokens.size();) {
        const size_t n = std::min(tokens.size() - done, size_t((*session)->batch()));
        auto r = (*session)->forward(std::span<const int32_t>(tokens).subspan(done, n), int(done));
        if (!r) return {};
        logits = *r;
        done += n;
    }
    return std::vector<float>(logits, logits + model.config().vocabSize);
}

const char* const kUserTurns[] = {"Tom had a red ball.", "He threw it high.", "It fell in the pond.",
                                  "A frog found it.", "The frog gave it back.", "Tom said thank you.",
                                  "They played all day.", "The sun went down.", "Tom went home.",
                                  "He slept well."};

}  // namespace

TEST(Conversation, TenTurnsEachEvaluateOnlyTheirNewTokens)
{
    Rig rig;
    ASSERT_TRUE(rig.conversation);
    const Tokenizer& tokenizer = rig.engine->model().tokenizer();
    std::vector<engine::Message> messages{{"system", "You tell short stories."}};
    std::vector<int32_t> before;  // the tokens of the previous request: its prompt and reply
    std::string beforeText;       // their text
    for (int turn = 0; turn < 10; ++turn) {
        SCOPED_TRACE("turn " + std::to_string(turn + 1));
        messages.push_back({"user", kUserTurns[turn]});
        std::vector<float> logits;
        std::string reply;
        engine::ReplyOptions o = greedyInto(&reply, 12, &logits);
        auto stats = rig.conversation->reply(messages, o);
        ASSERT_TRUE(stats.ok()) << stats.error().message;
        const uint64_t ran = rig.tokensRun();

        // The prompt is the previous request's tokens, then the tokens of the text that follows
        // them (the end of the reply's turn, the new user message, the assistant's header).
        std::vector<int32_t> expected = before;
        if (turn == 0) {
            expected = tokenizer.encode(stats->prompt, true);
        } else {
            ASSERT_TRUE(stats->prompt.starts_with(beforeText));
            const auto more = tokenizer.encodeContinuation(stats->prompt.substr(beforeText.size()));
            expected.insert(expected.end(), more.begin(), more.end());
        }
        ASSERT_EQ(std::vector<int32_t>(stats->tokens.begin(), stats->tokens.begin() + stats->promptTokens), expected);
        // Cached: everything before but the previous reply's last token (sampled, never run).
        const int newTokens = stats->promptTokens - (turn == 0 ? 0 : int(before.size()));
        EXPECT_EQ(stats->cachedTokens, turn == 0 ? 0 : int(before.size()) - 1);
        if (turn > 0) {
            const std::string turnText = std::string("</assistant>\n<user>") + kUserTurns[turn] + "</user>\n<assistant>";
            EXPECT_LE(newTokens, int(tokenizer.encodeContinuation(turnText).size()) + 2);
        }
        // The device ran the new prompt tokens (and the previous reply's last) and the reply's
        // tokens but its last: nothing of the history again.
        const uint64_t expectedRun =
            uint64_t(stats->promptTokens - stats->cachedTokens) + uint64_t(std::max(0, stats->generatedTokens - 1));
        EXPECT_EQ(ran, expectedRun);
        EXPECT_LT(ran, uint64_t(newTokens + 1 + stats->generatedTokens));
        EXPECT_EQ(stats->evaluated, int(stats->tokens.size()) - 1);

        // The same logits as a fresh session over the whole history (which runs it in other
        // batches: within the prompt tolerance of the CPU's matrix products, same greedy token).
        const std::vector<float> fresh = freshLogits(rig.engine->model(), expected, rig.conversation->contextLength());
        ASSERT_EQ(fresh.size(), logits.size());
        EXPECT_LE(testing_support::relativeL2(logits, fresh), testing_support::kPromptFloatTolerance);
        EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(),
                  std::max_element(fresh.begin(), fresh.end()) - fresh.begin());

        before = stats->tokens;
        beforeText = stats->prompt + reply;
        messages.push_back({"assistant", reply});
    }
}

TEST(Conversation, LongerThanTheContextDropsTheOldestTurnsAndKeepsTheSystemPrompt)
{
    Rig rig(256);
    ASSERT_TRUE(rig.conversation);
    const std::string system = "You tell short stories about a cat.";
    std::vector<engine::Message> messages{{"system", system}};
    int dropped = 0, reusedAfterDrop = 0;
    std::vector<int32_t> before;
    for (int turn = 0; turn < 20; ++turn) {
        SCOPED_TRACE("turn " + std::to_string(turn + 1));
        messages.push_back({"user", kUserTurns[turn % 10]});
        std::string reply;
        engine::ReplyOptions o = greedyInto(&reply, 8);
        auto stats = rig.conversation->reply(messages, o);
        ASSERT_TRUE(stats.ok()) << stats.error().message;
        EXPECT_TRUE(stats->prompt.starts_with("<system>" + system + "</system>")) << stats->prompt;
        EXPECT_NE(stats->prompt.find(kUserTurns[turn % 10]), std::string::npos);  // the new message is there
        EXPECT_LE(int(stats->tokens.size()), 256);
        EXPECT_GT(stats->generatedTokens, 0);
        std::printf("turn %2d: %3d prompt tokens, %3d cached, %d messages left out\n", turn + 1, stats->promptTokens,
                    stats->cachedTokens, stats->droppedMessages);
        // A turn after a drop that keeps the same cut reuses everything the cache holds.
        if (dropped > 0 && stats->droppedMessages > 0 && !before.empty() &&
            stats->cachedTokens == int(before.size()) - 1)
            ++reusedAfterDrop;
        dropped = std::max(dropped, stats->droppedMessages);
        before = stats->tokens;
        messages.push_back({"assistant", reply});
    }
    EXPECT_GT(dropped, 0) << "the conversation never filled the context";
    EXPECT_GT(reusedAfterDrop, 0) << "every turn after the first drop evaluated its history again";
}

TEST(Conversation, EditingAnEarlierTurnKeepsTheCacheUpToTheEdit)
{
    Rig rig;
    ASSERT_TRUE(rig.conversation);
    const Tokenizer& tokenizer = rig.engine->model().tokenizer();
    std::vector<engine::Message> messages{{"system", "You tell short stories."}};
    for (int turn = 0; turn < 4; ++turn) {
        messages.push_back({"user", kUserTurns[turn]});
        std::string reply;
        engine::ReplyOptions o = greedyInto(&reply, 8);
        auto stats = rig.conversation->reply(messages, o);
        ASSERT_TRUE(stats.ok()) << stats.error().message;
        messages.push_back({"assistant", reply});
    }
    const std::vector<int32_t> cached(rig.conversation->cachedTokens().begin(), rig.conversation->cachedTokens().end());
    rig.tokensRun();
    // Edit the third user message and reply to it: everything after it goes.
    messages.resize(6);
    messages[5].content = "A duck found it.";
    std::vector<float> logits;
    auto stats = rig.conversation->reply(messages, greedy(8, &logits));
    ASSERT_TRUE(stats.ok()) << stats.error().message;
    const std::vector<int32_t> prompt(stats->tokens.begin(), stats->tokens.begin() + stats->promptTokens);
    EXPECT_EQ(prompt, tokenizer.encode(stats->prompt, true));
    size_t common = 0;
    while (common < cached.size() && common < prompt.size() && cached[common] == prompt[common]) ++common;
    EXPECT_GT(common, size_t(20));
    EXPECT_EQ(stats->cachedTokens, int(common));
    EXPECT_EQ(rig.tokensRun(), uint64_t(stats->promptTokens - stats->cachedTokens + stats->generatedTokens - 1));
    const std::vector<float> fresh = freshLogits(rig.engine->model(), prompt, rig.conversation->contextLength());
    EXPECT_LE(testing_support::relativeL2(logits, fresh), testing_support::kPromptFloatTolerance);

    // Regenerating the same request again runs only its last prompt token.
    rig.tokensRun();
    auto again = rig.conversation->reply(messages, greedy(8));
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->cachedTokens, again->promptTokens - 1);
    EXPECT_EQ(again->tokens, stats->tokens);  // greedy: the same reply
}

// A reply says why it ended: at the limit asked for; with no limit, only when the model ends its
// turn or the context is full (never a silent cut); when the caller stops it.
TEST(Conversation, ReplySaysWhyItEnded)
{
    Rig rig(/*context=*/96);
    ASSERT_TRUE(rig.conversation);
    const std::vector<engine::Message> messages{{"user", "Tom had a red ball."}};
    auto limited = rig.conversation->reply(messages, greedy(5));
    ASSERT_TRUE(limited) << limited.error().message;
    EXPECT_EQ(limited->generatedTokens, 5);
    EXPECT_EQ(limited->end, engine::ReplyStats::End::Limit);
    EXPECT_STREQ(engine::endName(limited->end), "limit");

    auto unlimited = rig.conversation->reply(messages, greedy(0));
    ASSERT_TRUE(unlimited) << unlimited.error().message;
    ASSERT_TRUE(unlimited->end == engine::ReplyStats::End::Turn || unlimited->end == engine::ReplyStats::End::Context);
    if (unlimited->end == engine::ReplyStats::End::Context) {  // it ran to the end of the context
        // Every token has a position of its own: the exchange fills the context, never one past it.
        EXPECT_EQ(unlimited->promptTokens + unlimited->generatedTokens, 96);
        EXPECT_LE(rig.conversation->cachedTokens().size(), size_t(96));
    }
    else
        EXPECT_TRUE(unlimited->endOfText);
    EXPECT_GT(unlimited->generatedTokens, 5);

    std::atomic<bool> stop{false};
    engine::ReplyOptions stopping = greedy(0);
    int seen = 0;
    stopping.onToken = [&](std::string_view, int32_t) {
        if (++seen == 3) stop = true;
        return true;
    };
    stopping.stop = &stop;
    auto stopped = rig.conversation->reply(messages, stopping);
    ASSERT_TRUE(stopped) << stopped.error().message;
    EXPECT_EQ(stopped->end, engine::ReplyStats::End::Stopped);
    EXPECT_EQ(stopped->generatedTokens, 3);
}

// Continuing a reply that was cut: the model goes on from where it stopped, evaluating only the
// last token, and the two parts are the text of one uninterrupted reply (greedy).
TEST(Conversation, ContinuingACutReplyGoesOnWhereItStopped)
{
    const std::vector<engine::Message> asked{{"user", "Tom had a red ball."}};
    std::string whole;
    {
        Rig rig;
        ASSERT_TRUE(rig.conversation);
        auto one = rig.conversation->reply(asked, greedyInto(&whole, 24));
        ASSERT_TRUE(one) << one.error().message;
        ASSERT_EQ(one->generatedTokens, 24);
    }
    Rig rig;
    ASSERT_TRUE(rig.conversation);
    std::string first, rest;
    auto cut = rig.conversation->reply(asked, greedyInto(&first, 10));
    ASSERT_TRUE(cut) << cut.error().message;
    ASSERT_EQ(cut->end, engine::ReplyStats::End::Limit);
    rig.tokensRun();
    std::vector<engine::Message> soFar = asked;
    soFar.push_back({"assistant", first});
    engine::ReplyOptions more = greedyInto(&rest, 14);
    more.continueLast = true;
    auto continued = rig.conversation->reply(soFar, more);
    ASSERT_TRUE(continued) << continued.error().message;
    EXPECT_EQ(first + rest, whole);
    // Only the cut reply's last token ran before the new ones (it was sampled, not run).
    EXPECT_EQ(continued->cachedTokens, continued->promptTokens - 1);
    EXPECT_EQ(rig.tokensRun(), uint64_t(1 + continued->generatedTokens - 1));
}

// ---- A hybrid model (Gated DeltaNet layers with a recurrent state beside attention) -----------

namespace {

const std::string kHybrid = SPILLWAY_TEST_DATA_DIR "/models/families/tiny-qwen35moe.gguf";
// gpt-oss's sliding-window layers keep rings (window 8, + the batch): state that cannot be cut
// back either, kept in the same snapshots.
const std::string kWindowed = SPILLWAY_TEST_DATA_DIR "/models/families/tiny-gpt-oss.gguf";
// Tokens per reply; the context (2048, past the model's 256) holds all ten turns, so no turn is
// dropped (a drop re-evaluates from the cut: the other tests' subject).
constexpr int kHybridReply = 8;

// One uninterrupted run of `prompt` and `steps` greedy tokens on a fresh session.
std::vector<int32_t> freshGreedy(const LlamaModel& model, const std::vector<int32_t>& prompt, int steps, int context)
{
    auto cpu = gpu::createDevice("cpu", {1, 0});
    if (!cpu) return {};
    auto session = LlamaSession::create(model, **cpu, context);
    if (!session) return {};
    SamplerSettings greedy;
    greedy.temperature = 0;
    Sampler sampler(model.config().vocabSize, greedy);
    GenerationRequest request;
    request.tokens = prompt;
    request.maxNewTokens = steps;
    auto stats = generate(**session, sampler, request);
    return stats ? stats->tokens : std::vector<int32_t>{};
}

}  // namespace

// Ten turns: each runs only its new tokens (the recurrent state goes on from where the last
// reply left it, nothing is run again from a snapshot), and each reply is the one an
// uninterrupted run of the whole history gives. The same with sliding-window rings.
TEST(HybridConversation, TenTurnsEachEvaluateOnlyTheirNewTokens)
{
    for (const std::string& path : {kHybrid, kWindowed}) {
        SCOPED_TRACE(path);
        Rig rig(2048, path);
        ASSERT_TRUE(rig.conversation);
        std::vector<engine::Message> messages{{"system", "You tell short stories."}};
        for (int turn = 0; turn < 10; ++turn) {
            SCOPED_TRACE("turn " + std::to_string(turn + 1));
            messages.push_back({"user", kUserTurns[turn]});
            std::string reply;
            auto stats = rig.conversation->reply(messages, greedyInto(&reply, kHybridReply));
            ASSERT_TRUE(stats.ok()) << stats.error().message;
            const uint64_t ran = rig.tokensRun();
            EXPECT_EQ(ran, uint64_t(stats->promptTokens - stats->cachedTokens) + uint64_t(std::max(0, stats->generatedTokens - 1)));
            if (turn > 0) {
                EXPECT_GT(stats->cachedTokens, stats->promptTokens / 2);
            }
            EXPECT_EQ(rig.conversation->session()->rerunTokens(), 0u);
            const std::vector<int32_t> prompt(stats->tokens.begin(), stats->tokens.begin() + stats->promptTokens);
            EXPECT_EQ(freshGreedy(rig.engine->model(), prompt, stats->generatedTokens, rig.conversation->contextLength()),
                      stats->tokens);
            messages.push_back({"assistant", reply});
        }
    }
}

// Edit turn 3, then Regenerate: the recurrent state goes back to the snapshot the generator kept
// at the end of turn 2's prompt (no run from the start), and both replies are the ones a fresh
// run of the edited history gives. The same with sliding-window rings, in passes of 4 tokens
// (rings of window + 3: the edit is further back than they reach).
TEST(HybridConversation, EditAndRegenerateGoBackToASnapshot)
{
    for (const std::string& path : {kHybrid, kWindowed}) {
        SCOPED_TRACE(path);
        Rig rig(2048, path, path == kWindowed ? 4 : 0);
        ASSERT_TRUE(rig.conversation);
        std::vector<engine::Message> messages{{"system", "You tell short stories."}};
        for (int turn = 0; turn < 5; ++turn) {
            messages.push_back({"user", kUserTurns[turn]});
            std::string reply;
            auto stats = rig.conversation->reply(messages, greedyInto(&reply, kHybridReply));
            ASSERT_TRUE(stats.ok()) << stats.error().message;
            messages.push_back({"assistant", reply});
        }
        rig.tokensRun();
        messages.resize(6);  // system, then turns 1 and 2, and turn 3's user message edited
        messages[5].content = "A duck found it.";
        auto edited = rig.conversation->reply(messages, greedy(kHybridReply));
        ASSERT_TRUE(edited.ok()) << edited.error().message;
        const LlamaSession* session = rig.conversation->session();
        const uint64_t rerun = session->rerunTokens();
        EXPECT_GT(rerun, 0u);  // from a snapshot before the edit...
        EXPECT_LT(rerun, uint64_t(edited->cachedTokens));  // ...not from the start
        std::vector<int32_t> prompt(edited->tokens.begin(), edited->tokens.begin() + edited->promptTokens);
        const std::vector<int32_t> fresh = freshGreedy(rig.engine->model(), prompt, kHybridReply, rig.conversation->contextLength());
        EXPECT_EQ(fresh, edited->tokens);

        // Regenerate: back to the snapshot at the prompt's last token, nothing run again.
        auto again = rig.conversation->reply(messages, greedy(kHybridReply));
        ASSERT_TRUE(again.ok()) << again.error().message;
        EXPECT_EQ(again->cachedTokens, again->promptTokens - 1);
        EXPECT_EQ(session->rerunTokens(), rerun);
        EXPECT_EQ(again->tokens, edited->tokens);
    }
}

