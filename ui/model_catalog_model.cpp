#include "model_catalog_model.h"

#include "palette_colors.h"
#include "readable.h"
#include "remote_endpoint.h"

#include <QFileInfo>
#include <QGuiApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QTextDocument>
#include <cmath>

namespace spillway::ui {

QString qualityInWords(const QString& qualityJson)
{
    const QJsonObject q = QJsonDocument::fromJson(qualityJson.toUtf8()).object();
    if (q.isEmpty()) return QString();
    QString text = QObject::tr("mean KL %1, top-1 agreement %2%")
                       .arg(q.value("meanKl").toDouble(), 0, 'g', 3)
                       .arg(100.0 * q.value("top1Agreement").toDouble(), 0, 'f', 1);
    const double pr = q.value("perplexityReference").toDouble(), pc = q.value("perplexityCandidate").toDouble();
    if (pr > 0 && pc > 0) text += QObject::tr(", perplexity %1 → %2").arg(pr, 0, 'f', 2).arg(pc, 0, 'f', 2);
    return text;
}

bool qualityPasses(const QString& qualityJson, QString* why)
{
    const QJsonObject q = QJsonDocument::fromJson(qualityJson.toUtf8()).object();
    if (q.isEmpty() || !q.contains(QLatin1String("top1Agreement"))) return true;
    QStringList failed;
    const double top1 = q.value("top1Agreement").toDouble();
    if (top1 < kMinTop1Agreement)
        failed << QObject::tr("top-1 agreement %1% (the bar: %2%)")
                      .arg(100.0 * top1, 0, 'f', 1)
                      .arg(100.0 * kMinTop1Agreement, 0, 'f', 0);
    const double pr = q.value("perplexityReference").toDouble(), pc = q.value("perplexityCandidate").toDouble();
    if (pr > 0 && pc > 0 && pc / pr > kMaxPerplexityRatio)
        failed << QObject::tr("perplexity ×%1 (the bar: ×%2)").arg(pc / pr, 0, 'f', 2).arg(kMaxPerplexityRatio, 0, 'f', 2);
    if (why) *why = failed.join(QStringLiteral(", "));
    return failed.isEmpty();
}

QString recommendedPreset(const QVector<ModelItem>& catalog, qint64 id)
{
    QString best = QStringLiteral("fast");
    qint64 bestBytes = -1;
    for (const ModelItem& m : catalog) {
        if (m.parentId != id || m.qualityJson.isEmpty() || !qualityPasses(m.qualityJson)) continue;
        const QString preset = QJsonDocument::fromJson(m.qualityJson.toUtf8()).object().value("preset").toString();
        if (preset.isEmpty()) continue;
        if (bestBytes < 0 || m.sizeBytes < bestBytes) {
            best = preset;
            bestBytes = m.sizeBytes;
        }
    }
    return best;
}

int ModelCatalogModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

QVariant ModelCatalogModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= m_rows.size()) return {};
    const ModelItem& m = m_rows[index.row()];
    switch (role) {
    case Qt::DisplayRole: {
        QTextDocument doc;
        doc.setHtml(cardHtml(m));
        return doc.toPlainText();
    }
    case CardHtmlRole: return cardHtml(m);
    case SummaryRole: {
        if (const auto remote = parseEndpointPath(m.path))
            return tr("%1 · remote · %2").arg(remote->model, endpointHost(remote->url));
        QString line = QStringLiteral("%1 · %2 · %3").arg(QFileInfo(m.path).fileName(), m.format,
                                                           QLocale().formattedDataSize(m.sizeBytes));
        if (const double speed = m_speeds.value(m.path); speed > 0)
            line += tr(" · ~%1 tokens/s here").arg(readable(speed));
        return line;
    }
    case IdRole: return m.id;
    case PathRole:
    case Qt::ToolTipRole: return m.path;
    default: return {};
    }
}

void ModelCatalogModel::setModels(const QVector<ModelItem>& models)
{
    beginResetModel();
    m_catalog = models;
    m_rows.clear();
    for (const ModelItem& m : models) {
        if (m.parentId > 0 && model(m.parentId)) continue;
        m_rows.push_back(m);
        for (const ModelItem& p : models)
            if (p.parentId == m.id) m_rows.push_back(p);
    }
    endResetModel();
}

const ModelItem* ModelCatalogModel::model(qint64 id) const
{
    for (const ModelItem& m : m_catalog)
        if (m.id == id) return &m;
    return nullptr;
}

qint64 ModelCatalogModel::idAt(int row) const { return row >= 0 && row < m_rows.size() ? m_rows[row].id : 0; }

qint64 ModelCatalogModel::idOfPath(const QString& path) const
{
    for (const ModelItem& m : m_catalog)
        if (m.path == path) return m.id;
    return 0;
}

int ModelCatalogModel::rowOf(qint64 id) const
{
    for (int i = 0; i < m_rows.size(); ++i)
        if (m_rows[i].id == id) return i;
    return -1;
}

void ModelCatalogModel::setPrediction(const QString& path, const QString& text, double tokensPerSecond)
{
    m_predictions.insert(path, text);
    if (tokensPerSecond > 0) m_speeds.insert(path, tokensPerSecond);
    for (int i = 0; i < m_rows.size(); ++i)
        if (m_rows[i].path == path) emit dataChanged(index(i), index(i));
}

QVariant ModelPickerModel::data(const QModelIndex& index, int role) const
{
    if (role == Qt::DisplayRole || role == Qt::AccessibleTextRole)
        return QIdentityProxyModel::data(index, ModelCatalogModel::SummaryRole);
    return QIdentityProxyModel::data(index, role);
}

QString ModelCatalogModel::cardHtml(const ModelItem& m) const
{
    if (const auto remote = parseEndpointPath(m.path))
        return tr("<b>%1</b><br>Remote model · OpenAI-compatible endpoint<br>%2<br><i>Computed on %3: nothing "
                  "is loaded or planned here; the visualizer shows the time to first token and tokens/s over "
                  "the network</i>")
            .arg(remote->model.toHtmlEscaped(), remote->url.toHtmlEscaped(), endpointHost(remote->url).toHtmlEscaped());
    const QLocale locale;
    QString html = QStringLiteral("<b>%1</b><br>%2 · %3 · %4 M parameters · %5")
                       .arg(QFileInfo(m.path).fileName().toHtmlEscaped(), m.format.toHtmlEscaped(),
                            m.architecture.toHtmlEscaped())
                       .arg(double(m.parameters) / 1e6, 0, 'f', 2)
                       .arg(locale.formattedDataSize(m.sizeBytes));
    if (const ModelItem* parent = m.parentId > 0 ? model(m.parentId) : nullptr)
        html += tr("<br>from %1 (%2 → %3)")
                    .arg(QFileInfo(parent->path).fileName().toHtmlEscaped(), locale.formattedDataSize(parent->sizeBytes),
                         locale.formattedDataSize(m.sizeBytes));
    if (const QString q = qualityInWords(m.qualityJson); !q.isEmpty()) html += "<br>" + q.toHtmlEscaped();
    if (QString why; !qualityPasses(m.qualityJson, &why))
        html += QStringLiteral("<br><span style=\"color:%1\"><b>%2</b></span>")
                    .arg(errorColor(QGuiApplication::palette()).name(),
                         tr("⚠ Below the quality bar: %1. Its replies may be wrong or garbled; the "
                            "\"fast\" preset keeps the model's quality.")
                             .arg(why)
                             .toHtmlEscaped());
    const QString predicted = m_predictions.value(m.path);
    html += QStringLiteral("<br><i>%1</i>")
                .arg((predicted.isEmpty() ? tr("Predicted here: planning …") : predicted).toHtmlEscaped());
    return html;
}

}  // namespace spillway::ui
