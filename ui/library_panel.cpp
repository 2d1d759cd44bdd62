#include "library_panel.h"

#include <QAbstractTextDocumentLayout>
#include <QCheckBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QStandardPaths>
#include <QStyledItemDelegate>
#include <QTextDocument>
#include <QVBoxLayout>
#include <memory>

#include "palette_colors.h"
#include "remote_endpoint.h"

namespace spillway::ui {

namespace {

// The cards' width in the grid (the text's; the frame adds kCardPadding each side).
constexpr int kCardWidth = 330;
constexpr int kCardPadding = 8;

// Paints an item's card (rich text in kCardHtmlRole) in a frame, inside the view's normal
// selection.
class CardDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;

    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        QStyleOptionViewItem o = option;
        initStyleOption(&o, index);
        QTextDocument doc;
        setUp(doc, o, index);
        const bool selected = o.state & QStyle::State_Selected;
        painter->save();
        painter->setRenderHint(QPainter::Antialiasing);
        const QRectF card = QRectF(o.rect).adjusted(1.5, 1.5, -1.5, -1.5);
        painter->setPen(o.palette.color(selected ? QPalette::Highlight : QPalette::Mid));
        painter->setBrush(selected ? o.palette.brush(QPalette::Highlight) : o.palette.brush(QPalette::Base));
        painter->drawRoundedRect(card, 6, 6);
        if (o.state & QStyle::State_HasFocus) {
            QPen focus(o.palette.color(QPalette::Highlight).darker(130), 1, Qt::DotLine);
            painter->setPen(focus);
            painter->setBrush(Qt::NoBrush);
            painter->drawRoundedRect(card.adjusted(2, 2, -2, -2), 4, 4);
        }
        painter->translate(o.rect.topLeft() + QPoint(kCardPadding, kCardPadding));
        QAbstractTextDocumentLayout::PaintContext context;
        context.palette = o.palette;
        if (selected)
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
        return QSize(kCardWidth + 2 * kCardPadding, int(doc.size().height()) + 2 * kCardPadding);
    }

private:
    static void setUp(QTextDocument& doc, const QStyleOptionViewItem& o, const QModelIndex& index)
    {
        doc.setDefaultFont(o.font);
        doc.setHtml(index.data(ModelCatalogModel::CardHtmlRole).toString());
        doc.setTextWidth(kCardWidth);
    }
};

}  // namespace

LibraryPanel::LibraryPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 8, 8, 8);
    auto* title = new QLabel(tr("Model library"), this);
    QFont big = title->font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    big.setBold(true);
    title->setFont(big);
    auto* hint = new QLabel(tr("Drop a GGUF file or a package folder anywhere on the window"), this);
    hint->setStyleSheet(colorStyle(mutedColor(palette())));
    m_add = new QPushButton(tr("Add model…"), this);
    m_add->setObjectName("addModel");
    m_add->setToolTip(tr("Or drop a GGUF file or a package folder anywhere on the window"));
    m_addEndpoint = new QPushButton(tr("Add endpoint…"), this);
    m_addEndpoint->setObjectName("addEndpoint");
    m_addEndpoint->setToolTip(tr("Chat with the models of an OpenAI-compatible server (another Spillway, llama.cpp, "
                                 "Ollama, vLLM) as with a local file"));
    // The cards in a grid that fills the view (as many columns as fit).
    m_models = new QListView(this);
    m_models->setObjectName("models");
    m_models->setAccessibleName(tr("Model library"));
    m_models->setViewMode(QListView::IconMode);
    m_models->setFlow(QListView::LeftToRight);
    m_models->setWrapping(true);
    m_models->setMovement(QListView::Static);
    m_models->setResizeMode(QListView::Adjust);
    m_models->setSpacing(6);
    m_models->setWordWrap(true);
    m_models->setItemDelegate(new CardDelegate(m_models));
    m_models->setUniformItemSizes(false);
    m_models->setSelectionRectVisible(false);
    m_selected = new QLabel(this);
    m_selected->setObjectName("selectedModel");
    m_selected->setAccessibleName(tr("Selected model"));
    m_chatWith = new QPushButton(tr("Chat with this model"), this);
    m_chatWith->setObjectName("chatWithModel");
    m_chatWith->setToolTip(tr("Load the selected model (the one answering now goes on until it is ready)"));
    m_compress = new QPushButton(tr("Compress"), this);
    m_compress->setObjectName("compress");
    // The presets, each with what it measured on the selected model where a package of it exists;
    // "recommended" marks the one recommendedPreset picks (model_catalog_model.h).
    auto* presets = new QMenu(this);
    presets->setObjectName("presetMenu");
    connect(presets, &QMenu::aboutToShow, this, [this, presets] {
        presets->clear();
        static const std::pair<const char*, const char*> choices[] = {
            {"fast", QT_TR_NOOP("fast: int8 (Q8_0), about half the size, nearly lossless")},
            {"balanced", QT_TR_NOOP("balanced: 50% pruned (Wanda), bitmap sparse fp16")},
            {"smallest", QT_TR_NOOP("smallest: 50% pruned, bitmap sparse int8")},
            {"sparse", QT_TR_NOOP("sparse: for the neuron cache (ReLU models): bundles and activation predictors")},
        };
        const qint64 id = selectedModel();
        const QString recommended = m_catalog ? recommendedPreset(m_catalog->models(), id) : QStringLiteral("fast");
        for (const auto& [preset, label] : choices) {
            const QString name = QString::fromUtf8(preset);
            QString text = tr(label);
            if (m_catalog)
                for (const ModelItem& m : m_catalog->models()) {
                    const QJsonObject q = QJsonDocument::fromJson(m.qualityJson.toUtf8()).object();
                    if (m.parentId != id || q.value("preset").toString() != name) continue;
                    QString why;
                    text += qualityPasses(m.qualityJson, &why) ? tr(" — measured here: passes the quality bar")
                                                               : tr(" — measured here: %1").arg(why);
                    break;
                }
            if (name == recommended) text += tr(" (recommended)");
            presets->addAction(text, this, [this, name] {
                if (const qint64 id = selectedModel()) emit compressRequested(id, name);
            });
        }
    });
    m_presetButton = new QPushButton(tr("Presets"), this);
    m_presetButton->setMenu(presets);
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
    auto* header = new QHBoxLayout;
    header->addWidget(title);
    header->addSpacing(12);
    header->addWidget(hint, 1);
    header->addWidget(m_addEndpoint);
    header->addWidget(m_add);
    // What the selected card offers, under the grid.
    auto* actions = new QHBoxLayout;
    actions->addWidget(m_selected, 1);
    actions->addWidget(m_chatWith);
    actions->addWidget(m_compress);
    actions->addWidget(m_presetButton);
    actions->addWidget(m_cancel);
    m_errorRow = new QWidget(this);
    auto* errorLayout = new QHBoxLayout(m_errorRow);
    errorLayout->setContentsMargins(0, 0, 0, 0);
    m_error = new QLabel(m_errorRow);
    m_error->setObjectName("libraryError");
    m_error->setAccessibleName(tr("Why the model was not added"));
    m_error->setWordWrap(true);
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_error->setStyleSheet(colorStyle(errorColor(palette())));
    auto* dismiss = new QPushButton(tr("Dismiss"), m_errorRow);
    dismiss->setObjectName("libraryErrorDismiss");
    errorLayout->addWidget(m_error, 1);
    errorLayout->addWidget(dismiss, 0, Qt::AlignTop);
    m_errorRow->hide();
    connect(dismiss, &QPushButton::clicked, this, [this] { showError(QString()); });
    layout->addLayout(header);
    layout->addWidget(m_errorRow);
    layout->addWidget(m_models, 1);
    layout->addLayout(actions);
    layout->addWidget(m_bar);
    layout->addWidget(m_result);

    connect(m_add, &QPushButton::clicked, this, [this] {
        // Models are most often where the browser put them.
        const QString path = QFileDialog::getOpenFileName(this, tr("Add a model"),
                                                          QStandardPaths::writableLocation(QStandardPaths::DownloadLocation),
                                                          tr("Models (*.gguf manifest.json config.json *.safetensors *.bin);;All files (*)"));
        if (path.isEmpty()) return;
        showError(QString());
        emit addRequested(path);
    });
    connect(m_addEndpoint, &QPushButton::clicked, this, &LibraryPanel::askEndpoint);
    connect(m_compress, &QPushButton::clicked, this, [this] {
        if (const qint64 id = selectedModel()) emit compressRequested(id, recommended());
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

void LibraryPanel::askEndpoint()
{
    // Not modal to the app (tests and scripts fill it in).
    auto* dialog = new QDialog(this);
    dialog->setObjectName("endpointDialog");
    dialog->setWindowTitle(tr("Add a remote endpoint"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setMinimumWidth(560);
    auto* layout = new QVBoxLayout(dialog);
    auto* intro = new QLabel(tr("An OpenAI-compatible server (another Spillway's serve, llama.cpp's server, Ollama, "
                                "vLLM, a hosted API): the models it lists join the library, and chatting with one "
                                "runs on that machine."),
                             dialog);
    intro->setWordWrap(true);
    auto* url = new QLineEdit(dialog);
    url->setObjectName("endpointUrl");
    url->setPlaceholderText(QStringLiteral("http://127.0.0.1:8080/v1"));
    url->setAccessibleName(tr("Address"));
    auto* key = new QLineEdit(dialog);
    key->setObjectName("endpointKey");
    key->setEchoMode(QLineEdit::Password);
    key->setPlaceholderText(tr("none"));
    key->setAccessibleName(tr("API key"));
    auto* remember = new QCheckBox(tr("Remember the key on this computer (in a file only you can read)"), dialog);
    remember->setObjectName("rememberKey");
    remember->setToolTip(tr("Unchecked, the key is kept only until Spillway quits. It is never written to the "
                            "history, the logs or an export."));
    auto* form = new QFormLayout;
    form->addRow(tr("Address:"), url);
    form->addRow(tr("API key:"), key);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, dialog);
    QPushButton* ok = buttons->button(QDialogButtonBox::Ok);
    ok->setText(tr("Add"));
    ok->setEnabled(false);
    layout->addWidget(intro);
    layout->addLayout(form);
    layout->addWidget(remember);
    layout->addWidget(buttons);
    connect(url, &QLineEdit::textChanged, ok, [ok](const QString& text) { ok->setEnabled(!text.trimmed().isEmpty()); });
    connect(key, &QLineEdit::textChanged, remember, [remember](const QString& text) { remember->setEnabled(!text.isEmpty()); });
    remember->setEnabled(false);
    connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
    connect(buttons, &QDialogButtonBox::accepted, dialog, [this, dialog, url, key, remember] {
        emit addEndpointRequested(url->text(), key->text(), remember->isEnabled() && remember->isChecked());
        dialog->accept();
    });
    dialog->show();
}

QString LibraryPanel::recommended() const
{
    return m_catalog ? recommendedPreset(m_catalog->models(), selectedModel()) : QStringLiteral("fast");
}

qint64 LibraryPanel::selectedModel() const
{
    return m_catalog ? m_catalog->idAt(m_models->currentIndex().row()) : 0;
}

void LibraryPanel::setCatalog(ModelCatalogModel* catalog)
{
    m_catalog = catalog;
    m_models->setModel(catalog);
    connect(m_models->selectionModel(), &QItemSelectionModel::currentChanged, this, [this] { setCompressing(m_compressing); });
    connect(catalog, &QAbstractItemModel::dataChanged, this, [this] { setCompressing(m_compressing); });
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
    const QModelIndex selected = m_models->currentIndex();
    const bool remote = selected.isValid() && parseEndpointPath(selected.data(ModelCatalogModel::PathRole).toString());
    m_compress->setEnabled(!compressing && any && !remote);  // a remote model's weights are not here
    m_presetButton->setEnabled(!remote);
    m_chatWith->setEnabled(any);
    m_cancel->setEnabled(compressing);
    const QModelIndex current = m_models->currentIndex();
    const QString preset = recommended();
    m_compress->setText(tr("Compress (%1)").arg(preset));
    m_compress->setToolTip(tr("Compress the selected model into a package with the recommended preset, %1: the smallest "
                              "whose measured quality on this model passes the bar (Presets offers the others)")
                               .arg(preset));
    m_selected->setText(current.isValid() ? current.data(ModelCatalogModel::SummaryRole).toString()
                                          : any ? tr("Select a model") : tr("No model yet: add one"));
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

void LibraryPanel::showError(const QString& text)
{
    m_error->setText(text.isEmpty() ? QString() : tr("Not added: %1").arg(text));
    m_errorRow->setVisible(!text.isEmpty());
}

QString LibraryPanel::errorText() const { return m_errorRow->isHidden() ? QString() : m_error->text(); }

void LibraryPanel::showProgressDone() { m_bar->setValue(m_bar->maximum()); }

void LibraryPanel::clearProgress() { m_bar->setValue(0); }

}  // namespace spillway::ui
