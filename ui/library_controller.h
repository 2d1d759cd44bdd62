#pragma once
// The Models and Tuning views' state without widgets: the model catalog (an item model), the
// compression in progress and its before/after comparison, the machine's measured profile, the
// planner's predictions (for the settings shown, and each catalog model's "predicted here" line),
// the plan to apply, and whether the first-launch screen was seen. ChatWindow shows what it says
// and passes on what the user does; the requests go to the model, tuning and inference workers
// and the chat store by queued signals (WorkerThreads owns them all).

#include <QHash>
#include <QObject>
#include <QSet>
#include <QString>

#include "chat_store.h"
#include "tuning_worker.h"

namespace spillway::ui {

class EndpointKeys;
class ModelCatalogModel;
class WorkerThreads;

class LibraryController : public QObject {
    Q_OBJECT
public:
    // dataFolder: where packages go (dataFolder/models); modelPath: the model the chat loads.
    // Needs workers with a data folder (store, models and tuning threads).
    // keys: where endpoints' API keys go (not owned; outlives this object; may be null).
    LibraryController(WorkerThreads* workers, const QString& dataFolder, const QString& modelPath,
                      QObject* parent = nullptr, EndpointKeys* keys = nullptr);

    ModelCatalogModel* catalog() const { return m_catalog; }
    bool isCompressing() const { return m_compressing; }
    bool isTuningReady() const { return m_tuningReady; }
    QString capabilities() const { return m_capabilities; }  // what this machine can run
    const TuningPrediction& lastPrediction() const { return m_prediction; }
    // The model the chat runs: the launch model, or the variant whose plan was applied last.
    QString modelPath() const { return m_modelPath; }
    void setModelPath(const QString& path) { m_modelPath = path; }
    QString modelsFolder() const;  // where packages are written (dataFolder/models)
    // The device computing ("cpu", "cuda", "vulkan"): what "auto" settings and the catalog's
    // predictions plan for.
    void setActiveBackend(const QString& backend) { m_activeBackend = backend; }

public slots:
    // Measures the machine (once; after the model loaded), then predicts the catalog's speeds.
    void startTuning();
    // A run measured this machine (and calibrated its cached profile): the planner reads the
    // profile again, and the catalog's "predicted here" lines are planned anew.
    void reloadProfile();
    // Validates and catalogs a model (a drop, Add model…). A llama2.c checkpoint cannot say its
    // architecture (and may lack a tokenizer beside it): checkpointNeedsDetails() asks first.
    void addModel(const QString& path);
    // Catalogs a llama2.c checkpoint with the architecture and tokenizer the user named: a
    // descriptor (core/formats/llama2c.h) in the models folder stands for it from then on.
    void addCheckpoint(const QString& checkpoint, const QString& architecture, const QString& tokenizer);
    // Adds the models of an OpenAI-compatible endpoint (`typed`: its address as the user wrote
    // it, remote_endpoint.h's normalizeEndpointUrl) to the library, once it answered with them
    // (endpointAdded, or modelRejected). apiKey: "" = none; remember: the key is kept in the
    // data folder's key file (0600) once it worked, else for this session only.
    void addEndpoint(const QString& typed, const QString& apiKey, bool remember);
    // Compresses the catalog model `id` with a preset ("fast", "balanced", "smallest",
    // "sparse") into dataFolder/models/<name>-<preset> (numbered when taken); cancel stops it.
    bool compressModel(qint64 id, const QString& preset);
    // Takes model `id` out of the library (its files stay on disk); false for the one being
    // compressed.
    bool removeModel(qint64 id);
    void cancelCompression();
    // Plans these settings (backend "auto": the device computing); answered by predicted().
    void predict(TuningSettings settings);
    // Sends the last prediction's plan to the inference worker; false when there is none.
    bool applyPrediction();
    // The first-launch screen: asks whether it was seen (answered by welcomeNeeded() when not),
    // and records that it was.
    void checkWelcome();
    void markWelcomeSeen();

signals:
    void modelsListed(const QVector<spillway::ui::ModelItem>& models);
    void modelRejected(const QString& path, const QString& message);
    // An endpoint's models are in the library (`url`: its normalized address); keyNote: why its
    // key could not be kept on disk ("" when it was, or was not to be).
    void endpointAdded(const QString& url, int models, const QString& keyNote);
    // A llama2.c checkpoint to add: which architecture, which tokenizer (`found`: the one beside
    // it, or "")? Answered by addCheckpoint().
    void checkpointNeedsDetails(const QString& checkpoint, const QString& found);
    void compressionStarted(const QString& text);
    void compressionProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal, double eta);
    void compressionFinished(const QString& packagePath, const QString& summary);
    // The finished compression's predicted speed before and after ("Done: …; predicted X → Y").
    void compressionCompared(const QString& text);
    void compressionFailed(const QString& message, bool cancelled);
    void probeProgress(double fraction, const QString& stage);
    void tuningReady(const QString& hardwareSummary, const QString& capabilities);
    void tuningFailed(const QString& message);
    void predicted(const spillway::ui::TuningPrediction& prediction);
    void welcomeNeeded();
    // Requests to the workers and the store (queued).
    void inspectRequested(const QString& path);
    void inspectEndpointRequested(const QString& url, const QString& apiKey);
    void compressRequested(qint64 sourceId, const QString& sourcePath, const QString& outDir, const QString& preset);
    void storeAddModel(const spillway::ui::ModelItem& model);
    void storeRemoveModel(qint64 id);
    void storeReadSetting(const QString& key);
    void storeWriteSetting(const QString& key, const QString& valueJson);
    void tuningPrepare(const QString& modelPath, const QString& storageFolder);
    void tuningPredict(const spillway::ui::TuningSettings& settings);
    void tuningPredictModels(const QStringList& paths, const QString& backend);
    void tuningReloadProfile();
    void applyRequested(const spillway::ui::TuningPrediction& prediction);

private:
    void onModelsListed(const QVector<spillway::ui::ModelItem>& models);
    void onEndpointListed(const QString& url, const QStringList& models);
    void onCompressed(const spillway::ui::ModelItem& package, const QString& summary);
    void onModelPredicted(const QString& path, double tokensPerSecond, const QString& text);
    // Asks the planner about the catalog models it has not been asked about (their cards).
    void predictModels(const QVector<ModelItem>& models);
    QString backendForPlans() const;

    WorkerThreads* m_workers;
    EndpointKeys* m_keys;
    struct PendingKey {
        QString key;
        bool remember = false;
    };
    QHash<QString, PendingKey> m_pendingKeys;  // by endpoint URL, until it answers
    ModelCatalogModel* m_catalog;
    QString m_dataFolder;
    QString m_modelPath;
    QString m_activeBackend;
    bool m_compressing = false;
    QString m_compressedSource, m_compressedPackage, m_compressSummary;  // for "predicted X → Y"
    bool m_tuningStarted = false;
    bool m_tuningReady = false;
    QString m_capabilities;
    TuningPrediction m_prediction;
    QHash<QString, double> m_predictedSpeed;  // tokens/s by model path, default settings
    QSet<QString> m_predictionAsked;          // model paths sent to the planner once
};

}  // namespace spillway::ui
