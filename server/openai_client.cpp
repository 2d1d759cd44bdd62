#include "server/openai_client.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace spillway::server {

using nlohmann::json;

struct OpenAiClient::Impl {
    std::unique_ptr<httplib::Client> http;
    std::string basePath;  // "/v1"
};

namespace {

// "the endpoint answered 401: <its error message>".
Error httpError(const std::string& url, int status, const std::string& body)
{
    std::string message;
    json j = json::parse(body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("error")) {
        const json& e = j["error"];
        message = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                  : e.is_string()                                                  ? e.get<std::string>()
                                                                                    : e.dump();
    } else {
        message = body.substr(0, 200);
    }
    const ErrorCode code = status == 400 || status == 404 || status == 422 ? ErrorCode::InvalidArgument : ErrorCode::Io;
    return Error{code, url + " answered " + std::to_string(status) + (message.empty() ? "" : ": " + message)};
}

Error connectionError(const std::string& url, httplib::Error e)
{
    return Error{ErrorCode::Io, "cannot reach " + url + ": " + httplib::to_string(e)};
}

}  // namespace

OpenAiClient::OpenAiClient(EndpointOptions options) : m_options(std::move(options)), m(std::make_unique<Impl>()) {}
OpenAiClient::~OpenAiClient() = default;

Result<std::unique_ptr<OpenAiClient>> OpenAiClient::open(EndpointOptions options)
{
    const std::string& url = options.url;
    const size_t scheme = url.find("://");
    if (scheme == std::string::npos || (url.substr(0, scheme) != "http" && url.substr(0, scheme) != "https"))
        return Error{ErrorCode::InvalidArgument, "'" + url + "' is not an http:// or https:// address"};
    const size_t pathAt = url.find('/', scheme + 3);
    const std::string hostPort = url.substr(0, pathAt);
    std::string path = pathAt == std::string::npos ? "" : url.substr(pathAt);
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (hostPort.size() <= scheme + 3) return Error{ErrorCode::InvalidArgument, "'" + url + "' names no host"};
    std::unique_ptr<OpenAiClient> client(new OpenAiClient(std::move(options)));
    client->m->http = std::make_unique<httplib::Client>(hostPort);
    if (!client->m->http->is_valid()) return Error{ErrorCode::InvalidArgument, "'" + url + "' is not a usable address"};
    client->m->basePath = path;
    client->m->http->set_connection_timeout(10, 0);
    client->m->http->set_read_timeout(client->m_options.timeoutSeconds, 0);
    client->m->http->set_write_timeout(30, 0);
    client->m->http->set_tcp_nodelay(true);
    if (!client->m_options.apiKey.empty()) client->m->http->set_bearer_token_auth(client->m_options.apiKey);
    return client;
}

Result<std::vector<std::string>> OpenAiClient::models()
{
    auto r = m->http->Get(m->basePath + "/models");
    if (!r) return connectionError(m_options.url, r.error());
    if (r->status != 200) return httpError(m_options.url, r->status, r->body);
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
        return Error{ErrorCode::Io, m_options.url + "/models did not answer with a model list"};
    std::vector<std::string> ids;
    for (const json& model : j["data"])
        if (model.is_object() && model.contains("id") && model["id"].is_string()) ids.push_back(model["id"]);
    return ids;
}

Result<std::string> OpenAiClient::model()
{
    if (!m_options.model.empty()) return m_options.model;
    if (!m_model.empty()) return m_model;
    auto ids = models();
    if (!ids) return ids.error();
    if (ids->empty()) return Error{ErrorCode::InvalidArgument, m_options.url + " lists no models"};
    m_model = ids->front();
    return m_model;
}

Result<RemoteReply> OpenAiClient::chat(std::span<const engine::Message> messages, const SamplerSettings& sampling,
                                       int maxTokens, const std::function<bool(std::string_view)>& onText,
                                       const std::atomic<bool>* stop)
{
    auto id = model();
    if (!id) return id.error();
    json body = {{"model", *id}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
                 {"temperature", sampling.temperature}, {"top_p", sampling.topP}, {"seed", sampling.seed}};
    if (maxTokens > 0) body["max_tokens"] = maxTokens;
    json list = json::array();
    for (const engine::Message& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(list);

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    RemoteReply reply;
    bool first = true;
    std::string buffer, raw;
    bool callerStopped = false;
    // Server-sent events: "data: {...}" separated by blank lines.
    auto handleEvent = [&](std::string_view event) -> bool {
        for (size_t at = 0; at < event.size();) {
            size_t end = event.find('\n', at);
            if (end == std::string::npos) end = event.size();
            std::string_view line = event.substr(at, end - at);
            at = end + 1;
            if (line.rfind("data:", 0) != 0) continue;
            line.remove_prefix(5);
            if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
            if (line == "[DONE]") continue;
            json j = json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object()) continue;
            if (j.contains("usage") && j["usage"].is_object()) {
                reply.promptTokens = j["usage"].value("prompt_tokens", 0);
                reply.completionTokens = j["usage"].value("completion_tokens", 0);
            }
            if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
            const json& c = j["choices"][0];
            if (c.contains("finish_reason") && c["finish_reason"].is_string()) reply.finishReason = c["finish_reason"];
            if (!c.contains("delta") || !c["delta"].is_object()) continue;
            const json& content = c["delta"].contains("content") ? c["delta"]["content"] : json();
            if (!content.is_string() || content.get_ref<const std::string&>().empty()) continue;
            const std::string& text = content.get_ref<const std::string&>();
            if (first) {
                first = false;
                reply.timeToFirstToken = std::chrono::duration<double>(Clock::now() - start).count();
            }
            reply.text += text;
            if (onText && !onText(text)) return false;
            if (stop && stop->load()) return false;
        }
        return true;
    };
    httplib::Request req;
    req.method = "POST";
    req.path = m->basePath + "/chat/completions";
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        if (stop && stop->load()) {
            callerStopped = true;
            return false;
        }
        if (raw.size() < 65536) raw.append(data, std::min<size_t>(n, 65536 - raw.size()));
        // Events end at a blank line; servers may end lines with CRLF: keep the LFs only.
        for (size_t i = 0; i < n; ++i)
            if (data[i] != '\r') buffer += data[i];
        for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
            const std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            if (!handleEvent(event)) {
                callerStopped = true;
                return false;
            }
        }
        return true;
    };
    if (stop && stop->load()) {  // stopped before it began
        reply.stopped = true;
        return reply;
    }
    // A stop before the first byte (a long prompt on the server) ends the request at once: a
    // watcher closes its socket (httplib's Client::stop is safe from another thread).
    std::mutex watchMutex;
    std::condition_variable watchWake;
    bool sent = false;
    std::thread watcher;
    if (stop)
        watcher = std::thread([&] {
            std::unique_lock l(watchMutex);
            while (!sent) {
                if (stop->load()) {
                    m->http->stop();
                    return;
                }
                watchWake.wait_for(l, std::chrono::milliseconds(20));
            }
        });
    auto r = m->http->send(req);
    if (watcher.joinable()) {
        {
            std::lock_guard l(watchMutex);
            sent = true;
        }
        watchWake.notify_all();
        watcher.join();
    }
    reply.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (callerStopped || (stop && stop->load())) {
        reply.stopped = true;
        reply.finishReason.clear();
        return reply;
    }
    if (!r) return connectionError(m_options.url, r.error());
    if (r->status != 200) return httpError(m_options.url, r->status, raw);
    if (!buffer.empty()) handleEvent(buffer);
    return reply;
}

}  // namespace spillway::server
