#pragma once
// The model library's worker, on its own "models" thread: validates a dropped model (loads it
// with the engine: every size and offset checked) and compresses one into a package with
// progress and cancel. Requests by queued signals; cancelCompression() from any thread.

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <atomic>

namespace spillway::ui {

// A model as the library shows it (a catalog row once stored).
struct ModelItem {
    qint64 id = 0;  // catalog id; 0 until stored
    QString path;
    QString format;        // "gguf", "package"
    QString architecture;
    qint64 parameters = 0;
    qint64 sizeBytes = 0;
    QString qualityJson;   // packages: the compression's quality report
    qint64 parentId = 0;   // packages: the model they were made from
};

class ModelWorker : public QObject {
    Q_OBJECT
public:
    explicit ModelWorker(QObject* parent = nullptr);
    void cancelCompression() { m_cancel.store(true); }  // thread-safe
    // Thread-safe: the GUI clears a stale cancel before it queues a compression (so a cancel
    // that arrives before the worker starts still counts).
    void clearCancel() { m_cancel.store(false); }

public slots:
    void inspect(const QString& path);
    // Writes a package of `sourcePath` to `outDir` with the named preset ("fast", "balanced", "sparse",
    // "smallest"); nothing is left at outDir on failure or cancel.
    void compress(qint64 sourceId, const QString& sourcePath, const QString& outDir, const QString& preset);
    // Asks an OpenAI-compatible endpoint (`url`, its API base) for its models, with the API key
    // given ("" = none): answered by endpointListed, or rejected with the reason.
    void inspectEndpoint(const QString& url, const QString& apiKey);

signals:
    void inspected(const spillway::ui::ModelItem& model);
    void rejected(const QString& path, const QString& message);
    void endpointListed(const QString& url, const QStringList& models);
    void compressProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal,
                          double etaSeconds);
    void compressed(qint64 sourceId, const spillway::ui::ModelItem& package, const QString& summary);
    void compressFailed(const QString& message, bool cancelled);

private:
    std::atomic<bool> m_cancel{false};
};

}  // namespace spillway::ui

Q_DECLARE_METATYPE(spillway::ui::ModelItem)
