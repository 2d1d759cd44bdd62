#pragma once
// The Discover view's state without widgets (issue 32): the Hub search, the chosen repository's
// GGUF models with the planner's verdict on each for this machine (from their headers: nothing is
// downloaded to judge), the recommendation (the largest model predicted at or above a tokens/s
// floor), and the download queue: one model at a time on the "downloads" thread, resumable,
// checked, paused, resumed or cancelled; kept in <data folder>/downloads.json so that it
// survives a restart (a download that the exit interrupted is queued again; a paused one stays
// paused). A finished model goes to the data folder's models/ and into the library's catalog.
// The Hub's address is $HF_ENDPOINT, else https://huggingface.co; the access token for gated
// repositories is the one the user gave here (kept with the endpoints' keys, 0600, when asked
// to), else huggingface-cli's.

#include <QObject>
#include <QString>
#include <QVector>
#include <vector>

#include "hub_worker.h"

namespace spillway::ui {

class EndpointKeys;
class LibraryController;
class WorkerThreads;

struct DownloadEntry {
    enum class State { Queued, Downloading, Paused, Failed, Done };
    QString key;     // "REPO/FILE"
    QString repo;
    QString folder;  // where its files go
    std::vector<server::HubFile> parts;
    State state = State::Queued;
    qint64 done = 0, total = 0;
    double bytesPerSecond = 0, secondsLeft = 0;
    QString message;  // why it failed or paused; where it went when done
    QString path;     // done: the model file
    bool inLibrary = false;  // done: the library's catalog took it
    QString fileName() const;
};

class DiscoverController : public QObject {
    Q_OBJECT
public:
    // Needs workers with a data folder; library: where finished models are catalogued and whether
    // the machine is measured (not owned); keys: where a remembered token goes (may be null).
    DiscoverController(WorkerThreads* workers, LibraryController* library, EndpointKeys* keys,
                       const QString& dataFolder, QObject* parent = nullptr);

    QString endpoint() const { return m_access.endpoint; }
    bool hasOwnToken() const { return !m_access.token.isEmpty(); }  // one given in the app
    // The token for gated repositories ("" forgets it); remember: on disk (0600). Returns "" or
    // why it could not be kept on disk.
    QString setToken(const QString& token, bool remember);
    void setBackend(const QString& backend) { m_backend = backend; }  // what the verdicts plan for

    const std::vector<server::HubModel>& repositories() const { return m_repositories; }
    QString repository() const { return m_repo; }  // the one whose files are listed
    const std::vector<server::FileVerdict>& models() const { return m_models; }
    bool isJudging() const { return m_judging; }
    int otherFiles() const { return m_otherFiles; }  // files of the repository that are no GGUF
    double minTokensPerSecond() const { return m_minSpeed; }
    int recommended() const;  // index in models(), or -1
    const QVector<DownloadEntry>& queue() const { return m_queue; }
    int entry(const QString& key) const;  // index in queue(), or -1

public slots:
    void search(const QString& query);
    void openRepository(const QString& repo);
    void setMinTokensPerSecond(double tokensPerSecond);
    // Queues models()[index] (every part of a sharded one); false when it is queued already.
    bool download(int index);
    void pause(const QString& key);
    void resume(const QString& key);  // a paused or failed one: from its .part
    void cancel(const QString& key);  // removes its .part files and its row
    void clearFinished();             // the done and failed rows

signals:
    void searched(const QString& query);
    void modelsChanged();     // the repository's models or their verdicts
    void queueChanged();
    void failed(const QString& message);  // a listing that failed, a token not kept
    void searchFailed(const QString& query, const QString& message);  // why a search found nothing
    void downloadFinished(const QString& key, const QString& path);
    // To the workers (queued).
    void searchRequested(const spillway::ui::HubAccess& access, const QString& query);
    void listRequested(const spillway::ui::HubAccess& access, const QString& repo, bool judge, const QString& backend,
                       const QString& storageFolder);
    void downloadRequested(const spillway::ui::HubAccess& access, const spillway::ui::DownloadJob& job);

private:
    void onListed(const QString& repo, const std::vector<server::FileVerdict>& models, int otherFiles);
    void onJudged(const QString& repo, const server::FileVerdict& verdict);
    void onProgress(const QString& key, qint64 done, qint64 total, double bytesPerSecond, double secondsLeft);
    void onDownloaded(const QString& key, const QString& path);
    void onStopped(const QString& key, const QString& message, bool paused, bool cancelled);
    void startNext();  // the first queued entry, when none downloads
    void load();       // downloads.json
    void save() const;
    qint64 partBytes(const DownloadEntry& e) const;  // on disk already (.part files and finished parts)

    WorkerThreads* m_workers;
    LibraryController* m_library;
    EndpointKeys* m_keys;
    QString m_dataFolder;
    HubAccess m_access;
    QString m_backend = QStringLiteral("cpu");
    std::vector<server::HubModel> m_repositories;
    QString m_repo;
    std::vector<server::FileVerdict> m_models;
    int m_otherFiles = 0;
    bool m_judging = false;
    bool m_judgeWhenMeasured = false;  // listed before the machine was measured
    double m_minSpeed = 5.0;
    QVector<DownloadEntry> m_queue;
};

}  // namespace spillway::ui
