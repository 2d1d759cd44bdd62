// The OpenAI request parser and the text gate, without a network.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

using namespace spillway;
using namespace spillway::server;

namespace {

ApiError errorOf(const std::string& body, bool chat = true)
{
    auto r = parseCompletionRequest(body, chat);
    if (auto* e = std::get_if<ApiError>(&r)) return *e;
    ADD_FAILURE() << "accepted: " << body;
    return {};
}

CompletionRequest requestOf(const std::string& body, bool chat = true)
{
    auto r = parseCompletionRequest(body, chat);
    if (auto* q = std::get_if<CompletionRequest>(&r)) return *q;
    ADD_FAILURE() << std::get<ApiError>(r).message << ": " << body;
    return {};
}

}  // namespace

TEST(OpenAiProtocol, ReadsAChatRequest)
{
    const CompletionRequest r = requestOf(R"({"model":"m","messages":[{"role":"developer","content":"Be brief."},
        {"role":"user","content":[{"type":"text","text":"Hello "},{"type":"text","text":"there"}]}],
        "max_tokens":12,"temperature":0,"top_p":0.5,"seed":7,"stop":"\n","stream":true,
        "stream_options":{"include_usage":true},"unknown_field":{"x":1},"presence_penalty":0.5})");
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[1].content, "Hello there");
    EXPECT_EQ(r.maxTokens, 12);
    EXPECT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_EQ(r.sampling.topP, 0.5f);
    EXPECT_TRUE(r.seeded);
    EXPECT_EQ(r.sampling.seed, 7u);
    EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.includeUsage);
    EXPECT_EQ(r.sampling.presencePenalty, 0.5f);
    // max_completion_tokens wins over max_tokens; the engine's defaults where nothing is named.
    const CompletionRequest c = requestOf(R"({"prompt":["Once"],"max_completion_tokens":3,"max_tokens":9})", false);
    EXPECT_EQ(c.prompt, "Once");
    EXPECT_EQ(c.maxTokens, 3);
    EXPECT_EQ(c.sampling.temperature, SamplerSettings{}.temperature);
}

// A tool round trip's request: tools and tool_choice, the assistant's calls, the tool's result;
// and the response's tool_calls, whole and as streamed deltas.
TEST(OpenAiProtocol, ToolsCallsAndResults)
{
    const CompletionRequest r = requestOf(R"({"messages":[{"role":"user","content":"Weather?"},
        {"role":"assistant","content":null,"reasoning_content":"Call it.","tool_calls":[{"id":"call_1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
        "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
        "tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,
        "reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":false}})");
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[1].content, "");
    EXPECT_EQ(r.messages[1].reasoning, "Call it.");
    ASSERT_EQ(r.messages[1].toolCalls.size(), 1u);
    EXPECT_EQ(r.messages[1].toolCalls[0].id, "call_1");
    EXPECT_EQ(r.messages[1].toolCalls[0].name, "get_weather");
    EXPECT_EQ(r.messages[1].toolCalls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(r.messages[2].role, "tool");
    EXPECT_EQ(r.messages[2].toolCallId, "call_1");
    EXPECT_EQ(nlohmann::json::parse(r.promptOptions.tools)[0]["function"]["name"], "get_weather");
    EXPECT_EQ(r.toolChoice, CompletionRequest::ToolChoice::Function);
    EXPECT_EQ(r.forcedTool, "get_weather");
    EXPECT_FALSE(r.parallelToolCalls);
    EXPECT_EQ(r.promptOptions.reasoningEffort, "high");
    EXPECT_EQ(r.promptOptions.thinking, std::optional<bool>(false));
    // tool_choice none offers no tools.
    const CompletionRequest none = requestOf(R"({"messages":[{"role":"user","content":"x"}],
        "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"})");
    EXPECT_EQ(none.promptOptions.tools, "");

    const std::vector<engine::ToolCall> calls = {{"call_a", "get_weather", R"({"city":"Oslo"})"}};
    const auto whole = nlohmann::json::parse(completionResponse(r, "id", 1, "m", "", "tool_calls", {3, 4}, "", calls));
    const auto& message = whole["choices"][0]["message"];
    EXPECT_TRUE(message["content"].is_null());
    EXPECT_EQ(message["tool_calls"][0]["id"], "call_a");
    EXPECT_EQ(message["tool_calls"][0]["type"], "function");
    EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Oslo"})");
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
    const ToolCallDelta opens{0, "call_a", "get_weather", ""}, piece{0, "", "", "{\"ci"};
    const auto first = nlohmann::json::parse(completionChunk(r, "id", 1, "m", "", false, nullptr, "", &opens));
    const auto& call = first["choices"][0]["delta"]["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);
    EXPECT_EQ(call["id"], "call_a");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(call["function"]["arguments"], "");
    const auto next = nlohmann::json::parse(completionChunk(r, "id", 1, "m", "", false, nullptr, "", &piece));
    EXPECT_FALSE(next["choices"][0]["delta"]["tool_calls"][0].contains("id"));
    EXPECT_EQ(next["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"ci");
}

TEST(OpenAiProtocol, NamesWhatIsWrong)
{
    struct Case { const char* body; bool chat; const char* param; };
    const Case cases[] = {
        {"{", true, ""},
        {"[1,2]", true, ""},
        {R"({"messages":[]})", true, "messages"},
        {R"({"messages":"hi"})", true, "messages"},
        {R"({"messages":[{"content":"x"}]})", true, "messages[0].role"},
        {R"({"messages":[{"role":"function","content":"x"}]})", true, "messages[0].role"},
        {R"({"messages":[{"role":"tool","content":"x"}]})", true, "messages[0].tool_call_id"},
        {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]})", true, "tools[0].function.name"},
        {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", true, "tool_choice"},
        {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})", true, "tool_choice"},
        {R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"})", true, "reasoning_effort"},
        {R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", true, "messages[0].tool_calls"},
        {R"({"messages":[{"role":"user","content":5}]})", true, "messages[0].content"},
        {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", true, "messages[0].content"},
        {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", true, "temperature"},
        {R"({"messages":[{"role":"user","content":"x"}],"temperature":3})", true, "temperature"},
        {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e300})", true, "max_tokens"},
        {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})", true, "max_tokens"},
        {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2.5})", true, "max_tokens"},
        {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", true, "stop"},
        {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", true, "stream"},
        {R"({"messages":[{"role":"user","content":"x"}],"n":2})", true, "n"},
        {R"({"messages":[{"role":"user","content":"x"}],"seed":"1"})", true, "seed"},
        {R"({"messages":[{"role":"user","content":"x"}],"frequency_penalty":3})", true, "frequency_penalty"},
        {R"({"prompt":5})", false, "prompt"},
        {R"({})", false, "prompt"},
    };
    for (const Case& c : cases) {
        const ApiError e = errorOf(c.body, c.chat);
        EXPECT_EQ(e.status, 400) << c.body;
        EXPECT_EQ(e.param, c.param) << c.body;
        EXPECT_FALSE(e.message.empty()) << c.body;
        const auto body = nlohmann::json::parse(errorBody(e));
        EXPECT_EQ(body["error"]["type"], "invalid_request_error");
        EXPECT_EQ(body["error"]["message"], e.message);
    }
    // Invalid UTF-8 inside a string is no JSON.
    EXPECT_EQ(errorOf("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}").status, 400);
}

TEST(OpenAiProtocol, TheGateHoldsBackStopSequencesAndHalfCharacters)
{
    TextGate gate({"END", "\n\n"});
    std::string out;
    for (const char* piece : {"Hello E", "N", "oh", " wor", "ld\n", "\nnever"}) out += gate.feed(piece);
    EXPECT_TRUE(gate.stopped());
    EXPECT_EQ(out, "Hello ENoh world");
    EXPECT_EQ(gate.feed("more"), "");

    TextGate words({"END"});
    EXPECT_EQ(words.feed("a E"), "a ");
    EXPECT_EQ(words.feed("ND b"), "");
    EXPECT_TRUE(words.stopped());

    // "é" (C3 A9) split across tokens: nothing half sent.
    TextGate utf8({});
    EXPECT_EQ(utf8.feed("caf\xC3"), "caf");
    EXPECT_EQ(utf8.feed("\xA9!"), "\xC3\xA9!");
    EXPECT_EQ(utf8.feed("\xE2\x82"), "");
    EXPECT_EQ(utf8.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // a reply that ended mid-character
    EXPECT_EQ(validUtf8("a\xC0\xAF" "b\xED\xA0\x80"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}
