// A reply's parts (core/engine/reply_parser.h): gpt-oss's Harmony messages fed as its tokenizer
// cuts them (control tokens whole, text in pieces), think tags cut across tokens, the markup of
// each real template found from its text, and the conversation giving a reply by parts.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/engine/reply_parser.h"
#include "core/model/llama_model.h"
#include "gpu/registry.h"

using namespace spillway;
using engine::ReplyMarkup;
using engine::ReplyParser;
using engine::ReplyPart;

namespace {

struct Parts {
    std::vector<std::pair<ReplyPart, std::string>> pieces;  // as given, neighbours of a part merged
    bool stopAfterFirst = false;

    ReplyParser::Sink sink()
    {
        return [this](ReplyPart part, std::string_view text) {
            EXPECT_FALSE(text.empty());
            if (!pieces.empty() && pieces.back().first == part)
                pieces.back().second += text;
            else
                pieces.emplace_back(part, std::string(text));
            return !stopAfterFirst;
        };
    }
};

// Feeds `tokens` one by one; returns the index of the token that ended the turn, or -1.
int feedAll(ReplyParser& p, const std::vector<std::string>& tokens, Parts& out)
{
    for (size_t i = 0; i < tokens.size(); ++i) {
        p.feed(tokens[i], out.sink());
        if (p.turnEnded()) return int(i);
    }
    p.finish(out.sink());
    return -1;
}

const std::string kHarmonyPrompt = "<|start|>user<|message|>What is 2+2?<|end|><|start|>assistant";

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST(ReplyParser, HarmonyAnalysisIsReasoningAndFinalTheAnswer)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    const std::vector<std::string> tokens = {
        "<|channel|>", "analysis", "<|message|>", "The", " user", " asks", " 2+2.", "<|end|>",
        "<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "It", " is", " 4.", "<|return|>",
        "ignored"};
    EXPECT_EQ(feedAll(p, tokens, out), 16);
    ASSERT_EQ(out.pieces.size(), 2u);
    EXPECT_EQ(out.pieces[0], std::pair(ReplyPart::Reasoning, std::string("The user asks 2+2.")));
    EXPECT_EQ(out.pieces[1], std::pair(ReplyPart::Content, std::string("It is 4.")));
    EXPECT_EQ(p.reasoning(), "The user asks 2+2.");
    EXPECT_EQ(p.content(), "It is 4.");
    EXPECT_TRUE(p.toolCalls().empty());
}

TEST(ReplyParser, HarmonyEndAfterAnalysisDoesNotEndTheTurnButAfterFinalItDoes)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    p.feed("<|channel|>analysis<|message|>thinking<|end|>", out.sink());
    EXPECT_FALSE(p.turnEnded());
    p.feed("<|start|>assistant<|channel|>final<|message|>done", out.sink());
    EXPECT_FALSE(p.turnEnded());
    p.feed("<|end|>", out.sink());
    EXPECT_TRUE(p.turnEnded());
    EXPECT_EQ(p.content(), "done");
    EXPECT_EQ(p.reasoning(), "thinking");
}

TEST(ReplyParser, HarmonyToolCallIsItsOwnPartWithItsRecipient)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    const std::vector<std::string> tokens = {
        "<|channel|>", "analysis", "<|message|>", "Need", " weather.", "<|end|>", "<|start|>", "assistant",
        "<|channel|>", "commentary", " to", "=functions", ".get", "_weather", " ", "<|constrain|>", "json",
        "<|message|>", "{\"city\"", ":\"Paris\"}", "<|call|>"};
    EXPECT_EQ(feedAll(p, tokens, out), 20);
    ASSERT_EQ(p.toolCalls().size(), 1u);
    EXPECT_EQ(p.toolCalls()[0].name, "get_weather");
    EXPECT_EQ(p.toolCalls()[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(p.reasoning(), "Need weather.");
    EXPECT_EQ(p.content(), "");
    ASSERT_EQ(out.pieces.size(), 3u);
    EXPECT_EQ(out.pieces[1], std::make_pair(ReplyPart::ToolName, std::string("get_weather")));
    EXPECT_EQ(out.pieces[2].first, ReplyPart::ToolCall);
}

TEST(ReplyParser, HarmonyCommentaryToNobodyIsShownAsAnswer)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    feedAll(p, {"<|channel|>commentary<|message|>", "Let me check.", "<|end|>"}, out);
    EXPECT_EQ(p.content(), "Let me check.");
    EXPECT_FALSE(p.turnEnded());
}

TEST(ReplyParser, HarmonyMarkersCutAcrossTokensAreHeldBackNotShown)
{
    // A vocabulary without the control tokens writes the markers as text in pieces.
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    const std::vector<std::string> tokens = {"<|chan", "nel|>final<|mes", "sage|>Hi", " there<", "|en", "d|>"};
    EXPECT_EQ(feedAll(p, tokens, out), 5);
    ASSERT_EQ(out.pieces.size(), 1u);
    EXPECT_EQ(out.pieces[0].second, "Hi there");
}

TEST(ReplyParser, HarmonyContinuesAMessageThePromptOpened)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt + "<|channel|>final<|message|>It is", true);
    Parts out;
    feedAll(p, {" 4", ".", "<|return|>"}, out);
    EXPECT_EQ(p.content(), " 4.");
}

TEST(ReplyParser, HarmonyPlainTextWithoutAHeaderIsTheAnswer)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    feedAll(p, {"Hello", " world"}, out);
    EXPECT_EQ(p.content(), "Hello world");
}

TEST(ReplyParser, ThinkTagsCutAcrossTokens)
{
    ReplyParser p(ReplyMarkup::ThinkTags, "<|im_start|>assistant\n");
    Parts out;
    const std::vector<std::string> tokens = {"<th", "ink>", "\n", "Let", " me", " think", ".\n", "</", "think",
                                             ">\n\n", "Four", "."};
    EXPECT_EQ(feedAll(p, tokens, out), -1);
    ASSERT_EQ(out.pieces.size(), 2u);
    EXPECT_EQ(out.pieces[0], std::pair(ReplyPart::Reasoning, std::string("Let me think.")));
    EXPECT_EQ(out.pieces[1], std::pair(ReplyPart::Content, std::string("Four.")));
}

TEST(ReplyParser, ThinkingOpenedByTheTemplate)
{
    ReplyParser p(ReplyMarkup::ThinkTags, "<|im_start|>assistant\n<think>\n");
    Parts out;
    feedAll(p, {"Hmm", ".", "</think>", "\n\n", "Yes"}, out);
    EXPECT_EQ(p.reasoning(), "Hmm.");
    EXPECT_EQ(p.content(), "Yes");
}

TEST(ReplyParser, ThinkingSwitchedOffByTheTemplateLeavesTheAnswer)
{
    // Qwen3's enable_thinking=false: the template writes an empty thinking block itself.
    ReplyParser p(ReplyMarkup::ThinkTags, "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    Parts out;
    feedAll(p, {"4", "."}, out);
    EXPECT_EQ(p.content(), "4.");
    EXPECT_EQ(p.reasoning(), "");
}

TEST(ReplyParser, ThinkTagOnlyAtTheStartAndTextThatLooksLikeOneIsKept)
{
    ReplyParser p(ReplyMarkup::ThinkTags, "prompt");
    Parts out;
    feedAll(p, {"Use", " <think>", " tags", " <th"}, out);
    EXPECT_EQ(p.content(), "Use <think> tags <th");
    EXPECT_EQ(p.reasoning(), "");
}

TEST(ReplyParser, AnUnclosedThoughtIsGivenOutAtTheEnd)
{
    ReplyParser p(ReplyMarkup::ThinkTags, "prompt");
    Parts out;
    feedAll(p, {"<think>", "still", " going", " </thi"}, out);
    EXPECT_EQ(p.reasoning(), "still going </thi");
}

TEST(ReplyParser, ContinuingAThinkTagsAnswerKeepsItsLeadingSpace)
{
    ReplyParser p(ReplyMarkup::ThinkTags, "<|im_start|>assistant\nHello", true);
    Parts out;
    feedAll(p, {" world"}, out);
    EXPECT_EQ(p.content(), " world");
}

TEST(ReplyParser, TheSinkStopsTheReply)
{
    ReplyParser p(ReplyMarkup::Harmony, kHarmonyPrompt);
    Parts out;
    out.stopAfterFirst = true;
    EXPECT_FALSE(p.feed("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b",
                        out.sink()));
}

TEST(ReplyParser, MarkupOfTheRealTemplates)
{
    const std::string dir = SPILLWAY_TEST_DATA_DIR "/../chat/templates/";
    EXPECT_EQ(engine::replyMarkupOf(readFile(dir + "gpt-oss.jinja")), ReplyMarkup::Harmony);
    EXPECT_EQ(engine::replyMarkupOf(readFile(dir + "qwen3.jinja")), ReplyMarkup::ThinkTags);
    for (const char* plain : {"llama3.1-instruct.jinja", "qwen2.5-instruct.jinja", "gemma3-it.jinja",
                              "mistral-v0.3-instruct.jinja"}) {
        const std::string source = readFile(dir + plain);
        ASSERT_FALSE(source.empty()) << plain;
        EXPECT_EQ(engine::replyMarkupOf(source), ReplyMarkup::Plain) << plain;
    }
}

// The conversation on the real stories260K with a template that opens the thinking: everything
// the model writes is reasoning (it never closes it), given by parts as the tokens come, and the
// parts together are the tokens' text.
TEST(ReplyParser, ConversationGivesTheReplyByParts)
{
    auto model = LlamaModel::load(SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf");
    ASSERT_TRUE(model) << model.error().message;
    auto cpu = gpu::createDevice("cpu", {1, 0});
    ASSERT_TRUE(cpu) << cpu.error().message;
    auto opened = engine::Engine::open(std::move(*model), {}, {}, std::move(*cpu));
    ASSERT_TRUE(opened) << opened.error().message;
    engine::Engine& e = **opened;
    for (const bool thinking : {true, false}) {
        auto format = engine::ChatFormat::fromSource(
            std::string("{% for m in messages %}{{ m.content }}{% endfor %}") + (thinking ? "<think>" : "") +
                "{# </think> #}",
            "", "");
        ASSERT_TRUE(format) << format.error().message;
        ASSERT_EQ(format->markup(), ReplyMarkup::ThinkTags);
        e.setChatFormat(std::move(*format));
        engine::Conversation conversation(e);
        std::string raw;
        std::string parts[3];
        int calls = 0;
        engine::ReplyOptions options;
        options.maxNewTokens = 24;
        options.sampling.temperature = 0;
        options.onToken = [&](std::string_view t, int32_t) {
            raw += t;
            return true;
        };
        options.onPart = [&](ReplyPart part, std::string_view t) {
            parts[int(part)] += t;
            ++calls;
            return true;
        };
        const std::vector<engine::Message> messages = {{"user", "Once upon a time"}};
        auto r = conversation.reply(messages, options);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_GT(calls, 1);
        const size_t first = raw.find_first_not_of(" \n");
        ASSERT_NE(first, std::string::npos);
        std::string expected = raw.substr(first);
        expected.erase(expected.find_last_not_of(" \n") + 1);
        const std::string& got = thinking ? parts[int(ReplyPart::Reasoning)] : parts[int(ReplyPart::Content)];
        if (thinking) {
            EXPECT_EQ(got, expected);
            EXPECT_EQ(r->reasoning, expected);
            EXPECT_EQ(r->content, "");
        } else {
            EXPECT_EQ(got, raw.substr(first));
            EXPECT_EQ(r->content, raw.substr(first));
            EXPECT_EQ(r->reasoning, "");
        }
    }
}
