#include "hub_worker.h"

#include <QDir>
#include <QFileInfo>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "core/hw/probe.h"
#include "tuning_worker.h"

namespace spillway::ui {

namespace {

Result<std::unique_ptr<server::HubClient>> openHub(const HubAccess& access)
{
    server::HubOptions o;
    o.endpoint = access.endpoint.toStdString();
    o.token = access.token.toStdString();
    return server::HubClient::open(o);
}

QString text(const Error& e) { return QString::fromStdString(e.message); }

}  // namespace

QString partDestination(const QString& folder, const server::HubFile& part)
{
    return QDir(folder).filePath(QFileInfo(QString::fromStdString(part.path)).fileName());
}

HubWorker::HubWorker(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<HubAccess>();
    qRegisterMetaType<DownloadJob>();
    qRegisterMetaType<std::vector<server::HubModel>>();
    qRegisterMetaType<std::vector<server::FileVerdict>>();
    qRegisterMetaType<server::FileVerdict>();
}

void HubWorker::pause(const QString& key)
{
    QMutexLocker lock(&m_mutex);
    m_pause.insert(key);
}

void HubWorker::cancel(const QString& key)
{
    QMutexLocker lock(&m_mutex);
    m_cancel.insert(key);
}

void HubWorker::clearStop(const QString& key)
{
    QMutexLocker lock(&m_mutex);
    m_pause.remove(key);
    m_cancel.remove(key);
}

void HubWorker::search(const HubAccess& access, const QString& query)
{
    auto hub = openHub(access);
    if (!hub) return emit searchFailed(query, text(hub.error()));
    auto models = (*hub)->search(query.trimmed().toStdString(), 30);
    if (!models) return emit searchFailed(query, text(models.error()));
    emit searched(query, *models);
}

void HubWorker::listFiles(const HubAccess& access, const QString& repo, bool judge, const QString& backend,
                          const QString& storageFolder)
{
    auto hub = openHub(access);
    if (!hub) return emit filesFailed(repo, text(hub.error()));
    const std::string id = repo.toStdString();
    auto files = (*hub)->files(id);
    if (!files) return emit filesFailed(repo, text(files.error()));
    const std::vector<server::FileVerdict> models = server::repositoryModels(*files);
    int others = 0;
    for (const auto& f : *files) others += server::isGgufPath(f.path) ? 0 : 1;
    emit filesListed(repo, models, others);
    if (!judge || models.empty()) return emit judged(repo);
    // The machine as the Tuning view measured it (its cache answers: judging waits for it).
    auto profile = hw::probeHardware(appProbeOptions(storageFolder));
    if (!profile) return emit filesFailed(repo, text(profile.error()));
    for (const auto& m : models)
        emit fileJudged(repo, server::judgeFile(**hub, id, m.file, *files, *profile, backend.toStdString(),
                                                server::defaultHeaderCacheDir()));
    emit judged(repo);
}

void HubWorker::download(const HubAccess& access, const DownloadJob& job)
{
    auto stopWith = [this, &job](const QString& message, bool paused, bool cancelled) {
        {
            QMutexLocker lock(&m_mutex);
            m_pause.remove(job.key);
            m_cancel.remove(job.key);
        }
        emit downloadStopped(job.key, message, paused, cancelled);
    };
    auto hub = openHub(access);
    if (!hub) return stopWith(text(hub.error()), false, false);
    QDir().mkpath(job.folder);
    uint64_t total = 0, before = 0;  // all parts; the parts finished before this one
    for (const auto& p : job.parts) total += p.size;
    QStringList written;  // this job's finished parts (a cancel removes them too)
    for (const auto& part : job.parts) {
        const QString dest = partDestination(job.folder, part);
        if (QFileInfo(dest).size() == qint64(part.size) && !QFileInfo::exists(dest + QStringLiteral(".part"))) {
            before += part.size;  // a part downloaded and checked before
            continue;
        }
        server::DownloadOptions o;
        auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
        o.progress = [&](const server::DownloadProgress& p) {
            {
                QMutexLocker lock(&m_mutex);
                if (m_cancel.contains(job.key)) return server::DownloadControl::Cancel;
                if (m_pause.contains(job.key) || m_stopAll.load()) return server::DownloadControl::Pause;
            }
            const auto now = std::chrono::steady_clock::now();
            if (now - last >= std::chrono::milliseconds(200) || p.done == p.total) {
                last = now;
                const uint64_t done = before + p.done;
                const double left = p.bytesPerSecond > 0 ? double(total - done) / p.bytesPerSecond : 0;
                emit downloadProgress(job.key, qint64(done), qint64(total), p.bytesPerSecond, left);
            }
            return server::DownloadControl::Continue;
        };
        auto r = (*hub)->download(job.repo.toStdString(), part, dest.toStdString(), o);
        if (!r) {
            bool paused = false, cancelled = false;
            {
                QMutexLocker lock(&m_mutex);
                paused = m_pause.contains(job.key);
                cancelled = m_cancel.contains(job.key);
            }
            if (cancelled)
                for (const QString& w : written) QFile::remove(w);
            return stopWith(text(r.error()), paused && !cancelled, cancelled);
        }
        written << dest;
        before += part.size;
    }
    emit downloadProgress(job.key, qint64(total), qint64(total), 0, 0);
    {
        QMutexLocker lock(&m_mutex);
        m_pause.remove(job.key);
        m_cancel.remove(job.key);
    }
    emit downloaded(job.key, partDestination(job.folder, job.parts.front()));
}

}  // namespace spillway::ui
