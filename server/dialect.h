#pragma once
// How one API writes a completion: OpenAI's (server-sent events, openai_protocol.h) or
// Ollama's (NDJSON, ollama_protocol.h). The server parses a request with it, runs it the same
// way whatever its dialect, and writes what came out with it; a dialect is made per request and
// may keep what it has streamed so far.

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/openai_protocol.h"

namespace spillway::server {

// A reply once it is done.
struct Finished {
    std::string text;       // the answer (a completion's text)
    std::string reasoning;  // a chat's reasoning
    std::vector<engine::ToolCall> toolCalls;
    const char* finish = "stop";  // "stop", "length", "tool_calls"
    Usage usage;
    double promptSeconds = 0, decodeSeconds = 0, totalSeconds = 0;
};

class Dialect {
public:
    virtual ~Dialect() = default;
    // The request, or the error to answer with.
    virtual std::variant<CompletionRequest, ApiError> parse(std::string_view body) = 0;
    // An error's body (the status is the ApiError's).
    virtual std::string errorBody(const ApiError& e) const = 0;
    // A stream's content type, and the framed events before, during and after the reply ("" for
    // a piece that sends nothing now).
    virtual const char* streamType() const = 0;
    virtual std::vector<std::string> opening(const CompletionRequest& r) = 0;
    virtual std::string piece(const CompletionRequest& r, engine::ReplyPart part, const std::string& text,
                              const ToolCallDelta* call) = 0;
    virtual std::vector<std::string> closing(const CompletionRequest& r, const Finished& f) = 0;
    virtual std::string streamError(const ApiError& e) const = 0;
    // The stream's last bytes, after the closing events or an error ("data: [DONE]").
    virtual std::string end() const = 0;
    // The whole response of a request that does not stream.
    virtual std::string whole(const CompletionRequest& r, const Finished& f) const = 0;
};

// OpenAI's chat completions (chat) or completions, with the response's id, created and model.
std::unique_ptr<Dialect> openAiDialect(bool chat, std::string id, int64_t created, std::string model);

}  // namespace spillway::server
