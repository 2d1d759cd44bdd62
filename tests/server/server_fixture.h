#pragma once
// What the server's tests share (test_server.cpp, test_server_clients.cpp): the test model on an
// engine of its own, the engine's own greedy replies to compare with, a server on loopback
// (Served), a chat body, and a stream's events read back.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/trace/trace.h"
#include "server/server.h"

namespace spillway::server_test {

using nlohmann::json;


inline const std::string kModel = SPILLWAY_TEST_DATA_DIR "/models/stories260K.gguf";
inline const char* const kTemplate =
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

inline std::unique_ptr<engine::Engine> openEngine(trace::Recorder* recorder = nullptr, const std::string& path = kModel)
{
    auto model = LlamaModel::load(path);
    if (!model) {
        ADD_FAILURE() << model.error().message;
        return nullptr;
    }
    engine::EngineOptions options;
    options.backend = "cpu";
    options.threads = 1;
    options.batch = 4;
    options.trace = recorder;
    auto opened = engine::Engine::open(std::move(*model), options);
    if (!opened) {
        ADD_FAILURE() << opened.error().message;
        return nullptr;
    }
    auto format = engine::ChatFormat::fromSource(kTemplate, "", "");
    if (!format) {
        ADD_FAILURE() << format.error().message;
        return nullptr;
    }
    (*opened)->setChatFormat(std::move(*format));
    return std::move(*opened);
}

// The engine's own greedy reply: what the server must send (a chat's reply, or a completion's text).
inline std::string expectedText(const std::function<Result<engine::ReplyStats>(engine::Conversation&, const engine::ReplyOptions&)>& run,
                         int tokens, const std::string& path = kModel)
{
    auto e = openEngine(nullptr, path);
    if (!e) return {};
    auto c = e->conversation();
    engine::ReplyOptions o;
    o.maxNewTokens = tokens;
    o.sampling.temperature = 0;
    std::string text;
    o.onToken = [&](std::string_view t, int32_t) {
        text += t;
        return true;
    };
    EXPECT_TRUE(run(*c, o).ok());
    return text;
}

inline std::string expectedChat(const std::vector<engine::Message>& messages, int tokens, const std::string& path = kModel)
{
    return expectedText([&](engine::Conversation& c, const engine::ReplyOptions& o) { return c.reply(messages, o); }, tokens,
                        path);
}

inline std::string expectedCompletion(const std::string& prompt, int tokens)
{
    return expectedText([&](engine::Conversation& c, const engine::ReplyOptions& o) { return c.complete(prompt, true, o); },
                        tokens);
}

struct Served {
    explicit Served(server::ServerOptions o = {}, const std::string& path = kModel)
    {
        engine = openEngine(&recorder, path);
        if (!engine) return;
        o.trace = &recorder;
        o.port = 0;
        o.modelId = "stories260K.gguf";
        server = std::make_unique<server::Server>(*engine, o);
        auto bound = server->start();
        if (!bound) {
            ADD_FAILURE() << bound.error().message;
            return;
        }
        port = *bound;
        httplib::Client c("127.0.0.1", port);
        for (int i = 0; i < 200; ++i) {
            if (auto r = c.Get("/health"); r && r->status == 200) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ADD_FAILURE() << "the server did not answer /health";
    }
    ~Served()
    {
        server.reset();  // stops it and joins its thread
        engine.reset();
    }
    httplib::Client client() const
    {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(60, 0);
        return c;
    }
    json health() const
    {
        auto r = client().Get("/health");
        return r ? json::parse(r->body) : json();
    }
    trace::Recorder recorder{1 << 14};  // before the engine, whose sessions write to it
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<server::Server> server;
    int port = 0;
};

inline json chatBody(const std::string& user, int tokens, bool stream)
{
    return json{{"model", "stories260K.gguf"},
                {"messages", json::array({json{{"role", "user"}, {"content", user}}})},
                {"max_tokens", tokens},
                {"temperature", 0},
                {"stream", stream}};
}

struct Streamed {
    std::string text;
    std::string reasoning;  // the deltas' reasoning_content
    std::string finish;
    std::vector<json> chunks;
    bool done = false;
    bool roleFirst = false;
    bool oneId = true;
    json usage;
};

// The events of a streamed body, its text reassembled.
inline Streamed parseStream(const std::string& body, bool chat)
{
    Streamed s;
    size_t at = 0;
    std::string id;
    while (at < body.size()) {
        size_t end = body.find("\n\n", at);
        if (end == std::string::npos) end = body.size();
        const std::string event = body.substr(at, end - at);
        at = end + 2;
        if (event.rfind("data: ", 0) != 0) continue;
        const std::string data = event.substr(6);
        if (data == "[DONE]") {
            s.done = true;
            continue;
        }
        json j = json::parse(data);
        if (id.empty()) id = j.value("id", "");
        if (j.value("id", "") != id) s.oneId = false;
        s.chunks.push_back(j);
        if (j.contains("usage") && !j["usage"].is_null()) s.usage = j["usage"];
        if (j["choices"].empty()) continue;
        const json& c = j["choices"][0];
        if (s.chunks.size() == 1) s.roleFirst = chat && c["delta"].value("role", "") == "assistant";
        if (chat && c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
        if (chat && c["delta"].contains("reasoning_content"))
            s.reasoning += c["delta"]["reasoning_content"].get<std::string>();
        if (!chat) s.text += c["text"].get<std::string>();
        if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
    }
    return s;
}

// A raw loopback connection (for clients that misbehave).

}  // namespace spillway::server_test
