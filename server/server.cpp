#include "server/server.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include <httplib.h>
#include <netdb.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/socket.h>

#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/engine/turns.h"
#include "core/model/llama_model.h"
#include "core/trace/trace.h"
#include "server/dialect.h"
#include "server/ollama_protocol.h"
#include "server/openai_protocol.h"

namespace spillway::server {

bool isLoopback(const std::string& host)
{
    return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

Status checkOptions(const ServerOptions& o)
{
    if (!isLoopback(o.host) && o.apiKey.empty())
        return Error{ErrorCode::InvalidArgument,
                     "listening on " + o.host + " would let other machines use this model: give an API key "
                     "(--api-key or --api-key-file) or listen on 127.0.0.1"};
    if (o.parallel < 1 || o.maxQueue < 0 || o.port < 0 || o.port > 65535)
        return Error{ErrorCode::InvalidArgument, "the server's options are out of range (parallel >= 1, queue >= 0, port 0-65535)"};
    return {};
}

namespace {

using Clock = std::chrono::steady_clock;

struct Slot {
    std::unique_ptr<engine::Conversation> conversation;
    bool busy = false;
    std::vector<engine::Message> history;  // the last chat request's messages and its reply
    std::string completionText;            // the last completion's prompt and text
    uint64_t lastUse = 0;
};

// Leading messages `a` and `b` share.
size_t sharedMessages(const std::vector<engine::Message>& a, const std::vector<engine::Message>& b)
{
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n].role == b[n].role && a[n].content == b[n].content) ++n;
    return n;
}

size_t sharedPrefix(const std::string& a, const std::string& b)
{
    return size_t(std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin());
}

bool sameSecret(const std::string& a, const std::string& b)
{
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    return diff == 0;
}

const char* finishReason(const engine::ReplyStats& s, bool stopSequence)
{
    if (stopSequence) return "stop";
    return s.end == engine::ReplyStats::End::Limit || s.end == engine::ReplyStats::End::Context ? "length" : "stop";
}

int64_t unixNow() { return int64_t(std::time(nullptr)); }

// "127.0.0.1" / "::1" and the port of a socket address, as httplib writes a request's addresses.
std::pair<std::string, int> addressOf(const sockaddr_storage& a, socklen_t length)
{
    char host[NI_MAXHOST] = {}, port[NI_MAXSERV] = {};
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), length, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return {};
    return {host, std::atoi(port)};
}

// The socket of a request's connection, or -1. httplib 0.11 does not hand it to a handler, and a
// non-streamed reply writes nothing until its end, so the server finds it by the connection's
// addresses (the socket stays open while its handler runs: its number cannot be reused meanwhile).
int connectionSocket(const httplib::Request& req)
{
    struct rlimit limit {};
    const int last = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? int(std::min<rlim_t>(limit.rlim_cur, 65536)) : 1024;
    for (int fd = 3; fd < last; ++fd) {
        sockaddr_storage peer{}, local{};
        socklen_t peerLength = sizeof peer, localLength = sizeof local;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLength) != 0) continue;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localLength) != 0) continue;
        if (addressOf(peer, peerLength) == std::pair(req.remote_addr, req.remote_port) &&
            addressOf(local, localLength).second == req.local_port)
            return fd;
    }
    return -1;
}

// Whether the peer of connection `fd` has gone: its end of the stream is pending (a request it
// sent after this one is data, not an end) or the connection was reset.
bool peerGone(int fd)
{
    char byte;
    const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Whether a request's model name is the model's (Ollama's clients add ":latest").
bool sameModel(const std::string& wanted, const std::string& name)
{
    return wanted == name || wanted + ":latest" == name || wanted == name + ":latest";
}

// The "model" a request's body names ("" when none, or not JSON: its parse says so later).
std::string requestedModel(const std::string& body)
{
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object()) return {};
    auto it = j.find("model");
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

LoadedModel::LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&& other) noexcept
{
    engine.reset();  // the engine before its timeline
    engine = std::move(other.engine);
    trace = std::move(other.trace);
    return *this;
}
LoadedModel::~LoadedModel() { engine.reset(); }

struct Server::Impl {
    // The model the server owns (handed in, or loaded from the library), declared before the
    // slots: their conversations go first.
    LoadedModel owned;
    engine::Engine* engine;    // the model answering; null while another loads or after a failed load
    trace::Recorder* trace;    // its timeline (null: none)
    LibraryModel current;      // its name (and, where known, its file)
    ServerOptions options;
    httplib::Server http;
    engine::Turns ownTurns;
    engine::Turns& turns;  // options.turns, else ownTurns
    std::atomic<bool> stopping{false};
    std::thread runner;  // start()'s
    int64_t created = unixNow();

    mutable std::mutex slotsMutex;
    std::condition_variable slotFreed;
    std::vector<Slot> slots;
    int pins = 0;            // requests that hold the model answering (it is not unloaded under them)
    bool switching = false;  // a request is loading another model of the library
    int waiting = 0;
    uint64_t useCounter = 0;
    std::atomic<uint64_t> idCounter{0};

    // Metrics.
    mutable std::mutex metricsMutex;
    std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, status) -> count
    uint64_t promptTokens = 0, completionTokens = 0, cancelled = 0;
    double ttftSum = 0, decodeSecondsSum = 0;
    uint64_t ttftCount = 0, decodeTokens = 0;
    double lastTokensPerSecond = 0;
    std::array<double, trace::kLaneCount> laneSeconds{}, laneBytes{};
    std::vector<trace::Span> drained;  // scratch of drainTrace

    Impl(engine::Engine* e, LoadedModel model, ServerOptions o)
        : owned(std::move(model)),
          engine(e ? e : owned.engine.get()),
          trace(e ? o.trace : owned.trace.get()),
          options(std::move(o)),
          turns(options.turns ? *options.turns : ownTurns)
    {
        current.name = options.modelId;
        if (engine) current.path = engine->model().path();
        if (e) options.library.reset();  // a model the caller owns cannot be unloaded for another
    }

    // The model answering from now on (under slotsMutex): its slots' conversations opened on it.
    void install(LoadedModel model, const LibraryModel& entry)
    {
        owned = std::move(model);
        engine = owned.engine.get();
        {
            std::lock_guard m(metricsMutex);
            trace = owned.trace.get();
        }
        current = entry;
        for (Slot& s : slots) s.conversation = engine->conversation();
    }

    // Unloads the model answering (under slotsMutex, no request holding it).
    void unload()
    {
        for (Slot& s : slots) {
            s.conversation.reset();
            s.history.clear();
            s.completionText.clear();
        }
        {
            std::lock_guard m(metricsMutex);
            drainTrace();
            trace = nullptr;
        }
        engine = nullptr;
        owned = LoadedModel{};
    }

    std::optional<LibraryModel> inLibrary(const std::string& wanted) const
    {
        if (!options.library || !options.library->list) return std::nullopt;
        for (const LibraryModel& m : options.library->list())
            if (sameModel(wanted, m.name)) return m;
        return std::nullopt;
    }

    // Holds the model a request names for as long as the request runs (loading it first where it
    // is another of the library's); the error to answer with when it is not known or does not load.
    struct Pin {
        Impl* impl;
        ~Pin() { impl->unpin(); }
    };
    std::variant<std::shared_ptr<Pin>, ApiError> pinModel(const std::string& wanted)
    {
        std::unique_lock l(slotsMutex);
        for (;;) {
            slotFreed.wait(l, [&] { return !switching || stopping.load(); });
            if (stopping.load()) return ApiError{503, "the server is stopping", "server_error", {}, "overloaded"};
            if (!options.library || wanted.empty() || (engine && sameModel(wanted, current.name))) break;
            const std::optional<LibraryModel> entry = inLibrary(wanted);
            if (!entry) {
                if (!engine && sameModel(wanted, current.name)) break;  // said below
                return ApiError{404, "the model '" + wanted + "' is neither loaded nor in the library (GET /v1/models lists them)",
                                "invalid_request_error", "model", "model_not_found"};
            }
            // Another model of the library: once no request holds this one, it goes (its memory
            // is the next one's), the next comes in, and waiting requests go on with it.
            switching = true;
            slotFreed.wait(l, [&] { return pins == 0 || stopping.load(); });
            const LibraryModel before = current;
            unload();
            if (stopping.load()) {
                switching = false;
                slotFreed.notify_all();
                return ApiError{503, "the server is stopping", "server_error", {}, "overloaded"};
            }
            l.unlock();
            std::fprintf(stderr, "spillway: loading %s for a request (%s unloaded)\n", entry->name.c_str(), before.name.c_str());
            Result<LoadedModel> next = options.library->open(*entry);
            std::optional<Error> failed;
            if (!next) {
                failed = next.error();
                next = options.library->open(before);  // the model before answers again
            }
            l.lock();
            if (next) install(std::move(*next), failed ? before : *entry);
            else current = before;
            switching = false;
            slotFreed.notify_all();
            if (failed)
                return ApiError{500, "the model '" + entry->name + "' did not load: " + failed->message +
                                         (engine ? " (" + current.name + " answers again)" : ""),
                                "server_error", "model", {}};
        }
        if (!engine)
            return ApiError{503, "no model is loaded: " + current.name + " could not be loaded again", "server_error", {}, {}};
        ++pins;
        return std::shared_ptr<Pin>(new Pin{this});
    }
    void unpin()
    {
        {
            std::lock_guard l(slotsMutex);
            --pins;
        }
        slotFreed.notify_all();
    }

    void count(const std::string& endpoint, int status)
    {
        std::lock_guard l(metricsMutex);
        ++requests[{endpoint, status}];
    }

    std::string newId(const char* prefix)
    {
        static thread_local std::mt19937_64 rng{std::random_device{}()};
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s-%016llx%04llx", prefix, (unsigned long long)rng(),
                      (unsigned long long)(idCounter.fetch_add(1) & 0xffff));
        return buf;
    }

    void sendError(httplib::Response& res, const ApiError& e)
    {
        res.status = e.status;
        res.set_content(errorBody(e), "application/json");
    }

    // False, with the 401 answered (and counted for `endpoint` unless null), when an API key is
    // set and the request does not carry it.
    bool authorized(const httplib::Request& req, httplib::Response& res, const char* endpoint)
    {
        if (options.apiKey.empty()) return true;
        const std::string header = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        if (header.rfind(prefix, 0) == 0 && sameSecret(header.substr(prefix.size()), options.apiKey)) return true;
        sendError(res, {401, "a valid API key is required (Authorization: Bearer KEY)", "invalid_request_error", {}, "invalid_api_key"});
        if (endpoint) count(endpoint, 401);
        return false;
    }

    std::string tooLarge() const
    {
        return "the request body is larger than the server accepts (" + std::to_string(options.maxBodyBytes) + " bytes)";
    }

    // A free slot for the request (the one whose last conversation it continues longest), after
    // waiting in the queue; -1 when the queue is full or the server stops.
    int acquire(const CompletionRequest& r)
    {
        std::unique_lock l(slotsMutex);
        auto freeSlot = [&]() -> int {
            int best = -1;
            size_t bestShared = 0;
            for (size_t i = 0; i < slots.size(); ++i) {
                if (slots[i].busy) continue;
                const size_t shared =
                    r.chat ? sharedMessages(slots[i].history, r.messages) : sharedPrefix(slots[i].completionText, r.prompt);
                if (best < 0 || shared > bestShared ||
                    (shared == bestShared && slots[i].lastUse < slots[size_t(best)].lastUse)) {
                    best = int(i);
                    bestShared = shared;
                }
            }
            return best;
        };
        int slot = freeSlot();
        if (slot < 0) {
            if (waiting >= options.maxQueue) return -1;
            ++waiting;
            slotFreed.wait(l, [&] { return stopping.load() || (slot = freeSlot()) >= 0; });
            --waiting;
            if (stopping.load()) return -1;
        }
        slots[size_t(slot)].busy = true;
        slots[size_t(slot)].lastUse = ++useCounter;
        return slot;
    }

    // `reply`: the assistant's message (a chat's), or the text (a completion's) in its content.
    void release(int slot, const CompletionRequest& r, const engine::Message& reply, bool complete)
    {
        const std::string& text = reply.content;
        {
            std::lock_guard l(slotsMutex);
            Slot& s = slots[size_t(slot)];
            s.busy = false;
            if (r.chat) {
                s.history = r.messages;
                if (complete) s.history.push_back(reply);
            } else {
                s.completionText = r.prompt + text;
            }
        }
        slotFreed.notify_one();
    }

    // Runs the request on `slot`: `emit` gets the text safe to send (stop sequences held back),
    // the answer's and the reasoning's apart, and each tool call's pieces (ToolName with its
    // first, ToolCall with its arguments), and returns false when the client is gone. The finish
    // reason, or null when stopped.
    using Emit = std::function<bool(engine::ReplyPart part, const std::string& text, const ToolCallDelta* call)>;
    struct Outcome {
        std::string text;       // the answer
        std::string reasoning;  // a chat's reasoning (the model's thinking), apart
        std::vector<engine::ToolCall> toolCalls;
        const char* finish = nullptr;
        Usage usage;
        double promptSeconds = 0, decodeSeconds = 0;
        Status error;
        engine::Message message() const { return {"assistant", text, reasoning, toolCalls, {}}; }
    };
    Outcome generate(int slot, const CompletionRequest& r, const Emit& emit, Clock::time_point start)
    {
        Outcome out;
        TextGate gate(r.stop), thoughts({});  // stop sequences end the answer, not the thinking
        bool clientGone = false, first = true;
        engine::ReplyOptions reply;
        reply.maxNewTokens = r.maxTokens;
        reply.sampling = r.sampling;
        if (!r.seeded) reply.sampling.seed = std::random_device{}();
        reply.stop = &stopping;
        reply.prompt = r.promptOptions;
        reply.grammar = r.grammar;
        if (r.chat) reply.reasoningBudget = options.reasoningBudget;
        auto send = [&](engine::ReplyPart part, std::string_view piece) {
            if (part == engine::ReplyPart::ToolName || part == engine::ReplyPart::ToolCall) {
                ToolCallDelta delta;
                if (part == engine::ReplyPart::ToolName) {
                    out.toolCalls.push_back({newId("call"), std::string(piece), {}});
                    delta.id = out.toolCalls.back().id;
                    delta.name = out.toolCalls.back().name;
                } else if (!out.toolCalls.empty()) {
                    out.toolCalls.back().arguments += piece;
                    delta.arguments = std::string(piece);
                }
                delta.index = int(out.toolCalls.size()) - 1;
                if (!out.toolCalls.empty() && !emit(part, {}, &delta)) clientGone = true;
                return !clientGone;
            }
            const bool thinking = part == engine::ReplyPart::Reasoning;
            const std::string ready = (thinking ? thoughts : gate).feed(piece);
            (thinking ? out.reasoning : out.text) += ready;
            if (!ready.empty() && !emit(thinking ? part : engine::ReplyPart::Content, ready, nullptr)) clientGone = true;
            return !clientGone && !gate.stopped();
        };
        reply.onToken = [&](std::string_view piece, int32_t) {
            if (first) {
                first = false;
                std::lock_guard l(metricsMutex);
                ttftSum += std::chrono::duration<double>(Clock::now() - start).count();
                ++ttftCount;
            }
            if (!r.chat && !send(engine::ReplyPart::Content, piece)) return false;
            turns.yield();
            return !stopping.load();
        };
        // A chat's reply by parts: the reasoning apart from the answer (reasoning_content).
        if (r.chat) reply.onPart = send;
        engine::Conversation& conversation = *slots[size_t(slot)].conversation;
        Result<engine::ReplyStats> stats = Error{ErrorCode::Internal, "not run"};
        {
            engine::Turns::Held turn(turns);  // handed on even when the engine throws (out of memory, say)
            stats = r.chat ? conversation.reply(r.messages, reply) : conversation.complete(r.prompt, true, reply);
        }
        if (!stats) {
            out.error = stats.error();
            return out;
        }
        if (!gate.stopped() && !clientGone) {
            const std::string thought = thoughts.flush();
            out.reasoning += thought;
            if (!thought.empty() && !emit(engine::ReplyPart::Reasoning, thought, nullptr)) clientGone = true;
            const std::string rest = gate.flush();
            out.text += rest;
            if (!clientGone && !rest.empty() && !emit(engine::ReplyPart::Content, rest, nullptr)) clientGone = true;
        }
        out.usage = {stats->promptTokens, stats->generatedTokens};
        out.promptSeconds = stats->promptSeconds;
        out.decodeSeconds = stats->decodeSeconds;
        {
            std::lock_guard l(metricsMutex);
            promptTokens += uint64_t(std::max(0, stats->promptTokens - stats->cachedTokens));
            completionTokens += uint64_t(stats->generatedTokens);
            if (stats->generatedTokens > 1 && stats->decodeSeconds > 0) {
                decodeTokens += uint64_t(stats->generatedTokens - 1);
                decodeSecondsSum += stats->decodeSeconds;
                lastTokensPerSecond = stats->decodeTokensPerSecond();
            }
            if (clientGone || (stats->stopped && !gate.stopped())) ++cancelled;
            drainTrace();
        }
        if (!clientGone && !(stats->stopped && !gate.stopped())) out.finish = finishReason(*stats, gate.stopped());
        // A turn that ended with calls waits for their results.
        if (out.finish && !out.toolCalls.empty() && stats->end == engine::ReplyStats::End::Turn) out.finish = "tool_calls";
        return out;
    }

    void sendError(httplib::Response& res, const Dialect& d, const ApiError& e)
    {
        res.status = e.status;
        res.set_content(d.errorBody(e), "application/json");
    }

    // A completion in `dialect` (OpenAI's chat or completions, Ollama's chat or generate):
    // parsed, run on a slot, written whole or streamed.
    // `makeDialect` gets the name and chat template of the model that answers.
    using MakeDialect = std::function<std::shared_ptr<Dialect>(const std::string& model, bool chatting)>;
    void handle(const httplib::Request& req, httplib::Response& res, const MakeDialect& makeDialect,
                const std::string& endpoint)
    {
        const auto start = Clock::now();
        if (!authorized(req, res, endpoint.c_str())) return;
        // Only a server with a library reads the model's name first (a second parse of the body).
        auto pinned = pinModel(options.library ? requestedModel(req.body) : std::string());
        if (auto* e = std::get_if<ApiError>(&pinned)) {
            sendError(res, *makeDialect({}, false), *e);
            count(endpoint, e->status);
            return;
        }
        const std::shared_ptr<Pin> pin = std::get<std::shared_ptr<Pin>>(pinned);
        const std::shared_ptr<Dialect> dialect = makeDialect(current.name, engine->chat().chatting());
        auto parsed = dialect->parse(req.body);
        if (auto* e = std::get_if<ApiError>(&parsed)) {
            sendError(res, *dialect, *e);
            count(endpoint, e->status);
            return;
        }
        auto request = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
        if (request->chat && !engine->chat().chatting() && request->messages.back().role != "user") {
            sendError(res, *dialect, {400, "this model has no chat template: the last message must be the user's text to continue", "invalid_request_error", "messages", {}});
            count(endpoint, 400);
            return;
        }
        // A call required (tool_choice required or a named function): the answer is constrained
        // to one in the template's syntax. gpt-oss's calls are not constrained yet: asked, not forced.
        using Choice = CompletionRequest::ToolChoice;
        if ((request->toolChoice == Choice::Required || request->toolChoice == Choice::Function) &&
            engine->chat().chatting()) {
            const engine::ToolSet tools = engine->chat().tools(request->promptOptions.tools);
            if (tools.syntax != engine::ToolSyntax::Harmony) {
                auto g = engine::toolCallGrammar(tools, request->promptOptions.tools, request->forcedTool,
                                                 request->parallelToolCalls);
                if (!g) {
                    sendError(res, *dialect, {400, g.error().message, "invalid_request_error", "tools", {}});
                    count(endpoint, 400);
                    return;
                }
                request->grammar = *g;
            }
        }
        const int slot = acquire(*request);
        if (slot < 0) {
            res.set_header("Retry-After", "2");
            sendError(res, *dialect, {503, stopping ? "the server is stopping" : "the server is busy: every slot and the queue are taken; try again shortly",
                                      "server_error", {}, "overloaded"});
            count(endpoint, 503);
            return;
        }
        auto finished = [start](const Outcome& o) {
            Finished f{o.text, o.reasoning, o.toolCalls, o.finish ? o.finish : "stop", o.usage, o.promptSeconds, o.decodeSeconds,
                       std::chrono::duration<double>(Clock::now() - start).count()};
            return f;
        };
        if (!request->stream) {
            // A client that hangs up stops its reply at the next token, as a stream's does.
            const int fd = connectionSocket(req);
            Outcome o;
            try {
                o = generate(slot, *request, [fd](engine::ReplyPart, const std::string&, const ToolCallDelta*) {
                    return fd < 0 || !peerGone(fd);
                }, start);
            } catch (...) {
                release(slot, *request, {}, false);  // the slot is free again; the 500 is the handler's
                throw;
            }
            release(slot, *request, o.message(), o.error.ok() && o.finish);
            if (o.error.ok() && !o.finish) {
                count(endpoint, 499);  // the client went away (or the server is stopping)
                res.status = 499;
                return;
            }
            if (!o.error.ok()) {
                const bool bad = o.error.error().code == ErrorCode::InvalidArgument;
                sendError(res, *dialect, {bad ? 400 : 500, o.error.error().message, bad ? "invalid_request_error" : "server_error", {}, {}});
                count(endpoint, bad ? 400 : 500);
                return;
            }
            res.set_content(dialect->whole(*request, finished(o)), "application/json");
            count(endpoint, 200);
            return;
        }
        // Streamed: the reply runs inside the provider, writing events as tokens come. The slot
        // is released when the provider is done with it, or when the response goes unsent.
        struct Held {
            Impl* impl;
            int slot;
            std::shared_ptr<CompletionRequest> request;
            std::shared_ptr<Pin> pin;  // the model, until the slot is released (members go after ~Held's body)
            bool released = false;
            void release(const engine::Message& reply, bool complete)
            {
                if (released) return;
                released = true;
                impl->release(slot, *request, reply, complete);
            }
            ~Held() { release({}, false); }
        };
        std::shared_ptr<Held> held(new Held{this, slot, request, pin});  // no temporary: its destructor would release
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            dialect->streamType(),
            [this, held, dialect, start, endpoint, finished](size_t, httplib::DataSink& sink) {
                const CompletionRequest& r = *held->request;
                auto write = [&](const std::string& data) { return data.empty() || sink.write(data.data(), data.size()); };
                bool alive = true;
                for (const std::string& e : dialect->opening(r)) alive = alive && write(e);
                Outcome o;
                if (alive)
                    o = generate(held->slot, r,
                                 [&](engine::ReplyPart part, const std::string& text, const ToolCallDelta* call) {
                                     return write(dialect->piece(r, part, text, call));
                                 },
                                 start);
                held->release(o.message(), alive && o.error.ok() && o.finish);
                if (!alive || (o.error.ok() && !o.finish)) {
                    count(endpoint, 499);  // the client went away (or the server is stopping)
                    return false;
                }
                if (!o.error.ok()) {
                    write(dialect->streamError({500, o.error.error().message, "server_error", {}, {}}));
                } else {
                    for (const std::string& e : dialect->closing(r, finished(o))) write(e);
                }
                count(endpoint, o.error.ok() ? 200 : 500);  // before the end: a client that then reads /metrics sees it
                write(dialect->end());
                sink.done();
                return true;
            });
    }

    // What the listings say of the model answering (its template as it is now: the app may set
    // one), then of the library's others (what the catalog knows: no template until loaded);
    // `loadedOnly`: the first alone (none while another loads).
    std::vector<ModelCard> cards(bool loadedOnly)
    {
        std::vector<ModelCard> out;
        {
            std::lock_guard l(slotsMutex);
            if (engine) out.push_back(loadedCard());
        }
        if (loadedOnly || !options.library || !options.library->list) return out;
        for (const LibraryModel& m : options.library->list()) {
            if (!out.empty() && sameModel(m.name, out.front().name)) continue;
            ModelCard c;
            c.name = m.name;
            c.architecture = m.architecture;
            c.bytes = m.bytes;
            c.parameters = m.parameters;
            c.modified = m.modified;
            c.capabilities = {"completion"};
            out.push_back(std::move(c));
        }
        return out;
    }

    ModelCard loadedCard() const
    {
        const LlamaModel& m = engine->model();
        ModelCard c;
        c.name = current.name;
        c.architecture = m.config().architecture;
        c.parameters = m.parameterCount();
        c.contextLength = m.config().trainedContext;
        std::map<std::string, uint64_t> byType;
        for (const ModelTensor& t : m.tensors()) {
            c.bytes += t.bytes;
            byType[gpu::dtypeName(t.type)] += t.bytes;
        }
        for (const auto& [type, bytes] : byType)
            if (c.quantization.empty() || bytes > byType[c.quantization]) c.quantization = type;
        const engine::ChatFormat& f = engine->chat();
        c.chatTemplate = f.source();
        c.capabilities = {"completion"};
        if (f.chatting() && engine::templateKnowsTools(f.source())) c.capabilities.push_back("tools");
        if (f.markup() != engine::ReplyMarkup::Plain) c.capabilities.push_back("thinking");
        c.modified = created;
        return c;
    }

    void handleOllama(const httplib::Request& req, httplib::Response& res, bool chat)
    {
        handle(req, res, [chat](const std::string& model, bool chatting) { return std::shared_ptr<Dialect>(ollamaDialect(chat, chatting, model)); },
               chat ? "api_chat" : "api_generate");
    }

    void handleCompletion(const httplib::Request& req, httplib::Response& res, bool chat)
    {
        const std::string id = newId(chat ? "chatcmpl" : "cmpl");
        handle(req, res, [chat, id](const std::string& model, bool) {
            return std::shared_ptr<Dialect>(openAiDialect(chat, id, unixNow(), model));
        }, chat ? "chat" : "completions");
    }

    void routes()
    {
        http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
            std::lock_guard l(slotsMutex);
            int busy = 0;
            for (const Slot& s : slots) busy += s.busy ? 1 : 0;
            res.set_content("{\"status\":\"ok\",\"slots_idle\":" + std::to_string(int(slots.size()) - busy) +
                                ",\"slots_processing\":" + std::to_string(busy) + "}",
                            "application/json");
        });
        http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
            if (!authorized(req, res, "models")) return;
            std::vector<std::string> names;
            for (const ModelCard& c : cards(false)) names.push_back(c.name);
            res.set_content(modelsResponse(names, created), "application/json");
            count("models", 200);
        });
        http.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
            if (!authorized(req, res, nullptr)) return;
            res.set_content(metricsText(), "text/plain; version=0.0.4");
        });
        http.Post("/v1/chat/completions",
                  [this](const httplib::Request& req, httplib::Response& res) { handleCompletion(req, res, true); });
        http.Post("/v1/completions",
                  [this](const httplib::Request& req, httplib::Response& res) { handleCompletion(req, res, false); });
        // Ollama's API, for tools that speak only it.
        http.Post("/api/chat", [this](const httplib::Request& req, httplib::Response& res) { handleOllama(req, res, true); });
        http.Post("/api/generate", [this](const httplib::Request& req, httplib::Response& res) { handleOllama(req, res, false); });
        http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(ollamaVersion(), "application/json");
        });
        for (const char* path : {"/api/tags", "/api/ps"})
            http.Get(path, [this, path](const httplib::Request& req, httplib::Response& res) {
                if (!authorized(req, res, "api_tags")) return;
                const bool tags = std::string(path) == "/api/tags";
                const std::vector<ModelCard> c = cards(!tags);
                res.set_content(tags ? ollamaTags(c) : ollamaPs(c), "application/json");
            });
        http.Post("/api/show", [this](const httplib::Request& req, httplib::Response& res) {
            if (!authorized(req, res, "api_show")) return;
            const std::string name = ollamaShowModel(req.body);
            for (const ModelCard& c : cards(false))
                if (sameModel(name, c.name)) return res.set_content(ollamaShow(c), "application/json");
            res.status = 404;
            res.set_content(ollamaError("model '" + name + "' not found"), "application/json");
        });
        if (!options.cors.empty()) {
            http.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
            http.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
                res.set_header("Access-Control-Allow-Origin", options.cors);
                res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                res.set_header("Vary", "Origin");
            });
        }
        // A body announced larger than the limit is refused before it is read, and the
        // connection closed (its bytes are not read as a next request).
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            const std::string length = req.get_header_value("Content-Length");
            if (length.empty()) return httplib::Server::HandlerResponse::Unhandled;
            errno = 0;
            char* end = nullptr;
            const unsigned long long n = std::strtoull(length.c_str(), &end, 10);
            if (errno == 0 && end && *end == '\0' && n <= options.maxBodyBytes)
                return httplib::Server::HandlerResponse::Unhandled;
            sendError(res, {413, tooLarge(), "invalid_request_error", {}, {}});
            res.set_header("Connection", "close");
            return httplib::Server::HandlerResponse::Handled;
        });
        // Everything httplib answers itself (404, 413, 400 for a malformed request) in OpenAI's shape.
        http.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
            if (!res.body.empty()) return;
            const int status = res.status;
            std::string message = status == 404   ? "no such endpoint"
                                  : status == 413 ? tooLarge()
                                                  : "the request could not be handled (HTTP " + std::to_string(status) + ")";
            res.set_content(errorBody({status, message, status >= 500 ? "server_error" : "invalid_request_error", {}, {}}),
                            "application/json");
        });
        http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
            std::string what = "internal error";
            try {
                if (e) std::rethrow_exception(e);
            } catch (const std::exception& x) {
                what = x.what();
            } catch (...) {
            }
            sendError(res, {500, what, "server_error", {}, {}});
        });
    }

    // The engine's spans since the last call into the per-lane totals (under metricsMutex).
    void drainTrace()
    {
        if (!trace) return;
        drained.clear();
        trace->drain(drained);
        for (const trace::Span& sp : drained) {
            const size_t lane = static_cast<size_t>(sp.lane);
            if (lane >= trace::kLaneCount || sp.endNs < sp.startNs) continue;
            laneSeconds[lane] += double(sp.endNs - sp.startNs) * 1e-9;
            laneBytes[lane] += double(sp.bytes);
        }
    }

    std::string metricsText()
    {
        std::string out;
        auto line = [&](const char* name, const char* type, const char* help, const std::string& samples) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + samples;
        };
        std::lock_guard l(metricsMutex);
        drainTrace();
        std::string samples;
        for (const auto& [key, n] : requests)
            samples += "spillway_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
                       "\"} " + std::to_string(n) + "\n";
        if (samples.empty()) samples = "spillway_requests_total{endpoint=\"chat\",status=\"200\"} 0\n";
        line("spillway_requests_total", "counter", "Requests answered, by endpoint and HTTP status (499: the client went away).", samples);
        line("spillway_prompt_tokens_total", "counter", "Prompt tokens evaluated (not those the slot's cache held).",
             "spillway_prompt_tokens_total " + std::to_string(promptTokens) + "\n");
        line("spillway_completion_tokens_total", "counter", "Tokens generated.",
             "spillway_completion_tokens_total " + std::to_string(completionTokens) + "\n");
        line("spillway_requests_cancelled_total", "counter", "Replies stopped because the client went away or the server stopped.",
             "spillway_requests_cancelled_total " + std::to_string(cancelled) + "\n");
        char buf[256];
        std::snprintf(buf, sizeof buf, "spillway_time_to_first_token_seconds_sum %.6f\nspillway_time_to_first_token_seconds_count %llu\n",
                      ttftSum, (unsigned long long)ttftCount);
        line("spillway_time_to_first_token_seconds", "summary", "From a request's arrival to its first token (queue and prompt included).", buf);
        std::snprintf(buf, sizeof buf, "spillway_decode_seconds_total %.6f\n", decodeSecondsSum);
        line("spillway_decode_seconds_total", "counter", "Time spent generating tokens after each reply's first.", buf);
        line("spillway_decode_tokens_total", "counter", "Tokens generated after each reply's first (tokens/s = rate of this over decode seconds).",
             "spillway_decode_tokens_total " + std::to_string(decodeTokens) + "\n");
        std::snprintf(buf, sizeof buf, "spillway_tokens_per_second %.3f\n", lastTokensPerSecond);
        line("spillway_tokens_per_second", "gauge", "Decode speed of the last finished reply.", buf);
        if (trace || options.library) {
            std::string seconds, bytes;
            for (size_t lane = 0; lane < trace::kLaneCount; ++lane) {
                const std::string label = std::string("{lane=\"") + trace::laneName(trace::Lane(lane)) + "\"}";
                std::snprintf(buf, sizeof buf, " %.6f\n", laneSeconds[lane]);
                seconds += "spillway_engine_lane_seconds_total" + label + buf;
                std::snprintf(buf, sizeof buf, " %.0f\n", laneBytes[lane]);
                bytes += "spillway_engine_lane_bytes_total" + label + buf;
            }
            line("spillway_engine_lane_seconds_total", "counter",
                 "Busy time of each lane of the engine's timeline (the bottleneck visualizer's lanes).", seconds);
            line("spillway_engine_lane_bytes_total", "counter", "Bytes each lane moved or touched.", bytes);
        }
        int busy = 0, queued = 0, total = 0;
        {
            std::lock_guard s(slotsMutex);
            for (const Slot& slot : slots) busy += slot.busy ? 1 : 0;
            queued = waiting;
            total = int(slots.size());
        }
        line("spillway_queue_length", "gauge", "Requests waiting for a slot.", "spillway_queue_length " + std::to_string(queued) + "\n");
        line("spillway_slots_busy", "gauge", "Slots computing a reply.", "spillway_slots_busy " + std::to_string(busy) + "\n");
        line("spillway_slots", "gauge", "Conversation slots.", "spillway_slots " + std::to_string(total) + "\n");
        return out;
    }
};

Server::Server(engine::Engine& engine, ServerOptions options)
    : m(std::make_unique<Impl>(&engine, LoadedModel{}, std::move(options)))
{
    setUp();
}

Server::Server(LoadedModel model, ServerOptions options)
    : m(std::make_unique<Impl>(nullptr, std::move(model), std::move(options)))
{
    setUp();
}

void Server::setUp()
{
    m->slots.resize(size_t(std::max(1, m->options.parallel)));
    for (Slot& s : m->slots) s.conversation = m->engine->conversation();
    const size_t workers = m->slots.size() + size_t(std::max(0, m->options.maxQueue)) + 4;
    m->http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    m->http.set_payload_max_length(m->options.maxBodyBytes);
    m->http.set_read_timeout(m->options.headerTimeoutSeconds, 0);
    m->http.set_write_timeout(m->options.writeTimeoutSeconds, 0);
    m->http.set_keep_alive_timeout(m->options.idleTimeoutSeconds);
    // Each token is a small write: without TCP_NODELAY, Nagle's algorithm holds it until the
    // client's delayed ACK (40 ms on Linux), and a stream arrives in bursts.
    m->http.set_tcp_nodelay(true);
    m->routes();
}

Server::~Server()
{
    stop();
    // The slots' conversations go before the engine they were opened on (the caller's).
}

Result<int> Server::bind()
{
    const ServerOptions& o = m->options;
    SPILLWAY_TRY(checkOptions(o));
    const std::string host = o.host == "localhost" ? "127.0.0.1" : o.host;
    int port = o.port;
    if (port == 0) {
        port = m->http.bind_to_any_port(host);
        if (port <= 0) return Error{ErrorCode::Io, "cannot listen on " + o.host + " (any port)"};
    } else if (!m->http.bind_to_port(host, port)) {
        return Error{ErrorCode::Io, "cannot listen on " + o.host + ":" + std::to_string(port) +
                                        " (in use by another program, or not an address of this machine)"};
    }
    return port;
}

void Server::run() { m->http.listen_after_bind(); }

Result<int> Server::start()
{
    auto port = bind();
    if (!port) return port;
    m->runner = std::thread([this] { run(); });
    while (!m->http.is_running() && !m->stopping.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port;
}

void Server::stop()
{
    m->stopping.store(true);
    m->slotFreed.notify_all();
    m->http.stop();
    if (m->runner.joinable()) m->runner.join();  // every request handler has returned
}

std::string Server::metrics() const { return m->metricsText(); }

}  // namespace spillway::server
