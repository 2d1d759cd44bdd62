#pragma once
// Ollama's API beside OpenAI's, on the same port (tools that speak only Ollama find Spillway's
// model): POST /api/chat and /api/generate (NDJSON streams, streamed unless "stream": false;
// `format` "json" or a JSON Schema, `tools`, `think`, `options`), GET /api/tags, /api/ps,
// /api/version, POST /api/show. A request is read into the same CompletionRequest an OpenAI
// one is (its fields translated, then parsed by parseCompletionRequest, so both check alike);
// errors are Ollama's {"error": "..."}.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/dialect.h"

namespace spillway::server {

// What the listings say of a model (the one answering, or one of the library).
struct ModelCard {
    std::string name;           // as the API names it (ServerOptions::modelId)
    std::string architecture;   // general.architecture
    std::string quantization;   // the type most of its bytes are in ("Q4_K")
    uint64_t bytes = 0;         // its weights
    uint64_t parameters = 0;
    int contextLength = 0;      // trained
    std::string chatTemplate;   // "" for a base model
    std::vector<std::string> capabilities;  // "completion", "tools", "thinking"
    int64_t modified = 0;       // unix seconds
};

// /api/chat (chat) or /api/generate; `chatting`: the model has a chat template (generate
// renders the prompt through it unless "raw").
std::unique_ptr<Dialect> ollamaDialect(bool chat, bool chatting, std::string model);

std::string ollamaTags(const std::vector<ModelCard>& models);
std::string ollamaPs(const std::vector<ModelCard>& models);
std::string ollamaShow(const ModelCard& m);
std::string ollamaVersion();
std::string ollamaError(const std::string& message);
// The model a /api/show body names ("" when it names none, or the body is not an object).
std::string ollamaShowModel(const std::string& body);

}  // namespace spillway::server
