#pragma once
// The inference worker: the app's front end to the engine (core/engine): an Engine for the loaded
// model and a Conversation that keeps its KV cache between replies (a new message costs only its
// own tokens). Lives on its own QThread ("inference"); the GUI talks to it only through queued
// signals, plus requestStop(), which is safe to call from any thread.

#include <QObject>
#include <QString>
#include <atomic>
#include <chrono>
#include <functional>
#include <string_view>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat_store.h"
#include "generation_settings.h"
#include "core/engine/engine.h"
#include "core/engine/turns.h"
#include "tuning_worker.h"

namespace spillway {
namespace engine { class Conversation; struct ReplyStats; }
namespace server { class OpenAiClient; class Server; }
namespace gpu { class Device; }
namespace trace { class Recorder; }
}

namespace spillway::ui {

class EndpointKeys;

class GenerationWorker : public QObject {
    Q_OBJECT
public:
    explicit GenerationWorker(QObject* parent = nullptr);
    ~GenerationWorker() override;

    // Thread-safe: the running generation stops before its next token.
    void requestStop() { m_stop.store(true, std::memory_order_relaxed); }
    // Thread-safe: called by the GUI before it queues a request, so a stale stop is forgotten.
    void clearStop() { m_stop.store(false, std::memory_order_relaxed); }
    // Thread-safe: the model being loaded stops at its next weight copy; the one before comes back.
    void requestCancelLoad() { m_cancelLoad.store(true, std::memory_order_relaxed); }
    // Thread-safe: called by the GUI before it queues a load.
    void clearCancelLoad() { m_cancelLoad.store(false, std::memory_order_relaxed); }
    // Spans of every generation go here (the visualizer drains it); set before the worker moves
    // to its thread. Not owned; must outlive the worker.
    void setRecorder(trace::Recorder* recorder) { m_recorder = recorder; }
    // The backend to compute on: "auto" (the default: a usable CUDA device, else a Vulkan device
    // that is a real GPU, else the CPU), "cpu", "cuda" or "vulkan". Set before the worker moves to
    // its thread; a backend that cannot be used falls back to the CPU with the reason shown.
    void setBackend(const QString& backend) { m_backend = backend; }
    // Computes on `device` from the first model load on; later loads keep the device the engine
    // had (tests hand in one that fails on cue). Call before the first loadModel, before the
    // worker moves to its thread.
    void setDevice(std::unique_ptr<gpu::Device> device);
    // The API keys of remote endpoints (remote_endpoint.h; not owned, must outlive the worker).
    // Set before the worker moves to its thread.
    void setEndpointKeys(const EndpointKeys* keys) { m_keys = keys; }

public slots:
    // A model file or package; or a remote endpoint's model ("URL#model", remote_endpoint.h): its
    // endpoint is asked for its models first, and from then on replies come from it (the local
    // model is unloaded; plans do not apply to it).
    void loadModel(const QString& path);
    // Serves the local model that answers over the OpenAI API (server/server.h) on host:port,
    // beside the chat: the two take turns at the engine. The server follows the model: stopped
    // while another loads and started again on it (on the same port). Answered by serverStarted,
    // or serverStopped with the reason (no local model, the port taken, a remote model chosen).
    // parallel: the server's conversation slots; apiKey: required of clients ("" = none; needed
    // for an address other than loopback).
    void startServer(const QString& host, int port, int parallel, const QString& apiKey);
    void stopServer();
    // Replies to the conversation (its last message is the user's prompt). A base model
    // continues the last prompt.
    // maxTokens 0: until the model ends its turn or the context is full.
    void generate(const QVector<spillway::ui::MessageItem>& conversation, int maxTokens, double temperature);
    // The same with all of a chat's settings; its system prompt leads the conversation.
    // continueLast: the last message is the reply so far, which the model goes on with.
    void generateWith(const QVector<spillway::ui::MessageItem>& conversation,
                      const spillway::ui::GenerationSettings& settings, bool continueLast = false);
    // Runs later generations with this plan: a device with the plan's memory budget and the
    // thread count asked for, the plan's placement and RAM budget, the context length.
    void applyPlan(const spillway::ui::TuningPrediction& prediction);

signals:
    // chatTemplate: the model answers chat turns (replies are shown on their own), else it
    // continues the prompt.
    void modelLoaded(const QString& description, bool chatTemplate);
    // While a model loads: the bytes of weights copied in (to the device, or to pinned RAM) of
    // all it copies; about every 50 ms, and once at the end. None for weights used in place.
    void loadProgress(qint64 done, qint64 total);
    // The load was cancelled (requestCancelLoad); the model before answers again (`description`,
    // empty when there was none).
    void loadCancelled(const QString& description);
    // The model before was unloaded to make room for the next: its name and the device memory
    // that freed (the device's own accounting).
    void unloaded(const QString& name, qint64 freedDeviceBytes);
    // Before modelLoaded (and after a plan loaded another variant): what the model's template
    // offers of thinking (all false for a remote model: its server decides).
    void thinkingOffered(const spillway::ui::ThinkingOptions& options);
    // The exact text given to the model for the latest request.
    void promptPrepared(const QString& prompt);
    // Before finished(), after a reply that reasoned: how long its reasoning took, from its
    // first token to the answer's (or the reply's end).
    void reasoningTimed(double milliseconds);
    void failed(const QString& message);
    // Text of new tokens, batched about every 16 ms; always whole UTF-8 characters.
    void tokens(const QString& text);
    // The reply's reasoning as it streams, apart from its answer (tokens()).
    void reasoningText(const QString& text);
    // end: why the reply ended: "turn" (the model ended it), "limit" (max tokens), "context" (the
    // context is full) or "stopped" (Stop).
    void finished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end);
    // Before finished(), when the neuron cache ran: its hit rate and bytes loaded per token.
    void neuronCacheReport(double hitRate, double bytesPerToken);
    // Before finished(), after a reply of 16 tokens or more that ran with a plan: its decode
    // measured lane by lane (what the Tuning view shows beside the prediction), after it went
    // into the profile's calibration (core/hw/calibration.h).
    void runMeasured(const spillway::ui::RunLanes& run);
    void planApplied(const QString& description);
    // A plan for another compression variant loaded it: `path` answers from now on (modelLoaded
    // follows).
    void variantApplied(const QString& path);
    // After each reply: the tokens the conversation holds (prompt and reply) of the context's.
    void contextUsed(int tokens, int contextLength);
    // The device that computes from now on: its backend ("cpu", "cuda", "vulkan"), the model's
    // description on it (as modelLoaded's) and why a faster backend was not taken or was left
    // ("" when nothing was passed over). Sent when a model loads, a plan is applied and after a
    // fallback to the CPU.
    void deviceChanged(const QString& backend, const QString& description, const QString& why);
    // What the user should know that did not stop the reply: the reply moved to the CPU, or the
    // weights had to stream from RAM because they did not fit the device.
    void notice(const QString& message);
    // The server listens at `url` (its API base, "http://127.0.0.1:8080/v1") for `model`.
    void serverStarted(const QString& url, const QString& model);
    // It stopped: why ("" when asked to).
    void serverStopped(const QString& why);

private:
    struct ServeSettings {
        QString host, apiKey;
        int port = 0, parallel = 1;
    };
    // Remote models (generation_worker_remote.cpp).
    void loadEndpoint(const QString& path);
    void generateRemote(const std::vector<engine::Message>& messages, const GenerationSettings& settings,
                        bool continueLast);
    // The server around a model change: suspended before, resumed after on the model then loaded.
    void suspendServer();
    void resumeServer();
    struct ServerPause {
        GenerationWorker* w;
        explicit ServerPause(GenerationWorker* worker) : w(worker) { w->suspendServer(); }
        ~ServerPause() { w->resumeServer(); }
        ServerPause(const ServerPause&) = delete;
        ServerPause& operator=(const ServerPause&) = delete;
    };
    QString loadedDescription() const;
    ThinkingOptions thinkingOptions() const;
    // Engine notices as signals (a lost device also changes the device).
    void onNotice(const engine::Notice& notice);
    engine::EngineOptions baseOptions();

    std::unique_ptr<gpu::Device> m_injected;  // setDevice's, until the first load
    std::unique_ptr<engine::Engine> m_engine;
    std::unique_ptr<engine::Conversation> m_conversation;  // on m_engine: declared after it
    int m_contextTokens = 0;                 // the chat's tokens after its last reply (the meter's)
    engine::Turns m_turns;                   // the chat's and the server's turns at m_engine
    std::unique_ptr<server::Server> m_served;  // the server on m_engine: declared after it
    std::optional<ServeSettings> m_serve;    // the server asked for (kept while suspended)
    std::unique_ptr<server::OpenAiClient> m_remote;  // a remote model answers (m_engine is null)
    QString m_remoteDescription;
    const EndpointKeys* m_keys = nullptr;
    QString m_backend = QStringLiteral("auto");
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_cancelLoad{false};
    std::chrono::steady_clock::time_point m_lastLoadProgress{};
    // A reply's decode measured against the plan, into the profile's calibration.
    void calibrateFrom(const engine::ReplyStats& stats, uint64_t endNs);
    trace::Recorder* m_recorder = nullptr;
};

// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary.
size_t completeUtf8Prefix(const std::string& bytes);

// A reply's text on its way to the GUI: pieces are gathered and sent about every 16 ms (one frame
// at 60 Hz) in whole UTF-8 characters; flush() sends the rest (a character cut off at the very
// end shows as U+FFFD).
class TextBatcher {
public:
    explicit TextBatcher(std::function<void(const QString&)> send) : m_send(std::move(send)) {}
    void add(std::string_view text);
    void flush();

private:
    std::function<void(const QString&)> m_send;
    std::string m_pending;  // bytes not yet sent
    std::chrono::steady_clock::time_point m_last = std::chrono::steady_clock::now();
};

}  // namespace spillway::ui
