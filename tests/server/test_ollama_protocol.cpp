// Ollama's requests read into the engine's request, and its responses, without a network.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/ollama_protocol.h"

using namespace spillway;
using namespace spillway::server;
using nlohmann::json;

namespace {

CompletionRequest parsed(bool chat, bool chatting, const std::string& body)
{
    auto d = ollamaDialect(chat, chatting, "m");
    auto r = d->parse(body);
    if (auto* e = std::get_if<ApiError>(&r)) {
        ADD_FAILURE() << e->message << ": " << body;
        return {};
    }
    return std::get<CompletionRequest>(r);
}

}  // namespace

TEST(OllamaProtocol, ReadsChatWithOptionsToolsAndResults)
{
    const CompletionRequest r = parsed(true, true, R"({"model": "m", "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "thinking": "Call both.", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"function": {"name": "get_time", "arguments": {"zone": "CET"}}}]},
        {"role": "tool", "tool_name": "get_time", "content": "12:00"},
        {"role": "tool", "tool_name": "get_weather", "content": "sunny"}],
      "options": {"temperature": 0.5, "top_k": 7, "num_predict": 9, "seed": 3, "stop": ["\n"]},
      "format": {"type": "object", "properties": {"a": {"type": "integer"}}}, "think": "high",
      "tools": [{"type": "function", "function": {"name": "get_weather"}}]})");
    EXPECT_TRUE(r.stream);  // Ollama streams unless told not to
    EXPECT_EQ(r.maxTokens, 9);
    EXPECT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_EQ(r.sampling.topK, 7);
    EXPECT_TRUE(r.seeded);
    EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
    EXPECT_TRUE(r.grammar);
    EXPECT_EQ(r.promptOptions.thinking, std::optional<bool>(true));
    EXPECT_EQ(r.promptOptions.reasoningEffort, "high");
    EXPECT_FALSE(r.promptOptions.tools.empty());
    ASSERT_EQ(r.messages.size(), 4u);
    ASSERT_EQ(r.messages[1].toolCalls.size(), 2u);
    EXPECT_EQ(r.messages[1].reasoning, "Call both.");
    EXPECT_EQ(json::parse(r.messages[1].toolCalls[0].arguments), json({{"city", "Oslo"}}));
    // Each result answers the call of its function, though they come in another order.
    EXPECT_EQ(r.messages[2].toolCallId, r.messages[1].toolCalls[1].id);
    EXPECT_EQ(r.messages[3].toolCallId, r.messages[1].toolCalls[0].id);
    EXPECT_FALSE(parsed(true, true, R"({"messages": [{"role": "user", "content": "x"}], "stream": false})").stream);
}

TEST(OllamaProtocol, GenerateGoesThroughTheTemplateUnlessRaw)
{
    const CompletionRequest chat = parsed(false, true, R"({"prompt": "Hi", "system": "Be brief."})");
    EXPECT_TRUE(chat.chat);
    ASSERT_EQ(chat.messages.size(), 2u);
    EXPECT_EQ(chat.messages[0].role, "system");
    const CompletionRequest raw = parsed(false, true, R"({"prompt": "Hi", "raw": true})");
    EXPECT_FALSE(raw.chat);
    EXPECT_EQ(raw.prompt, "Hi");
    EXPECT_FALSE(parsed(false, false, R"({"prompt": "Hi"})").chat);  // a base model continues it
}

TEST(OllamaProtocol, RefusesWhatIsWrongByName)
{
    for (const auto& [body, named] : std::vector<std::pair<std::string, std::string>>{
             {R"({"messages": [], "format": "yaml"})", "format"},
             {R"({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", "images"},
             {R"({"messages": [{"role": "user", "content": "x"}], "think": "max"})", "think"},
             {R"({"messages": [{"role": "user", "content": "x"}], "options": 3})", "options"},
             {R"({"messages": [{"role": "user", "content": "x"}], "format": {"type": "string", "pattern": "a"}})", "pattern"},
             {"not json", "JSON"}}) {
        auto r = ollamaDialect(true, true, "m")->parse(body);
        ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
        EXPECT_NE(std::get<ApiError>(r).message.find(named), std::string::npos) << std::get<ApiError>(r).message;
        EXPECT_EQ(json::parse(ollamaDialect(true, true, "m")->errorBody(std::get<ApiError>(r)))["error"],
                  std::get<ApiError>(r).message);
    }
}

TEST(OllamaProtocol, WritesLinesAndTheFinalRecord)
{
    auto d = ollamaDialect(true, true, "m");
    const CompletionRequest r = parsed(true, true, R"({"messages": [{"role": "user", "content": "x"}]})");
    const std::string piece = d->piece(r, engine::ReplyPart::Content, "Hel", nullptr);
    ASSERT_TRUE(piece.ends_with("\n"));
    const json p = json::parse(piece);
    EXPECT_EQ(p["message"]["content"], "Hel");
    EXPECT_EQ(p["done"], false);
    EXPECT_EQ(json::parse(d->piece(r, engine::ReplyPart::Reasoning, "hmm", nullptr))["message"]["thinking"], "hmm");
    EXPECT_EQ(d->piece(r, engine::ReplyPart::ToolName, "f", nullptr), "");  // calls go out whole, at the end
    Finished f;
    f.toolCalls = {{"call-1", "f", R"({"a":1})"}};
    f.finish = "tool_calls";
    f.usage = {5, 7};
    f.decodeSeconds = 0.5;
    const auto lines = d->closing(r, f);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(json::parse(lines[0])["message"]["tool_calls"][0]["function"]["arguments"], json({{"a", 1}}));
    const json last = json::parse(lines[1]);
    EXPECT_EQ(last["done"], true);
    EXPECT_EQ(last["done_reason"], "stop");
    EXPECT_EQ(last["eval_count"], 7);
    EXPECT_EQ(last["eval_duration"], 500000000);
}
