#include "chat_window.h"

#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QPainter>
#include <QSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLocale>
#include <QMimeData>
#include <QProgressBar>
#include <QRegularExpression>
#include <QTabWidget>
#include <QUrl>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QTextBrowser>
#include <QTextCursor>
#include <QThread>
#include <QVBoxLayout>

#include "bottleneck_view.h"
#include "core/plan/planner.h"
#include "core/trace/trace.h"
#include "generation_worker.h"

namespace spillway::ui {

namespace {

// One stacked bar: the model's weights on the device, in pinned RAM and on the SSD.
class TierBar : public QWidget {
public:
    explicit TierBar(QWidget* parent) : QWidget(parent) { setMinimumHeight(22); }
    void set(double device, double ram, double ssd)
    {
        m_parts[0] = device;
        m_parts[1] = ram;
        m_parts[2] = ssd;
        update();
    }

protected:
    void paintEvent(QPaintEvent*) override
    {
        QPainter p(this);
        const double total = m_parts[0] + m_parts[1] + m_parts[2];
        const QColor colors[] = {QColor(0x2e, 0x7d, 0x32), QColor(0x7b, 0x4f, 0xa3), QColor(0xe0, 0x8a, 0x1e)};
        const char* names[] = {"device", "RAM", "SSD"};
        double x = 0;
        for (int i = 0; i < 3; ++i) {
            if (total <= 0 || m_parts[i] <= 0) continue;
            const double w = width() * m_parts[i] / total;
            const QRectF r(x, 0, w, height());
            p.fillRect(r, colors[i]);
            p.setPen(Qt::white);
            if (w > 40) p.drawText(r, Qt::AlignCenter, QString::fromLatin1(names[i]));
            x += w;
        }
        p.setPen(palette().color(QPalette::Mid));
        p.drawRect(rect().adjusted(0, 0, -1, -1));
    }

private:
    double m_parts[3] = {0, 0, 0};
};

}  // namespace

ChatWindow::ChatWindow(const QString& modelPath, const QString& dataFolder, QWidget* parent)
    : QMainWindow(parent)
{
    setWindowTitle(tr("Spillway"));
    resize(1200, 800);

    auto* splitter = new QSplitter(this);
    auto* side = new QWidget(splitter);
    auto* sideLayout = new QVBoxLayout(side);
    sideLayout->setContentsMargins(4, 4, 4, 4);
    m_newChat = new QPushButton(tr("New chat"), side);
    m_newChat->setObjectName("newChat");
    m_search = new QLineEdit(side);
    m_search->setObjectName("search");
    m_search->setPlaceholderText(tr("Search conversations"));
    m_search->setClearButtonEnabled(true);
    m_conversations = new QListWidget(side);
    m_conversations->setObjectName("conversations");
    m_conversations->setContextMenuPolicy(Qt::CustomContextMenu);
    sideLayout->addWidget(m_newChat);
    sideLayout->addWidget(m_search);
    sideLayout->addWidget(m_conversations, 1);

    // The model library: drop a model anywhere on the window, or Add model….
    auto* library = new QWidget;
    auto* libraryLayout = new QVBoxLayout(library);
    libraryLayout->setContentsMargins(4, 4, 4, 4);
    m_addModel = new QPushButton(tr("Add model…"), library);
    m_addModel->setObjectName("addModel");
    m_models = new QListWidget(library);
    m_models->setObjectName("models");
    m_models->setWordWrap(true);
    m_compress = new QPushButton(tr("Compress"), library);
    m_compress->setObjectName("compress");
    m_compress->setToolTip(tr("Prune and quantize the selected model into a package (balanced preset)"));
    auto* presets = new QMenu(m_compress);
    for (const char* preset : {"fast", "balanced", "smallest"})
        presets->addAction(QString::fromUtf8(preset), this, [this, preset] {
            if (QListWidgetItem* item = m_models->currentItem())
                compressModel(item->data(Qt::UserRole).toLongLong(), QString::fromUtf8(preset));
        });
    m_cancelCompress = new QPushButton(tr("Cancel"), library);
    m_cancelCompress->setObjectName("cancelCompress");
    m_compressBar = new QProgressBar(library);
    m_compressBar->setRange(0, 1000);
    m_compressBar->setTextVisible(false);
    m_compressLabel = new QLabel(library);
    m_compressLabel->setWordWrap(true);
    auto* compressRow = new QHBoxLayout;
    compressRow->addWidget(m_compress, 1);
    compressRow->addWidget(m_cancelCompress);
    auto* presetButton = new QPushButton(tr("Presets"), library);
    presetButton->setMenu(presets);
    compressRow->addWidget(presetButton);
    libraryLayout->addWidget(m_addModel);
    libraryLayout->addWidget(m_models, 1);
    libraryLayout->addLayout(compressRow);
    libraryLayout->addWidget(m_compressBar);
    libraryLayout->addWidget(m_compressLabel);

    // Tuning: budgets and options; every change shows the planner's placement and prediction.
    auto* tuning = new QWidget;
    auto* tuningLayout = new QVBoxLayout(tuning);
    tuningLayout->setContentsMargins(4, 4, 4, 4);
    m_hardware = new QLabel(tr("Measuring this machine …"), tuning);
    m_hardware->setObjectName("hardwareSummary");
    m_hardware->setWordWrap(true);
    auto* form = new QFormLayout;
    auto mib = [tuning](double max) {
        auto* box = new QDoubleSpinBox(tuning);
        box->setRange(0, max);
        box->setDecimals(2);
        box->setSuffix(QStringLiteral(" MiB"));
        box->setSpecialValueText(QObject::tr("default"));
        box->setKeyboardTracking(false);
        return box;
    };
    m_vramBox = mib(1e8);
    m_ramBox = mib(1e8);
    m_ctxBox = new QSpinBox(tuning);
    m_ctxBox->setRange(0, 1 << 20);
    m_ctxBox->setSpecialValueText(tr("trained (≤ 4096)"));
    m_ctxBox->setKeyboardTracking(false);
    m_prefetchBox = new QSpinBox(tuning);
    m_prefetchBox->setRange(0, 16);
    m_prefetchBox->setValue(2);
    m_threadsBox = new QSpinBox(tuning);
    m_threadsBox->setRange(0, 1024);
    m_threadsBox->setSpecialValueText(tr("one per core"));
    form->addRow(tr("Device budget"), m_vramBox);
    form->addRow(tr("RAM budget"), m_ramBox);
    form->addRow(tr("Context"), m_ctxBox);
    form->addRow(tr("Prefetch depth"), m_prefetchBox);
    form->addRow(tr("CPU threads"), m_threadsBox);
    m_tierBar = new TierBar(tuning);
    m_predictionLabel = new QLabel(tuning);
    m_predictionLabel->setObjectName("prediction");
    m_predictionLabel->setWordWrap(true);
    m_apply = new QPushButton(tr("Apply"), tuning);
    m_apply->setObjectName("applyTuning");
    m_apply->setEnabled(false);
    tuningLayout->addWidget(m_hardware);
    tuningLayout->addLayout(form);
    tuningLayout->addWidget(m_tierBar);
    tuningLayout->addWidget(m_predictionLabel);
    tuningLayout->addWidget(m_apply);
    tuningLayout->addStretch(1);
    for (QDoubleSpinBox* box : {m_vramBox, m_ramBox})
        connect(box, &QDoubleSpinBox::valueChanged, this, &ChatWindow::requestPrediction);
    for (QSpinBox* box : {m_ctxBox, m_prefetchBox, m_threadsBox})
        connect(box, &QSpinBox::valueChanged, this, &ChatWindow::requestPrediction);
    connect(m_apply, &QPushButton::clicked, this, &ChatWindow::applyTuning);

    auto* tabs = m_tabs = new QTabWidget(splitter);
    auto* chats = side;
    tabs->addTab(chats, tr("Chats"));
    tabs->addTab(library, tr("Models"));
    tabs->addTab(tuning, tr("Tuning"));
    tabs->setVisible(!dataFolder.isEmpty());
    m_dataFolder = dataFolder;
    setAcceptDrops(!dataFolder.isEmpty());

    auto* central = new QWidget(splitter);
    auto* layout = new QVBoxLayout(central);
    m_transcript = new QTextBrowser(central);
    m_transcript->setObjectName("transcript");
    m_transcript->setReadOnly(true);
    m_transcript->setOpenLinks(false);
    m_error = new QLabel(central);
    m_error->setObjectName("inlineError");
    m_error->setStyleSheet("color: #b00020;");
    m_error->setWordWrap(true);
    m_error->hide();
    m_prompt = new QLineEdit(central);
    m_prompt->setObjectName("prompt");
    m_prompt->setPlaceholderText(tr("Type a prompt and press Enter"));
    m_send = new QPushButton(tr("Send"), central);
    m_send->setObjectName("send");
    m_stop = new QPushButton(tr("Stop"), central);
    m_stop->setObjectName("stop");
    auto* row = new QHBoxLayout;
    row->addWidget(m_prompt, 1);
    row->addWidget(m_send);
    row->addWidget(m_stop);
    layout->addWidget(m_transcript, 1);
    layout->addWidget(m_error);
    layout->addLayout(row);
    splitter->addWidget(tabs);
    splitter->addWidget(central);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({240, 840});
    setCentralWidget(splitter);

    // The bottleneck visualizer, live while generating: it polls the trace ring on a timer.
    auto* dock = new QDockWidget(tr("Bottleneck"), this);
    dock->setObjectName("bottleneckDock");
    m_bottleneck = new BottleneckView(dock);
    m_bottleneck->setObjectName("bottleneck");
    dock->setWidget(m_bottleneck);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    resizeDocks({dock}, {260}, Qt::Vertical);

    m_status = new QLabel(tr("Loading %1 …").arg(modelPath), this);
    m_status->setObjectName("statusLine");
    statusBar()->addWidget(m_status, 1);

    connect(m_send, &QPushButton::clicked, this, &ChatWindow::send);
    connect(m_prompt, &QLineEdit::returnPressed, this, &ChatWindow::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatWindow::stop);

    // The worker has no parent: it moves to the inference thread and is deleted there.
    m_thread = new QThread(this);
    m_thread->setObjectName("inference");
    m_worker = new GenerationWorker;
    m_recorder = std::make_unique<trace::Recorder>(size_t{1} << 16);
    m_worker->setRecorder(m_recorder.get());
    m_worker->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(this, &ChatWindow::loadRequested, m_worker, &GenerationWorker::loadModel,
            Qt::QueuedConnection);
    connect(this, &ChatWindow::generateRequested, m_worker, &GenerationWorker::generate,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::modelLoaded, this, &ChatWindow::onModelLoaded,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::failed, this, &ChatWindow::onFailed,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::tokens, this, &ChatWindow::onTokens,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::finished, this, &ChatWindow::onFinished,
            Qt::QueuedConnection);
    m_thread->start();
    m_bottleneck->setRecorder(m_recorder.get());

    if (!dataFolder.isEmpty()) {
        m_storageThread = new QThread(this);
        m_storageThread->setObjectName("storage");
        m_store = new ChatStore;
        m_store->moveToThread(m_storageThread);
        connect(m_storageThread, &QThread::finished, m_store, &QObject::deleteLater);
        connect(this, &ChatWindow::storeOpen, m_store, &ChatStore::open, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeList, m_store, &ChatStore::list, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeCreate, m_store, &ChatStore::create, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeLoad, m_store, &ChatStore::load, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeAppend, m_store, &ChatStore::append, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeRename, m_store, &ChatStore::rename, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeRemove, m_store, &ChatStore::remove, Qt::QueuedConnection);
        connect(m_store, &ChatStore::opened, this, [this](const QString&, const QString& note) {
            if (!note.isEmpty()) showError(note);
            emit historyOpened();
        }, Qt::QueuedConnection);
        connect(m_store, &ChatStore::listed, this, &ChatWindow::onListed, Qt::QueuedConnection);
        connect(m_store, &ChatStore::created, this, &ChatWindow::onCreated, Qt::QueuedConnection);
        connect(m_store, &ChatStore::loaded, this, &ChatWindow::onLoaded, Qt::QueuedConnection);
        connect(m_store, &ChatStore::stored, this, &ChatWindow::onStored, Qt::QueuedConnection);
        connect(m_store, &ChatStore::changed, this, [this] { emit storeList(m_search->text()); },
                Qt::QueuedConnection);
        connect(m_store, &ChatStore::failed, this, &ChatWindow::showError, Qt::QueuedConnection);
        m_storageThread->start();
        connect(m_newChat, &QPushButton::clicked, this, &ChatWindow::newConversation);
        connect(m_search, &QLineEdit::textChanged, this, [this](const QString& q) { emit storeList(q); });
        connect(m_conversations, &QListWidget::itemActivated, this,
                [this](QListWidgetItem* item) { openConversation(item->data(Qt::UserRole).toLongLong()); });
        connect(m_conversations, &QListWidget::itemClicked, this,
                [this](QListWidgetItem* item) { openConversation(item->data(Qt::UserRole).toLongLong()); });
        connect(m_conversations, &QListWidget::customContextMenuRequested, this,
                &ChatWindow::showConversationMenu);
        connect(this, &ChatWindow::storeAddModel, m_store, &ChatStore::addModel, Qt::QueuedConnection);
        connect(m_store, &ChatStore::modelsListed, this, &ChatWindow::onModelsListed, Qt::QueuedConnection);
        emit storeOpen(dataFolder);

        m_modelsThread = new QThread(this);
        m_modelsThread->setObjectName("models");
        m_modelWorker = new ModelWorker;
        m_modelWorker->moveToThread(m_modelsThread);
        connect(m_modelsThread, &QThread::finished, m_modelWorker, &QObject::deleteLater);
        connect(this, &ChatWindow::inspectRequested, m_modelWorker, &ModelWorker::inspect, Qt::QueuedConnection);
        connect(this, &ChatWindow::compressRequested, m_modelWorker, &ModelWorker::compress, Qt::QueuedConnection);
        connect(m_modelWorker, &ModelWorker::inspected, this, [this](const ModelItem& m) { emit storeAddModel(m); },
                Qt::QueuedConnection);
        connect(m_modelWorker, &ModelWorker::rejected, this, [this](const QString& path, const QString& message) {
            showError(message.contains(path) ? message : path + ": " + message);
            emit modelRejected(path, message);
        }, Qt::QueuedConnection);
        connect(m_modelWorker, &ModelWorker::compressProgress, this, &ChatWindow::onCompressProgress,
                Qt::QueuedConnection);
        connect(m_modelWorker, &ModelWorker::compressed, this, &ChatWindow::onCompressed, Qt::QueuedConnection);
        connect(m_modelWorker, &ModelWorker::compressFailed, this, &ChatWindow::onCompressFailed,
                Qt::QueuedConnection);
        m_modelsThread->start();
        connect(m_addModel, &QPushButton::clicked, this, [this] {
            const QString path = QFileDialog::getOpenFileName(this, tr("Add a model"), QString(),
                                                              tr("Models (*.gguf manifest.json);;All files (*)"));
            if (!path.isEmpty()) addModel(path);
        });
        connect(m_compress, &QPushButton::clicked, this, [this] {
            if (QListWidgetItem* item = m_models->currentItem())
                compressModel(item->data(Qt::UserRole).toLongLong(), QStringLiteral("balanced"));
        });
        connect(m_cancelCompress, &QPushButton::clicked, this, &ChatWindow::cancelCompression);

        m_tuningThread = new QThread(this);
        m_tuningThread->setObjectName("tuning");
        m_tuningWorker = new TuningWorker;
        m_tuningWorker->moveToThread(m_tuningThread);
        connect(m_tuningThread, &QThread::finished, m_tuningWorker, &QObject::deleteLater);
        connect(this, &ChatWindow::tuningPrepare, m_tuningWorker, &TuningWorker::prepare, Qt::QueuedConnection);
        connect(this, &ChatWindow::tuningPredict, m_tuningWorker, &TuningWorker::predict, Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::ready, this, &ChatWindow::onTuningReady, Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::predicted, this, &ChatWindow::onPredicted, Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::failed, this, [this](const QString& message) {
            m_predictionLabel->setText(tr("No plan: %1").arg(message));
            m_apply->setEnabled(false);
            emit tuningPredicted();
        }, Qt::QueuedConnection);
        m_tuningThread->start();
        connect(this, &ChatWindow::applyRequested, m_worker, &GenerationWorker::applyPlan, Qt::QueuedConnection);
        connect(m_worker, &GenerationWorker::planApplied, this, [this](const QString& description) {
            m_modelDescription = description;
            m_status->setText(description);
            emit tuningApplied();
        }, Qt::QueuedConnection);
        m_modelPath = modelPath;
        connect(this, &ChatWindow::modelReady, this, [this] {
            if (m_tuningStarted) return;
            m_tuningStarted = true;
            emit tuningPrepare(m_modelPath, modelsFolder());
        });
    }

    updateButtons();
    emit loadRequested(modelPath);
}

ChatWindow::~ChatWindow()
{
    m_worker->requestStop();  // a running generation ends before its next token
    m_thread->quit();
    m_thread->wait();
    if (m_modelsThread) {  // a running compression stops at its next progress report
        m_modelWorker->cancelCompression();
        m_modelsThread->quit();
        m_modelsThread->wait();
    }
    if (m_tuningThread) {
        m_tuningThread->quit();
        m_tuningThread->wait();
    }
    if (m_storageThread) {  // pending writes finish first: the queue drains before quit
        m_storageThread->quit();
        m_storageThread->wait();
    }
}

QString ChatWindow::statusText() const { return m_status->text(); }

QString ChatWindow::errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }

void ChatWindow::send()
{
    const QString prompt = m_prompt->text();
    if (!m_modelReady || m_generating || prompt.trimmed().isEmpty()) return;
    m_generating = true;
    m_error->hide();
    m_error->clear();
    m_prompt->clear();
    updateButtons();

    m_transcript->append(QStringLiteral("<p><b>%1</b> %2</p>")
                             .arg(tr("You:"), prompt.toHtmlEscaped()));
    m_transcript->append(QStringLiteral("<b>%1</b>").arg(tr("Model:")));
    // The model continues the prompt: show the prompt dimmed, then the new text.
    appendToTranscript(" ", false);
    appendToTranscript(prompt, true);
    m_status->setText(tr("%1 — generating …").arg(m_modelDescription));
    m_reply.clear();
    m_replyStart = -1;

    if (m_store && m_conversation == 0) {
        // The conversation is created first; the prompt is stored and sent once it exists.
        m_pendingPrompt = prompt;
        emit storeCreate(prompt.left(60).simplified());
        return;
    }
    startGeneration(prompt);
}

void ChatWindow::startGeneration(const QString& prompt)
{
    if (m_store && m_conversation) {
        ++m_pendingStores;
        emit storeAppend(m_conversation, QStringLiteral("user"), prompt, 0, 0, QString());
    }
    m_worker->clearStop();
    emit generateRequested(prompt, m_maxTokens, m_temperature);
}

void ChatWindow::onCreated(qint64 conversation)
{
    m_conversation = conversation;
    const QString prompt = m_pendingPrompt;
    m_pendingPrompt.clear();
    if (m_generating && !prompt.isEmpty()) startGeneration(prompt);
    emit storeList(m_search->text());
}

void ChatWindow::onStored(qint64 conversation, qint64)
{
    // Stores are answered in the order they were sent: the last one of an exchange is its reply.
    if (--m_pendingStores == 0 && !m_generating) emit replyStored(conversation);
}

void ChatWindow::newConversation()
{
    if (m_generating) return;
    m_conversation = 0;
    m_transcript->clear();
    m_conversations->clearSelection();
    m_prompt->setFocus();
}

void ChatWindow::openConversation(qint64 id)
{
    if (m_generating || !m_store) return;
    emit storeLoad(id);
}

void ChatWindow::renameConversation(qint64 id, const QString& title)
{
    if (m_store && !title.trimmed().isEmpty()) emit storeRename(id, title.trimmed());
}

void ChatWindow::deleteConversation(qint64 id)
{
    if (!m_store || (m_generating && id == m_conversation)) return;
    if (id == m_conversation) newConversation();
    emit storeRemove(id);
}

void ChatWindow::showConversationMenu(const QPoint& at)
{
    QListWidgetItem* item = m_conversations->itemAt(at);
    if (!item) return;
    const qint64 id = item->data(Qt::UserRole).toLongLong();
    QMenu menu(this);
    QAction* rename = menu.addAction(tr("Rename…"));
    QAction* remove = menu.addAction(tr("Delete"));
    QAction* chosen = menu.exec(m_conversations->viewport()->mapToGlobal(at));
    if (chosen == rename) {
        bool ok = false;
        const QString title = QInputDialog::getText(this, tr("Rename conversation"), tr("Title:"),
                                                    QLineEdit::Normal, item->text(), &ok);
        if (ok) renameConversation(id, title);
    } else if (chosen == remove) {
        deleteConversation(id);
    }
}

void ChatWindow::onListed(const QString& query, const QVector<ConversationItem>& items)
{
    if (query != m_search->text()) return;  // a newer search is on its way
    m_conversations->clear();
    for (const ConversationItem& c : items) {
        auto* item = new QListWidgetItem(c.title.isEmpty() ? tr("(untitled)") : c.title, m_conversations);
        item->setData(Qt::UserRole, c.id);
        if (c.id == m_conversation) item->setSelected(true);
    }
    emit conversationsListed(int(items.size()));
}

void ChatWindow::onLoaded(qint64 conversation, const QVector<MessageItem>& messages)
{
    if (m_generating) return;
    m_conversation = conversation;
    m_transcript->clear();
    QString lastPrompt;
    for (const MessageItem& m : messages) {
        if (m.role == QLatin1String("user")) {
            m_transcript->append(QStringLiteral("<p><b>%1</b> %2</p>").arg(tr("You:"), m.content.toHtmlEscaped()));
            lastPrompt = m.content;
        } else {
            m_transcript->append(QStringLiteral("<b>%1</b>").arg(tr("Model:")));
            appendToTranscript(" ", false);
            appendToTranscript(lastPrompt, true);
            QTextCursor end(m_transcript->document());
            end.movePosition(QTextCursor::End);
            const int start = end.position();
            appendToTranscript(m.content, false);
            renderMarkdownFrom(start, m.content);
            if (m.tokensPerSecond > 0)
                m_transcript->append(QStringLiteral("<p style=\"color:gray; font-size:small\">%1</p>")
                                         .arg(tr("%1 tokens/s, first token %2 ms%3")
                                                  .arg(m.tokensPerSecond, 0, 'f', 1)
                                                  .arg(m.firstTokenMs, 0, 'f', 1)
                                                  .arg(m.modelName.isEmpty() ? QString() : " — " + m.modelName)
                                                  .toHtmlEscaped()));
        }
    }
    emit conversationShown(conversation);
}

void ChatWindow::stop()
{
    if (m_generating) m_worker->requestStop();
}

void ChatWindow::onModelLoaded(const QString& description)
{
    m_modelReady = true;
    m_modelDescription = description;
    m_status->setText(description);
    updateButtons();
    emit modelReady();
}

void ChatWindow::onFailed(const QString& message)
{
    m_generating = false;
    m_pendingPrompt.clear();
    showError(message);
    updateButtons();
}

void ChatWindow::showError(const QString& message)
{
    m_error->setText(tr("Error: %1").arg(message));
    m_error->show();
    m_status->setText(tr("Error: %1").arg(message));
    emit errorShown(message);
}

void ChatWindow::onTokens(const QString& text)
{
    if (m_replyStart < 0) {
        QTextCursor end(m_transcript->document());
        end.movePosition(QTextCursor::End);
        m_replyStart = end.position();
    }
    m_reply += text;
    appendToTranscript(text, false);
}

bool looksLikeMarkdown(const QString& text)
{
    if (text.contains(QLatin1String("```")) || text.contains(QLatin1String("**"))) return true;
    static const QRegularExpression block(QStringLiteral(R"((^|\n)(#{1,6} |[-*] |\d+\. |> |\|))"));
    return block.match(text).hasMatch();
}

void ChatWindow::renderMarkdownFrom(int start, const QString& markdown)
{
    // Streamed as plain text; once whole, a reply written in Markdown (code blocks, lists,
    // headings) is shown rendered by Qt's own Markdown support.
    if (start < 0 || !looksLikeMarkdown(markdown)) return;
    QTextCursor cursor(m_transcript->document());
    cursor.setPosition(start);
    cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    cursor.removeSelectedText();
    cursor.insertBlock();
    cursor.insertMarkdown(markdown);
}

void ChatWindow::onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens)
{
    m_generating = false;
    renderMarkdownFrom(m_replyStart, m_reply);
    if (m_store && m_conversation) {
        ++m_pendingStores;
        emit storeAppend(m_conversation, QStringLiteral("assistant"), m_reply, tokensPerSecond, timeToFirstTokenMs,
                         m_modelDescription);
    }
    m_status->setText(tr("%1 — %2 tokens, %3 tokens/s, first token %4 ms")
                          .arg(m_modelDescription)
                          .arg(tokens)
                          .arg(tokensPerSecond, 0, 'f', 1)
                          .arg(timeToFirstTokenMs, 0, 'f', 1));
    updateButtons();
    m_prompt->setFocus();
    emit replyFinished();
}

void ChatWindow::appendToTranscript(const QString& text, bool dim)
{
    QTextCursor cursor(m_transcript->document());
    cursor.movePosition(QTextCursor::End);
    QTextCharFormat format;
    format.setForeground(dim ? palette().color(QPalette::PlaceholderText)
                             : palette().color(QPalette::Text));
    cursor.insertText(text, format);
    m_transcript->ensureCursorVisible();
}

QString ChatWindow::hardwareSummary() const { return m_hardware->text(); }
QString ChatWindow::predictionText() const { return m_predictionLabel->text(); }

void ChatWindow::onTuningReady(const QString& summary, qint64, qint64, int)
{
    m_hardware->setText(summary);
    emit tuningReady();
    requestPrediction();
}

void ChatWindow::requestPrediction()
{
    if (!m_tuningWorker || !m_tuningStarted) return;
    TuningSettings t;
    t.vramBudget = qint64(m_vramBox->value() * 1024.0 * 1024.0);
    t.ramBudget = qint64(m_ramBox->value() * 1024.0 * 1024.0);
    t.contextLength = m_ctxBox->value();
    t.prefetchDepth = m_prefetchBox->value();
    t.threads = m_threadsBox->value();
    emit tuningPredict(t);
}

void ChatWindow::onPredicted(const TuningPrediction& prediction)
{
    m_prediction = prediction;
    const double ssd = double(std::max<qint64>(0, prediction.modelBytes - prediction.deviceBytes - prediction.ramBytes));
    static_cast<TierBar*>(m_tierBar)->set(double(prediction.deviceBytes), double(prediction.ramBytes), ssd);
    const QLocale locale;
    m_predictionLabel->setText(tr("Predicted %1 tokens/s\ndevice %2 · RAM %3 · SSD %4 read per token\n%5")
                                   .arg(prediction.tokensPerSecond, 0, 'f', 1)
                                   .arg(locale.formattedDataSize(prediction.deviceBytes),
                                        locale.formattedDataSize(prediction.ramBytes),
                                        locale.formattedDataSize(prediction.ssdBytesPerToken), prediction.lanes));
    m_apply->setEnabled(prediction.plan != nullptr && !m_generating);
    emit tuningPredicted();
}

void ChatWindow::applyTuning()
{
    if (!m_prediction.plan || m_generating) return;
    m_bottleneck->setPrediction(*m_prediction.plan);
    emit applyRequested(m_prediction);
}

QString ChatWindow::modelsFolder() const
{
    return m_dataFolder.isEmpty() ? QString() : QDir(m_dataFolder).filePath(QStringLiteral("models"));
}

void ChatWindow::addModel(const QString& path)
{
    if (m_modelWorker) emit inspectRequested(path);
}

void ChatWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void ChatWindow::dropEvent(QDropEvent* event)
{
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) addModel(url.toLocalFile());
    event->acceptProposedAction();
}

void ChatWindow::compressModel(qint64 id, const QString& preset)
{
    if (!m_modelWorker || m_compressing) return;
    const ModelItem* source = nullptr;
    for (const ModelItem& m : m_catalog)
        if (m.id == id) source = &m;
    if (!source) return;
    // dataFolder/models/<name>-<preset>, numbered when taken.
    const QString stem = QFileInfo(source->path).completeBaseName();
    QString out = QDir(modelsFolder()).filePath(stem + "-" + preset);
    for (int n = 2; QFileInfo::exists(out); ++n) out = QDir(modelsFolder()).filePath(QStringLiteral("%1-%2-%3").arg(stem, preset).arg(n));
    m_compressing = true;
    m_compressOut = out;
    m_compressBar->setValue(0);
    m_compressLabel->setText(tr("Compressing %1 (%2) …").arg(QFileInfo(source->path).fileName(), preset));
    updateButtons();
    m_modelWorker->clearCancel();
    emit compressRequested(id, source->path, out, preset);
}

void ChatWindow::cancelCompression()
{
    if (m_compressing) m_modelWorker->cancelCompression();
}

void ChatWindow::onCompressProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal,
                                    double eta)
{
    m_compressBar->setValue(int(fraction * 1000.0));
    emit compressionProgress(fraction);
    QString text = tr("%1: %2%").arg(stage).arg(int(fraction * 100.0));
    if (bytesTotal > 0)
        text += tr(", %1 of %2").arg(QLocale().formattedDataSize(bytesDone), QLocale().formattedDataSize(bytesTotal));
    if (eta >= 0) text += tr(", about %1 s left").arg(int(eta + 0.5));
    m_compressLabel->setText(text);
}

void ChatWindow::onCompressed(qint64, const ModelItem& package, const QString& summary)
{
    m_compressing = false;
    m_compressBar->setValue(1000);
    m_compressLabel->setText(tr("Done: %1").arg(summary));
    emit storeAddModel(package);
    updateButtons();
    emit compressionFinished(package.path, summary);
}

void ChatWindow::onCompressFailed(const QString& message, bool cancelled)
{
    m_compressing = false;
    m_compressBar->setValue(0);
    m_compressLabel->setText(cancelled ? tr("Compression cancelled; nothing was written.") : tr("Compression failed."));
    if (!cancelled) showError(message);
    updateButtons();
    emit compressionFailed(message, cancelled);
}

void ChatWindow::onModelsListed(const QVector<ModelItem>& models)
{
    m_catalog = models;
    const qint64 selected = m_models->currentItem() ? m_models->currentItem()->data(Qt::UserRole).toLongLong() : 0;
    m_models->clear();
    for (const ModelItem& m : models) {
        QString text = QStringLiteral("%1\n%2 · %3 · %4 M parameters · %5")
                           .arg(QFileInfo(m.path).fileName(), m.format, m.architecture)
                           .arg(double(m.parameters) / 1e6, 0, 'f', 2)
                           .arg(QLocale().formattedDataSize(m.sizeBytes));
        if (m.parentId > 0) text = QStringLiteral("  ↳ ") + text;
        auto* item = new QListWidgetItem(text, m_models);
        item->setData(Qt::UserRole, m.id);
        item->setToolTip(m.path + (m.qualityJson.isEmpty() ? QString() : "\n" + m.qualityJson));
        if (m.id == selected) m_models->setCurrentItem(item);
    }
    if (!m_models->currentItem() && m_models->count()) m_models->setCurrentRow(0);
    updateButtons();
    emit modelsListed(int(models.size()));
}

void ChatWindow::updateButtons()
{
    m_send->setEnabled(m_modelReady && !m_generating);
    m_prompt->setEnabled(m_modelReady);
    m_stop->setEnabled(m_generating);
    m_newChat->setEnabled(!m_generating);
    m_compress->setEnabled(!m_compressing && m_models->count() > 0);
    m_cancelCompress->setEnabled(m_compressing);
    m_addModel->setEnabled(true);
}

}  // namespace spillway::ui
