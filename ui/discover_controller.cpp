#include "discover_controller.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include "library_controller.h"
#include "remote_endpoint.h"
#include "worker_threads.h"

namespace spillway::ui {

namespace {

const char* stateName(DownloadEntry::State s)
{
    switch (s) {
    case DownloadEntry::State::Queued: return "queued";
    case DownloadEntry::State::Downloading: return "downloading";
    case DownloadEntry::State::Paused: return "paused";
    case DownloadEntry::State::Failed: return "failed";
    case DownloadEntry::State::Done: return "done";
    }
    return "queued";
}

DownloadEntry::State stateNamed(const QString& s)
{
    if (s == QLatin1String("paused")) return DownloadEntry::State::Paused;
    if (s == QLatin1String("failed")) return DownloadEntry::State::Failed;
    if (s == QLatin1String("done")) return DownloadEntry::State::Done;
    return DownloadEntry::State::Queued;  // queued, or downloading when the app ended
}

}  // namespace

QString DownloadEntry::fileName() const
{
    return parts.empty() ? key : QFileInfo(QString::fromStdString(parts.front().path)).fileName();
}

DiscoverController::DiscoverController(WorkerThreads* workers, LibraryController* library, EndpointKeys* keys,
                                       const QString& dataFolder, QObject* parent)
    : QObject(parent), m_workers(workers), m_library(library), m_keys(keys), m_dataFolder(dataFolder)
{
    m_access.endpoint = qEnvironmentVariable("HF_ENDPOINT");
    while (m_access.endpoint.endsWith(QLatin1Char('/'))) m_access.endpoint.chop(1);
    if (m_access.endpoint.isEmpty()) m_access.endpoint = QStringLiteral("https://huggingface.co");
    if (m_keys) m_access.token = m_keys->key(m_access.endpoint);

    HubWorker* hub = workers->hub();
    connect(this, &DiscoverController::searchRequested, hub, &HubWorker::search, Qt::QueuedConnection);
    connect(this, &DiscoverController::listRequested, hub, &HubWorker::listFiles, Qt::QueuedConnection);
    connect(hub, &HubWorker::searched, this, [this](const QString& query, const std::vector<server::HubModel>& models) {
        m_repositories = models;
        emit searched(query);
    }, Qt::QueuedConnection);
    connect(hub, &HubWorker::searchFailed, this, [this](const QString& query, const QString& message) {
        m_repositories.clear();
        emit searchFailed(query, message);
    }, Qt::QueuedConnection);
    connect(hub, &HubWorker::filesListed, this, &DiscoverController::onListed, Qt::QueuedConnection);
    connect(hub, &HubWorker::fileJudged, this, &DiscoverController::onJudged, Qt::QueuedConnection);
    connect(hub, &HubWorker::judged, this, [this](const QString& repo) {
        if (repo != m_repo) return;
        m_judging = false;
        emit modelsChanged();
    }, Qt::QueuedConnection);
    connect(hub, &HubWorker::filesFailed, this, [this](const QString& repo, const QString& message) {
        if (repo != m_repo) return;
        m_judging = false;
        emit failed(message);
        emit modelsChanged();
    }, Qt::QueuedConnection);

    HubWorker* downloads = workers->downloads();
    connect(this, &DiscoverController::downloadRequested, downloads, &HubWorker::download, Qt::QueuedConnection);
    connect(downloads, &HubWorker::downloadProgress, this, &DiscoverController::onProgress, Qt::QueuedConnection);
    connect(downloads, &HubWorker::downloaded, this, &DiscoverController::onDownloaded, Qt::QueuedConnection);
    connect(downloads, &HubWorker::downloadStopped, this, &DiscoverController::onStopped, Qt::QueuedConnection);

    // Verdicts need the measured machine: a repository listed before it is judged once it is.
    connect(library, &LibraryController::tuningReady, this, [this] {
        if (!m_judgeWhenMeasured || m_repo.isEmpty()) return;
        m_judgeWhenMeasured = false;
        openRepository(m_repo);
    });
    // A finished download's row says whether the library took it (validated there), or why not.
    connect(library, &LibraryController::modelsListed, this, [this](const QVector<ModelItem>& models) {
        bool changed = false;
        for (auto& e : m_queue) {
            if (e.state != DownloadEntry::State::Done || e.inLibrary) continue;
            for (const auto& m : models)
                if (QFileInfo(m.path) == QFileInfo(e.path)) {
                    e.inLibrary = changed = true;
                    e.message = tr("Checked and added to the library");
                }
        }
        if (changed) {
            save();
            emit queueChanged();
        }
    });
    connect(library, &LibraryController::modelRejected, this, [this](const QString& path, const QString& why) {
        for (auto& e : m_queue)
            if (e.state == DownloadEntry::State::Done && !e.inLibrary && QFileInfo(path) == QFileInfo(e.path)) {
                e.message = tr("Downloaded and checked, but not added to the library: %1").arg(why);
                save();
                emit queueChanged();
            }
    });
    load();
    startNext();
}

QString DiscoverController::setToken(const QString& token, bool remember)
{
    m_access.token = token.trimmed();
    if (!m_keys) return QString();
    const QString why = m_keys->set(m_access.endpoint, m_access.token, remember && !m_access.token.isEmpty());
    if (!why.isEmpty()) emit failed(why);
    return why;
}

int DiscoverController::recommended() const { return server::recommend(m_models, m_minSpeed); }

int DiscoverController::entry(const QString& key) const
{
    for (int i = 0; i < m_queue.size(); ++i)
        if (m_queue[i].key == key) return i;
    return -1;
}

void DiscoverController::search(const QString& query)
{
    if (query.trimmed().isEmpty()) return;
    emit searchRequested(m_access, query.trimmed());
}

void DiscoverController::openRepository(const QString& repo)
{
    m_repo = repo;
    m_models.clear();
    m_otherFiles = 0;
    const bool measured = m_library->isTuningReady();
    m_judgeWhenMeasured = !measured;
    m_judging = measured;
    emit modelsChanged();
    emit listRequested(m_access, repo, measured, m_backend, m_library->modelsFolder());
}

void DiscoverController::setMinTokensPerSecond(double tokensPerSecond)
{
    if (tokensPerSecond == m_minSpeed) return;
    m_minSpeed = tokensPerSecond;
    emit modelsChanged();
}

void DiscoverController::onListed(const QString& repo, const std::vector<server::FileVerdict>& models, int otherFiles)
{
    if (repo != m_repo) return;
    m_models = models;
    m_otherFiles = otherFiles;
    emit modelsChanged();
}

void DiscoverController::onJudged(const QString& repo, const server::FileVerdict& verdict)
{
    if (repo != m_repo) return;
    for (auto& m : m_models)
        if (m.file.path == verdict.file.path) m = verdict;
    emit modelsChanged();
}

bool DiscoverController::download(int index)
{
    if (index < 0 || size_t(index) >= m_models.size()) return false;
    const server::FileVerdict& m = m_models[size_t(index)];
    DownloadEntry e;
    e.repo = m_repo;
    e.key = m_repo + QLatin1Char('/') + QString::fromStdString(m.file.path);
    if (const int at = entry(e.key); at >= 0) {
        if (m_queue[at].state == DownloadEntry::State::Done) return false;
        resume(e.key);
        return false;
    }
    e.folder = m_library->modelsFolder();
    e.parts = m.parts;
    for (const auto& p : e.parts) e.total += qint64(p.size);
    e.done = partBytes(e);
    m_queue.append(e);
    save();
    emit queueChanged();
    startNext();
    return true;
}

void DiscoverController::pause(const QString& key)
{
    const int at = entry(key);
    if (at < 0) return;
    DownloadEntry& e = m_queue[at];
    if (e.state == DownloadEntry::State::Downloading) {
        m_workers->downloads()->pause(key);  // answered by onStopped
        return;
    }
    if (e.state != DownloadEntry::State::Queued) return;
    e.state = DownloadEntry::State::Paused;
    save();
    emit queueChanged();
}

void DiscoverController::resume(const QString& key)
{
    const int at = entry(key);
    if (at < 0) return;
    DownloadEntry& e = m_queue[at];
    if (e.state != DownloadEntry::State::Paused && e.state != DownloadEntry::State::Failed) return;
    e.state = DownloadEntry::State::Queued;
    e.message.clear();
    save();
    emit queueChanged();
    startNext();
}

void DiscoverController::cancel(const QString& key)
{
    const int at = entry(key);
    if (at < 0) return;
    DownloadEntry& e = m_queue[at];
    if (e.state == DownloadEntry::State::Downloading) {
        m_workers->downloads()->cancel(key);  // the worker removes the .part: answered by onStopped
        return;
    }
    if (e.state == DownloadEntry::State::Done) return;
    for (const auto& p : e.parts) {
        const QString dest = partDestination(e.folder, p);
        QFile::remove(dest + QStringLiteral(".part"));
    }
    m_queue.removeAt(at);
    save();
    emit queueChanged();
}

void DiscoverController::clearFinished()
{
    for (int i = int(m_queue.size()) - 1; i >= 0; --i)
        if (m_queue[i].state == DownloadEntry::State::Done || m_queue[i].state == DownloadEntry::State::Failed)
            m_queue.removeAt(i);
    save();
    emit queueChanged();
}

void DiscoverController::onProgress(const QString& key, qint64 done, qint64 total, double bytesPerSecond,
                                    double secondsLeft)
{
    const int at = entry(key);
    if (at < 0) return;
    DownloadEntry& e = m_queue[at];
    e.done = done;
    e.total = total;
    e.bytesPerSecond = bytesPerSecond;
    e.secondsLeft = secondsLeft;
    emit queueChanged();
}

void DiscoverController::onDownloaded(const QString& key, const QString& path)
{
    const int at = entry(key);
    if (at < 0) return;
    DownloadEntry& e = m_queue[at];
    e.state = DownloadEntry::State::Done;
    e.path = path;
    e.done = e.total;
    e.message = tr("Checked; adding it to the library …");
    save();
    m_library->addModel(path);  // validated there; a model the engine cannot run is refused with the reason
    emit queueChanged();
    emit downloadFinished(key, path);
    startNext();
}

void DiscoverController::onStopped(const QString& key, const QString& message, bool paused, bool cancelled)
{
    const int at = entry(key);
    if (at < 0) return;
    if (cancelled) {
        m_queue.removeAt(at);
    } else {
        DownloadEntry& e = m_queue[at];
        e.state = paused ? DownloadEntry::State::Paused : DownloadEntry::State::Failed;
        e.message = paused ? QString() : message;
        e.done = partBytes(e);
        e.bytesPerSecond = e.secondsLeft = 0;
    }
    save();
    emit queueChanged();
    startNext();
}

void DiscoverController::startNext()
{
    for (const auto& e : m_queue)
        if (e.state == DownloadEntry::State::Downloading) return;
    for (auto& e : m_queue)
        if (e.state == DownloadEntry::State::Queued) {
            e.state = DownloadEntry::State::Downloading;
            m_workers->downloads()->clearStop(e.key);
            DownloadJob job;
            job.key = e.key;
            job.repo = e.repo;
            job.folder = e.folder;
            job.parts = e.parts;
            emit downloadRequested(m_access, job);
            save();
            emit queueChanged();
            return;
        }
}

qint64 DiscoverController::partBytes(const DownloadEntry& e) const
{
    qint64 bytes = 0;
    for (const auto& p : e.parts) {
        const QString dest = partDestination(e.folder, p);
        if (QFileInfo::exists(dest + QStringLiteral(".part"))) bytes += QFileInfo(dest + QStringLiteral(".part")).size();
        else if (QFileInfo(dest).size() == qint64(p.size)) bytes += qint64(p.size);
    }
    return bytes;
}

void DiscoverController::load()
{
    QFile f(QDir(m_dataFolder).filePath(QStringLiteral("downloads.json")));
    if (!f.open(QIODevice::ReadOnly)) return;
    const QJsonArray rows = QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("downloads")).toArray();
    for (const QJsonValue& v : rows) {
        const QJsonObject o = v.toObject();
        DownloadEntry e;
        e.repo = o.value(QStringLiteral("repo")).toString();
        e.folder = o.value(QStringLiteral("folder")).toString();
        e.state = stateNamed(o.value(QStringLiteral("state")).toString());
        e.message = o.value(QStringLiteral("message")).toString();
        e.path = o.value(QStringLiteral("path")).toString();
        e.inLibrary = o.value(QStringLiteral("inLibrary")).toBool();
        for (const QJsonValue& pv : o.value(QStringLiteral("parts")).toArray()) {
            const QJsonObject p = pv.toObject();
            server::HubFile part;
            part.path = p.value(QStringLiteral("path")).toString().toStdString();
            part.size = uint64_t(p.value(QStringLiteral("size")).toInteger());
            part.sha256 = p.value(QStringLiteral("sha256")).toString().toStdString();
            e.parts.push_back(part);
            e.total += qint64(part.size);
        }
        if (e.repo.isEmpty() || e.folder.isEmpty() || e.parts.empty()) continue;  // not a row of ours
        e.key = e.repo + QLatin1Char('/') + QString::fromStdString(e.parts.front().path);
        e.done = e.state == DownloadEntry::State::Done ? e.total : partBytes(e);
        if (e.state == DownloadEntry::State::Done && !QFileInfo::exists(e.path)) continue;  // removed since
        m_queue.append(e);
    }
}

void DiscoverController::save() const
{
    QJsonArray rows;
    for (const auto& e : m_queue) {
        QJsonArray parts;
        for (const auto& p : e.parts)
            parts.append(QJsonObject{{QStringLiteral("path"), QString::fromStdString(p.path)},
                                     {QStringLiteral("size"), qint64(p.size)},
                                     {QStringLiteral("sha256"), QString::fromStdString(p.sha256)}});
        rows.append(QJsonObject{{QStringLiteral("repo"), e.repo},
                                {QStringLiteral("folder"), e.folder},
                                {QStringLiteral("state"), QString::fromLatin1(stateName(e.state))},
                                {QStringLiteral("message"), e.message},
                                {QStringLiteral("path"), e.path},
                                {QStringLiteral("inLibrary"), e.inLibrary},
                                {QStringLiteral("parts"), parts}});
    }
    QSaveFile f(QDir(m_dataFolder).filePath(QStringLiteral("downloads.json")));
    if (!f.open(QIODevice::WriteOnly)) return;
    f.write(QJsonDocument(QJsonObject{{QStringLiteral("downloads"), rows}}).toJson());
    f.commit();
}

}  // namespace spillway::ui
