#pragma once
// The model catalog as a Qt item model: sources first, each followed by the packages made from
// it. Per row: the card (CardHtmlRole: name, format, architecture, parameters, size on disk, what
// the planner predicts here; for packages their quality and the model they came from), the same
// as plain text (DisplayRole: accessibility, search, tests), the catalog id (IdRole) and the path
// (PathRole, also the tooltip).

#include <QAbstractListModel>
#include <QIdentityProxyModel>
#include <QHash>
#include <QVector>

#include "model_worker.h"

namespace spillway::ui {

class ModelCatalogModel : public QAbstractListModel {
    Q_OBJECT
public:
    // SummaryRole: one line, "name · format · size · ~N tokens/s here" (the model picker's).
    enum Role { IdRole = Qt::UserRole, CardHtmlRole, PathRole, SummaryRole };
    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = QModelIndex()) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

    void setModels(const QVector<ModelItem>& models);
    const QVector<ModelItem>& models() const { return m_catalog; }  // as the store listed them
    const ModelItem* model(qint64 id) const;
    qint64 idAt(int row) const;  // 0 outside the list
    int rowOf(qint64 id) const;  // -1 when absent
    qint64 idOfPath(const QString& path) const;  // 0 when absent
    // "Predicted here: 12.3 tokens/s (RAM 60%, SSD 40%)", shown on the model's card.
    void setPrediction(const QString& path, const QString& text, double tokensPerSecond = 0);
    QString prediction(const QString& path) const { return m_predictions.value(path); }

private:
    QString cardHtml(const ModelItem& m) const;

    QVector<ModelItem> m_catalog;
    QVector<ModelItem> m_rows;  // display order
    QHash<QString, QString> m_predictions;  // by path
    QHash<QString, double> m_speeds;        // by path: predicted tokens/s
};

// The catalog as the model picker shows it: each model's one-line summary (SummaryRole) as its
// text.
class ModelPickerModel : public QIdentityProxyModel {
    Q_OBJECT
public:
    using QIdentityProxyModel::QIdentityProxyModel;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
};


// The quality report of a package (compare JSON) in words: "mean KL 0.0123, top-1 97.9%".
QString qualityInWords(const QString& qualityJson);

// The quality bar a package must pass to be recommended and not flagged: its greedy choice agrees
// with the original's on at least kMinTop1Agreement of the positions, and its perplexity is at
// most kMaxPerplexityRatio times the original's (where measured). Int8 (the "fast" preset) keeps
// 99-100 % on the test models; 50 % pruning of a 260K-parameter model keeps 29 % (perplexity x4).
inline constexpr double kMinTop1Agreement = 0.90;
inline constexpr double kMaxPerplexityRatio = 1.25;
// Whether a quality report passes the bar; `why` (may be null) says what failed. No report (an
// original, or a package from before reports): passes.
bool qualityPasses(const QString& qualityJson, QString* why = nullptr);
// The preset recommended for compressing the catalog model `id`: the one of its packages, among
// those whose measured quality passes, that made the smallest; "fast" (int8, nearly lossless)
// while none of the smaller presets has been measured to pass on it.
QString recommendedPreset(const QVector<ModelItem>& catalog, qint64 id);

}  // namespace spillway::ui
