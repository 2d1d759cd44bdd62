#pragma once
// The chat window: the conversation list (with full-text search, new / rename / delete), a
// transcript, a prompt line with Send and Stop, and a status line. All engine work happens on
// the GenerationWorker's "inference" thread and all SQL on the ChatStore's "storage" thread;
// this class only paints.

#include <QMainWindow>
#include <QString>
#include <QVector>
#include <memory>

#include "chat_store.h"
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
class QThread;

namespace spillway::trace {
class Recorder;
}

namespace spillway::ui {

class BottleneckView;
class GenerationWorker;

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

    QTextBrowser* transcript() const { return m_transcript; }
    QLineEdit* promptEdit() const { return m_prompt; }
    QPushButton* sendButton() const { return m_send; }
    QPushButton* stopButton() const { return m_stop; }
    QString statusText() const;  // the status bar line
    QString errorText() const;   // the inline error line; empty when there is none
    QListWidget* conversationList() const { return m_conversations; }
    QLineEdit* searchEdit() const { return m_search; }
    QPushButton* newChatButton() const { return m_newChat; }
    qint64 currentConversation() const { return m_conversation; }
    QListWidget* modelList() const { return m_models; }  // the catalog; item data: catalog id
    QProgressBar* compressionBar() const { return m_compressBar; }
    BottleneckView* bottleneckView() const { return m_bottleneck; }
    QTabWidget* sideTabs() const { return m_tabs; }  // Chats, Models, Tuning
    // Tuning: budgets in MiB (0 = default), context, prefetch depth, threads; Apply.
    QDoubleSpinBox* vramBudgetBox() const { return m_vramBox; }
    QDoubleSpinBox* ramBudgetBox() const { return m_ramBox; }
    QSpinBox* contextBox() const { return m_ctxBox; }
    QSpinBox* prefetchBox() const { return m_prefetchBox; }
    QSpinBox* threadsBox() const { return m_threadsBox; }
    QPushButton* applyButton() const { return m_apply; }
    QString hardwareSummary() const;
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
    // Model library: validate and catalog a model (as a drop does); compress the catalog
    // model `id` with a preset ("fast", "balanced", "smallest"); cancel that.
    void addModel(const QString& path);
    void compressModel(qint64 id, const QString& preset);
    void cancelCompression();
    void applyTuning();

signals:
    // Requests to the worker (queued onto the inference thread).
    void loadRequested(const QString& path);
    void generateRequested(const QString& prompt, int maxTokens, double temperature);
    // For callers that drive the window (tests, --screenshot).
    void modelReady();
    void replyFinished();
    void errorShown(const QString& message);
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
    void applyRequested(const spillway::ui::TuningPrediction& prediction);
    void compressionFinished(const QString& packagePath, const QString& summary);
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
    void storeRemove(qint64 conversation);

private slots:
    void onModelLoaded(const QString& description);
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
    void onTuningReady(const QString& summary, qint64 deviceMemory, qint64 ramAvailable, int trainedContext);
    void onPredicted(const spillway::ui::TuningPrediction& prediction);
    void requestPrediction();

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void appendToTranscript(const QString& text, bool dim);
    void updateButtons();
    void startGeneration(const QString& prompt);
    void renderMarkdownFrom(int start, const QString& markdown);
    void showError(const QString& message);

    QThread* m_thread = nullptr;
    GenerationWorker* m_worker = nullptr;  // lives on m_thread; deleted there
    QThread* m_storageThread = nullptr;    // null without a data folder
    ChatStore* m_store = nullptr;          // lives on m_storageThread; deleted there
    QListWidget* m_conversations = nullptr;
    QLineEdit* m_search = nullptr;
    QPushButton* m_newChat = nullptr;
    qint64 m_conversation = 0;             // 0: a new conversation, not stored yet
    QString m_pendingPrompt;               // sent before its conversation existed
    QString m_reply;                       // the reply being generated
    int m_replyStart = -1;                 // its first character in the transcript
    int m_pendingStores = 0;               // appends sent to the store, not yet answered
    QString m_dataFolder;
    std::unique_ptr<trace::Recorder> m_recorder;  // filled by the inference thread; outlives it
    BottleneckView* m_bottleneck = nullptr;
    QTabWidget* m_tabs = nullptr;
    QString m_modelPath;
    QThread* m_tuningThread = nullptr;
    TuningWorker* m_tuningWorker = nullptr;  // lives on m_tuningThread; deleted there
    QLabel* m_hardware = nullptr;
    QDoubleSpinBox* m_vramBox = nullptr;
    QDoubleSpinBox* m_ramBox = nullptr;
    QSpinBox* m_ctxBox = nullptr;
    QSpinBox* m_prefetchBox = nullptr;
    QSpinBox* m_threadsBox = nullptr;
    QWidget* m_tierBar = nullptr;
    QLabel* m_predictionLabel = nullptr;
    QPushButton* m_apply = nullptr;
    TuningPrediction m_prediction;
    bool m_tuningStarted = false;
    QThread* m_modelsThread = nullptr;
    ModelWorker* m_modelWorker = nullptr;  // lives on m_modelsThread; deleted there
    QListWidget* m_models = nullptr;
    QPushButton* m_addModel = nullptr;
    QPushButton* m_compress = nullptr;
    QPushButton* m_cancelCompress = nullptr;
    QProgressBar* m_compressBar = nullptr;
    QLabel* m_compressLabel = nullptr;
    QVector<ModelItem> m_catalog;
    bool m_compressing = false;
    QString m_compressOut;
    QTextBrowser* m_transcript = nullptr;
    QLineEdit* m_prompt = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_error = nullptr;
    QLabel* m_status = nullptr;
    QString m_modelDescription;
    double m_temperature = 0.8;
    int m_maxTokens = 256;
    bool m_modelReady = false;
    bool m_generating = false;
};

// True for text that uses Markdown blocks or emphasis (code fences, headings, lists, quotes,
// tables, bold): such replies are shown rendered once complete.
bool looksLikeMarkdown(const QString& text);

}  // namespace spillway::ui
