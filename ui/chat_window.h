#pragma once
// The chat window arranges the widgets: the Chats tab (conversation list with full-text search,
// new / rename / delete), the Models tab (library_panel.h), the Tuning tab (tuning_panel.h), the
// transcript, a prompt line with Send and Stop, the bottleneck visualizer and a status line. The
// conversation's state and its saving are the ChatController's (chat_controller.h); the threads
// and their workers are WorkerThreads' (worker_threads.h): all engine work happens on the
// "inference" thread, all SQL on "storage". This class shows what they say and passes on what
// the user does; the Models and Tuning tabs' requests go to their workers from here.
//
// Widgets carry object names (prompt, send, stop, transcript, conversations, search, newChat,
// statusLine, inlineError, sideTabs, library, models, tuning, bottleneck, welcome, ...): tests
// and scripts find them with findChild.

#include <QHash>
#include <QSet>
#include <QMainWindow>
#include <QString>
#include <QVector>
#include <memory>

#include "chat_store.h"
#include "tuning_worker.h"

class QLabel;
class QLineEdit;
class QListView;
class QTabWidget;
class QPushButton;
class QStackedWidget;

namespace spillway::trace {
class Recorder;
}

namespace spillway::ui {

class BottleneckView;
class ChatController;
class LibraryPanel;
class TranscriptView;
class TuningPanel;
class WelcomePage;
class WorkerThreads;

class ChatWindow : public QMainWindow {
    Q_OBJECT
public:
    // Starts loading `modelPath` on the inference thread at once. `dataFolder`: where the chat
    // history (spillway.db) lives; empty keeps nothing (tests, screenshots).
    explicit ChatWindow(const QString& modelPath, const QString& dataFolder = QString(),
                        QWidget* parent = nullptr);
    ~ChatWindow() override;

    ChatController* controller() const { return m_chat; }
    WorkerThreads* workers() const { return m_workers; }
    QString activeBackend() const { return m_activeBackend; }  // the device computing: "cpu", "cuda", "vulkan"
    QString deviceNote() const { return m_deviceNote; }  // why a faster backend was passed over or left
    bool isWelcomeShown() const;
    QString capabilities() const { return m_capabilities; }  // what this machine can run
    const TuningPrediction& lastPrediction() const { return m_prediction; }
    bool isCompressing() const { return m_compressing; }
    QString modelsFolder() const;  // where packages are written (dataFolder/models)

public slots:
    // Sends the prompt line (or, while editing a prompt, resends it edited).
    void send();
    void stop();
    // Puts a prompt in the prompt line to edit (Send resends it, Escape cancels).
    void editMessage(int index);
    void cancelEdit();
    // Model library: validate and catalog a model (as a drop does); compress the catalog
    // model `id` with a preset ("fast", "balanced", "smallest", "sparse"); cancel that.
    void addModel(const QString& path);
    void compressModel(qint64 id, const QString& preset);
    void cancelCompression();
    void applyTuning();
    // The first-launch screen (the machine's summary while it is measured).
    void showWelcome();
    void closeWelcome();
    void skipWelcome();  // never show it in this window (screenshots of other scenes)

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
    void modelRejected(const QString& path, const QString& message);
    void compressionProgress(double fraction);
    void tuningReady();
    void tuningPredicted();
    void tuningApplied();
    void compressionFinished(const QString& packagePath, const QString& summary);
    void compressionCompared();  // the finished compression's predicted speed before and after is shown
    void compressionFailed(const QString& message, bool cancelled);
    // Requests to the tuning worker, the inference worker and the model worker (queued).
    void tuningPrepare(const QString& modelPath, const QString& storageFolder);
    void tuningPredict(const spillway::ui::TuningSettings& settings);
    void tuningPredictModels(const QStringList& paths, const QString& backend);
    void applyRequested(const spillway::ui::TuningPrediction& prediction);
    void inspectRequested(const QString& path);
    void compressRequested(qint64 sourceId, const QString& sourcePath, const QString& outDir, const QString& preset);
    // Requests to the chat store (queued): the catalog and the settings.
    void storeAddModel(const spillway::ui::ModelItem& model);
    void storeReadSetting(const QString& key);
    void storeWriteSetting(const QString& key, const QString& valueJson);

private slots:
    void onModelLoaded(const QString& description, bool chatTemplate);
    void onGenerationStarted();
    void onReplyFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens);
    void showConversationMenu(const QPoint& at);
    void onModelsListed(const QVector<spillway::ui::ModelItem>& models);
    void onCompressProgress(double fraction, const QString& stage, qint64 bytesDone, qint64 bytesTotal, double eta);
    void onCompressed(qint64 sourceId, const spillway::ui::ModelItem& package, const QString& summary);
    void onCompressFailed(const QString& message, bool cancelled);
    void onTuningReady(const QString& summary, const QString& capabilities);
    void onModelPredicted(const QString& path, double tokensPerSecond, const QString& text);
    void onPredicted(const spillway::ui::TuningPrediction& prediction);
    void requestPrediction();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildWidgets(bool withData);
    void connectChat();
    void connectLibraryAndTuning();
    void updateButtons();
    void showError(const QString& message);
    void showNotice(const QString& message);
    void selectCurrentConversation();
    // Asks the planner about the catalog models it has not been asked about (their cards).
    void requestModelPredictions(const QVector<ModelItem>& models);

    std::unique_ptr<trace::Recorder> m_recorder;  // filled by the inference thread; outlives it
    WorkerThreads* m_workers = nullptr;
    ChatController* m_chat = nullptr;
    QString m_dataFolder;
    QString m_modelPath;

    // Widgets.
    QTabWidget* m_tabs = nullptr;
    QListView* m_conversations = nullptr;
    QLineEdit* m_search = nullptr;
    QPushButton* m_newChat = nullptr;
    LibraryPanel* m_library = nullptr;
    TuningPanel* m_tuning = nullptr;
    QStackedWidget* m_stack = nullptr;  // the chat, or the first-launch screen
    WelcomePage* m_welcome = nullptr;
    TranscriptView* m_transcript = nullptr;
    QLabel* m_editBanner = nullptr;
    QLineEdit* m_prompt = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_error = nullptr;  // an error, or a notice (its "notice" property true)
    QLabel* m_status = nullptr;
    BottleneckView* m_bottleneck = nullptr;

    // What the widgets show that no worker keeps.
    int m_editIndex = -1;          // the prompt being edited, or -1
    QString m_activeBackend;       // from the inference worker's deviceChanged
    QString m_deviceNote;
    QString m_neuronCacheText;  // the neuron cache's report of the reply being generated, for the status line
    bool m_welcomeSkipped = false;
    TuningPrediction m_prediction;
    bool m_tuningStarted = false;
    bool m_tuningReady = false;
    QString m_capabilities;
    QHash<QString, double> m_predictedSpeed;  // tokens/s by model path, default settings
    QSet<QString> m_predictionAsked;          // model paths sent to the planner once
    QString m_compressedSource, m_compressedPackage, m_compressSummary;  // for "predicted X → Y"
    bool m_compressing = false;
};

}  // namespace spillway::ui
