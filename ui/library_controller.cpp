#include "library_controller.h"

#include <QDir>
#include <QFileInfo>

#include "core/formats/llama2c.h"
#include "generation_worker.h"
#include "model_catalog_model.h"
#include "model_worker.h"
#include "worker_threads.h"
#include "readable.h"
#include "remote_endpoint.h"

namespace spillway::ui {

namespace {
constexpr const char* kWelcomeDoneKey = "ui.welcomeDone";  // a setting: the first-launch screen was seen
}  // namespace

LibraryController::LibraryController(WorkerThreads* workers, const QString& dataFolder, const QString& modelPath,
                                     QObject* parent, EndpointKeys* keys)
    : QObject(parent), m_workers(workers), m_keys(keys), m_catalog(new ModelCatalogModel(this)), m_dataFolder(dataFolder),
      m_modelPath(modelPath)
{
    ChatStore* store = workers->store();
    connect(this, &LibraryController::storeReadSetting, store, &ChatStore::readSetting, Qt::QueuedConnection);
    connect(this, &LibraryController::storeWriteSetting, store, &ChatStore::writeSetting, Qt::QueuedConnection);
    connect(store, &ChatStore::setting, this, [this](const QString& key, const QString& value) {
        if (key == QLatin1String(kWelcomeDoneKey) && value.isEmpty()) emit welcomeNeeded();
    }, Qt::QueuedConnection);
    connect(this, &LibraryController::storeAddModel, store, &ChatStore::addModel, Qt::QueuedConnection);
    connect(this, &LibraryController::storeRemoveModel, store, &ChatStore::removeModel, Qt::QueuedConnection);
    connect(store, &ChatStore::modelsListed, this, &LibraryController::onModelsListed, Qt::QueuedConnection);

    ModelWorker* models = workers->models();
    connect(this, &LibraryController::inspectRequested, models, &ModelWorker::inspect, Qt::QueuedConnection);
    connect(this, &LibraryController::compressRequested, models, &ModelWorker::compress, Qt::QueuedConnection);
    connect(models, &ModelWorker::inspected, this, [this](const ModelItem& m) { emit storeAddModel(m); },
            Qt::QueuedConnection);
    connect(models, &ModelWorker::rejected, this, [this](const QString& path, const QString& message) {
        m_pendingKeys.remove(path);
        emit modelRejected(path, message);
    }, Qt::QueuedConnection);
    connect(this, &LibraryController::inspectEndpointRequested, models, &ModelWorker::inspectEndpoint,
            Qt::QueuedConnection);
    connect(models, &ModelWorker::endpointListed, this, &LibraryController::onEndpointListed, Qt::QueuedConnection);
    connect(models, &ModelWorker::compressProgress, this, &LibraryController::compressionProgress, Qt::QueuedConnection);
    connect(models, &ModelWorker::compressed, this,
            [this](qint64, const ModelItem& package, const QString& summary) { onCompressed(package, summary); },
            Qt::QueuedConnection);
    connect(models, &ModelWorker::compressFailed, this, [this](const QString& message, bool cancelled) {
        m_compressing = false;
        emit compressionFailed(message, cancelled);
    }, Qt::QueuedConnection);

    TuningWorker* tuning = workers->tuning();
    connect(this, &LibraryController::tuningPrepare, tuning, &TuningWorker::prepare, Qt::QueuedConnection);
    connect(this, &LibraryController::tuningPredict, tuning, &TuningWorker::predict, Qt::QueuedConnection);
    connect(this, &LibraryController::tuningPredictModels, tuning, &TuningWorker::predictModels, Qt::QueuedConnection);
    connect(this, &LibraryController::tuningReloadProfile, tuning, &TuningWorker::reloadProfile, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::probeProgress, this, &LibraryController::probeProgress, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::ready, this, [this](const QString& summary, const QString& capabilities) {
        m_tuningReady = true;
        m_capabilities = capabilities;
        emit tuningReady(summary, capabilities);
        predictModels(m_catalog->models());
    }, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::predicted, this, [this](const TuningPrediction& prediction) {
        m_prediction = prediction;
        emit predicted(prediction);
    }, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::modelPredicted, this, &LibraryController::onModelPredicted, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::failed, this, &LibraryController::tuningFailed, Qt::QueuedConnection);
    connect(this, &LibraryController::applyRequested, workers->generation(), &GenerationWorker::applyPlan,
            Qt::QueuedConnection);
}

QString LibraryController::modelsFolder() const
{
    return m_dataFolder.isEmpty() ? QString() : QDir(m_dataFolder).filePath(QStringLiteral("models"));
}

QString LibraryController::backendForPlans() const
{
    return m_activeBackend.isEmpty() ? QStringLiteral("cpu") : m_activeBackend;
}

void LibraryController::startTuning()
{
    if (m_tuningStarted) return;
    m_tuningStarted = true;
    emit tuningPrepare(m_modelPath, modelsFolder());
}

void LibraryController::addModel(const QString& path)
{
    const std::string file = path.toStdString();
    if (!llama2c::isDescriptor(file) && QFileInfo(path).isFile() && llama2c::looksLikeCheckpoint(file))
        return emit checkpointNeedsDetails(path, QString::fromStdString(llama2c::tokenizerBeside(file)));
    emit inspectRequested(path);
}

void LibraryController::addCheckpoint(const QString& checkpoint, const QString& architecture, const QString& tokenizer)
{
    // dataFolder/models/<name>.llama2c.json, numbered when another checkpoint took the name.
    const QDir folder(modelsFolder());
    folder.mkpath(QStringLiteral("."));
    const QString stem = QFileInfo(checkpoint).completeBaseName();
    QString out = folder.filePath(stem + QString::fromLatin1(llama2c::kDescriptorSuffix));
    for (int n = 2; QFileInfo::exists(out); ++n)
        out = folder.filePath(QStringLiteral("%1-%2%3").arg(stem).arg(n).arg(QString::fromLatin1(llama2c::kDescriptorSuffix)));
    llama2c::Descriptor d;
    d.checkpoint = QFileInfo(checkpoint).absoluteFilePath().toStdString();
    d.architecture = architecture.toStdString();
    d.tokenizer = tokenizer.isEmpty() ? std::string() : QFileInfo(tokenizer).absoluteFilePath().toStdString();
    if (Status s = llama2c::writeDescriptor(out.toStdString(), d); !s)
        return emit modelRejected(checkpoint, QString::fromStdString(s.error().message));
    emit inspectRequested(out);
}

void LibraryController::addEndpoint(const QString& typed, const QString& apiKey, bool remember)
{
    const QString url = normalizeEndpointUrl(typed);
    if (url.isEmpty())
        return emit modelRejected(typed, tr("'%1' is not the address of an OpenAI-compatible API (http://host:port/v1)")
                                             .arg(typed.trimmed()));
    m_pendingKeys.insert(url, {apiKey.trimmed(), remember});
    emit inspectEndpointRequested(url, apiKey.trimmed());
}

void LibraryController::onEndpointListed(const QString& url, const QStringList& models)
{
    // The key worked: held from now on (on disk only with the user's consent).
    const PendingKey pending = m_pendingKeys.take(url);
    QString keyNote;
    if (m_keys && (!pending.key.isEmpty() || m_keys->remembered(url)))
        keyNote = m_keys->set(url, pending.key, pending.remember);
    for (const QString& id : models) {
        ModelItem item;
        item.path = endpointPath(url, id);
        item.format = QStringLiteral("endpoint");
        item.architecture = QStringLiteral("remote");
        emit storeAddModel(item);
    }
    emit endpointAdded(url, int(models.size()), keyNote);
}

bool LibraryController::compressModel(qint64 id, const QString& preset)
{
    const ModelItem* source = m_catalog->model(id);
    if (m_compressing || !source || source->format == QLatin1String("endpoint")) return false;
    // dataFolder/models/<name>-<preset>, numbered when taken.
    const QString stem = QFileInfo(source->path).completeBaseName();
    const QDir folder(modelsFolder());
    QString out = folder.filePath(stem + "-" + preset);
    for (int n = 2; QFileInfo::exists(out); ++n) out = folder.filePath(QStringLiteral("%1-%2-%3").arg(stem, preset).arg(n));
    m_compressing = true;
    m_compressedSource = source->path;
    m_compressedPackage.clear();
    m_workers->models()->clearCancel();
    emit compressionStarted(tr("Compressing %1 (%2) …").arg(QFileInfo(source->path).fileName(), preset));
    emit compressRequested(id, source->path, out, preset);
    return true;
}

bool LibraryController::removeModel(qint64 id)
{
    const ModelItem* model = m_catalog->model(id);
    if (!model || (m_compressing && model->path == m_compressedSource)) return false;
    m_predictionAsked.remove(model->path);  // asked again if it comes back
    emit storeRemoveModel(id);
    return true;
}

void LibraryController::cancelCompression()
{
    if (m_compressing) m_workers->models()->cancelCompression();
}

void LibraryController::onCompressed(const ModelItem& package, const QString& summary)
{
    m_compressing = false;
    m_compressSummary = summary;
    if (QString why; !qualityPasses(package.qualityJson, &why))
        m_compressSummary += tr(" — below the quality bar (%1): its replies may be wrong or garbled").arg(why);
    m_compressedPackage = package.path;
    emit storeAddModel(package);  // the new catalog list asks the planner about it (the source is known)
    emit compressionFinished(package.path, m_compressSummary);
}

void LibraryController::reloadProfile()
{
    if (!m_tuningReady) return;
    emit tuningReloadProfile();  // queued before the predictions that follow: they see it
    m_predictionAsked.clear();
    predictModels(m_catalog->models());
}

void LibraryController::predict(TuningSettings settings)
{
    if (!m_tuningStarted) return;
    if (settings.backend == QLatin1String("auto")) settings.backend = backendForPlans();
    emit tuningPredict(settings);
}

bool LibraryController::applyPrediction()
{
    if (!m_prediction.plan) return false;
    if (!m_prediction.settings.modelPath.isEmpty()) m_modelPath = m_prediction.settings.modelPath;
    emit applyRequested(m_prediction);
    return true;
}

void LibraryController::checkWelcome() { emit storeReadSetting(QString::fromLatin1(kWelcomeDoneKey)); }

void LibraryController::markWelcomeSeen()
{
    emit storeWriteSetting(QString::fromLatin1(kWelcomeDoneKey), QStringLiteral("true"));
}

void LibraryController::onModelsListed(const QVector<ModelItem>& models)
{
    m_catalog->setModels(models);
    predictModels(models);
    emit modelsListed(models);
}

void LibraryController::predictModels(const QVector<ModelItem>& models)
{
    if (!m_tuningReady) return;  // the tuning worker's ready asks for the whole catalog
    QStringList paths;
    for (const ModelItem& m : models)
        if (m.format != QLatin1String("endpoint") && !m_predictionAsked.contains(m.path)) {  // remote: nothing to plan
            m_predictionAsked.insert(m.path);
            paths << m.path;
        }
    if (!paths.isEmpty()) emit tuningPredictModels(paths, backendForPlans());
}

void LibraryController::onModelPredicted(const QString& path, double tokensPerSecond, const QString& text)
{
    m_predictedSpeed.insert(path, tokensPerSecond);
    m_catalog->setPrediction(path, text, tokensPerSecond);
    // The end of a compression: its predicted speed beside the source's.
    if (!m_compressedPackage.isEmpty() && m_predictedSpeed.contains(m_compressedSource) &&
        m_predictedSpeed.contains(m_compressedPackage)) {
        const QString compared = tr("Done: %1; predicted %2 → %3 tokens/s on this machine")
                                 .arg(m_compressSummary)
                                 .arg(readable(m_predictedSpeed.value(m_compressedSource)))
                                 .arg(readable(m_predictedSpeed.value(m_compressedPackage)));
        m_compressedPackage.clear();
        emit compressionCompared(compared);
    }
}

}  // namespace spillway::ui
