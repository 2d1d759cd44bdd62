// The server with what today's clients ask of it, on loopback with the test model: a thinking
// model's reasoning apart from its answer and its budget, tool calls and structured output
// (JSON Schema and GBNF), Ollama's API beside OpenAI's, and the library's models loaded when a
// request names one. The engine's own replies are what the server must send.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/engine/chat_format.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/trace/trace.h"
#include "server/server.h"
#include "server_fixture.h"

using namespace spillway;
using namespace spillway::server_test;
using nlohmann::json;

// A thinking model's reply: its reasoning apart from its answer, as reasoning_content in the
// message and in the stream's deltas. The template opens the thinking and stories260K never
// closes it, so the whole reply is reasoning; a template that does not open it gives an answer.
TEST(Server, ReasoningComesApartFromTheAnswer)
{
    Served s;
    ASSERT_GT(s.port, 0);
    for (const bool thinking : {true, false}) {
        const std::string source = std::string(kTemplate) + (thinking ? "<think>" : "") + "{# </think> #}";
        auto format = engine::ChatFormat::fromSource(source, "", "");
        ASSERT_TRUE(format) << format.error().message;
        s.engine->setChatFormat(*format);
        // What the engine gives by parts, on an engine of its own.
        auto e = openEngine();
        ASSERT_TRUE(e);
        e->setChatFormat(*format);
        engine::ReplyOptions o;
        o.maxNewTokens = 24;
        o.sampling.temperature = 0;
        auto want = e->conversation()->reply(std::vector<engine::Message>{{"user", "Once upon a time"}}, o);
        ASSERT_TRUE(want) << want.error().message;
        ASSERT_FALSE((thinking ? want->reasoning : want->content).empty());
        EXPECT_TRUE((thinking ? want->content : want->reasoning).empty());

        auto c = s.client();
        auto plain = c.Post("/v1/chat/completions", chatBody("Once upon a time", 24, false).dump(), "application/json");
        ASSERT_TRUE(plain);
        ASSERT_EQ(plain->status, 200) << plain->body;
        const json message = json::parse(plain->body)["choices"][0]["message"];
        EXPECT_EQ(message["content"], want->content);
        if (thinking)
            EXPECT_EQ(message["reasoning_content"], want->reasoning);
        else
            EXPECT_FALSE(message.contains("reasoning_content")) << message.dump();

        auto events = c.Post("/v1/chat/completions", chatBody("Once upon a time", 24, true).dump(), "application/json");
        ASSERT_TRUE(events);
        const Streamed st = parseStream(events->body, true);
        EXPECT_EQ(st.text, want->content);
        EXPECT_EQ(st.reasoning, want->reasoning);
        EXPECT_TRUE(st.done);
    }
}

// A library beside the model (serve --library): both listed; a request naming the other loads it
// just in time (the one before unloaded first) and is answered by it exactly; a name neither
// loaded nor listed is a 404; a model that fails to load leaves the one before answering; a
// reply in progress finishes on its model before another comes in.
TEST(Server, ALibraryModelLoadsWhenARequestNamesIt)
{
    const std::string other = SPILLWAY_TEST_DATA_DIR "/models/moe/tiny-mixtral.gguf";
    std::atomic<int> opened{0};
    server::ModelLibrary library;
    library.list = [&] {
        return std::vector<server::LibraryModel>{{"stories260K.gguf", kModel, "llama", 1000, 260'000, 1},
                                                 {"tiny-mixtral.gguf", other, "llama", 2000, 500'000, 2},
                                                 {"broken.gguf", "/nonexistent/broken.gguf", "llama", 3, 3, 3}};
    };
    library.open = [&](const server::LibraryModel& m) -> Result<server::LoadedModel> {
        ++opened;
        server::LoadedModel out;
        out.trace = std::make_unique<trace::Recorder>(1 << 12);
        auto model = LlamaModel::load(m.path);
        if (!model) return model.error();
        out.engine = openEngine(out.trace.get(), m.path);
        if (!out.engine) return Error{ErrorCode::Internal, "no engine"};
        return out;
    };
    server::ServerOptions o;
    o.port = 0;
    o.modelId = "stories260K.gguf";
    o.library = library;
    server::LoadedModel first;
    first.trace = std::make_unique<trace::Recorder>(1 << 12);
    first.engine = openEngine(first.trace.get());
    ASSERT_TRUE(first.engine);
    server::Server s(std::move(first), o);
    auto port = s.start();
    ASSERT_TRUE(port) << port.error().message;
    httplib::Client c("127.0.0.1", *port);
    c.set_read_timeout(60, 0);
    auto names = [&](const char* path, const char* list, const char* key) {
        auto r = c.Get(path);
        std::vector<std::string> out;
        EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : httplib::to_string(r.error()));
        if (!r || r->status != 200) return out;
        const json parsed = json::parse(r->body);
        for (const json& m : parsed[list]) out.push_back(m[key]);
        return out;
    };
    using Names = std::vector<std::string>;
    EXPECT_EQ(names("/v1/models", "data", "id"), (Names{"stories260K.gguf", "tiny-mixtral.gguf", "broken.gguf"}));
    EXPECT_EQ(names("/api/tags", "models", "name"), (Names{"stories260K.gguf", "tiny-mixtral.gguf", "broken.gguf"}));
    EXPECT_EQ(names("/api/ps", "models", "name"), (Names{"stories260K.gguf"}));
    auto show = c.Post("/api/show", R"({"model": "tiny-mixtral.gguf"})", "application/json");
    ASSERT_TRUE(show);
    EXPECT_EQ(show->status, 200);

    const std::vector<engine::Message> story{{"user", "Once upon a time"}};
    // tiny-mixtral's random vocabulary writes invalid UTF-8: compared as JSON sends it.
    auto asSent = [](const std::string& text) {
        return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
    };
    auto ask = [&](const std::string& model, int tokens, bool stream) {
        json body = chatBody("Once upon a time", tokens, stream);
        body["model"] = model;
        return c.Post("/v1/chat/completions", body.dump(), "application/json");
    };
    auto r = ask("tiny-mixtral.gguf", 12, false);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json reply = json::parse(r->body);
    EXPECT_EQ(reply["model"], "tiny-mixtral.gguf");
    EXPECT_EQ(reply["choices"][0]["message"]["content"], asSent(expectedChat(story, 12, other)));
    EXPECT_EQ(opened.load(), 1);
    EXPECT_EQ(names("/api/ps", "models", "name"), (Names{"tiny-mixtral.gguf"}));
    EXPECT_EQ(names("/v1/models", "data", "id").front(), "tiny-mixtral.gguf");

    // Unknown: 404 in OpenAI's and Ollama's shapes; nothing loads.
    r = ask("gpt-4o", 4, false);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found") << r->body;
    auto ollama = c.Post("/api/chat", R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}], "stream": false})",
                         "application/json");
    ASSERT_TRUE(ollama);
    EXPECT_EQ(ollama->status, 404);
    EXPECT_TRUE(json::parse(ollama->body).contains("error")) << ollama->body;
    EXPECT_EQ(opened.load(), 1);

    // A model that does not load: the error names it, the model before answers again.
    r = ask("broken.gguf", 4, false);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    EXPECT_NE(r->body.find("broken.gguf"), std::string::npos) << r->body;
    EXPECT_EQ(names("/api/ps", "models", "name"), (Names{"tiny-mixtral.gguf"}));
    r = ask("", 6, false);  // no model named: the one loaded
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], asSent(expectedChat(story, 6, other)));

    // A long reply on the model loaded while another request names the first: the reply ends
    // whole on its model, then the first comes back and answers.
    const int before = opened.load();
    std::string streamed;
    std::atomic<bool> streamEnded{false};
    std::thread longer([&] {
        httplib::Client c2("127.0.0.1", *port);
        c2.set_read_timeout(60, 0);
        json body = chatBody("Once upon a time", 200, false);
        body["model"] = "tiny-mixtral.gguf";
        auto whole = c2.Post("/v1/chat/completions", body.dump(), "application/json");
        streamEnded = true;
        if (whole && whole->status == 200) {
            const json j = json::parse(whole->body);
            streamed = j["choices"][0]["finish_reason"].get<std::string>() + " " + j["usage"]["completion_tokens"].dump();
        }
    });
    bool overlapped = false;  // the long reply is on its slot when the other request comes
    for (int i = 0; i < 2000 && !overlapped; ++i) {
        auto h = c.Get("/health");
        overlapped = h && json::parse(h->body)["slots_processing"] == 1;
        if (!overlapped) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    r = ask("stories260K.gguf", 8, false);
    const bool streamWasDone = streamEnded.load();
    longer.join();
    EXPECT_TRUE(overlapped);
    EXPECT_TRUE(streamWasDone);  // the other request waited for it
    EXPECT_EQ(streamed, "length 200");  // whole: not cut by the other model's load
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"], expectedChat(story, 8));
    EXPECT_EQ(opened.load(), before + 1);
    auto metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("spillway_engine_lane_seconds_total"), std::string::npos);
    s.stop();
}

// llama-server's `grammar` field: a GBNF grammar the answer follows (chat and completions); a
// grammar that does not parse is a 400 with its line; with response_format beside it, a 400.
TEST(Server, AGbnfGrammarConstrainsTheAnswer)
{
    Served s;
    ASSERT_GT(s.port, 0);
    auto c = s.client();
    const std::string grammarText = "root ::= \"The \" (\"cat\" | \"dog\") \" is \" [a-z]{2,12} \".\"\n";
    for (const bool chat : {true, false}) {
        json body = chat ? chatBody("Once upon a time", 40, false)
                         : json{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}};
        body["grammar"] = grammarText;
        auto r = c.Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump(), "application/json");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        const json choice = json::parse(r->body)["choices"][0];
        const std::string text = chat ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
        const std::regex pattern("The (cat|dog) is [a-z]{2,12}\\.");
        EXPECT_TRUE(std::regex_match(text, pattern)) << text;
    }
    json bad = chatBody("Hi", 8, false);
    bad["grammar"] = "root ::= \"a\" | (\"b\"\n";
    auto r = c.Post("/v1/chat/completions", bad.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("expected ')'"), std::string::npos) << r->body;
    json both = chatBody("Hi", 8, false);
    both["grammar"] = grammarText;
    both["response_format"] = {{"type", "json_object"}};
    r = c.Post("/v1/chat/completions", both.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("one of"), std::string::npos) << r->body;
}

// serve --reasoning-budget: a thinking reply reasons for at most that many tokens, then answers
// (stories260K never closes its thinking itself).
TEST(Server, AReasoningBudgetEndsTheThinkingAndTheAnswerFollows)
{
    server::ServerOptions o;
    o.reasoningBudget = 6;
    Served s(o);
    ASSERT_GT(s.port, 0);
    auto format = engine::ChatFormat::fromSource(std::string(kTemplate) + "<think>{# </think> #}", "", "");
    ASSERT_TRUE(format) << format.error().message;
    s.engine->setChatFormat(*format);
    auto c = s.client();
    auto r = c.Post("/v1/chat/completions", chatBody("Once upon a time", 30, false).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json message = json::parse(r->body)["choices"][0]["message"];
    ASSERT_TRUE(message.contains("reasoning_content")) << message.dump();
    EXPECT_FALSE(message["reasoning_content"].get<std::string>().empty());
    EXPECT_FALSE(message["content"].get<std::string>().empty()) << message.dump();
}

// A tool round trip over HTTP: tool_choice required gives a call (constrained), whole and as
// streamed deltas that reassemble to it, with finish_reason tool_calls; the tool's result goes
// back and the model answers. response_format's schema gives JSON that parses, and a schema
// asking what is not supported is a 400 that names it.
TEST(Server, ToolCallsAndStructuredOutput)
{
    Served s;
    ASSERT_GT(s.port, 0);
    auto format = engine::ChatFormat::fromSource(
        "{# tools: <tool_call> #}{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}<assistant>",
        "", "");
    ASSERT_TRUE(format);
    s.engine->setChatFormat(*format);
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}}}])");
    json body = chatBody("Weather in Oslo?", 200, false);
    body["temperature"] = 1.0;
    body["seed"] = 3;
    body["tools"] = tools;
    body["tool_choice"] = "required";
    body["parallel_tool_calls"] = false;
    auto c = s.client();
    auto whole = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(whole);
    ASSERT_EQ(whole->status, 200) << whole->body;
    const json choice = json::parse(whole->body)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << whole->body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << whole->body;
    const json call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>())["city"].is_string());
    EXPECT_TRUE(choice["message"]["content"].is_null());
    EXPECT_TRUE(call["id"].get<std::string>().starts_with("call-"));

    body["stream"] = true;
    auto events = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(events);
    const Streamed st = parseStream(events->body, true);
    std::string name, arguments, id;
    for (const json& chunk : st.chunks)
        if (!chunk["choices"].empty() && chunk["choices"][0]["delta"].contains("tool_calls")) {
            const json& d = chunk["choices"][0]["delta"]["tool_calls"][0];
            EXPECT_EQ(d["index"], 0);
            if (d.contains("id")) id = d["id"];
            if (d["function"].contains("name")) name += d["function"]["name"].get<std::string>();
            arguments += d["function"]["arguments"].get<std::string>();
        }
    EXPECT_EQ(st.finish, "tool_calls");
    EXPECT_EQ(name, "get_weather");
    EXPECT_EQ(arguments, call["function"]["arguments"]);  // the same seed, the same call
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(st.text, "");

    // Parallel calls: a story model goes on calling, each call whole but a last one the token
    // limit cut.
    body["stream"] = false;
    body["parallel_tool_calls"] = true;
    auto parallel = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(parallel);
    const json calls = json::parse(parallel->body)["choices"][0]["message"]["tool_calls"];
    EXPECT_GE(calls.size(), 2u) << parallel->body;
    std::set<std::string> ids;
    for (const json& k : calls) {
        EXPECT_TRUE(json::parse(k["function"]["arguments"].get<std::string>()).is_object());
        ids.insert(k["id"].get<std::string>());
    }
    EXPECT_EQ(ids.size(), calls.size());

    // The result goes back; with tool_choice auto the model (a story model) answers in text.
    json next = chatBody("Weather in Oslo?", 16, false);
    next["tools"] = tools;
    next["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    next["messages"].push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "sunny"}});
    auto answer = c.Post("/v1/chat/completions", next.dump(), "application/json");
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->status, 200) << answer->body;
    EXPECT_FALSE(json::parse(answer->body)["choices"][0]["message"]["content"].get<std::string>().empty());

    // Structured output.
    json structured = chatBody("Once upon a time", 300, false);
    structured["temperature"] = 1.0;
    structured["seed"] = 5;
    structured["response_format"] = {{"type", "json_schema"},
                                     {"json_schema", {{"name", "story"}, {"strict", true},
                                                      {"schema", json::parse(R"({"type": "object", "properties": {
                                                          "hero": {"type": "string", "maxLength": 16},
                                                          "happy": {"type": "boolean"}}, "required": ["hero", "happy"]})")}}}};
    auto out = c.Post("/v1/chat/completions", structured.dump(), "application/json");
    ASSERT_TRUE(out);
    ASSERT_EQ(out->status, 200) << out->body;
    const json v = json::parse(json::parse(out->body)["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(v.is_object()) << out->body;
    EXPECT_TRUE(v["hero"].is_string() && v["happy"].is_boolean()) << v.dump();
    structured["response_format"]["json_schema"]["schema"]["properties"]["hero"]["pattern"] = "^[A-Z]";
    auto refused = c.Post("/v1/chat/completions", structured.dump(), "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400);
    EXPECT_NE(refused->body.find("'pattern' at /properties/hero"), std::string::npos) << refused->body;
}

// Ollama's API on the same port: /api/chat streamed as NDJSON gives the same greedy text as the
// OpenAI endpoint; /api/tags and /api/show describe the model; an unknown model is a 404.
TEST(Server, OllamasApiBesideOpenAis)
{
    Served s;
    ASSERT_GT(s.port, 0);
    auto c = s.client();
    auto openai = c.Post("/v1/chat/completions", chatBody("Once upon a time", 16, false).dump(), "application/json");
    ASSERT_TRUE(openai);
    const std::string want = json::parse(openai->body)["choices"][0]["message"]["content"];
    const json body = {{"model", "stories260K.gguf"},
                       {"messages", json::array({json{{"role", "user"}, {"content", "Once upon a time"}}})},
                       {"options", {{"temperature", 0}, {"num_predict", 16}}}};
    auto stream = c.Post("/api/chat", body.dump(), "application/json");
    ASSERT_TRUE(stream);
    ASSERT_EQ(stream->status, 200) << stream->body;
    EXPECT_EQ(stream->get_header_value("Content-Type"), "application/x-ndjson");
    std::string text;
    json last;
    size_t at = 0;
    int lines = 0;
    while (at < stream->body.size()) {
        const size_t end = stream->body.find('\n', at);
        ASSERT_NE(end, std::string::npos) << "every record ends its line";
        last = json::parse(stream->body.substr(at, end - at));
        text += last["message"]["content"].get<std::string>();
        at = end + 1;
        ++lines;
    }
    EXPECT_GT(lines, 2);
    EXPECT_EQ(text, want);
    EXPECT_EQ(last["done"], true);
    EXPECT_EQ(last["eval_count"], 16);
    EXPECT_EQ(last["done_reason"], "length");
    json whole = body;
    whole["stream"] = false;
    auto one = c.Post("/api/chat", whole.dump(), "application/json");
    ASSERT_TRUE(one);
    EXPECT_EQ(json::parse(one->body)["message"]["content"], want);
    auto tags = c.Get("/api/tags");
    ASSERT_TRUE(tags);
    EXPECT_EQ(json::parse(tags->body)["models"][0]["name"], "stories260K.gguf");
    auto show = c.Post("/api/show", R"({"model": "stories260K.gguf"})", "application/json");
    ASSERT_TRUE(show);
    EXPECT_EQ(json::parse(show->body)["template"], kTemplate);
    auto missing = c.Post("/api/show", R"({"model": "llama9"})", "application/json");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_NE(json::parse(missing->body)["error"].get<std::string>().find("llama9"), std::string::npos);
    auto bad = c.Post("/api/chat", R"({"messages": [{"role": "user", "content": "x"}], "format": 5})", "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_TRUE(json::parse(bad->body).contains("error"));
}

