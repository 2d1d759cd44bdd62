#include "worker_threads.h"

#include <QThread>

#include "chat_store.h"
#include "generation_worker.h"
#include "hub_worker.h"
#include "model_worker.h"
#include "tuning_worker.h"

namespace spillway::ui {

WorkerThreads::WorkerThreads(bool withData, trace::Recorder* recorder, const QString& backend, QObject* parent,
                             const EndpointKeys* keys)
    : QObject(parent)
{
    m_generation = new GenerationWorker;
    m_generation->setEndpointKeys(keys);
    m_generation->setRecorder(recorder);
    m_generation->setBackend(backend);
    m_generationThread = start(m_generation, "inference");
    if (!withData) return;
    m_store = new ChatStore;
    m_storageThread = start(m_store, "storage");
    m_models = new ModelWorker;
    m_modelsThread = start(m_models, "models");
    m_tuning = new TuningWorker;
    m_tuningThread = start(m_tuning, "tuning");
    m_hub = new HubWorker;
    m_hubThread = start(m_hub, "hub");
    m_downloads = new HubWorker;
    m_downloadsThread = start(m_downloads, "downloads");
}

QThread* WorkerThreads::start(QObject* worker, const char* name)
{
    // The worker has no parent: it moves to its thread and is deleted there.
    auto* thread = new QThread(this);
    thread->setObjectName(QString::fromLatin1(name));
    worker->moveToThread(thread);
    connect(thread, &QThread::finished, worker, &QObject::deleteLater);
    thread->start();
    return thread;
}

WorkerThreads::~WorkerThreads()
{
    m_generation->requestStop();  // a running generation ends before its next token
    m_generationThread->quit();
    m_generationThread->wait();
    if (m_modelsThread) {  // a running compression stops at its next progress report
        m_models->cancelCompression();
        m_modelsThread->quit();
        m_modelsThread->wait();
    }
    if (m_tuningThread) {  // a probe that is measuring stops at its next stage
        m_tuning->cancel();
        m_tuningThread->quit();
        m_tuningThread->wait();
    }
    if (m_downloadsThread) {  // a download pauses at its next progress report (its .part stays)
        m_downloads->stopAll();
        m_downloadsThread->quit();
        m_downloadsThread->wait();
        m_hubThread->quit();  // a request in flight ends within the Hub client's timeout
        m_hubThread->wait();
    }
    if (m_storageThread) {  // pending writes finish first: the queue drains before quit
        m_storageThread->quit();
        m_storageThread->wait();
    }
}

}  // namespace spillway::ui
