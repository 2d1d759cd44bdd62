#pragma once
// The one owner of the app's worker threads. Each worker lives on a thread of its own, is created
// here, moved there, and deleted there when its thread ends:
//   inference  GenerationWorker  loads the model, generates, applies plans (always)
//   storage    ChatStore         every SQL statement (with a data folder)
//   models     ModelWorker       inspects dropped models, compresses (with a data folder)
//   tuning     TuningWorker      probes the machine, predicts plans (with a data folder)
//   hub        HubWorker         searches the Hub, judges its files (with a data folder)
//   downloads  HubWorker         downloads models (with a data folder)
// Requests go to the workers by queued signals. The destructor stops them in an order that loses
// nothing: a generation ends before its next token, a compression at its next progress report,
// a probe at its next stage, a download at its next progress report (its .part kept), and the store's queue drains (pending writes finish) before it quits.

#include <QObject>

class QThread;

namespace spillway::trace {
class Recorder;
}

namespace spillway::ui {

class ChatStore;
class EndpointKeys;
class GenerationWorker;
class HubWorker;
class ModelWorker;
class TuningWorker;

class WorkerThreads : public QObject {
    Q_OBJECT
public:
    // withData: the storage, models and tuning threads too. recorder: the trace the inference
    // thread fills (may be null); it must outlive this object.
    // keys: remote endpoints' API keys for the inference thread (may be null; must outlive this).
    WorkerThreads(bool withData, trace::Recorder* recorder, const QString& backend, QObject* parent = nullptr,
                  const EndpointKeys* keys = nullptr);
    ~WorkerThreads() override;

    GenerationWorker* generation() const { return m_generation; }
    ChatStore* store() const { return m_store; }          // null without a data folder
    ModelWorker* models() const { return m_models; }      // null without a data folder
    TuningWorker* tuning() const { return m_tuning; }     // null without a data folder
    HubWorker* hub() const { return m_hub; }              // null without a data folder
    HubWorker* downloads() const { return m_downloads; }  // null without a data folder

private:
    QThread* start(QObject* worker, const char* name);

    QThread* m_generationThread = nullptr;
    QThread* m_storageThread = nullptr;
    QThread* m_modelsThread = nullptr;
    QThread* m_tuningThread = nullptr;
    QThread* m_hubThread = nullptr;
    QThread* m_downloadsThread = nullptr;
    GenerationWorker* m_generation = nullptr;
    ChatStore* m_store = nullptr;
    ModelWorker* m_models = nullptr;
    TuningWorker* m_tuning = nullptr;
    HubWorker* m_hub = nullptr;
    HubWorker* m_downloads = nullptr;
};

}  // namespace spillway::ui
