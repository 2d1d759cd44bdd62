#pragma once
// The OpenAI API's request and response bodies, without the network: parsing a chat or text
// completion request into what the engine takes (with OpenAI's error body for what is wrong),
// and writing the responses, the streamed chunks and the error bodies. Unknown fields are
// ignored; a known field of the wrong type or out of range is an error naming it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/engine/chat_format.h"
#include "core/engine/constraints.h"
#include "core/runtime/sampler.h"

namespace spillway::server {

// An error as OpenAI reports it: HTTP status and {"error": {"message", "type", "param", "code"}}.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // the offending field ("" = none)
    std::string code;   // "" = null
};
std::string errorBody(const ApiError& e);

struct CompletionRequest {
    bool chat = true;                      // /v1/chat/completions (messages) or /v1/completions (prompt)
    std::string model;                     // as sent ("" when absent)
    std::vector<engine::Message> messages; // chat
    std::string prompt;                    // completions
    int maxTokens = 0;                     // max_tokens / max_completion_tokens; 0: until the turn ends or the context is full
    SamplerSettings sampling;              // the engine's defaults where the request names none
    bool seeded = false;                   // seed given
    std::vector<std::string> stop;
    bool stream = false;
    bool includeUsage = false;             // stream_options.include_usage
    bool echo = false;                     // completions: the prompt before the text
    // Chat: tools (OpenAI's list, as JSON text, "" = none), thinking (chat_template_kwargs'
    // enable_thinking) and reasoning_effort, for the template.
    engine::PromptOptions promptOptions;
    // tool_choice: auto (the model decides), none (no tools offered), required (a call must
    // come), or a function named in `forcedTool`.
    enum class ToolChoice { Auto, None, Required, Function };
    ToolChoice toolChoice = ToolChoice::Auto;
    std::string forcedTool;
    bool parallelToolCalls = true;
    // response_format (json_object, or json_schema's schema) and llama-server's json_schema,
    // compiled: the answer is constrained to it (engine::jsonGrammar).
    engine::GrammarPtr grammar;
};

struct Limits {
    size_t maxStops = 16;
    size_t maxStopBytes = 256;
    size_t maxMessages = 4096;
};

// The body of a POST to /v1/chat/completions (chat = true) or /v1/completions.
std::variant<CompletionRequest, ApiError> parseCompletionRequest(std::string_view body, bool chat,
                                                                 const Limits& limits = {});

// OpenAI's finish_reason: "stop" (the turn ended, or a stop sequence) or "length".
struct Usage {
    int promptTokens = 0;
    int completionTokens = 0;
};

// The non-streamed response. A chat's reasoning, where the model gave some, is the message's
// reasoning_content beside its content (as llama-server, vLLM and DeepSeek's API give it); its
// tool calls are the message's tool_calls (content null when there is no text).
std::string completionResponse(const CompletionRequest& r, const std::string& id, int64_t created,
                               const std::string& model, const std::string& text, const char* finishReason,
                               const Usage& usage, const std::string& reasoning = {},
                               const std::vector<engine::ToolCall>& toolCalls = {});
// A streamed piece of a tool call: the first of call `index` carries its id, type and name (with
// arguments ""), the next pieces of its arguments.
struct ToolCallDelta {
    int index = 0;
    std::string id, name;  // set on the call's first piece
    std::string arguments;
};
// One streamed chunk's JSON (without "data: "): the first carries the role (chat), the last the
// finish_reason; `text` may be empty; a chat's `reasoning` piece goes in delta.reasoning_content.
// With include_usage, every chunk carries "usage": null.
std::string completionChunk(const CompletionRequest& r, const std::string& id, int64_t created,
                            const std::string& model, std::string_view text, bool first, const char* finishReason,
                            std::string_view reasoning = {}, const ToolCallDelta* toolCall = nullptr);
// The usage chunk at the end of a stream with include_usage: empty choices.
std::string usageChunk(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                       const Usage& usage);
// GET /v1/models.
std::string modelsResponse(const std::vector<std::string>& models, int64_t created);

// Holds back what may be the start of a stop sequence or an unfinished UTF-8 character, so that
// streamed text never shows a stop sequence or half a character: feed() returns the text that is
// safe to send now; stopped() once a stop sequence appeared (its text and what follows dropped).
class TextGate {
public:
    explicit TextGate(std::vector<std::string> stops) : m_stops(std::move(stops)) {}
    std::string feed(std::string_view text);
    // What is still held at the end (a finished reply: the partial character is sent as it is,
    // replaced where invalid).
    std::string flush();
    bool stopped() const { return m_stopped; }

private:
    std::vector<std::string> m_stops;
    std::string m_pending;
    bool m_stopped = false;
};

// `text` with invalid UTF-8 sequences replaced by U+FFFD.
std::string validUtf8(std::string_view text);

}  // namespace spillway::server
