#pragma once
// An OpenAI-compatible HTTP server over one engine (spillway-cli serve): GET /v1/models,
// POST /v1/chat/completions and /v1/completions (streamed as server-sent events or not),
// GET /health and GET /metrics (Prometheus text).
//
// Requests take one of `parallel` slots, each a Conversation on the engine (its own KV cache,
// the weights shared); a request goes to the free slot whose last conversation it continues
// longest, so a client that resends its conversation reuses the cache. Slots compute in turns,
// token by token (engine::Turns: the engine runs on one thread at a time), so concurrent replies
// advance together. Requests beyond the slots wait in a bounded queue; when it is full the answer is 503
// with Retry-After. A client that goes away stops its reply at the next token (streamed or not).
//
// Safe by default: a loopback address unless an API key is set (Bearer), bounded bodies, header
// and idle timeouts (a slow client cannot hold a worker), no CORS unless an origin is named.
//
// With a library (ServerOptions::library) the listings (/v1/models, /api/tags) name its models
// too, and a request that names one of them loads it just in time: the server waits for the
// replies in progress, unloads the model before (one model at a time, so the next has the
// memory) and answers with the new one from then on, as LM Studio's JIT loading and Ollama do.
// A request naming a model that is neither loaded nor in the library is a 404 (model_not_found).
// A model that fails to load is an error for that request; the model before is loaded again.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway::engine { class Engine; class Turns; }
namespace spillway::trace { class Recorder; }

namespace spillway::server {

// A model of the library a server may load on request.
struct LibraryModel {
    std::string name;          // as the API names it (the file's name)
    std::string path;          // its file, folder or package
    std::string architecture;  // as far as the catalog knows
    uint64_t bytes = 0;
    uint64_t parameters = 0;
    int64_t modified = 0;      // unix seconds
};

// A loaded model: its engine, and the timeline its sessions write to (null: none, no lane metrics).
struct LoadedModel {
    std::unique_ptr<trace::Recorder> trace;  // before the engine: it outlives the engine's sessions
    std::unique_ptr<engine::Engine> engine;
    LoadedModel();
    LoadedModel(LoadedModel&&) noexcept;
    LoadedModel& operator=(LoadedModel&&) noexcept;
    ~LoadedModel();
};

struct ModelLibrary {
    std::function<std::vector<LibraryModel>()> list;              // called for each listing and request
    std::function<Result<LoadedModel>(const LibraryModel&)> open;  // loads one (minutes, for a big model)
};

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                  // 0: any free port (Server::bind returns it)
    std::string apiKey;               // required as "Authorization: Bearer KEY" when set
    int parallel = 1;                 // conversation slots
    int maxQueue = 16;                // requests that may wait for a slot
    size_t maxBodyBytes = 4u << 20;   // a larger body is refused (413)
    int headerTimeoutSeconds = 10;    // to receive a request's headers and body
    int idleTimeoutSeconds = 5;       // a kept-alive connection with no request
    int writeTimeoutSeconds = 30;     // a client that reads nothing for this long is dropped
    std::string cors;                 // an origin allowed to call from a browser ("" = none)
    std::string modelId;              // the name /v1/models lists
    // The engine's timeline (EngineOptions::trace), or null: /metrics then counts each lane's busy
    // seconds and bytes (SSD read, host→device, compute, stalls), so a dashboard shows the
    // bottleneck too. The server drains it (it must have no other drainer).
    trace::Recorder* trace = nullptr;
    // Turns at the engine shared with another front end on it (the desktop app's chat), or null:
    // the server's own. Must outlive the server.
    engine::Turns* turns = nullptr;
    // The most tokens a chat reply may think for (engine::ReplyOptions::reasoningBudget; 0: it
    // answers at once), as llama-server's --reasoning-budget; -1: no limit.
    int reasoningBudget = -1;
    // Models to load when a request names them (see above); unset: the one engine answers every
    // request, whatever model it names (as llama-server).
    std::optional<ModelLibrary> library;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool isLoopback(const std::string& host);
// InvalidArgument for a non-loopback address without an API key or options out of range (what
// Server::bind checks first; spillway-cli serve asks before it loads the model).
Status checkOptions(const ServerOptions& options);

class Server {
public:
    // The engine must outlive the server.
    Server(engine::Engine& engine, ServerOptions options);
    // The server owns the model (and may unload it for another of its library); its timeline, if
    // any, is the server's (options.trace is not used).
    Server(LoadedModel model, ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the address: the port bound. InvalidArgument for a non-loopback address without an
    // API key or bad options; Io when the address cannot be bound.
    Result<int> bind();
    // Serves until stop() (from another thread or a signal handler's thread).
    void run();
    // bind(), then serves on a thread of the server's own: returns once it listens (a stop() that
    // came before would not be seen). stop() and the destructor end it and join the thread.
    Result<int> start();
    // Stops listening and ends every reply in progress at its next token (and joins start()'s
    // thread: call it from another thread than the server's).
    void stop();
    // The /metrics text.
    std::string metrics() const;

private:
    void setUp();
    struct Impl;
    std::unique_ptr<Impl> m;
};

}  // namespace spillway::server
