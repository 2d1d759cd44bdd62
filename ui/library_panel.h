#pragma once
// The Models tab: the catalog as cards (name, format, architecture, parameters, size on disk,
// what the planner predicts on this machine; for packages their quality and the model they came
// from), Add model…, and Compress (recommended preset; a menu offers the others) with progress,
// bytes, ETA and Cancel. It shows and collects; ChatWindow talks to the workers.

#include <QHash>
#include <QVector>
#include <QWidget>

#include "model_worker.h"

class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;

namespace spillway::ui {

class LibraryPanel : public QWidget {
    Q_OBJECT
public:
    explicit LibraryPanel(QWidget* parent = nullptr);

    QListWidget* modelList() const { return m_models; }  // item data (Qt::UserRole): catalog id
    QProgressBar* compressionBar() const { return m_bar; }
    QPushButton* compressButton() const { return m_compress; }
    QPushButton* cancelButton() const { return m_cancel; }
    QString resultText() const;

    void setModels(const QVector<ModelItem>& models);
    const QVector<ModelItem>& models() const { return m_catalog; }
    const ModelItem* model(qint64 id) const;
    qint64 selectedModel() const;  // 0 when none
    // "Predicted here: 12.3 tokens/s (RAM 60%, SSD 40%)", shown on the model's card.
    void setPrediction(const QString& path, const QString& text);
    QString prediction(const QString& path) const { return m_predictions.value(path); }

    void setCompressing(bool compressing);
    void showProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal, double eta);
    void showResult(const QString& text);

signals:
    void addRequested(const QString& path);
    void compressRequested(qint64 id, const QString& preset);
    void cancelRequested();

private:
    QString cardText(const ModelItem& m) const;
    void refreshCards();

    QListWidget* m_models = nullptr;
    QPushButton* m_add = nullptr;
    QPushButton* m_compress = nullptr;
    QPushButton* m_cancel = nullptr;
    QProgressBar* m_bar = nullptr;
    QLabel* m_result = nullptr;
    QVector<ModelItem> m_catalog;
    QHash<QString, QString> m_predictions;  // by path
    bool m_compressing = false;
};

// The quality report of a package (compare JSON) in words: "mean KL 0.0123, top-1 97.9%".
QString qualityInWords(const QString& qualityJson);

}  // namespace spillway::ui
