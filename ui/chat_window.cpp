#include "chat_window.h"

#include <QComboBox>
#include <QGuiApplication>
#include <QScreen>
#include <QDateTime>
#include <QStandardPaths>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFormLayout>
#include <QDockWidget>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QToolButton>
#include <QButtonGroup>
#include <QStyle>
#include <QStyledItemDelegate>
#include <QUrl>
#include <QVBoxLayout>

#include "bottleneck_view.h"
#include "discover_controller.h"
#include "eliding_label.h"
#include "discover_panel.h"
#include "chat_controller.h"
#include "conversation_list_model.h"
#include "core/trace/trace.h"
#include "generation_panel.h"
#include "generation_worker.h"
#include "library_controller.h"
#include "library_panel.h"
#include "model_catalog_model.h"
#include "prompt_edit.h"
#include "palette_colors.h"
#include "transcript_view.h"
#include "tuning_panel.h"
#include "welcome_page.h"
#include "worker_threads.h"
#include "readable.h"
#include "remote_endpoint.h"
#include "server_control.h"

namespace spillway::ui {

namespace {
constexpr const char* kWindowKey = "ui.window";        // geometry and dock layout
constexpr const char* kLastModelKey = "ui.lastModel";  // the model that answered last
constexpr const char* kTuningKey = "ui.tuning";        // the Tuning view's choices
constexpr const char* kServerKey = "ui.server";        // the server toggle's port, slots and state

// A list's rows as wide as the list (not as their text): a long title ends in "…" instead of
// running past the edge into a sideways scrollbar.
class ListRowDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override
    {
        return {1, QStyledItemDelegate::sizeHint(option, index).height()};
    }
};

}  // namespace

ChatWindow::ChatWindow(const QString& modelPath, const QString& dataFolder, QWidget* parent,
                       const QString& fallbackModel)
    : QMainWindow(parent)
{
    const bool withData = !dataFolder.isEmpty();
    m_recorder = std::make_unique<trace::Recorder>(size_t{1} << 16);
    // Remote endpoints' API keys: kept on disk only when the user agrees, readable by the user alone.
    m_keys = std::make_unique<EndpointKeys>(withData ? QDir(dataFolder).filePath(QStringLiteral("endpoint-keys.json"))
                                                     : QString());
    m_workers = new WorkerThreads(withData, m_recorder.get(), qEnvironmentVariable("SPILLWAY_BACKEND", QStringLiteral("auto")),
                                  this, m_keys.get());
    m_chat = new ChatController(m_workers->generation(), m_workers->store(), this);
    if (withData) m_models = new LibraryController(m_workers, dataFolder, modelPath, this, m_keys.get());
    if (withData) m_discoverController = new DiscoverController(m_workers, m_models, m_keys.get(), dataFolder, this);
    buildWidgets(withData);
    keepOnScreen();  // the first launch's size, on a screen smaller than it
    buildMenus(withData);
    connectChat();
    if (withData) connectLibraryAndTuning();
    updateButtons();
    if (withData) {
        m_chat->openHistory(dataFolder);
        m_models->checkWelcome();
        emit storeReadSetting(QString::fromLatin1(kWindowKey));
        emit storeReadSetting(QString::fromLatin1(kTuningKey));
        emit storeReadSetting(QString::fromLatin1(kServerKey));
    }
    if (withData && modelPath.isEmpty()) {  // the model used last, once the store says which
        m_awaitingLastModel = true;
        m_fallbackModel = fallbackModel;
        m_status->setText(tr("Loading …"));
        emit storeReadSetting(QString::fromLatin1(kLastModelKey));
        return;
    }
    // A model named on the command line that cannot be opened leaves the one used last (else the
    // fallback) answering, and says why.
    m_startPath = modelPath;
    m_fallbackModel = fallbackModel;
    startWith(modelPath.isEmpty() ? fallbackModel : modelPath);
}

void ChatWindow::startWith(const QString& modelPath)
{
    m_status->setText(tr("Loading %1 …").arg(modelPath));
    m_chat->loadModel(modelPath);
    if (m_models) m_models->addModel(modelPath);  // the running model is in the library
}

void ChatWindow::onSetting(const QString& key, const QString& valueJson)
{
    const QJsonDocument doc = QJsonDocument::fromJson(valueJson.toUtf8());
    if (key == QLatin1String(kLastModelKey) && m_awaitingLastModel) {
        m_awaitingLastModel = false;
        const QString last = doc.object().value("path").toString();
        QString next = !last.isEmpty() && QFileInfo::exists(last) ? last : m_fallbackModel;
        if (next == m_startPath) next = m_fallbackModel;  // (the model that just failed)
        if (next.isEmpty() || next == m_startPath) {
            showError(m_startFailure);
            m_startFailure.clear();
            return;
        }
        startWith(next);
    } else if (key == QLatin1String(kWindowKey) && doc.isObject()) {
        restoreGeometry(QByteArray::fromBase64(doc.object().value("geometry").toString().toLatin1()));
        restoreState(QByteArray::fromBase64(doc.object().value("state").toString().toLatin1()));
        keepOnScreen();
    } else if (key == QLatin1String(kTuningKey) && doc.isObject()) {
        m_tuningRestored = true;
        m_tuning->restoreState(doc.object());
    } else if (key == QLatin1String(kTuningKey)) {
        m_tuningRestored = true;  // nothing stored yet: the defaults stand
    } else if (key == QLatin1String(kServerKey) && doc.isObject()) {
        m_server->restoreState(doc.object());
    }
}

void ChatWindow::keepOnScreen()
{
    // A geometry kept from another screen (or a larger one) comes back inside this one's
    // available area: smaller where it does not fit, moved where it hangs over an edge.
    if (isMaximized() || isFullScreen()) return;
    const QScreen* screen = QGuiApplication::screenAt(frameGeometry().center());
    if (!screen) screen = QGuiApplication::primaryScreen();
    if (!screen) return;
    const QRect area = screen->availableGeometry();
    const QRect frame = frameGeometry();
    const QSize margins = frame.size() - size();  // the window manager's frame, if any
    const QSize fitted = size().boundedTo(area.size() - margins);
    if (fitted != size()) resize(fitted);
    QRect moved(frame.topLeft(), fitted + margins);
    if (moved.right() > area.right()) moved.moveRight(area.right());
    if (moved.bottom() > area.bottom()) moved.moveBottom(area.bottom());
    if (moved.left() < area.left()) moved.moveLeft(area.left());
    if (moved.top() < area.top()) moved.moveTop(area.top());
    if (moved.topLeft() != frame.topLeft()) move(moved.topLeft());
}

void ChatWindow::storeTuningChoices()
{
    if (!m_tuningRestored) return;  // a change before the stored choices are back is their restore
    emit storeWriteSetting(QString::fromLatin1(kTuningKey),
                           QString::fromUtf8(QJsonDocument(m_tuning->saveState()).toJson(QJsonDocument::Compact)));
}

void ChatWindow::closeEvent(QCloseEvent* event)
{
    if (m_workers->store()) {
        const QJsonObject window{{"geometry", QString::fromLatin1(saveGeometry().toBase64())},
                                 {"state", QString::fromLatin1(saveState().toBase64())}};
        emit storeWriteSetting(QString::fromLatin1(kWindowKey),
                               QString::fromUtf8(QJsonDocument(window).toJson(QJsonDocument::Compact)));
    }
    QMainWindow::closeEvent(event);
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

    // The chats' list: new chat, search, the conversations.
    m_chatList = new QWidget;
    m_chatList->setObjectName("chatList");
    auto* sideLayout = new QVBoxLayout(m_chatList);
    sideLayout->setContentsMargins(4, 4, 4, 4);
    m_newChat = new QPushButton(tr("New chat"), m_chatList);
    m_newChat->setObjectName("newChat");
    m_newChat->setAccessibleName(tr("New chat"));
    m_search = new QLineEdit(m_chatList);
    m_search->setObjectName("search");
    m_search->setAccessibleName(tr("Search conversations"));
    m_search->setPlaceholderText(tr("Search conversations"));
    m_search->setClearButtonEnabled(true);
    m_conversations = new QListView(m_chatList);
    m_conversations->setObjectName("conversations");
    m_conversations->setAccessibleName(tr("Conversations"));
    m_conversations->setModel(m_chat->conversations());
    m_conversations->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_conversations->setContextMenuPolicy(Qt::CustomContextMenu);
    // Long titles end in "…" (the whole title on hover), never in a sideways scrollbar.
    m_conversations->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_conversations->setTextElideMode(Qt::ElideRight);
    m_conversations->setWordWrap(false);
    m_conversations->setUniformItemSizes(true);
    m_conversations->setItemDelegate(new ListRowDelegate(m_conversations));
    sideLayout->addWidget(m_newChat);
    sideLayout->addWidget(m_search);
    sideLayout->addWidget(m_conversations, 1);
    m_chatList->setVisible(withData);

    // The model library (drop a model anywhere on the window) and the tuning view: each a view of
    // the main area, as wide as the window.
    m_library = new LibraryPanel;
    m_library->setObjectName("library");
    if (m_models) m_library->setCatalog(m_models->catalog());
    m_tuning = new TuningPanel;
    m_tuning->setObjectName("tuning");
    // The Tuning view scrolls rather than make the window taller than a laptop screen.
    auto* tuningArea = new QScrollArea;
    tuningArea->setObjectName("tuningArea");
    tuningArea->setAccessibleName(tr("Tuning"));
    tuningArea->setWidget(m_tuning);
    tuningArea->setWidgetResizable(true);
    tuningArea->setFrameShape(QFrame::NoFrame);
    // Discover: the Hub's models with the planner's verdict on each, and the downloads.
    m_discover = new DiscoverPanel;
    m_discover->setObjectName("discover");
    m_discover->setController(m_discoverController);
    setAcceptDrops(withData);

    // The chat: a top row (the model picker, the settings toggle), the transcript with the chat's
    // settings beside it, the prompt line.
    auto* central = new QWidget;
    auto* layout = new QVBoxLayout(central);
    auto* top = new QHBoxLayout;
    if (m_models) {
        // The model picker: the catalog's models and packages, with size, format and the
        // planner's predicted speed here.
        m_picker = new QComboBox(central);
        m_picker->setObjectName("modelPicker");
        m_picker->setAccessibleName(tr("Model"));
        m_picker->setToolTip(tr("The model that answers; another loads in the background"));
        m_picker->setModel(new ModelPickerModel(m_picker));
        static_cast<ModelPickerModel*>(m_picker->model())->setSourceModel(m_models->catalog());
        m_picker->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        m_picker->setMinimumContentsLength(30);
        top->addWidget(new QLabel(tr("Model:"), central));
        top->addWidget(m_picker, 1);
    } else {
        top->addStretch(1);
    }
    // A model loading: how much of its weights are in, and Cancel (the model before stays).
    m_loadBar = new QProgressBar(central);
    m_loadBar->setObjectName("loadProgress");
    m_loadBar->setAccessibleName(tr("Model loading"));
    m_loadBar->setRange(0, 1000);
    m_loadBar->setMaximumWidth(160);
    m_loadBar->hide();
    m_cancelLoad = new QPushButton(tr("Cancel loading"), central);
    m_cancelLoad->setObjectName("cancelLoad");
    m_cancelLoad->setToolTip(tr("Stop loading this model; the one before goes on answering"));
    m_cancelLoad->hide();
    top->addWidget(m_loadBar);
    top->addWidget(m_cancelLoad);
    auto* settingsToggle = new QPushButton(tr("Settings"), central);
    settingsToggle->setObjectName("settingsToggle");
    settingsToggle->setCheckable(true);
    settingsToggle->setToolTip(tr("This chat's system prompt, length and sampling"));
    top->addWidget(settingsToggle);
    layout->addLayout(top);
    auto* beside = new QSplitter(Qt::Horizontal, central);
    m_generation = new GenerationPanel(beside);
    m_generation->setObjectName("generationSettings");
    m_generation->setVisible(false);
    connect(settingsToggle, &QPushButton::toggled, m_generation, &QWidget::setVisible);
    m_transcript = new TranscriptView(beside);
    m_transcript->setObjectName("transcript");
    m_transcript->setAccessibleName(tr("Conversation"));
    beside->addWidget(m_transcript);
    beside->addWidget(m_generation);
    beside->setStretchFactor(0, 1);
    m_editBanner = new QLabel(tr("Editing your message: Send resends it, Escape cancels."), central);
    m_editBanner->setObjectName("editBanner");
    m_editBanner->setStyleSheet(colorStyle(mutedColor(palette())));
    m_editBanner->hide();
    m_error = new QLabel(central);
    m_error->setObjectName("inlineError");
    m_error->setStyleSheet(colorStyle(errorColor(palette())));
    m_error->setWordWrap(true);
    m_error->hide();
    m_prompt = new PromptEdit(central);
    m_prompt->setObjectName("prompt");
    m_prompt->setAccessibleName(tr("Prompt"));
    m_prompt->setPlaceholderText(tr("Type a prompt and press Enter (Shift+Enter for a new line)"));
    m_send = new QPushButton(tr("Send"), central);
    m_send->setObjectName("send");
    m_send->setAccessibleName(tr("Send"));
    m_stop = new QPushButton(tr("Stop"), central);
    m_stop->setObjectName("stop");
    m_stop->setAccessibleName(tr("Stop"));
    auto* row = new QHBoxLayout;
    row->addWidget(m_prompt, 1);
    row->addWidget(m_send);
    row->addWidget(m_stop);
    layout->addWidget(beside, 1);
    layout->addWidget(m_error);
    layout->addWidget(m_editBanner);
    layout->addLayout(row);
    // The first-launch screen shares the chat's place; the chat shows unless it is the first.
    m_stack = new QStackedWidget;
    m_welcome = new WelcomePage(m_stack);
    m_welcome->setObjectName("welcome");
    m_stack->addWidget(central);
    m_stack->addWidget(m_welcome);
    m_stack->setCurrentWidget(central);
    auto* chats = new QSplitter;
    chats->setObjectName("chatsView");
    chats->addWidget(m_chatList);
    chats->addWidget(m_stack);
    chats->setStretchFactor(1, 1);
    chats->setCollapsible(1, false);
    chats->setSizes({240, 900});

    // The main area shows one view at a time; the navigation rail at its left switches them.
    m_views = new QStackedWidget;
    m_views->setObjectName("views");
    m_views->addWidget(chats);
    m_views->addWidget(m_library);
    m_views->addWidget(tuningArea);
    m_views->addWidget(m_discover);
    m_rail = new QWidget;
    m_rail->setObjectName("navigation");
    m_rail->setAccessibleName(tr("Views"));
    m_rail->setVisible(withData);
    auto* railLayout = new QVBoxLayout(m_rail);
    railLayout->setContentsMargins(2, 6, 2, 6);
    railLayout->setSpacing(4);
    auto* group = new QButtonGroup(m_rail);
    const struct {
        const char* name;
        const char* label;
        const char* theme;
        QStyle::StandardPixmap fallback;
        const char* tip;
    } views[] = {
        {"navChats", QT_TR_NOOP("Chats"), "mail-message-new", QStyle::SP_FileDialogDetailedView,
         QT_TR_NOOP("Your conversations (Ctrl+1)")},
        {"navModels", QT_TR_NOOP("Models"), "drive-harddisk", QStyle::SP_DriveHDIcon,
         QT_TR_NOOP("The model library: add, compress, chat with a model (Ctrl+2)")},
        {"navTuning", QT_TR_NOOP("Tuning"), "preferences-system", QStyle::SP_ComputerIcon,
         QT_TR_NOOP("Where the weights go and how fast it runs here (Ctrl+3)")},
        {"navDiscover", QT_TR_NOOP("Discover"), "system-search", QStyle::SP_ArrowDown,
         QT_TR_NOOP("Find models on Hugging Face, judged for this machine before you download (Ctrl+4)")},
    };
    for (int i = 0; i < 4; ++i) {
        auto* button = new QToolButton(m_rail);
        button->setObjectName(QString::fromLatin1(views[i].name));
        button->setText(tr(views[i].label));
        button->setAccessibleName(tr(views[i].label));
        button->setToolTip(tr(views[i].tip));
        button->setIcon(QIcon::fromTheme(QString::fromLatin1(views[i].theme), style()->standardIcon(views[i].fallback)));
        button->setIconSize(QSize(24, 24));
        button->setToolButtonStyle(Qt::ToolButtonTextUnderIcon);
        button->setCheckable(true);
        button->setAutoRaise(true);
        button->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
        button->setMinimumWidth(64);
        group->addButton(button, i);
        railLayout->addWidget(button);
    }
    railLayout->addStretch(1);
    group->button(0)->setChecked(true);
    connect(group, &QButtonGroup::idClicked, this, [this](int id) { showView(View(id)); });
    auto* root = new QWidget(this);
    auto* rootLayout = new QHBoxLayout(root);
    rootLayout->setContentsMargins(0, 0, 0, 0);
    rootLayout->setSpacing(0);
    rootLayout->addWidget(m_rail);
    rootLayout->addWidget(m_views, 1);
    setCentralWidget(root);

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
        if (chosen) exportTimeline(chosen == trace);
    });
    connect(m_bottleneck, &BottleneckView::exportRequested, this, &ChatWindow::exportTimeline);

    m_status = new ElidingLabel(this);  // a long line ends in "…" (the whole of it on hover)
    m_status->setObjectName("statusLine");
    m_status->setAccessibleName(tr("Status"));
    statusBar()->addWidget(m_status, 1);
    m_contextMeter = new QLabel(this);
    m_contextMeter->setObjectName("contextMeter");
    m_contextMeter->setAccessibleName(tr("Context used"));
    m_contextMeter->setToolTip(tr("Tokens of the context this chat holds (prompt and replies); when it is full, "
                                  "the oldest turns leave (the system prompt stays)"));
    statusBar()->addPermanentWidget(m_contextMeter);
}

void ChatWindow::buildMenus(bool withData)
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->setObjectName("fileMenu");
    QAction* newChat = file->addAction(tr("&New chat"), this, [this] {
        m_chat->newConversation();
        m_prompt->setFocus();
    });
    newChat->setShortcut(QKeySequence::New);
    if (withData) {
        file->addSeparator();
        QAction* import = file->addAction(tr("&Import chats…"), this, [this] {
            const QString path = QFileDialog::getOpenFileName(this, tr("Import chats"), documentsFile(QString()),
                                                              tr("Chats (*.json)"));
            if (!path.isEmpty()) m_chat->importFile(path);
        });
        import->setShortcut(QKeySequence::Open);
        QMenu* one = file->addMenu(tr("&Export this chat"));
        one->addAction(tr("As &Markdown…"), this, [this] { exportChats(false, QStringLiteral("markdown")); });
        one->addAction(tr("As &JSON…"), this, [this] { exportChats(false, QStringLiteral("json")); });
        QMenu* all = file->addMenu(tr("Export &all chats"));
        all->addAction(tr("As &Markdown…"), this, [this] { exportChats(true, QStringLiteral("markdown")); });
        all->addAction(tr("As &JSON…"), this, [this] { exportChats(true, QStringLiteral("json")); });
    }
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    view->setObjectName("viewMenu");
    if (auto* dock = findChild<QDockWidget*>(QStringLiteral("bottleneckDock"))) view->addAction(dock->toggleViewAction());
    if (withData) {
        const QString names[] = {tr("&Chats"), tr("&Models"), tr("&Tuning"), tr("&Discover")};
        for (int i = 0; i < 4; ++i) {
            QAction* shown = view->addAction(names[i], this, [this, i] { showView(View(i)); });
            shown->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
        }
        QAction* search = view->addAction(tr("&Search chats"), this, [this] {
            showView(View::Chats);
            m_search->setFocus();
            m_search->selectAll();
        });
        search->setShortcut(QKeySequence::Find);
    }
    // Server: the loaded model over the OpenAI API, for other programs on this computer.
    m_server = new ServerControl(m_workers->generation(), this);
    QMenu* server = menuBar()->addMenu(tr("&Server"));
    server->setObjectName("serverMenu");
    server->addAction(m_server->toggle());
    server->addAction(m_server->settingsAction());
    statusBar()->addPermanentWidget(m_server->statusLabel());
    connect(m_server, &ServerControl::stopped, this, [this](const QString& why) {
        if (!why.isEmpty()) showNotice(tr("The server stopped: %1").arg(why));
    });
    if (withData)
        connect(m_server, &ServerControl::changed, this, [this] {
            emit storeWriteSetting(QString::fromLatin1(kServerKey),
                                   QString::fromUtf8(QJsonDocument(m_server->state()).toJson(QJsonDocument::Compact)));
        });

    QAction* prompt = view->addAction(tr("&Prompt"), this, [this] {
        closeWelcome();  // (typing into a prompt behind the first-launch screen goes nowhere to be seen)
        m_prompt->setFocus();
    });
    prompt->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    // Escape cancels an edit of a prompt, else stops a reply being written.
    auto* escape = new QShortcut(QKeySequence(Qt::Key_Escape), this);
    connect(escape, &QShortcut::activated, this, [this] {
        if (m_editIndex >= 0) cancelEdit();
        else stop();
    });
}


// The chat: the controller's transcript into the view, the user's actions to the controller.
void ChatWindow::connectChat()
{
    ChatController* chat = m_chat;
    connect(m_send, &QPushButton::clicked, this, &ChatWindow::send);
    connect(m_prompt, &PromptEdit::submitted, this, &ChatWindow::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatWindow::stop);
    connect(m_transcript, &TranscriptView::regenerateRequested, chat, &ChatController::regenerate);
    connect(m_transcript, &TranscriptView::continueRequested, chat, [this] { m_chat->continueReply(); });
    connect(m_transcript, &TranscriptView::editRequested, this, &ChatWindow::editMessage);
    connect(m_transcript, &TranscriptView::versionRequested, chat, &ChatController::showVersion);

    connect(chat, &ChatController::messagesReset, this, [this](const QVector<MessageItem>& messages) {
        cancelEdit();
        if (messages.isEmpty()) m_contextMeter->clear();  // a new chat
        // The same chat again (another version of a message): the view keeps the user's place.
        const qint64 shown = m_chat->currentConversation();
        m_transcript->setMessages(messages, shown != 0 && shown == m_shownConversation);
        m_shownConversation = shown;
        selectCurrentConversation();
    });
    connect(chat, &ChatController::messageAppended, m_transcript, &TranscriptView::appendMessage);
    connect(chat, &ChatController::messagesTruncated, m_transcript, &TranscriptView::truncate);
    connect(chat, &ChatController::messageIdSet, m_transcript, &TranscriptView::setMessageId);
    connect(chat, &ChatController::replyStarted, m_transcript, &TranscriptView::beginReply);
    connect(chat, &ChatController::replyContinued, m_transcript, &TranscriptView::continueReply);
    connect(chat, &ChatController::replyText, m_transcript, &TranscriptView::appendReplyText);
    connect(chat, &ChatController::replyReasoning, m_transcript, &TranscriptView::appendReplyReasoning);
    connect(chat, &ChatController::replyReasoningTimed, m_transcript, &TranscriptView::setReplyReasoningTime);
    connect(chat, &ChatController::replyEnded, m_transcript, &TranscriptView::finishReply);
    connect(chat, &ChatController::stateChanged, this, &ChatWindow::updateButtons);
    connect(chat, &ChatController::modelLoaded, this, &ChatWindow::onModelLoaded);
    connect(chat, &ChatController::generationStarted, this, &ChatWindow::onGenerationStarted);
    connect(chat, &ChatController::replyFinished, this, &ChatWindow::onReplyFinished);
    connect(chat, &ChatController::failed, this, [this](const QString& message) {
        m_unloadedText.clear();  // (a failed load's "unloaded ..." is not news to keep)
        if (!m_startPath.isEmpty() && !m_chat->isModelReady() && m_startFailure.isEmpty() && m_workers->store()) {
            // The model the window started with failed, and nothing answers: the one used last does.
            m_startFailure = tr("%1 could not be opened: %2").arg(QFileInfo(m_startPath).fileName(), message);
            m_awaitingLastModel = true;
            m_status->setText(m_startFailure);
            emit storeReadSetting(QString::fromLatin1(kLastModelKey));
            return;
        }
        showError(message);
        showPickedModel();  // a model that failed to load is not the one answering
    });
    connect(chat, &ChatController::storeFailed, this, [this](const QString& message) { showError(message); });
    connect(chat, &ChatController::historyOpened, this, [this](const QString& note) {
        if (!note.isEmpty()) showError(note);
        emit historyOpened();
    });
    connect(chat, &ChatController::conversationsListed, this, [this](int count) {
        selectCurrentConversation();
        emit conversationsListed(count);
    });
    connect(chat, &ChatController::conversationShown, this, &ChatWindow::conversationShown);
    connect(chat, &ChatController::exported, this, [this](const QString& path, int count) {
        m_error->hide();
        m_status->setText(tr("Exported %n chat(s) to %1", "", count).arg(path));
    });
    connect(chat, &ChatController::imported, this, [this](int count, qint64) {
        m_error->hide();
        m_status->setText(tr("Imported %n chat(s)", "", count));
    });
    connect(chat, &ChatController::conversationModelWanted, this, &ChatWindow::chatWith);
    connect(m_cancelLoad, &QPushButton::clicked, chat, &ChatController::cancelLoad);
    connect(chat, &ChatController::loadProgress, this, [this](qint64 done, qint64 total) {
        if (total <= 0) return;
        m_loadBar->setValue(int(1000.0 * double(done) / double(total)));
        m_loadBar->show();
        const QLocale locale;
        m_status->setText(tr("Loading %1 … %2 of %3 of weights")
                              .arg(QFileInfo(m_chat->loadingPath()).fileName(), locale.formattedDataSize(done),
                                   locale.formattedDataSize(total)));
    });
    connect(chat, &ChatController::modelUnloaded, this, [this](const QString& name, qint64 freed) {
        m_unloadedText = tr(" — unloaded %1, which freed %2 of device memory").arg(name, QLocale().formattedDataSize(freed));
    });
    connect(chat, &ChatController::loadCancelled, this, [this] {
        m_unloadedText.clear();
        m_status->setText(m_chat->isModelReady() ? tr("Loading cancelled; %1 answers").arg(m_chat->modelDescription())
                                                 : tr("Loading cancelled; no model is loaded"));
        showPickedModel();
    });
    m_generation->setPresets(chat->presets());
    m_generation->setSettings(chat->settings());
    connect(chat, &ChatController::settingsChanged, m_generation, &GenerationPanel::setSettings);
    connect(chat, &ChatController::thinkingOffered, m_generation, &GenerationPanel::setThinkingOptions);
    connect(chat, &ChatController::presetsChanged, this, [this] { m_generation->setPresets(m_chat->presets()); });
    connect(m_generation, &GenerationPanel::changed, chat, &ChatController::setSettings);
    connect(m_generation, &GenerationPanel::presetChosen, chat, &ChatController::applyPreset);
    connect(m_generation, &GenerationPanel::savePresetRequested, this, [this](const QString& name) {
        if (!m_chat->savePreset(name)) showError(tr("\"%1\" is a built-in preset: choose another name").arg(name));
    });
    connect(chat, &ChatController::replyStored, this, &ChatWindow::replyStored);

    connect(m_newChat, &QPushButton::clicked, this, [this] {
        m_chat->newConversation();
        m_prompt->setFocus();
    });
    connect(m_search, &QLineEdit::textChanged, chat, &ChatController::setSearch);
    auto open = [this](const QModelIndex& index) {
        const qint64 id = index.data(ConversationListModel::IdRole).toLongLong();
        if (m_chat->isGenerating() && id != m_chat->currentConversation()) {
            // The highlight stays with the chat whose reply is being written.
            selectCurrentConversation();
            m_status->setText(tr("A reply is being written: stop it (Escape) to open another chat"));
            return;
        }
        m_chat->openConversation(id);
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
    connect(worker, &GenerationWorker::contextUsed, this, [this](int tokens, int context) {
        m_contextMeter->setText(context > 0 ? tr("Context %1 / %2").arg(QLocale().toString(tokens), QLocale().toString(context))
                                            : tr("Context %1 tokens").arg(QLocale().toString(tokens)));  // a remote model's
    }, Qt::QueuedConnection);
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
                m_bottleneck->setComputeOnHost(backend == QLatin1String("cpu"));
                // A remote model: the local timeline has nothing to show; the header says where it runs.
                const auto remote = parseEndpointPath(m_chat->loadingPath());
                m_bottleneck->setRemote(backend == QLatin1String("remote") && remote ? endpointHost(remote->url) : QString());
                if (backend == QLatin1String("remote")) m_bottleneck->clearPrediction();
                emit deviceChanged(backend);
                if (!m_models) return;
                m_models->setActiveBackend(backend);
                m_discoverController->setBackend(backend == QLatin1String("remote") ? QStringLiteral("cpu") : backend);
                if (changed && m_models->isTuningReady()) requestPrediction();  // plan for the device that computes
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
    m_bottleneck->beginReply();  // the dock shows this reply's tokens
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
        if (QMessageBox::question(this, tr("Delete chat"),
                                  tr("Delete \"%1\" and all its messages? This cannot be undone.")
                                      .arg(index.data(Qt::DisplayRole).toString())) == QMessageBox::Yes)
            m_chat->deleteConversation(id);
    }
}

void ChatWindow::onModelLoaded(const QString& description, bool chatTemplate)
{
    if (!m_error->property("notice").toBool()) m_error->hide();  // an earlier failure is over
    m_transcript->setContinuation(!chatTemplate);
    m_generation->setBaseModel(!chatTemplate, ChatController::kBaseModelReplyTokens);
    showPickedModel();
    const bool remote = m_activeBackend == QLatin1String("remote");
    m_server->modelLoaded(!remote);
    m_transcript->setCanContinue(!remote);
    if (m_models && !m_chat->modelPath().isEmpty() && !remote) {
        // The Tuning view plans for the model that answers; the next start begins with it.
        m_models->setModelPath(m_chat->modelPath());
        m_tuning->setVariants(m_models->catalog()->models(), m_chat->modelPath());
        emit storeWriteSetting(QString::fromLatin1(kLastModelKey),
                               QString::fromUtf8(QJsonDocument(QJsonObject{{"path", m_chat->modelPath()}})
                                                     .toJson(QJsonDocument::Compact)));
        if (m_models->isTuningReady()) requestPrediction();
    }
    m_welcome->setModel(description);
    m_status->setText(description + m_unloadedText);
    m_unloadedText.clear();
    if (!m_startFailure.isEmpty()) {  // the model named at the start failed; this one took its place
        showError(tr("%1 — %2 answers instead").arg(m_startFailure, QFileInfo(m_chat->modelPath()).fileName()), false);
        m_startFailure.clear();
    }
    m_startPath.clear();  // from now on a failed load leaves the model before answering
    // A package below the quality bar answers, but the user hears that its text cannot be trusted.
    if (m_models)
        for (const ModelItem& m : m_models->catalog()->models())
            if (QString why; m.path == m_chat->modelPath() && !qualityPasses(m.qualityJson, &why))
                showNotice(tr("%1 is below the quality bar (%2): its replies may be wrong or garbled")
                               .arg(QFileInfo(m.path).fileName(), why));
    emit modelReady();
}

void ChatWindow::showNotice(const QString& message)
{
    if (!m_error->isHidden() && !m_error->property("notice").toBool()) return;  // an error stays in view
    m_error->setProperty("notice", true);
    m_error->setStyleSheet(colorStyle(noticeColor(palette())));
    m_error->setText(message);
    m_error->show();
    emit noticeShown(message);
}

void ChatWindow::showError(const QString& message) { showError(message, true); }

void ChatWindow::showError(const QString& message, bool inStatusLine)
{
    m_error->setProperty("notice", false);
    m_error->setStyleSheet(colorStyle(errorColor(palette())));
    m_error->setText(tr("Error: %1").arg(message));
    m_error->show();
    if (inStatusLine) m_status->setText(tr("Error: %1").arg(message));
    emit errorShown(message);
}

void ChatWindow::onReplyFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end)
{
    // A reply the model did not end itself says why it ended.
    const QString ending = end == QLatin1String("context") ? tr(" — ended: the context is full")
                           : end == QLatin1String("limit") ? tr(" — ended: the reply length (%1 tokens); Continue goes on").arg(m_chat->replyLimit())
                           : end == QLatin1String("stopped") ? tr(" — stopped")
                                                              : QString();
    m_status->setText(tr("%1 — %2 tokens, %3 tokens/s, first token %4 ms")
                          .arg(m_chat->modelDescription())
                          .arg(tokens)
                          .arg(readable(tokensPerSecond))
                          .arg(readable(timeToFirstTokenMs)) +
                      ending + m_neuronCacheText);
    m_neuronCacheText.clear();
    m_bottleneck->setRemoteReply(timeToFirstTokenMs, tokensPerSecond, tokens);  // when the model is remote
    m_bottleneck->finishReply(tokensPerSecond);  // its header says what the status line says
    m_prompt->setFocus();
    emit replyFinished();
}

void ChatWindow::chatWith(qint64 id)
{
    const ModelItem* model = m_models ? m_models->catalog()->model(id) : nullptr;
    if (!model) return;
    if (id == m_chat->modelId() && !m_chat->isLoading()) return showPickedModel();
    if (!m_chat->loadModel(model->path, id)) {
        showError(tr("A reply is being written: stop it first, then pick %1").arg(QFileInfo(model->path).fileName()));
        return showPickedModel();
    }
    m_error->hide();
    m_status->setText(tr("Loading %1 … (%2 answers until it is ready)")
                          .arg(QFileInfo(model->path).fileName(), m_chat->modelDescription()));
    showPickedModel();
}

void ChatWindow::showPickedModel()
{
    if (!m_picker) return;
    const qint64 id = m_chat->isLoading() ? m_chat->loadingId() : m_chat->modelId();
    const int row = m_models->catalog()->rowOf(id);
    if (row >= 0 && m_picker->currentIndex() != row) m_picker->setCurrentIndex(row);
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
    if (m_models) m_models->markWelcomeSeen();
    m_prompt->setFocus();
}

void ChatWindow::showView(View view)
{
    if (!m_rail->isVisibleTo(this) && view != View::Chats) return;  // no library without a data folder
    m_views->setCurrentIndex(int(view));
    if (auto* group = m_rail->findChild<QButtonGroup*>()) group->button(int(view))->setChecked(true);
    emit viewShown(view);
}

ChatWindow::View ChatWindow::currentView() const { return View(m_views->currentIndex()); }

bool ChatWindow::isWelcomeShown() const { return m_stack->currentWidget() == m_welcome; }

void ChatWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void ChatWindow::dropEvent(QDropEvent* event)
{
    // A chat export (.json) is imported; anything else is offered to the library as a model.
    for (const QUrl& url : event->mimeData()->urls()) {
        if (!url.isLocalFile() || !m_models) continue;
        const QString path = url.toLocalFile();
        if (path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive) && QFileInfo(path).isFile() &&
            QFileInfo(path).fileName() != QLatin1String("config.json") && QFileInfo(path).fileName() != QLatin1String("manifest.json"))
            m_chat->importFile(path);
        else
            m_models->addModel(path);
    }
    event->acceptProposedAction();
}

void ChatWindow::updateButtons()
{
    const bool ready = m_chat->isModelReady(), generating = m_chat->isGenerating();
    m_cancelLoad->setVisible(m_chat->isLoading());
    if (!m_chat->isLoading()) {
        m_loadBar->hide();
        m_loadBar->setValue(0);
    }
    m_send->setEnabled(ready && !generating && !m_chat->isLoading());
    if (m_picker) m_picker->setEnabled(!generating);
    m_prompt->setEnabled(ready);
    m_stop->setEnabled(generating);
    m_newChat->setEnabled(!generating);
}

}  // namespace spillway::ui
