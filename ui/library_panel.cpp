#include "library_panel.h"

#include <QAbstractTextDocumentLayout>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QStyledItemDelegate>
#include <QTextDocument>
#include <QVBoxLayout>
#include <memory>

namespace spillway::ui {

namespace {

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
        doc.setHtml(index.data(ModelCatalogModel::CardHtmlRole).toString());
        const int width = o.widget ? o.widget->width() - 24 : 240;
        doc.setTextWidth(std::max(120, width));
    }
};

}  // namespace

LibraryPanel::LibraryPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    m_add = new QPushButton(tr("Add model…"), this);
    m_add->setObjectName("addModel");
    m_add->setToolTip(tr("Or drop a GGUF file or a package folder anywhere on the window"));
    m_models = new QListView(this);
    m_models->setObjectName("models");
    m_models->setAccessibleName(tr("Model library"));
    m_models->setWordWrap(true);
    m_models->setItemDelegate(new CardDelegate(m_models));
    m_models->setResizeMode(QListView::Adjust);
    m_models->setUniformItemSizes(false);
    m_chatWith = new QPushButton(tr("Chat with this model"), this);
    m_chatWith->setObjectName("chatWithModel");
    m_chatWith->setToolTip(tr("Load the selected model (the one answering now goes on until it is ready)"));
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
    m_bar->setObjectName("compressionBar");
    m_bar->setRange(0, 1000);
    m_bar->setTextVisible(false);
    m_result = new QLabel(this);
    m_result->setObjectName("compressResult");
    m_result->setAccessibleName(tr("Compression result"));
    m_result->setWordWrap(true);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* row = new QHBoxLayout;
    row->addWidget(m_compress, 1);
    row->addWidget(m_cancel);
    row->addWidget(presetButton);
    layout->addWidget(m_add);
    layout->addWidget(m_models, 1);
    layout->addWidget(m_chatWith);
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
    connect(m_chatWith, &QPushButton::clicked, this, [this] {
        if (const qint64 id = selectedModel()) emit chatRequested(id);
    });
    m_models->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_models, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
        const QModelIndex index = m_models->indexAt(at);
        if (!index.isValid()) return;
        const qint64 id = index.data(ModelCatalogModel::IdRole).toLongLong();
        QMenu menu(this);
        QAction* chat = menu.addAction(tr("Chat with this model"));
        QAction* remove = menu.addAction(tr("Remove from library (the files stay)"));
        QAction* chosen = menu.exec(m_models->viewport()->mapToGlobal(at));
        if (chosen == chat) emit chatRequested(id);
        else if (chosen == remove) emit removeRequested(id);
    });
    connect(m_models, &QListView::doubleClicked, this, [this] {
        if (const qint64 id = selectedModel()) emit chatRequested(id);
    });
    setCompressing(false);
}

qint64 LibraryPanel::selectedModel() const
{
    return m_catalog ? m_catalog->idAt(m_models->currentIndex().row()) : 0;
}

void LibraryPanel::setCatalog(ModelCatalogModel* catalog)
{
    m_catalog = catalog;
    m_models->setModel(catalog);
    auto selected = std::make_shared<qint64>(0);
    connect(catalog, &QAbstractItemModel::modelAboutToBeReset, this, [this, selected] { *selected = selectedModel(); });
    connect(catalog, &QAbstractItemModel::modelReset, this, [this, selected] {
        const int row = m_catalog->rowOf(*selected);
        if (m_catalog->rowCount() > 0) m_models->setCurrentIndex(m_catalog->index(row >= 0 ? row : 0));
        setCompressing(m_compressing);
    });
    setCompressing(m_compressing);
}

void LibraryPanel::setCompressing(bool compressing)
{
    m_compressing = compressing;
    const bool any = m_catalog && m_catalog->rowCount() > 0;
    m_compress->setEnabled(!compressing && any);
    m_chatWith->setEnabled(any);
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

void LibraryPanel::showProgressDone() { m_bar->setValue(m_bar->maximum()); }

void LibraryPanel::clearProgress() { m_bar->setValue(0); }

}  // namespace spillway::ui
