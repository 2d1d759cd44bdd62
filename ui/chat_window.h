#pragma once
// The chat window: the conversation list (with full-text search, new / rename / delete), a
// transcript, a prompt line with Send and Stop, and a status line. All engine work happens on
// the GenerationWorker's "inference" thread and all SQL on the ChatStore's "storage" thread;
// this class only paints.

#include <QHash>
#include <QSet>
#include <QMainWindow>
#include <QString>
#include <QVector>
#include <memory>

#include "chat_store.h"
#include "transcript_view.h"
#include "tuning_worker.h"

class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QDoubleSpinBox;
class QSpinBox;
class QTabWidget;
class QPushButton;
class QTextBrowser;
class QStackedWidget;
class QThread;

namespace spillway::trace {
class Recorder;
}

namespace spillway::ui {

class BottleneckView;
class GenerationWorker;
class LibraryPanel;
class TuningPanel;
class WelcomePage;

class ChatWindow : public QMainWindow {
    Q_OBJECT
public:
    // Starts loading `modelPath` on the inference thread at once. `dataFolder`: where the chat
    // history (spillway.db) lives; empty keeps nothing (tests, screenshots).
    explicit ChatWindow(const QString& modelPath, const QString& dataFolder = QString(),
                        QWidget* parent = nullptr);
    ~ChatWindow() override;

    void setTemperature(double temperature) { m_temperature = temperature; }  // 0 = greedy
    void setMaxTokens(int maxTokens) { m_maxTokens = maxTokens; }
    double temperature() const { return m_temperature; }
    int maxTokens() const { return m_maxTokens; }
    bool isModelReady() const { return m_modelReady; }
    bool isGenerating() const { return m_generating; }
    GenerationWorker* generationWorker() const { return m_worker; }  // lives on the inference thread

    TranscriptView* transcript() const { return m_transcript; }
    QLineEdit* promptEdit() const { return m_prompt; }
    QPushButton* sendButton() const { return m_send; }
    QPushButton* stopButton() const { return m_stop; }
    QString statusText() const;  // the status bar line
    QString errorText() const;   // the inline error line; empty when there is none (or it shows a notice)
    QString noticeText() const;  // the inline notice (a fallback to the CPU, ...); empty when there is none
    QString activeBackend() const { return m_activeBackend; }  // the device computing: "cpu", "cuda", "vulkan"
    QString deviceNote() const { return m_deviceNote; }  // why a faster backend was passed over or left
    QListWidget* conversationList() const { return m_conversations; }
    QLineEdit* searchEdit() const { return m_search; }
    QPushButton* newChatButton() const { return m_newChat; }
    qint64 currentConversation() const { return m_conversation; }
    QListWidget* modelList() const;  // the catalog's cards; item data: catalog id
    QProgressBar* compressionBar() const;
    LibraryPanel* libraryPanel() const { return m_library; }
    TuningPanel* tuningPanel() const { return m_tuning; }
    BottleneckView* bottleneckView() const { return m_bottleneck; }
    QTabWidget* sideTabs() const { return m_tabs; }  // Chats, Models, Tuning
    // Tuning: budgets in MiB (0 = default), context, prefetch depth, threads; Apply.
    QDoubleSpinBox* vramBudgetBox() const;
    QDoubleSpinBox* ramBudgetBox() const;
    QSpinBox* contextBox() const;
    QSpinBox* prefetchBox() const;
    QSpinBox* threadsBox() const;
    QPushButton* applyButton() const;
    QString hardwareSummary() const;
    bool isWelcomeShown() const;
    WelcomePage* welcomePage() const { return m_welcome; }
    QString capabilities() const { return m_capabilities; }  // what this machine can run
    QString predictionText() const;
    const TuningPrediction& lastPrediction() const { return m_prediction; }
    bool isCompressing() const { return m_compressing; }
    QString modelsFolder() const;  // where packages are written (dataFolder/models)

public slots:
    void send();
    void stop();
    void newConversation();
    void openConversation(qint64 id);
    void renameConversation(qint64 id, const QString& title);
    void deleteConversation(qint64 id);
    // The message actions. regenerate: a new version of the last reply. editMessage: puts a
    // prompt in the prompt line to edit (Send resends it, Escape cancels). editAndResend: the
    // prompt at `index` gets `text` as a new version and a new reply; when it was the last
    // prompt its reply gets a new version too, an earlier prompt drops what followed it.
    void regenerate(int index);
    void editMessage(int index);
    void cancelEdit();
    void editAndResend(int index, const QString& text);
    void showVersion(int index, int number);
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
    // Requests to the worker (queued onto the inference thread).
    void loadRequested(const QString& path);
    void generateRequested(const QVector<spillway::ui::MessageItem>& conversation, int maxTokens, double temperature);
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
    // Requests to the tuning worker and the inference worker (queued).
    void tuningPrepare(const QString& modelPath, const QString& storageFolder);
    void tuningPredict(const spillway::ui::TuningSettings& settings);
    void tuningPredictModels(const QStringList& paths, const QString& backend);
    void applyRequested(const spillway::ui::TuningPrediction& prediction);
    void compressionFinished(const QString& packagePath, const QString& summary);
    void compressionCompared();  // the finished compression's predicted speed before and after is shown
    void compressionFailed(const QString& message, bool cancelled);
    // Requests to the model worker (queued onto the models thread).
    void inspectRequested(const QString& path);
    void compressRequested(qint64 sourceId, const QString& sourcePath, const QString& outDir, const QString& preset);
    void storeAddModel(const spillway::ui::ModelItem& model);
    // Requests to the chat store (queued onto the storage thread).
    void storeOpen(const QString& folder);
    void storeList(const QString& query);
    void storeCreate(const QString& title);
    void storeLoad(qint64 conversation);
    void storeAppend(qint64 conversation, const QString& role, const QString& content, double tokensPerSecond,
                     double firstTokenMs, const QString& modelName);
    void storeRename(qint64 conversation, const QString& title);
    void storeVersion(qint64 conversation, qint64 message, const QString& kind, const QString& content,
                      double tokensPerSecond, double firstTokenMs, const QString& modelName);
    void storeSelectVersion(qint64 conversation, qint64 message, int number);
    void storeTruncate(qint64 conversation, qint64 message);
    void storeRemove(qint64 conversation);
    void storeReadSetting(const QString& key);
    void storeWriteSetting(const QString& key, const QString& valueJson);

private slots:
    void onModelLoaded(const QString& description, bool chatTemplate);
    void onFailed(const QString& message);
    void onTokens(const QString& text);
    void onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens);
    void onListed(const QString& query, const QVector<spillway::ui::ConversationItem>& items);
    void onCreated(qint64 conversation);
    void onLoaded(qint64 conversation, const QVector<spillway::ui::MessageItem>& messages);
    void onStored(qint64 conversation, qint64 message);
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
    void updateButtons();
    void beginExchange();
    void startReply(int index, qint64 replacesMessage);
    void requestGeneration();
    void storeLastPrompt();
    void showError(const QString& message);
    void showNotice(const QString& message);
    // Asks the planner about the catalog models it has not been asked about (their cards).
    void requestModelPredictions(const QVector<ModelItem>& models);

    QThread* m_thread = nullptr;
    GenerationWorker* m_worker = nullptr;  // lives on m_thread; deleted there
    QThread* m_storageThread = nullptr;    // null without a data folder
    ChatStore* m_store = nullptr;          // lives on m_storageThread; deleted there
    QListWidget* m_conversations = nullptr;
    QLineEdit* m_search = nullptr;
    QPushButton* m_newChat = nullptr;
    qint64 m_conversation = 0;             // 0: a new conversation, not stored yet
    bool m_awaitingConversation = false;   // a prompt was sent before its conversation existed
    int m_replyIndex = -1;                 // the reply being generated (index in the transcript)
    qint64 m_replacesMessage = 0;          // it is a new version of this stored message, or 0
    int m_editIndex = -1;                  // the prompt being edited, or -1
    int m_pendingStores = 0;               // writes sent to the store, not yet answered
    QVector<int> m_storeTargets;           // per pending write: the message index it stores, -1: a version
    QString m_dataFolder;
    std::unique_ptr<trace::Recorder> m_recorder;  // filled by the inference thread; outlives it
    BottleneckView* m_bottleneck = nullptr;
    QTabWidget* m_tabs = nullptr;
    QString m_modelPath;
    QThread* m_tuningThread = nullptr;
    TuningWorker* m_tuningWorker = nullptr;  // lives on m_tuningThread; deleted there
    TuningPanel* m_tuning = nullptr;
    QStackedWidget* m_stack = nullptr;  // the chat, or the first-launch screen
    WelcomePage* m_welcome = nullptr;
    bool m_welcomeSkipped = false;
    TuningPrediction m_prediction;
    bool m_tuningStarted = false;
    bool m_tuningReady = false;
    QString m_capabilities;
    QHash<QString, double> m_predictedSpeed;  // tokens/s by model path, default settings
    QSet<QString> m_predictionAsked;          // model paths sent to the planner once
    QString m_compressedSource, m_compressedPackage, m_compressSummary;  // for "predicted X → Y" 
    QThread* m_modelsThread = nullptr;
    ModelWorker* m_modelWorker = nullptr;  // lives on m_modelsThread; deleted there
    LibraryPanel* m_library = nullptr;
    bool m_compressing = false;
    QString m_compressOut;
    TranscriptView* m_transcript = nullptr;
    QLabel* m_editBanner = nullptr;
    QLineEdit* m_prompt = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_error = nullptr;
    bool m_errorIsNotice = false;  // m_error shows a notice, not an error
    QString m_activeBackend;       // from the inference worker's deviceChanged
    QString m_deviceNote;
    QLabel* m_status = nullptr;
    QString m_neuronCacheText;  // the neuron cache's report of the reply being generated, for the status line
    QString m_modelDescription;
    double m_temperature = 0.8;
    int m_maxTokens = 256;
    bool m_modelReady = false;
    bool m_generating = false;
};

}  // namespace spillway::ui
