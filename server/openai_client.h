#pragma once
// A client of an OpenAI-compatible server (Spillway's own, llama.cpp's, Ollama, vLLM, a hosted
// API): the models it lists and a streamed chat reply, so that a remote endpoint is a model to
// chat with like a local file (spillway-cli chat --endpoint). HTTP and HTTPS (cpp-httplib with
// OpenSSL). The API key is sent as a Bearer token and never written anywhere.

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/engine/chat_format.h"
#include "core/runtime/sampler.h"

namespace spillway::server {

struct EndpointOptions {
    std::string url;       // the API's base, e.g. http://127.0.0.1:8080/v1
    std::string apiKey;    // "" = none
    std::string model;     // "" = the first the endpoint lists
    int timeoutSeconds = 600;
};

struct RemoteReply {
    std::string text;
    std::string finishReason;  // "stop", "length", or "" when stopped by the caller
    int promptTokens = 0, completionTokens = 0;  // as the endpoint reports them (0 when it does not)
    double timeToFirstToken = 0;  // seconds from the request to the first text, over the network
    double seconds = 0;           // the whole reply
    bool stopped = false;         // the caller stopped it
    double tokensPerSecond() const
    {
        return completionTokens > 1 && seconds > timeToFirstToken ? (completionTokens - 1) / (seconds - timeToFirstToken) : 0;
    }
};

class OpenAiClient {
public:
    // InvalidArgument for a URL that is not http(s)://host[:port][/path].
    static Result<std::unique_ptr<OpenAiClient>> open(EndpointOptions options);
    ~OpenAiClient();

    // GET {url}/models: the ids. Io when the endpoint cannot be reached or answers an error.
    Result<std::vector<std::string>> models();
    // The model the replies use: options.model, else the first listed (asked once).
    Result<std::string> model();
    // POST {url}/chat/completions, streamed: onText gets each piece of text; returning false, or
    // *stop becoming true, ends the reply (stopped); a stop closes the connection within ~20 ms,
    // also while the server is still reading the prompt.
    Result<RemoteReply> chat(std::span<const engine::Message> messages, const SamplerSettings& sampling, int maxTokens,
                             const std::function<bool(std::string_view)>& onText, const std::atomic<bool>* stop = nullptr);
    const EndpointOptions& options() const { return m_options; }

private:
    struct Impl;
    explicit OpenAiClient(EndpointOptions options);
    EndpointOptions m_options;
    std::string m_model;
    std::unique_ptr<Impl> m;
};

}  // namespace spillway::server
