#include "chat_window.h"

#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QLocale>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QMimeData>
#include <QProgressBar>
#include <QTabWidget>
#include <QUrl>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QPushButton>
#include <QMessageBox>
#include <QShortcut>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTextBrowser>
#include <QThread>
#include <QVBoxLayout>

#include "bottleneck_view.h"
#include "core/plan/planner.h"
#include "core/trace/trace.h"
#include "generation_worker.h"
#include "library_panel.h"
#include "tuning_panel.h"
#include "welcome_page.h"

namespace spillway::ui {

namespace {
constexpr const char* kWelcomeDoneKey = "ui.welcomeDone";  // a setting: the first-launch screen was seen
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

    // The model library (drop a model anywhere on the window) and the tuning panel.
    m_library = new LibraryPanel;
    m_tuning = new TuningPanel;
    connect(m_tuning, &TuningPanel::changed, this, &ChatWindow::requestPrediction);
    connect(m_tuning, &TuningPanel::applyClicked, this, &ChatWindow::applyTuning);

    auto* tabs = m_tabs = new QTabWidget(splitter);
    auto* chats = side;
    tabs->addTab(chats, tr("Chats"));
    tabs->addTab(m_library, tr("Models"));
    tabs->addTab(m_tuning, tr("Tuning"));
    tabs->setVisible(!dataFolder.isEmpty());
    m_dataFolder = dataFolder;
    setAcceptDrops(!dataFolder.isEmpty());

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
    connect(m_welcome, &WelcomePage::startClicked, this, &ChatWindow::closeWelcome);
    splitter->addWidget(tabs);
    splitter->addWidget(m_stack);
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
    resizeDocks({dock}, {260}, Qt::Vertical);

    m_status = new QLabel(tr("Loading %1 …").arg(modelPath), this);
    m_status->setObjectName("statusLine");
    statusBar()->addWidget(m_status, 1);

    connect(m_send, &QPushButton::clicked, this, &ChatWindow::send);
    connect(m_prompt, &QLineEdit::returnPressed, this, &ChatWindow::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatWindow::stop);
    connect(m_transcript, &TranscriptView::regenerateRequested, this, &ChatWindow::regenerate);
    connect(m_transcript, &TranscriptView::editRequested, this, &ChatWindow::editMessage);
    connect(m_transcript, &TranscriptView::versionRequested, this, &ChatWindow::showVersion);
    auto* escape = new QShortcut(QKeySequence(Qt::Key_Escape), m_prompt);
    escape->setContext(Qt::WidgetShortcut);
    connect(escape, &QShortcut::activated, this, &ChatWindow::cancelEdit);
    qRegisterMetaType<MessageItem>();
    qRegisterMetaType<QVector<MessageItem>>();

    // The worker has no parent: it moves to the inference thread and is deleted there.
    m_thread = new QThread(this);
    m_thread->setObjectName("inference");
    m_worker = new GenerationWorker;
    m_recorder = std::make_unique<trace::Recorder>(size_t{1} << 16);
    m_worker->setRecorder(m_recorder.get());
    m_worker->setBackend(qEnvironmentVariable("SPILLWAY_BACKEND", QStringLiteral("auto")));
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
    connect(m_worker, &GenerationWorker::neuronCacheReport, this, [this](double hitRate, double bytesPerToken) {
        m_neuronCacheText = tr(" — neuron cache: hit rate %1%, %2 per token")
                                .arg(100.0 * hitRate, 0, 'f', 1)
                                .arg(QLocale().formattedDataSize(qint64(bytesPerToken)));
    }, Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::finished, this, &ChatWindow::onFinished,
            Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::notice, this, &ChatWindow::showNotice, Qt::QueuedConnection);
    connect(m_worker, &GenerationWorker::deviceChanged, this,
            [this](const QString& backend, const QString& description, const QString& why) {
                const bool changed = backend != m_activeBackend;
                m_activeBackend = backend;
                m_deviceNote = why;
                m_status->setToolTip(why.isEmpty() ? description : description + QStringLiteral("\n") + why);
                if (m_modelReady) {
                    m_modelDescription = description;
                    if (!m_generating) m_status->setText(description);
                }
                emit deviceChanged(backend);
                if (changed && m_tuningReady) requestPrediction();  // plan for the device that computes
            }, Qt::QueuedConnection);
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
        connect(this, &ChatWindow::storeVersion, m_store, &ChatStore::addVersion, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeSelectVersion, m_store, &ChatStore::selectVersion, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeTruncate, m_store, &ChatStore::truncateAfter, Qt::QueuedConnection);
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
        connect(this, &ChatWindow::storeReadSetting, m_store, &ChatStore::readSetting, Qt::QueuedConnection);
        connect(this, &ChatWindow::storeWriteSetting, m_store, &ChatStore::writeSetting, Qt::QueuedConnection);
        connect(m_store, &ChatStore::setting, this, [this](const QString& key, const QString& value) {
            if (key == QLatin1String(kWelcomeDoneKey) && value.isEmpty()) showWelcome();
        }, Qt::QueuedConnection);
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
        emit storeReadSetting(QString::fromLatin1(kWelcomeDoneKey));

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
        connect(m_library, &LibraryPanel::addRequested, this, &ChatWindow::addModel);
        connect(m_library, &LibraryPanel::compressRequested, this, &ChatWindow::compressModel);
        connect(m_library, &LibraryPanel::cancelRequested, this, &ChatWindow::cancelCompression);

        m_tuningThread = new QThread(this);
        m_tuningThread->setObjectName("tuning");
        m_tuningWorker = new TuningWorker;
        m_tuningWorker->moveToThread(m_tuningThread);
        connect(m_tuningThread, &QThread::finished, m_tuningWorker, &QObject::deleteLater);
        connect(this, &ChatWindow::tuningPrepare, m_tuningWorker, &TuningWorker::prepare, Qt::QueuedConnection);
        connect(this, &ChatWindow::tuningPredict, m_tuningWorker, &TuningWorker::predict, Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::ready, this, &ChatWindow::onTuningReady, Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::predicted, this, &ChatWindow::onPredicted, Qt::QueuedConnection);
        connect(this, &ChatWindow::tuningPredictModels, m_tuningWorker, &TuningWorker::predictModels,
                Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::modelPredicted, this, &ChatWindow::onModelPredicted,
                Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::probeProgress, m_welcome, &WelcomePage::setProgress,
                Qt::QueuedConnection);
        connect(m_tuningWorker, &TuningWorker::failed, this, [this](const QString& message) {
            if (!m_tuningReady) m_welcome->setFailed(message);
            m_tuning->showNoPlan(message);
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
    if (m_tuningThread) {  // a probe that is measuring stops at its next stage
        m_tuningWorker->cancel();
        m_tuningThread->quit();
        m_tuningThread->wait();
    }
    if (m_storageThread) {  // pending writes finish first: the queue drains before quit
        m_storageThread->quit();
        m_storageThread->wait();
    }
}

QString ChatWindow::statusText() const { return m_status->text(); }

QString ChatWindow::errorText() const { return m_error->isHidden() || m_errorIsNotice ? QString() : m_error->text(); }

QString ChatWindow::noticeText() const { return m_error->isHidden() || !m_errorIsNotice ? QString() : m_error->text(); }

void ChatWindow::send()
{
    const QString prompt = m_prompt->text();
    if (!m_modelReady || m_generating || prompt.trimmed().isEmpty()) return;
    if (m_editIndex >= 0) {
        const int index = m_editIndex;
        const int after = int(m_transcript->messages().size()) - index - 1;
        if (after > 1 && QMessageBox::question(this, tr("Edit and resend"),
                                               tr("Resending this message removes the %n message(s) after it.", "", after))
                             != QMessageBox::Yes)
            return;
        cancelEdit();
        editAndResend(index, prompt);
        return;
    }
    beginExchange();
    MessageItem user;
    user.role = QStringLiteral("user");
    user.content = prompt;
    m_transcript->appendMessage(user);
    startReply(int(m_transcript->messages().size()), 0);
    if (m_store && m_conversation == 0) {
        // The conversation is created first; the prompt is stored and sent once it exists.
        m_awaitingConversation = true;
        emit storeCreate(prompt.left(60).simplified());
        return;
    }
    storeLastPrompt();
    requestGeneration();
}

void ChatWindow::beginExchange()
{
    m_generating = true;
    m_error->hide();
    m_error->clear();
    m_prompt->clear();
    updateButtons();
    m_status->setText(tr("%1 — generating …").arg(m_modelDescription));
}

void ChatWindow::startReply(int index, qint64 replacesMessage)
{
    m_replyIndex = index;
    m_replacesMessage = replacesMessage;
    m_transcript->beginReply(index);
}

void ChatWindow::storeLastPrompt()
{
    // The prompt is the message just before the reply.
    const int index = m_replyIndex - 1;
    if (!m_store || !m_conversation || index < 0) return;
    ++m_pendingStores;
    m_storeTargets.push_back(index);
    emit storeAppend(m_conversation, QStringLiteral("user"), m_transcript->messages()[index].content, 0, 0, QString());
}

void ChatWindow::requestGeneration()
{
    m_worker->clearStop();
    emit generateRequested(m_transcript->messages().mid(0, m_replyIndex), m_maxTokens, m_temperature);
}

void ChatWindow::regenerate(int index)
{
    const auto& messages = m_transcript->messages();
    if (!m_modelReady || m_generating || m_pendingStores > 0 || index != messages.size() - 1 ||
        messages[index].role != QLatin1String("assistant"))
        return;
    const qint64 replaces = messages[index].id;
    beginExchange();
    startReply(index, replaces);
    requestGeneration();
}

void ChatWindow::editMessage(int index)
{
    const auto& messages = m_transcript->messages();
    if (m_generating || index < 0 || index >= messages.size() || messages[index].role != QLatin1String("user")) return;
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

void ChatWindow::editAndResend(int index, const QString& text)
{
    const QVector<MessageItem> messages = m_transcript->messages();
    if (!m_modelReady || m_generating || m_pendingStores > 0 || text.trimmed().isEmpty() || index < 0 ||
        index >= messages.size() || messages[index].role != QLatin1String("user"))
        return;
    MessageItem edited = messages[index];
    const qint64 promptId = edited.id;
    // The last prompt keeps its reply as an earlier version; an earlier prompt drops what followed.
    const bool lastExchange = index >= messages.size() - 2;
    const qint64 replyId = lastExchange && index + 1 < messages.size() ? messages[index + 1].id : 0;
    if (m_store && m_conversation && promptId) {
        if (!lastExchange) emit storeTruncate(m_conversation, promptId);
        ++m_pendingStores;
        m_storeTargets.push_back(-1);
        emit storeVersion(m_conversation, promptId, QStringLiteral("edit"), text, 0, 0, QString());
        edited.versionCount += 1;
        edited.versionNumber = edited.versionCount;
    }
    edited.content = text;
    beginExchange();
    m_transcript->truncate(index);
    m_transcript->appendMessage(edited);
    startReply(index + 1, replyId);
    requestGeneration();
}

void ChatWindow::showVersion(int index, int number)
{
    const auto& messages = m_transcript->messages();
    if (m_generating || !m_store || index < 0 || index >= messages.size() || !messages[index].id) return;
    emit storeSelectVersion(m_conversation, messages[index].id, number);
}

void ChatWindow::onCreated(qint64 conversation)
{
    m_conversation = conversation;
    if (m_awaitingConversation) {
        m_awaitingConversation = false;
        if (m_generating) {
            storeLastPrompt();
            requestGeneration();
        }
    }
    emit storeList(m_search->text());
}

void ChatWindow::onStored(qint64 conversation, qint64 message)
{
    // Stores are answered in the order they were sent: the last one of an exchange is its reply.
    const int target = m_storeTargets.isEmpty() ? -1 : m_storeTargets.takeFirst();
    if (conversation == m_conversation && target >= 0) m_transcript->setMessageId(target, message);
    if (--m_pendingStores > 0 || m_generating) return;
    if (target < 0 && conversation == m_conversation) emit storeLoad(conversation);  // new version counts
    emit replyStored(conversation);
}

void ChatWindow::newConversation()
{
    if (m_generating) return;
    m_conversation = 0;
    cancelEdit();
    m_transcript->setMessages({});
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
    cancelEdit();
    m_transcript->setMessages(messages);
    emit conversationShown(conversation);
}

void ChatWindow::stop()
{
    if (m_generating) m_worker->requestStop();
}

void ChatWindow::onModelLoaded(const QString& description, bool chatTemplate)
{
    m_modelReady = true;
    m_transcript->setContinuation(!chatTemplate);
    m_welcome->setModel(description);
    m_modelDescription = description;
    m_status->setText(description);
    updateButtons();
    emit modelReady();
}

void ChatWindow::onFailed(const QString& message)
{
    if (m_generating && m_replyIndex >= 0) {  // the failed reply goes; its prompt stays
        m_transcript->finishReply(0, 0, QString());
        m_transcript->truncate(m_replyIndex);
    }
    m_generating = false;
    m_awaitingConversation = false;
    // A failed regeneration cleared the reply it replaced: show the stored conversation again.
    if (m_replacesMessage && m_store && m_conversation && m_pendingStores == 0) emit storeLoad(m_conversation);
    showError(message);
    updateButtons();
}

void ChatWindow::showNotice(const QString& message)
{
    if (!m_error->isHidden() && !m_errorIsNotice) return;  // an error stays in view
    m_errorIsNotice = true;
    m_error->setStyleSheet("color: #8a5300;");
    m_error->setText(message);
    m_error->show();
    emit noticeShown(message);
}

void ChatWindow::showError(const QString& message)
{
    m_errorIsNotice = false;
    m_error->setStyleSheet("color: #b00020;");
    m_error->setText(tr("Error: %1").arg(message));
    m_error->show();
    m_status->setText(tr("Error: %1").arg(message));
    emit errorShown(message);
}

void ChatWindow::onTokens(const QString& text) { m_transcript->appendReplyText(text); }

void ChatWindow::onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens)
{
    m_generating = false;
    m_transcript->finishReply(tokensPerSecond, timeToFirstTokenMs, m_modelDescription);
    const QString reply = m_transcript->messages().value(m_replyIndex).content;
    if (m_store && m_conversation) {
        ++m_pendingStores;
        if (m_replacesMessage) {
            m_storeTargets.push_back(-1);
            emit storeVersion(m_conversation, m_replacesMessage, QStringLiteral("regeneration"), reply, tokensPerSecond,
                              timeToFirstTokenMs, m_modelDescription);
        } else {
            m_storeTargets.push_back(m_replyIndex);
            emit storeAppend(m_conversation, QStringLiteral("assistant"), reply, tokensPerSecond, timeToFirstTokenMs,
                             m_modelDescription);
        }
    }
    m_status->setText(tr("%1 — %2 tokens, %3 tokens/s, first token %4 ms")
                          .arg(m_modelDescription)
                          .arg(tokens)
                          .arg(tokensPerSecond, 0, 'f', 1)
                          .arg(timeToFirstTokenMs, 0, 'f', 1) +
                      m_neuronCacheText);
    m_neuronCacheText.clear();
    updateButtons();
    m_prompt->setFocus();
    emit replyFinished();
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
    if (m_store) emit storeWriteSetting(QString::fromLatin1(kWelcomeDoneKey), QStringLiteral("true"));
    m_prompt->setFocus();
}

bool ChatWindow::isWelcomeShown() const { return m_stack->currentWidget() == m_welcome; }

QListWidget* ChatWindow::modelList() const { return m_library->modelList(); }
QProgressBar* ChatWindow::compressionBar() const { return m_library->compressionBar(); }
QDoubleSpinBox* ChatWindow::vramBudgetBox() const { return m_tuning->vramBudgetBox(); }
QDoubleSpinBox* ChatWindow::ramBudgetBox() const { return m_tuning->ramBudgetBox(); }
QSpinBox* ChatWindow::contextBox() const { return m_tuning->contextBox(); }
QSpinBox* ChatWindow::prefetchBox() const { return m_tuning->prefetchBox(); }
QSpinBox* ChatWindow::threadsBox() const { return m_tuning->threadsBox(); }
QPushButton* ChatWindow::applyButton() const { return m_tuning->applyButton(); }
QString ChatWindow::hardwareSummary() const { return m_tuning->hardwareSummary(); }
QString ChatWindow::predictionText() const { return m_tuning->predictionText(); }

void ChatWindow::onTuningReady(const QString& summary, const QString& capabilities)
{
    m_tuningReady = true;
    m_tuning->setHardware(summary);
    m_welcome->setSummary(summary, capabilities);
    m_capabilities = capabilities;
    emit tuningReady();
    requestPrediction();
    requestModelPredictions(m_library->models());
}

void ChatWindow::requestPrediction()
{
    if (!m_tuningWorker || !m_tuningStarted) return;
    TuningSettings settings = m_tuning->settings(m_modelPath);
    if (settings.backend == QLatin1String("auto"))
        settings.backend = m_activeBackend.isEmpty() ? QStringLiteral("cpu") : m_activeBackend;
    emit tuningPredict(settings);
}

void ChatWindow::onPredicted(const TuningPrediction& prediction)
{
    m_prediction = prediction;
    m_tuning->showPrediction(prediction, !m_generating);
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
    m_library->setPrediction(path, text);
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
    if (!m_prediction.plan || m_generating) return;
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
    const ModelItem* source = m_library->model(id);
    if (!source) return;
    // dataFolder/models/<name>-<preset>, numbered when taken.
    const QString stem = QFileInfo(source->path).completeBaseName();
    QString out = QDir(modelsFolder()).filePath(stem + "-" + preset);
    for (int n = 2; QFileInfo::exists(out); ++n) out = QDir(modelsFolder()).filePath(QStringLiteral("%1-%2-%3").arg(stem, preset).arg(n));
    m_compressing = true;
    m_compressOut = out;
    m_compressedSource = source->path;
    m_compressedPackage.clear();
    m_library->setCompressing(true);
    m_library->showResult(tr("Compressing %1 (%2) …").arg(QFileInfo(source->path).fileName(), preset));
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
    m_library->showProgress(fraction, stage, bytesDone, bytesTotal, eta);
    emit compressionProgress(fraction);
}

void ChatWindow::onCompressed(qint64, const ModelItem& package, const QString& summary)
{
    m_compressing = false;
    m_library->setCompressing(false);
    m_library->compressionBar()->setValue(1000);
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
    m_send->setEnabled(m_modelReady && !m_generating);
    m_prompt->setEnabled(m_modelReady);
    m_stop->setEnabled(m_generating);
    m_newChat->setEnabled(!m_generating);
    m_library->setCompressing(m_compressing);
}

}  // namespace spillway::ui
