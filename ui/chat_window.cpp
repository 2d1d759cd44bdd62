#include "chat_window.h"

#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QShortcut>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QUrl>
#include <QVBoxLayout>

#include "bottleneck_view.h"
#include "chat_controller.h"
#include "conversation_list_model.h"
#include "core/trace/trace.h"
#include "generation_worker.h"
#include "library_panel.h"
#include "transcript_view.h"
#include "tuning_panel.h"
#include "welcome_page.h"
#include "worker_threads.h"

namespace spillway::ui {

namespace {
constexpr const char* kWelcomeDoneKey = "ui.welcomeDone";  // a setting: the first-launch screen was seen
}  // namespace

ChatWindow::ChatWindow(const QString& modelPath, const QString& dataFolder, QWidget* parent)
    : QMainWindow(parent), m_dataFolder(dataFolder), m_modelPath(modelPath)
{
    const bool withData = !dataFolder.isEmpty();
    m_recorder = std::make_unique<trace::Recorder>(size_t{1} << 16);
    m_workers = new WorkerThreads(withData, m_recorder.get(), qEnvironmentVariable("SPILLWAY_BACKEND", QStringLiteral("auto")),
                                  this);
    m_chat = new ChatController(m_workers->generation(), m_workers->store(), this);
    buildWidgets(withData);
    m_status->setText(tr("Loading %1 …").arg(modelPath));
    connectChat();
    if (withData) connectLibraryAndTuning();
    updateButtons();
    if (withData) {
        m_chat->openHistory(dataFolder);
        emit storeReadSetting(QString::fromLatin1(kWelcomeDoneKey));
    }
    m_chat->loadModel(modelPath);
}

ChatWindow::~ChatWindow()
{
    delete m_workers;  // stops the threads (worker_threads.h) before the recorder they fill goes
    m_workers = nullptr;
}

void ChatWindow::buildWidgets(bool withData)
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
    m_conversations = new QListView(side);
    m_conversations->setObjectName("conversations");
    m_conversations->setModel(m_chat->conversations());
    m_conversations->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_conversations->setContextMenuPolicy(Qt::CustomContextMenu);
    sideLayout->addWidget(m_newChat);
    sideLayout->addWidget(m_search);
    sideLayout->addWidget(m_conversations, 1);

    // The model library (drop a model anywhere on the window) and the tuning panel.
    m_library = new LibraryPanel;
    m_library->setObjectName("library");
    m_tuning = new TuningPanel;
    m_tuning->setObjectName("tuning");
    m_tabs = new QTabWidget(splitter);
    m_tabs->setObjectName("sideTabs");
    m_tabs->addTab(side, tr("Chats"));
    m_tabs->addTab(m_library, tr("Models"));
    m_tabs->addTab(m_tuning, tr("Tuning"));
    m_tabs->setVisible(withData);
    setAcceptDrops(withData);

    auto* central = new QWidget(splitter);
    auto* layout = new QVBoxLayout(central);
    m_transcript = new TranscriptView(central);
    m_transcript->setObjectName("transcript");
    m_editBanner = new QLabel(tr("Editing your message: Send resends it, Escape cancels."), central);
    m_editBanner->setObjectName("editBanner");
    m_editBanner->setStyleSheet("color: gray;");
    m_editBanner->hide();
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
    layout->addWidget(m_editBanner);
    layout->addLayout(row);
    // The first-launch screen shares the chat's place; the chat shows unless it is the first.
    m_stack = new QStackedWidget(splitter);
    m_welcome = new WelcomePage(m_stack);
    m_welcome->setObjectName("welcome");
    m_stack->addWidget(central);
    m_stack->addWidget(m_welcome);
    m_stack->setCurrentWidget(central);
    splitter->addWidget(m_tabs);
    splitter->addWidget(m_stack);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({240, 840});
    setCentralWidget(splitter);

    // The bottleneck visualizer, live while generating: it polls the trace ring on a timer.
    auto* dock = new QDockWidget(tr("Bottleneck"), this);
    dock->setObjectName("bottleneckDock");
    m_bottleneck = new BottleneckView(dock);
    m_bottleneck->setObjectName("bottleneck");
    m_bottleneck->setRecorder(m_recorder.get());
    dock->setWidget(m_bottleneck);
    addDockWidget(Qt::BottomDockWidgetArea, dock);
    resizeDocks({dock}, {260}, Qt::Vertical);
    // Right-click: export what is shown (Chrome trace JSON for Perfetto / chrome://tracing, or PNG).
    m_bottleneck->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(m_bottleneck, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
        QMenu menu(this);
        QAction* trace = menu.addAction(tr("Export Chrome trace…"));
        menu.addAction(tr("Export PNG…"));  // the other choice
        QAction* chosen = menu.exec(m_bottleneck->mapToGlobal(at));
        if (!chosen) return;
        const bool json = chosen == trace;
        const QString path = QFileDialog::getSaveFileName(this, chosen->text(), json ? "spillway-trace.json" : "spillway-trace.png",
                                                          json ? tr("Chrome trace (*.json)") : tr("PNG image (*.png)"));
        if (path.isEmpty()) return;
        const Status s = json ? m_bottleneck->exportChromeTrace(path) : m_bottleneck->exportPng(path);
        if (!s) showError(QString::fromStdString(s.error().message));
        else m_status->setText(tr("Wrote %1").arg(path));
    });

    m_status = new QLabel(this);
    m_status->setObjectName("statusLine");
    statusBar()->addWidget(m_status, 1);
}

// The chat: the controller's transcript into the view, the user's actions to the controller.
void ChatWindow::connectChat()
{
    ChatController* chat = m_chat;
    connect(m_send, &QPushButton::clicked, this, &ChatWindow::send);
    connect(m_prompt, &QLineEdit::returnPressed, this, &ChatWindow::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatWindow::stop);
    auto* escape = new QShortcut(QKeySequence(Qt::Key_Escape), m_prompt);
    escape->setContext(Qt::WidgetShortcut);
    connect(escape, &QShortcut::activated, this, &ChatWindow::cancelEdit);
    connect(m_transcript, &TranscriptView::regenerateRequested, chat, &ChatController::regenerate);
    connect(m_transcript, &TranscriptView::editRequested, this, &ChatWindow::editMessage);
    connect(m_transcript, &TranscriptView::versionRequested, chat, &ChatController::showVersion);

    connect(chat, &ChatController::messagesReset, this, [this](const QVector<MessageItem>& messages) {
        cancelEdit();
        m_transcript->setMessages(messages);
        selectCurrentConversation();
    });
    connect(chat, &ChatController::messageAppended, m_transcript, &TranscriptView::appendMessage);
    connect(chat, &ChatController::messagesTruncated, m_transcript, &TranscriptView::truncate);
    connect(chat, &ChatController::messageIdSet, m_transcript, &TranscriptView::setMessageId);
    connect(chat, &ChatController::replyStarted, m_transcript, &TranscriptView::beginReply);
    connect(chat, &ChatController::replyText, m_transcript, &TranscriptView::appendReplyText);
    connect(chat, &ChatController::replyEnded, m_transcript, &TranscriptView::finishReply);
    connect(chat, &ChatController::stateChanged, this, &ChatWindow::updateButtons);
    connect(chat, &ChatController::modelLoaded, this, &ChatWindow::onModelLoaded);
    connect(chat, &ChatController::generationStarted, this, &ChatWindow::onGenerationStarted);
    connect(chat, &ChatController::replyFinished, this, &ChatWindow::onReplyFinished);
    connect(chat, &ChatController::failed, this, &ChatWindow::showError);
    connect(chat, &ChatController::storeFailed, this, &ChatWindow::showError);
    connect(chat, &ChatController::historyOpened, this, [this](const QString& note) {
        if (!note.isEmpty()) showError(note);
        emit historyOpened();
    });
    connect(chat, &ChatController::conversationsListed, this, [this](int count) {
        selectCurrentConversation();
        emit conversationsListed(count);
    });
    connect(chat, &ChatController::conversationShown, this, &ChatWindow::conversationShown);
    connect(chat, &ChatController::replyStored, this, &ChatWindow::replyStored);

    connect(m_newChat, &QPushButton::clicked, this, [this] {
        m_chat->newConversation();
        m_prompt->setFocus();
    });
    connect(m_search, &QLineEdit::textChanged, chat, &ChatController::setSearch);
    auto open = [this](const QModelIndex& index) {
        m_chat->openConversation(index.data(ConversationListModel::IdRole).toLongLong());
    };
    connect(m_conversations, &QListView::activated, this, open);
    connect(m_conversations, &QListView::clicked, this, open);
    connect(m_conversations, &QListView::customContextMenuRequested, this, &ChatWindow::showConversationMenu);

    GenerationWorker* worker = m_workers->generation();
    connect(worker, &GenerationWorker::neuronCacheReport, this, [this](double hitRate, double bytesPerToken) {
        m_neuronCacheText = tr(" — neuron cache: hit rate %1%, %2 per token")
                                .arg(100.0 * hitRate, 0, 'f', 1)
                                .arg(QLocale().formattedDataSize(qint64(bytesPerToken)));
    }, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::notice, this, &ChatWindow::showNotice, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::deviceChanged, this,
            [this](const QString& backend, const QString& description, const QString& why) {
                const bool changed = backend != m_activeBackend;
                m_activeBackend = backend;
                m_deviceNote = why;
                m_status->setToolTip(why.isEmpty() ? description : description + QStringLiteral("\n") + why);
                if (m_chat->isModelReady()) {
                    m_chat->setModelDescription(description);
                    if (!m_chat->isGenerating()) m_status->setText(description);
                }
                emit deviceChanged(backend);
                if (changed && m_tuningReady) requestPrediction();  // plan for the device that computes
            }, Qt::QueuedConnection);
}

void ChatWindow::send()
{
    const QString prompt = m_prompt->text();
    if (!m_chat->isModelReady() || m_chat->isGenerating() || prompt.trimmed().isEmpty()) return;
    if (m_editIndex >= 0) {
        const int index = m_editIndex;
        const int after = int(m_chat->messages().size()) - index - 1;
        if (after > 1 && QMessageBox::question(this, tr("Edit and resend"),
                                               tr("Resending this message removes the %n message(s) after it.", "", after))
                             != QMessageBox::Yes)
            return;
        cancelEdit();
        m_chat->editAndResend(index, prompt);
        return;
    }
    m_chat->send(prompt);
}

void ChatWindow::stop() { m_chat->stop(); }

void ChatWindow::onGenerationStarted()
{
    m_error->hide();
    m_error->clear();
    m_prompt->clear();
    m_status->setText(tr("%1 — generating …").arg(m_chat->modelDescription()));
}

void ChatWindow::editMessage(int index)
{
    const auto& messages = m_chat->messages();
    if (m_chat->isGenerating() || index < 0 || index >= messages.size() || messages[index].role != QLatin1String("user"))
        return;
    m_editIndex = index;
    m_prompt->setText(messages[index].content);
    m_prompt->setFocus();
    m_editBanner->show();
}

void ChatWindow::cancelEdit()
{
    if (m_editIndex < 0) return;
    m_editIndex = -1;
    m_editBanner->hide();
    m_prompt->clear();
}

void ChatWindow::selectCurrentConversation()
{
    const int row = m_chat->conversations()->rowOf(m_chat->currentConversation());
    if (row >= 0) m_conversations->setCurrentIndex(m_chat->conversations()->index(row));
    else m_conversations->clearSelection();
}

void ChatWindow::showConversationMenu(const QPoint& at)
{
    const QModelIndex index = m_conversations->indexAt(at);
    if (!index.isValid()) return;
    const qint64 id = index.data(ConversationListModel::IdRole).toLongLong();
    QMenu menu(this);
    QAction* rename = menu.addAction(tr("Rename…"));
    QAction* remove = menu.addAction(tr("Delete"));
    QAction* chosen = menu.exec(m_conversations->viewport()->mapToGlobal(at));
    if (chosen == rename) {
        bool ok = false;
        const QString title = QInputDialog::getText(this, tr("Rename conversation"), tr("Title:"), QLineEdit::Normal,
                                                    index.data(Qt::DisplayRole).toString(), &ok);
        if (ok) m_chat->renameConversation(id, title);
    } else if (chosen == remove) {
        m_chat->deleteConversation(id);
    }
}

void ChatWindow::onModelLoaded(const QString& description, bool chatTemplate)
{
    m_transcript->setContinuation(!chatTemplate);
    m_welcome->setModel(description);
    m_status->setText(description);
    emit modelReady();
}

void ChatWindow::showNotice(const QString& message)
{
    if (!m_error->isHidden() && !m_error->property("notice").toBool()) return;  // an error stays in view
    m_error->setProperty("notice", true);
    m_error->setStyleSheet("color: #8a5300;");
    m_error->setText(message);
    m_error->show();
    emit noticeShown(message);
}

void ChatWindow::showError(const QString& message)
{
    m_error->setProperty("notice", false);
    m_error->setStyleSheet("color: #b00020;");
    m_error->setText(tr("Error: %1").arg(message));
    m_error->show();
    m_status->setText(tr("Error: %1").arg(message));
    emit errorShown(message);
}

void ChatWindow::onReplyFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens)
{
    m_status->setText(tr("%1 — %2 tokens, %3 tokens/s, first token %4 ms")
                          .arg(m_chat->modelDescription())
                          .arg(tokens)
                          .arg(tokensPerSecond, 0, 'f', 1)
                          .arg(timeToFirstTokenMs, 0, 'f', 1) +
                      m_neuronCacheText);
    m_neuronCacheText.clear();
    m_prompt->setFocus();
    emit replyFinished();
}

// The Models and Tuning tabs: their requests to the model and tuning workers, and the catalog
// and settings to and from the store.
void ChatWindow::connectLibraryAndTuning()
{
    ChatStore* store = m_workers->store();
    connect(this, &ChatWindow::storeReadSetting, store, &ChatStore::readSetting, Qt::QueuedConnection);
    connect(this, &ChatWindow::storeWriteSetting, store, &ChatStore::writeSetting, Qt::QueuedConnection);
    connect(store, &ChatStore::setting, this, [this](const QString& key, const QString& value) {
        if (key == QLatin1String(kWelcomeDoneKey) && value.isEmpty()) showWelcome();
    }, Qt::QueuedConnection);
    connect(this, &ChatWindow::storeAddModel, store, &ChatStore::addModel, Qt::QueuedConnection);
    connect(store, &ChatStore::modelsListed, this, &ChatWindow::onModelsListed, Qt::QueuedConnection);

    ModelWorker* models = m_workers->models();
    connect(this, &ChatWindow::inspectRequested, models, &ModelWorker::inspect, Qt::QueuedConnection);
    connect(this, &ChatWindow::compressRequested, models, &ModelWorker::compress, Qt::QueuedConnection);
    connect(models, &ModelWorker::inspected, this, [this](const ModelItem& m) { emit storeAddModel(m); },
            Qt::QueuedConnection);
    connect(models, &ModelWorker::rejected, this, [this](const QString& path, const QString& message) {
        showError(message.contains(path) ? message : path + ": " + message);
        emit modelRejected(path, message);
    }, Qt::QueuedConnection);
    connect(models, &ModelWorker::compressProgress, this, &ChatWindow::onCompressProgress, Qt::QueuedConnection);
    connect(models, &ModelWorker::compressed, this, &ChatWindow::onCompressed, Qt::QueuedConnection);
    connect(models, &ModelWorker::compressFailed, this, &ChatWindow::onCompressFailed, Qt::QueuedConnection);
    connect(m_library, &LibraryPanel::addRequested, this, &ChatWindow::addModel);
    connect(m_library, &LibraryPanel::compressRequested, this, &ChatWindow::compressModel);
    connect(m_library, &LibraryPanel::cancelRequested, this, &ChatWindow::cancelCompression);

    TuningWorker* tuning = m_workers->tuning();
    connect(m_tuning, &TuningPanel::changed, this, &ChatWindow::requestPrediction);
    connect(m_tuning, &TuningPanel::applyClicked, this, &ChatWindow::applyTuning);
    connect(m_welcome, &WelcomePage::startClicked, this, &ChatWindow::closeWelcome);
    connect(this, &ChatWindow::tuningPrepare, tuning, &TuningWorker::prepare, Qt::QueuedConnection);
    connect(this, &ChatWindow::tuningPredict, tuning, &TuningWorker::predict, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::ready, this, &ChatWindow::onTuningReady, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::predicted, this, &ChatWindow::onPredicted, Qt::QueuedConnection);
    connect(this, &ChatWindow::tuningPredictModels, tuning, &TuningWorker::predictModels, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::modelPredicted, this, &ChatWindow::onModelPredicted, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::probeProgress, m_welcome, &WelcomePage::setProgress, Qt::QueuedConnection);
    connect(tuning, &TuningWorker::failed, this, [this](const QString& message) {
        if (!m_tuningReady) m_welcome->setFailed(message);
        m_tuning->showNoPlan(message);
        emit tuningPredicted();
    }, Qt::QueuedConnection);
    GenerationWorker* worker = m_workers->generation();
    connect(this, &ChatWindow::applyRequested, worker, &GenerationWorker::applyPlan, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::planApplied, this, [this](const QString& description) {
        m_chat->setModelDescription(description);
        m_status->setText(description);
        emit tuningApplied();
    }, Qt::QueuedConnection);
    connect(this, &ChatWindow::modelReady, this, [this] {
        if (m_tuningStarted) return;
        m_tuningStarted = true;
        emit tuningPrepare(m_modelPath, modelsFolder());
    });
}

void ChatWindow::showWelcome()
{
    if (!m_welcomeSkipped) m_stack->setCurrentWidget(m_welcome);
}

void ChatWindow::skipWelcome()
{
    m_welcomeSkipped = true;
    m_stack->setCurrentIndex(0);
}

void ChatWindow::closeWelcome()
{
    if (m_stack->currentWidget() != m_welcome) return;
    m_stack->setCurrentIndex(0);
    if (m_workers->store()) emit storeWriteSetting(QString::fromLatin1(kWelcomeDoneKey), QStringLiteral("true"));
    m_prompt->setFocus();
}

bool ChatWindow::isWelcomeShown() const { return m_stack->currentWidget() == m_welcome; }

void ChatWindow::onTuningReady(const QString& summary, const QString& capabilities)
{
    m_tuningReady = true;
    m_tuning->setHardware(summary);
    m_welcome->setSummary(summary, capabilities);
    m_capabilities = capabilities;
    emit tuningReady();
    requestPrediction();
    requestModelPredictions(m_library->catalog()->models());
}

void ChatWindow::requestPrediction()
{
    if (!m_workers->tuning() || !m_tuningStarted) return;
    TuningSettings settings = m_tuning->settings(m_modelPath);
    if (settings.backend == QLatin1String("auto"))
        settings.backend = m_activeBackend.isEmpty() ? QStringLiteral("cpu") : m_activeBackend;
    emit tuningPredict(settings);
}

void ChatWindow::onPredicted(const TuningPrediction& prediction)
{
    m_prediction = prediction;
    m_tuning->showPrediction(prediction, !m_chat->isGenerating());
    emit tuningPredicted();
}

void ChatWindow::requestModelPredictions(const QVector<ModelItem>& models)
{
    if (!m_tuningReady) return;  // onTuningReady asks for the whole catalog
    QStringList paths;
    for (const ModelItem& m : models)
        if (!m_predictionAsked.contains(m.path)) {
            m_predictionAsked.insert(m.path);
            paths << m.path;
        }
    if (!paths.isEmpty()) emit tuningPredictModels(paths, m_activeBackend.isEmpty() ? QStringLiteral("cpu") : m_activeBackend);
}

void ChatWindow::onModelPredicted(const QString& path, double tokensPerSecond, const QString& text)
{
    m_predictedSpeed.insert(path, tokensPerSecond);
    m_library->catalog()->setPrediction(path, text);
    // The end of a compression: its predicted speed beside the source's.
    if (!m_compressedPackage.isEmpty() && m_predictedSpeed.contains(m_compressedSource) &&
        m_predictedSpeed.contains(m_compressedPackage)) {
        m_library->showResult(tr("Done: %1; predicted %2 → %3 tokens/s on this machine")
                                  .arg(m_compressSummary)
                                  .arg(m_predictedSpeed.value(m_compressedSource), 0, 'f', 1)
                                  .arg(m_predictedSpeed.value(m_compressedPackage), 0, 'f', 1));
        m_compressedPackage.clear();
        emit compressionCompared();
    }
}

void ChatWindow::applyTuning()
{
    if (!m_prediction.plan || m_chat->isGenerating()) return;
    if (!m_prediction.settings.modelPath.isEmpty()) m_modelPath = m_prediction.settings.modelPath;
    m_bottleneck->setPrediction(*m_prediction.plan);
    emit applyRequested(m_prediction);
}

QString ChatWindow::modelsFolder() const
{
    return m_dataFolder.isEmpty() ? QString() : QDir(m_dataFolder).filePath(QStringLiteral("models"));
}

void ChatWindow::addModel(const QString& path)
{
    if (m_workers->models()) emit inspectRequested(path);
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
    if (!m_workers->models() || m_compressing) return;
    const ModelItem* source = m_library->catalog()->model(id);
    if (!source) return;
    // dataFolder/models/<name>-<preset>, numbered when taken.
    const QString stem = QFileInfo(source->path).completeBaseName();
    QString out = QDir(modelsFolder()).filePath(stem + "-" + preset);
    for (int n = 2; QFileInfo::exists(out); ++n) out = QDir(modelsFolder()).filePath(QStringLiteral("%1-%2-%3").arg(stem, preset).arg(n));
    m_compressing = true;
    m_compressedSource = source->path;
    m_compressedPackage.clear();
    m_library->setCompressing(true);
    m_library->showResult(tr("Compressing %1 (%2) …").arg(QFileInfo(source->path).fileName(), preset));
    updateButtons();
    m_workers->models()->clearCancel();
    emit compressRequested(id, source->path, out, preset);
}

void ChatWindow::cancelCompression()
{
    if (m_compressing) m_workers->models()->cancelCompression();
}

void ChatWindow::onCompressProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal,
                                    double eta)
{
    m_library->showProgress(fraction, stage, bytesDone, bytesTotal, eta);
    emit compressionProgress(fraction);
}

void ChatWindow::onCompressed(qint64, const ModelItem& package, const QString& summary)
{
    m_compressing = false;
    m_library->setCompressing(false);
    m_library->showProgressDone();
    m_library->showResult(tr("Done: %1").arg(summary));
    m_compressSummary = summary;
    m_compressedPackage = package.path;
    emit storeAddModel(package);  // the new catalog list asks the planner about it (the source is known)
    updateButtons();
    emit compressionFinished(package.path, summary);
}

void ChatWindow::onCompressFailed(const QString& message, bool cancelled)
{
    m_compressing = false;
    m_library->setCompressing(false);
    m_library->showResult(cancelled ? tr("Compression cancelled; nothing was written.") : tr("Compression failed."));
    if (!cancelled) showError(message);
    updateButtons();
    emit compressionFailed(message, cancelled);
}

void ChatWindow::onModelsListed(const QVector<ModelItem>& models)
{
    m_library->setModels(models);
    m_tuning->setVariants(models, m_modelPath);
    requestModelPredictions(models);
    updateButtons();
    emit modelsListed(int(models.size()));
}

void ChatWindow::updateButtons()
{
    const bool ready = m_chat->isModelReady(), generating = m_chat->isGenerating();
    m_send->setEnabled(ready && !generating);
    m_prompt->setEnabled(ready);
    m_stop->setEnabled(generating);
    m_newChat->setEnabled(!generating);
    m_library->setCompressing(m_compressing);
}

}  // namespace spillway::ui
