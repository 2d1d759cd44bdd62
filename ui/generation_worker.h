#pragma once
// The inference worker: the app's front end to the engine (core/engine): an Engine for the loaded
// model and a Conversation that keeps its KV cache between replies (a new message costs only its
// own tokens). Lives on its own QThread ("inference"); the GUI talks to it only through queued
// signals, plus requestStop(), which is safe to call from any thread.

#include <QObject>
#include <QString>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat_store.h"
#include "generation_settings.h"
#include "core/engine/engine.h"
#include "tuning_worker.h"

namespace spillway {
namespace engine { class Conversation; }
namespace gpu { class Device; }
namespace trace { class Recorder; }
}

namespace spillway::ui {

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

public slots:
    void loadModel(const QString& path);
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
    // The exact text given to the model for the latest request.
    void promptPrepared(const QString& prompt);
    void failed(const QString& message);
    // Text of new tokens, batched about every 16 ms; always whole UTF-8 characters.
    void tokens(const QString& text);
    // end: why the reply ended: "turn" (the model ended it), "limit" (max tokens), "context" (the
    // context is full) or "stopped" (Stop).
    void finished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end);
    // Before finished(), when the neuron cache ran: its hit rate and bytes loaded per token.
    void neuronCacheReport(double hitRate, double bytesPerToken);
    void planApplied(const QString& description);
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

private:
    QString loadedDescription() const;
    // Engine notices as signals (a lost device also changes the device).
    void onNotice(const engine::Notice& notice);
    engine::EngineOptions baseOptions();

    std::unique_ptr<gpu::Device> m_injected;  // setDevice's, until the first load
    std::unique_ptr<engine::Engine> m_engine;
    std::unique_ptr<engine::Conversation> m_conversation;  // on m_engine: declared after it
    QString m_backend = QStringLiteral("auto");
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_cancelLoad{false};
    std::chrono::steady_clock::time_point m_lastLoadProgress{};
    trace::Recorder* m_recorder = nullptr;
};

// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary.
size_t completeUtf8Prefix(const std::string& bytes);

}  // namespace spillway::ui
