#pragma once
// The Models view: the catalog as a grid of cards (name, format, architecture, parameters, size on disk,
// what the planner predicts on this machine; for packages their quality and the model they came
// from), Add model…, and Compress (the recommended preset: the smallest measured to pass the quality bar on the model; a menu offers the others, with what they measured) with progress,
// bytes, ETA and Cancel. It shows its catalog model (model_catalog_model.h) and collects; ChatWindow
// talks to the workers.

#include <QVector>
#include <QWidget>

#include "model_catalog_model.h"

class QLabel;
class QListView;
class QProgressBar;
class QPushButton;

namespace spillway::ui {

class LibraryPanel : public QWidget {
    Q_OBJECT
public:
    explicit LibraryPanel(QWidget* parent = nullptr);

    // The catalog it shows (LibraryController's); a new listing keeps the selected model, else
    // selects the first.
    void setCatalog(ModelCatalogModel* catalog);
    qint64 selectedModel() const;  // 0 when none
    QString recommended() const;   // the preset Compress uses for the selected model (recommendedPreset)

    void setCompressing(bool compressing);
    void showProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal, double eta);
    void showResult(const QString& text);
    // A model that could not be added (Add model…, a drop): shown in red above the grid until
    // dismissed or the next add (libraryError, libraryErrorDismiss); empty = hidden.
    void showError(const QString& text);
    QString errorText() const;
    void showProgressDone();  // the bar full
    void clearProgress();     // the bar empty (a cancelled or failed compression)
    // The "Add endpoint…" dialog (endpointDialog: endpointUrl, endpointKey, rememberKey).
    void askEndpoint();

signals:
    void addRequested(const QString& path);
    // "Add endpoint…": the address typed, its API key ("" = none), whether to keep the key.
    void addEndpointRequested(const QString& url, const QString& apiKey, bool rememberKey);
    void compressRequested(qint64 id, const QString& preset);
    void chatRequested(qint64 id);    // "Chat with this model" on the selected card
    void removeRequested(qint64 id);  // "Remove from library" (its context menu)
    void cancelRequested();

private:
    ModelCatalogModel* m_catalog = nullptr;
    QListView* m_models = nullptr;
    QPushButton* m_add = nullptr;
    QPushButton* m_addEndpoint = nullptr;
    QPushButton* m_chatWith = nullptr;
    QPushButton* m_compress = nullptr;
    QPushButton* m_presetButton = nullptr;
    QPushButton* m_cancel = nullptr;
    QProgressBar* m_bar = nullptr;
    QLabel* m_result = nullptr;
    QWidget* m_errorRow = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_selected = nullptr;  // the selected card's one-line summary, beside its actions
    bool m_compressing = false;
};

}  // namespace spillway::ui
