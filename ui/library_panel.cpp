#include "library_panel.h"

#include <QAbstractTextDocumentLayout>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QMenu>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QStyledItemDelegate>
#include <QTextDocument>
#include <QVBoxLayout>

namespace spillway::ui {

namespace {

constexpr int kCardHtmlRole = Qt::UserRole + 1;

// Paints an item's card (rich text in kCardHtmlRole) inside the list's normal selection frame.
class CardDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;

    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        QStyleOptionViewItem o = option;
        initStyleOption(&o, index);
        o.text.clear();
        o.widget->style()->drawControl(QStyle::CE_ItemViewItem, &o, painter, o.widget);
        QTextDocument doc;
        setUp(doc, o, index);
        painter->save();
        painter->translate(o.rect.topLeft() + QPoint(4, 2));
        QAbstractTextDocumentLayout::PaintContext context;
        context.palette = o.palette;
        if (o.state & QStyle::State_Selected)
            context.palette.setColor(QPalette::Text, o.palette.color(QPalette::HighlightedText));
        doc.documentLayout()->draw(painter, context);
        painter->restore();
    }

    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        QStyleOptionViewItem o = option;
        initStyleOption(&o, index);
        QTextDocument doc;
        setUp(doc, o, index);
        return QSize(int(doc.idealWidth()) + 8, int(doc.size().height()) + 6);
    }

private:
    static void setUp(QTextDocument& doc, const QStyleOptionViewItem& o, const QModelIndex& index)
    {
        doc.setDefaultFont(o.font);
        doc.setHtml(index.data(kCardHtmlRole).toString());
        const int width = o.widget ? o.widget->width() - 24 : 240;
        doc.setTextWidth(std::max(120, width));
    }
};

}  // namespace

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

LibraryPanel::LibraryPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_add = new QPushButton(tr("Add model…"), this);
    m_add->setObjectName("addModel");
    m_add->setToolTip(tr("Or drop a GGUF file or a package folder anywhere on the window"));
    m_models = new QListWidget(this);
    m_models->setObjectName("models");
    m_models->setWordWrap(true);
    m_models->setItemDelegate(new CardDelegate(m_models));
    m_models->setResizeMode(QListView::Adjust);
    m_models->setUniformItemSizes(false);
    m_compress = new QPushButton(tr("Compress"), this);
    m_compress->setObjectName("compress");
    m_compress->setToolTip(tr("Prune and quantize the selected model into a package (balanced preset)"));
    auto* presets = new QMenu(this);
    const std::pair<const char*, const char*> choices[] = {
        {"fast", QT_TR_NOOP("fast: int8 (Q8_0), about half the size, nearly lossless")},
        {"balanced", QT_TR_NOOP("balanced: 50% pruned (Wanda), bitmap sparse fp16 (recommended)")},
        {"smallest", QT_TR_NOOP("smallest: 50% pruned, bitmap sparse int8")},
        {"sparse", QT_TR_NOOP("sparse: for the neuron cache (ReLU models): bundles and activation predictors")},
    };
    for (const auto& [preset, label] : choices)
        presets->addAction(tr(label), this, [this, name = QString::fromUtf8(preset)] {
            if (const qint64 id = selectedModel()) emit compressRequested(id, name);
        });
    auto* presetButton = new QPushButton(tr("Presets"), this);
    presetButton->setMenu(presets);
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName("cancelCompress");
    m_bar = new QProgressBar(this);
    m_bar->setRange(0, 1000);
    m_bar->setTextVisible(false);
    m_result = new QLabel(this);
    m_result->setObjectName("compressResult");
    m_result->setWordWrap(true);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* row = new QHBoxLayout;
    row->addWidget(m_compress, 1);
    row->addWidget(m_cancel);
    row->addWidget(presetButton);
    layout->addWidget(m_add);
    layout->addWidget(m_models, 1);
    layout->addLayout(row);
    layout->addWidget(m_bar);
    layout->addWidget(m_result);

    connect(m_add, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Add a model"), QString(),
                                                          tr("Models (*.gguf manifest.json config.json *.safetensors *.bin);;All files (*)"));
        if (!path.isEmpty()) emit addRequested(path);
    });
    connect(m_compress, &QPushButton::clicked, this, [this] {
        if (const qint64 id = selectedModel()) emit compressRequested(id, QStringLiteral("balanced"));
    });
    connect(m_cancel, &QPushButton::clicked, this, &LibraryPanel::cancelRequested);
    setCompressing(false);
}

QString LibraryPanel::resultText() const { return m_result->text(); }

const ModelItem* LibraryPanel::model(qint64 id) const
{
    for (const ModelItem& m : m_catalog)
        if (m.id == id) return &m;
    return nullptr;
}

qint64 LibraryPanel::selectedModel() const
{
    const QListWidgetItem* item = m_models->currentItem();
    return item ? item->data(Qt::UserRole).toLongLong() : 0;
}

QString LibraryPanel::cardText(const ModelItem& m) const
{
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
    const QString predicted = m_predictions.value(m.path);
    html += QStringLiteral("<br><i>%1</i>")
                .arg((predicted.isEmpty() ? tr("Predicted here: planning …") : predicted).toHtmlEscaped());
    return html;
}

void LibraryPanel::refreshCards()
{
    for (int i = 0; i < m_models->count(); ++i) {
        QListWidgetItem* item = m_models->item(i);
        if (const ModelItem* m = model(item->data(Qt::UserRole).toLongLong())) {
            const QString html = cardText(*m);
            item->setData(kCardHtmlRole, html);
            QTextDocument doc;
            doc.setHtml(html);
            item->setText(doc.toPlainText());  // for accessibility, search and tests
            item->setToolTip(m->path);
        }
    }
}

void LibraryPanel::setModels(const QVector<ModelItem>& models)
{
    const qint64 selected = selectedModel();
    m_catalog = models;
    m_models->clear();
    // Sources first, each followed by its packages.
    QVector<ModelItem> ordered;
    for (const ModelItem& m : models) {
        if (m.parentId > 0 && model(m.parentId)) continue;
        ordered.push_back(m);
        for (const ModelItem& p : models)
            if (p.parentId == m.id) ordered.push_back(p);
    }
    for (const ModelItem& m : ordered) {
        auto* item = new QListWidgetItem(m_models);
        item->setData(Qt::UserRole, m.id);
        if (m.id == selected) m_models->setCurrentItem(item);
    }
    refreshCards();
    if (!m_models->currentItem() && m_models->count()) m_models->setCurrentRow(0);
    setCompressing(m_compressing);
}

void LibraryPanel::setPrediction(const QString& path, const QString& text)
{
    m_predictions.insert(path, text);
    refreshCards();
}

void LibraryPanel::setCompressing(bool compressing)
{
    m_compressing = compressing;
    m_compress->setEnabled(!compressing && m_models->count() > 0);
    m_cancel->setEnabled(compressing);
    if (compressing) m_bar->setValue(0);
}

void LibraryPanel::showProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal, double eta)
{
    m_bar->setValue(int(fraction * 1000.0));
    QString text = tr("%1: %2%").arg(stage).arg(int(fraction * 100.0));
    if (bytesTotal > 0)
        text += tr(", %1 of %2").arg(QLocale().formattedDataSize(bytesDone), QLocale().formattedDataSize(bytesTotal));
    if (eta >= 0) text += tr(", about %1 s left").arg(int(eta + 0.5));
    m_result->setText(text);
}

void LibraryPanel::showResult(const QString& text) { m_result->setText(text); }

}  // namespace spillway::ui
