#pragma once
// The inference worker: owns the model, the compute device and, per request, a fresh session
// and sampler. Lives on its own QThread ("inference"); the GUI talks to it only through queued
// signals, plus requestStop(), which is safe to call from any thread.

#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat_store.h"
#include "tuning_worker.h"

namespace spillway {
class LlamaModel;
namespace chat { class ChatTemplate; }
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
    // Spans of every generation go here (the visualizer drains it); set before the worker moves
    // to its thread. Not owned; must outlive the worker.
    void setRecorder(trace::Recorder* recorder) { m_recorder = recorder; }

public slots:
    void loadModel(const QString& path);
    // Replies to the conversation (its last message is the user's prompt). A base model
    // continues the last prompt.
    void generate(const QVector<spillway::ui::MessageItem>& conversation, int maxTokens, double temperature);
    // Runs later generations with this plan: a device with the plan's memory budget and the
    // thread count asked for, the plan's placement and RAM budget, the context length.
    void applyPlan(const spillway::ui::TuningPrediction& prediction);

signals:
    // chatTemplate: the model answers chat turns (replies are shown on their own), else it
    // continues the prompt.
    void modelLoaded(const QString& description, bool chatTemplate);
    // The exact text given to the model for the latest request.
    void promptPrepared(const QString& prompt);
    void failed(const QString& message);
    // Text of new tokens, batched about every 16 ms; always whole UTF-8 characters.
    void tokens(const QString& text);
    void finished(double tokensPerSecond, double timeToFirstTokenMs, int tokens);
    // Before finished(), when the neuron cache ran: its hit rate and bytes loaded per token.
    void neuronCacheReport(double hitRate, double bytesPerToken);
    void planApplied(const QString& description);

private:
    // Reads the model's chat template (none, or one that does not parse: the prompt is continued).
    void readChatTemplate();
    QString loadedDescription() const;
    // The text given to the model for `conversation`, and whether it starts with BOS already.
    bool buildPrompt(const QVector<MessageItem>& conversation, std::string* prompt, bool* addBos);

    std::unique_ptr<LlamaModel> m_model;
    std::shared_ptr<const chat::ChatTemplate> m_template;  // null: a base model, continued
    std::string m_bosText, m_eosText;
    QString m_templateNote;  // why a template present in the file is not used, or empty
    std::unique_ptr<gpu::Device> m_device;
    std::atomic<bool> m_stop{false};
    trace::Recorder* m_recorder = nullptr;
    std::shared_ptr<const plan::PlanResult> m_plan;  // applied by the tuning panel, or null
    int m_contextLength = 0;
    int m_neuronCache = 0;          // bundles per layer applied by the tuning panel (0: dense FFN)
    bool m_neuronPredicted = false;
};

// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary.
size_t completeUtf8Prefix(const std::string& bytes);

}  // namespace spillway::ui
