#pragma once
// The Discover view's worker (server/hub.h and server/hub_verdict.h below it). Two of them run, on
// threads of their own: "hub" searches, lists a repository's files and judges each GGUF from its
// header (the planner for this machine), "downloads" downloads one model at a time, resumably and
// checked. Requests by queued signals; pause() and cancel() from any thread.

#include <QMetaType>
#include <QMutex>
#include <QObject>
#include <QSet>
#include <QString>
#include <atomic>
#include <vector>

#include "server/hub.h"
#include "server/hub_verdict.h"

namespace spillway::ui {

// Where the Hub is and how to reach a gated repository: the endpoint ("" = $HF_ENDPOINT, else
// huggingface.co) and the access token ("" = huggingface-cli's).
struct HubAccess {
    QString endpoint;
    QString token;
};

// One model to download: its parts (one file unless sharded) into `folder`.
struct DownloadJob {
    QString key;  // "REPO/FILE" of its first part
    QString repo;
    QString folder;
    std::vector<server::HubFile> parts;
};

// Where a downloaded part goes: its file name (the repository's folders left out) in `folder`;
// its download in progress is that path plus ".part".
QString partDestination(const QString& folder, const server::HubFile& part);

class HubWorker : public QObject {
    Q_OBJECT
public:
    explicit HubWorker(QObject* parent = nullptr);

    // The download `key` stops at its next progress report: paused keeps its .part files, a
    // cancel removes them. Thread-safe; a key not downloading yet is stopped when it starts.
    void pause(const QString& key);
    void cancel(const QString& key);
    // Every download pauses at its next progress report, now and from now on (the app is ending:
    // its .part files stay for the next start). Thread-safe.
    void stopAll() { m_stopAll.store(true); }
    // Forgets a pause or cancel of `key` that came too late to count (before it is queued again).
    void clearStop(const QString& key);

public slots:
    void search(const spillway::ui::HubAccess& access, const QString& query);
    // The repository's files (filesListed), then, where `judge` (the machine is measured; the
    // probe's cache answers), the verdict on each GGUF model one by one (fileJudged), then
    // judged. storageFolder and backend: as the Tuning view plans.
    void listFiles(const spillway::ui::HubAccess& access, const QString& repo, bool judge, const QString& backend,
                   const QString& storageFolder);
    void download(const spillway::ui::HubAccess& access, const spillway::ui::DownloadJob& job);

signals:
    void searched(const QString& query, const std::vector<spillway::server::HubModel>& models);
    void searchFailed(const QString& query, const QString& message);
    // GGUF models of the repository, unjudged yet (later shards folded into their first part).
    void filesListed(const QString& repo, const std::vector<spillway::server::FileVerdict>& models, int otherFiles);
    void fileJudged(const QString& repo, const spillway::server::FileVerdict& verdict);
    void judged(const QString& repo);
    void filesFailed(const QString& repo, const QString& message);
    // part: which of the job's parts (0-based); done/total over all its parts.
    void downloadProgress(const QString& key, qint64 done, qint64 total, double bytesPerSecond, double secondsLeft);
    void downloaded(const QString& key, const QString& path);
    // paused: stopped by pause() (the .part kept); cancelled: by cancel() (removed); else failed.
    void downloadStopped(const QString& key, const QString& message, bool paused, bool cancelled);

private:
    std::atomic<bool> m_stopAll{false};
    QMutex m_mutex;
    QSet<QString> m_pause, m_cancel;
};

}  // namespace spillway::ui

Q_DECLARE_METATYPE(spillway::ui::HubAccess)
Q_DECLARE_METATYPE(spillway::ui::DownloadJob)
Q_DECLARE_METATYPE(std::vector<spillway::server::HubModel>)
Q_DECLARE_METATYPE(std::vector<spillway::server::FileVerdict>)
Q_DECLARE_METATYPE(spillway::server::FileVerdict)
