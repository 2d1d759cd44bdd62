#pragma once
// The tuning panel's worker (on the "models" thread): measures the machine once (the probe,
// cached under a hardware fingerprint), then answers "where would each tensor live, and how fast
// would it run, with these budgets?" with the planner: fast enough to call on every move of a
// control. It keeps its own mapping of the model (no engine state is shared with inference).

#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <atomic>
#include <map>
#include <memory>

namespace spillway {
class LlamaModel;
namespace plan { struct PlanResult; }
namespace hw { struct HardwareProfile; struct ProbeOptions; }
}

namespace spillway::ui {

struct TuningSettings {
    qint64 vramBudget = 0;  // bytes of device memory; 0 = all free
    qint64 ramBudget = 0;   // bytes of pinned RAM; 0 = half the available
    int contextLength = 0;  // 0 = trained, at most 4096
    int prefetchDepth = 2;
    int threads = 0;        // 0 = one per core
    QString kvType = QStringLiteral("f32");  // KV cache precision: "f32", "f16", "q8"
    QString modelPath;      // the model variant planned for; "" = the one prepared
    // The neuron cache (ReLU models): bundles per layer (0 = off) and "exact" or "predicted".
    int neuronCache = 0;
    QString neuronMode = QStringLiteral("exact");
    // Where cold neurons run: "auto" (the cost model, per layer), "ship" or "cpu".
    QString coldNeurons = QStringLiteral("auto");
    // The device to plan for and compute on: "cpu", "cuda" or "vulkan" ("" = cpu). The panel's
    // "auto" is resolved by the chat window to the device the app chose.
    QString backend = QStringLiteral("cpu");
};

struct TuningPrediction {
    TuningSettings settings;
    double tokensPerSecond = 0;
    qint64 deviceBytes = 0, ramBytes = 0, ssdBytesPerToken = 0, modelBytes = 0;
    qint64 ssdBytes = 0;  // weights left on the SSD (device + RAM + SSD: every weight of the file)
    int trainedContext = 0;  // the model's trained context length
    int defaultContext = 0;  // what context 0 (the default) resolves to for this model
    qint64 kvBytes = 0;  // the KV cache, on the device
    qint64 stateBytes = 0;  // a hybrid model's recurrent state, on the device (fixed per layer)
    QString note;   // why a setting was not taken (a neuron cache on a SwiGLU model, ...), or empty
    // The neuron cache: per layer, whether the cost model has the CPU compute its cold neurons
    // (else they are shipped to the device's slots); empty when the cache is off.
    QList<bool> coldOnCpu;
    std::shared_ptr<const plan::PlanResult> plan;  // to apply
};

// A reply's decode measured lane by lane (GenerationWorker, after a reply of 16 tokens or more
// that ran with a plan): the Tuning view shows it beside the prediction of the same placement.
struct RunLanes {
    QString planKey;                      // planKey() of the plan it ran with
    int tokens = 0;                       // decoded tokens measured
    double secondsPerToken = 0;           // measured
    double predictedSecondsPerToken = 0;  // what that plan predicted
    // Busy seconds per token, as plan::LaneTimes: SSD reads, host->device copies, decompression,
    // device compute, CPU compute.
    double ssd = 0, copy = 0, decompress = 0, device = 0, cpu = 0;
};

// Which placement a plan is (the device, the bytes on each tier, the KV cache, the prefetch):
// a run and a prediction with the same key ran or would run the same way.
QString planKey(const plan::PlanResult& plan);

// How the app probes the machine (the Tuning view, Discover's verdicts): the disk of
// `storageFolder`; the small, rough probe where SPILLWAY_QUICK_PROBE=1 (tests).
hw::ProbeOptions appProbeOptions(const QString& storageFolder);

class TuningWorker : public QObject {
    Q_OBJECT
public:
    explicit TuningWorker(QObject* parent = nullptr);
    ~TuningWorker() override;

    // Ends a probe that is measuring at its next stage (any thread may call it: the window that
    // closes while the machine is measured does not wait minutes for it).
    void cancel() { m_cancelled.store(true); }

public slots:
    // Maps the model and measures the machine (storageFolder: the disk packages go to). With
    // SPILLWAY_QUICK_PROBE=1 in the environment the probe is the small, rough one (tests).
    void prepare(const QString& modelPath, const QString& storageFolder);
    // Plans settings.modelPath (or the prepared model) with these settings.
    void predict(const spillway::ui::TuningSettings& settings);
    // Plans each model with the default settings on `backend`: its card's "predicted here" line.
    void predictModels(const QStringList& paths, const QString& backend);
    // Reads the cached profile again (a run calibrated it, or marked it suspect): the predictions
    // after it use what runs measured. Kept as it is where the cache is gone or of other hardware.
    void reloadProfile();

signals:
    // The measuring's progress (not sent when the cached profile answers).
    void probeProgress(double fraction, const QString& stage);
    // A one-screen summary of the machine, and what it can run (model sizes and their
    // estimated speed).
    void ready(const QString& hardwareSummary, const QString& capabilities);
    void modelPredicted(const QString& path, double tokensPerSecond, const QString& text);
    void predicted(const spillway::ui::TuningPrediction& prediction);
    void failed(const QString& message);

private:
    // The model at `path` (mapped once and kept), or an error message.
    const LlamaModel* model(const QString& path, QString* error);

    std::atomic<bool> m_cancelled{false};
    QString m_modelPath;
    std::map<QString, std::unique_ptr<LlamaModel>> m_models;
    std::unique_ptr<hw::HardwareProfile> m_profile;
};

}  // namespace spillway::ui

Q_DECLARE_METATYPE(spillway::ui::TuningSettings)
Q_DECLARE_METATYPE(spillway::ui::TuningPrediction)
Q_DECLARE_METATYPE(spillway::ui::RunLanes)
