#pragma once
// The chat window arranges the widgets: a navigation rail switches the main area between four
// views, Chats (the conversation list with full-text search, new / rename / delete, beside the
// transcript and a prompt line with Send and Stop), Models (library_panel.h, the library as a grid
// of cards), Tuning (tuning_panel.h) and Discover (discover_panel.h, the Hub's models judged for
// this machine, and the downloads); the bottleneck visualizer (a dock, in every view) and a
// status line. The
// conversation's state and its saving are the ChatController's (chat_controller.h); the threads
// and their workers are WorkerThreads' (worker_threads.h): all engine work happens on the
// "inference" thread, all SQL on "storage". The Models and Tuning views' state is the
// LibraryController's (library_controller.h). This class shows what they say and passes on what
// the user does.
//
// Widgets carry object names (prompt, send, stop, transcript, conversations, search, newChat,
// modelPicker, settingsToggle, generationSettings (systemPrompt, temperature, ...), statusLine, inlineError, navigation (navChats, navModels, navTuning, navDiscover), views, library, models, chatWithModel, tuning, discover (discover_panel.h),
// bottleneck, welcome, ...): tests and scripts find them with findChild.

#include <QMainWindow>
#include <QString>
#include <memory>


class QComboBox;
class QLabel;
class QLineEdit;
class QListView;
class QProgressBar;
class QPushButton;
class QStackedWidget;

namespace spillway::trace {
class Recorder;
}

namespace spillway::ui {

class BottleneckView;
class ChatController;
class DiscoverController;
class DiscoverPanel;
class GenerationPanel;
class LibraryController;
class LibraryPanel;
class EndpointKeys;
class PromptEdit;
class ServerControl;
class TranscriptView;
class TuningPanel;
class WelcomePage;
class WorkerThreads;

class ChatWindow : public QMainWindow {
    Q_OBJECT
public:
    // Starts loading `modelPath` on the inference thread at once. `dataFolder`: where the chat
    // history (spillway.db) lives; empty keeps nothing (tests, screenshots). An empty modelPath
    // with a data folder: the model used last (remembered there), else `fallbackModel`.
    explicit ChatWindow(const QString& modelPath, const QString& dataFolder = QString(),
                        QWidget* parent = nullptr, const QString& fallbackModel = QString());
    ~ChatWindow() override;

    ChatController* controller() const { return m_chat; }
    ServerControl* server() const { return m_server; }
    // The Models and Tuning views' state (null without a data folder).
    LibraryController* library() const { return m_models; }
    WorkerThreads* workers() const { return m_workers; }
    // The Discover view's state (null without a data folder).
    DiscoverController* discover() const { return m_discoverController; }
    QString activeBackend() const { return m_activeBackend; }  // the device computing: "cpu", "cuda", "vulkan"
    QString deviceNote() const { return m_deviceNote; }  // why a faster backend was passed over or left
    bool isWelcomeShown() const;

    // The views of the main area, switched by the navigation rail (Ctrl+1..4).
    enum class View { Chats, Models, Tuning, Discover };
    View currentView() const;

    // Where file dialogs open: `name` in the user's Documents folder (else home); a chat's title
    // as a file name (chat_window_files.cpp, with the exports and the checkpoint dialog).
    static QString documentsFile(const QString& name);
    static QString fileNameFor(const QString& title);

public slots:
    // Sends the prompt line (or, while editing a prompt, resends it edited).
    void send();
    void stop();
    // Puts a prompt in the prompt line to edit (Send resends it, Escape cancels).
    void editMessage(int index);
    void cancelEdit();
    // The first-launch screen (the machine's summary while it is measured).
    void showWelcome();
    void closeWelcome();
    void skipWelcome();  // never show it in this window (screenshots of other scenes)
    void showView(spillway::ui::ChatWindow::View view);

signals:
    // For callers that drive the window (tests, --screenshot).
    void modelReady();
    void replyFinished();
    void errorShown(const QString& message);
    void noticeShown(const QString& message);
    void deviceChanged(const QString& backend);
    void historyOpened();
    void conversationsListed(int count);
    void conversationShown(qint64 id);
    void replyStored(qint64 conversation);
    void modelsListed(int count);
    void tuningReady();
    void tuningPredicted();
    void tuningApplied();
    void viewShown(spillway::ui::ChatWindow::View view);
    void compressionCompared();  // the finished compression's predicted speed before and after is shown

private slots:
    void onModelLoaded(const QString& description, bool chatTemplate);
    void onGenerationStarted();
    void onReplyFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end);
    void showConversationMenu(const QPoint& at);
    // The Tuning view's settings to the planner.
    void requestPrediction();
    void applyTuning();

protected:
    // Keeps the window's geometry and dock layout for the next start.
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildWidgets(bool withData);
    // File (new chat, import, export, quit) and View (the Bottleneck dock, the views, the prompt,
    // search) with their shortcuts.
    void buildMenus(bool withData);
    // Asks where to write, then exports the open chat (all: every chat) as Markdown or JSON.
    void exportChats(bool all, const QString& format);
    // Asks where, then writes the Bottleneck dock's timeline as a Chrome trace or a PNG.
    void exportTimeline(bool chromeTrace);

    void connectChat();
    void connectLibraryAndTuning();
    void updateButtons();
    void showError(const QString& message);
    void showError(const QString& message, bool inStatusLine);
    void showNotice(const QString& message);
    void selectCurrentConversation();
    // Loads the model the window starts with (and puts it in the library).
    void startWith(const QString& modelPath);
    void onSetting(const QString& key, const QString& valueJson);
    void storeTuningChoices();
    void keepOnScreen();  // the restored geometry inside the screen's available area  // the Tuning view's choices into the settings (once restored)
    // The architecture and tokenizer of a llama2.c checkpoint being added (a dialog, object name
    // checkpointDialog: checkpointArchitecture, checkpointTokenizer).
    void askCheckpointDetails(const QString& checkpoint, const QString& found);
    // The catalog model `id` answers from now on (loaded in the background).
    void chatWith(qint64 id);
    // The picker shows the model that answers (or is loading).
    void showPickedModel();

    std::unique_ptr<trace::Recorder> m_recorder;  // filled by the inference thread; outlives it
    std::unique_ptr<EndpointKeys> m_keys;          // remote endpoints' API keys; outlives the threads
    ServerControl* m_server = nullptr;            // the Server menu's toggle and the status bar's address
    WorkerThreads* m_workers = nullptr;
    ChatController* m_chat = nullptr;
    LibraryController* m_models = nullptr;  // null without a data folder
    DiscoverController* m_discoverController = nullptr;  // null without a data folder

    // Widgets.
    QWidget* m_rail = nullptr;           // the navigation rail: Chats, Models, Tuning
    QStackedWidget* m_views = nullptr;   // the main area: the chats, the library, the tuning view
    QWidget* m_chatList = nullptr;       // new chat, search, the conversations (the Chats view)
    QListView* m_conversations = nullptr;
    QLineEdit* m_search = nullptr;
    QPushButton* m_newChat = nullptr;
    LibraryPanel* m_library = nullptr;
    TuningPanel* m_tuning = nullptr;
    DiscoverPanel* m_discover = nullptr;
    QStackedWidget* m_stack = nullptr;  // the chat, or the first-launch screen
    WelcomePage* m_welcome = nullptr;
    TranscriptView* m_transcript = nullptr;
    QComboBox* m_picker = nullptr;  // the model that answers, from the catalog (with a data folder)
    GenerationPanel* m_generation = nullptr;  // the chat's settings, beside the transcript
    QLabel* m_editBanner = nullptr;
    PromptEdit* m_prompt = nullptr;
    bool m_tuningRestored = false;  // the stored Tuning choices were read (changes are saved from then on)
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_error = nullptr;  // an error, or a notice (its "notice" property true)
    QLabel* m_status = nullptr;
    QLabel* m_contextMeter = nullptr;
    QProgressBar* m_loadBar = nullptr;  // the weights of a model being loaded
    QPushButton* m_cancelLoad = nullptr;
    QString m_unloadedText;  // " — unloaded A, which freed 1.2 GiB of device memory", for the status line  // "Context 1,234 / 4,096" after a reply
    BottleneckView* m_bottleneck = nullptr;

    // What the widgets show that no controller keeps.
    int m_editIndex = -1;          // the prompt being edited, or -1
    qint64 m_shownConversation = 0;  // the chat the transcript shows (0: a new one)
    QString m_activeBackend;       // from the inference worker's deviceChanged
    QString m_deviceNote;
    QString m_neuronCacheText;  // the neuron cache's report of the reply being generated, for the status line
    bool m_welcomeSkipped = false;
    bool m_awaitingLastModel = false;  // started without a model: the store says which was used last
    QString m_fallbackModel;           // ... and this one when none was
    QString m_startPath;     // the model the window was started with, until a model answers
    QString m_startFailure;  // why it could not be opened, while the one used last loads instead

signals:
    // The window's own settings (geometry, last model), to the chat store (queued).
    void storeReadSetting(const QString& key);
    void storeWriteSetting(const QString& key, const QString& valueJson);

private:
};

}  // namespace spillway::ui
