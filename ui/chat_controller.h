#pragma once
// The chat's state without widgets: the model's readiness, the open conversation's messages,
// the reply being generated, and the saving of each exchange (prompts, replies, new versions of
// edited or regenerated messages) to the chat store, in order. ChatWindow shows what it says
// (messages, replies as they stream, the conversation list) and calls its slots; a front end
// without widgets (a test, a script) drives it the same way.
//
// It talks to the GenerationWorker (inference thread) and the ChatStore (storage thread; null
// without a data folder: nothing is kept) by queued signals only; WorkerThreads owns both.

#include <QObject>
#include <QString>
#include <QVector>

#include "chat_store.h"
#include "generation_settings.h"

namespace spillway::ui {

class ConversationListModel;
class GenerationWorker;

class ChatController : public QObject {
    Q_OBJECT
public:
    ChatController(GenerationWorker* worker, ChatStore* store, QObject* parent = nullptr);

    ConversationListModel* conversations() const { return m_list; }
    const QVector<MessageItem>& messages() const { return m_messages; }
    qint64 currentConversation() const { return m_conversation; }  // 0: new, not stored yet
    bool isModelReady() const { return m_modelReady; }  // a model answers (also while another loads)
    bool isGenerating() const { return m_generating; }
    bool isLoading() const { return m_loading; }  // a model is being loaded
    // The model that answers: its file or package, and its catalog id (0: not in the catalog).
    QString modelPath() const { return m_modelPath; }
    qint64 modelId() const { return m_modelId; }
    QString loadingPath() const { return m_loadingPath; }  // the model asked for last
    qint64 loadingId() const { return m_loadingId; }
    // The catalog knows the model at `path` as `id`: the one that answers, or is loading.
    void identifyModel(const QString& path, qint64 id);
    // Another model answers from now on without a load of the chat's own (a plan applied in the
    // Tuning view for another compression variant): its path and catalog id (0: not listed).
    void setAnsweringModel(const QString& path, qint64 id);
    bool hasStore() const { return m_store != nullptr; }
    // The model and the device computing, as the worker last described them.
    QString modelDescription() const { return m_modelDescription; }
    void setModelDescription(const QString& description) { m_modelDescription = description; }
    // The open chat's generation settings (system prompt, length, sampler); kept with the chat
    // once it is stored, and carried over to a new chat.
    const GenerationSettings& settings() const { return m_settings; }
    void setSettings(const GenerationSettings& settings);
    void setTemperature(double temperature);  // 0 = greedy
    void setMaxTokens(int maxTokens);         // 0: until the turn ends or the context is full
    double temperature() const { return m_settings.temperature; }
    int maxTokens() const { return m_settings.maxTokens; }
    // The tokens a reply may have: the chat's setting, else for a base model (no chat template:
    // it never ends a turn, and would write until the context is full) kBaseModelReplyTokens,
    // else 0 (until the model ends its turn). Continue goes on past it.
    int replyLimit() const;
    static constexpr int kBaseModelReplyTokens = 512;
    bool chatTemplate() const { return m_chatTemplate; }  // whether the model answering has one
    const ThinkingOptions& thinkingOptions() const { return m_thinking; }  // what its template offers
    // The built-in presets, then the user's.
    const QVector<GenerationPreset>& presets() const { return m_presets; }
    // The preset's settings for this chat (its system prompt stays when the preset has none).
    bool applyPreset(const QString& name);
    // The chat's settings as a preset of the user's (replacing one of that name); built-in names
    // are refused.
    bool savePreset(const QString& name);
    QString searchQuery() const { return m_query; }

public slots:
    // Loads a model in the background; the one loaded so far answers until it is ready, and stays
    // when the new one fails to load. The open conversation talks to it from then on. Refused
    // while a reply is generated.
    bool loadModel(const QString& path, qint64 modelId = 0);
    // Stops the model being loaded; the one before answers again (loadCancelled).
    void cancelLoad();
    // Opens the history in `folder` (spillway.db) and lists the conversations.
    void openHistory(const QString& folder);
    // A new exchange: the prompt, then the reply. False when it cannot start now (no model yet,
    // a reply in progress, an empty prompt).
    bool send(const QString& prompt);
    // A new version of the last reply.
    bool regenerate(int index);
    // The last reply goes on from where it ended (a stopped or cut reply); the longer text is a
    // new version of it.
    bool continueReply();
    // The prompt at `index` gets `text` as a new version and a new reply; when it was the last
    // prompt its reply gets a new version too, an earlier prompt drops what followed it.
    bool editAndResend(int index, const QString& text);
    void showVersion(int index, int number);
    void stop();
    void newConversation();
    void openConversation(qint64 id);
    void renameConversation(qint64 id, const QString& title);
    void deleteConversation(qint64 id);
    void setSearch(const QString& query);
    // Export and import (chat_store.h): format "markdown" or "json"; answered by exported() or
    // imported() (the last imported conversation opens), or storeFailed().
    void exportConversation(qint64 id, const QString& path, const QString& format);
    void exportAll(const QString& path, const QString& format);
    void importFile(const QString& path);

signals:
    // The transcript: the whole of it replaced, or changed piece by piece.
    void messagesReset(const QVector<spillway::ui::MessageItem>& messages);
    void messageAppended(const spillway::ui::MessageItem& message);
    void messagesTruncated(int count);
    void messageIdSet(int index, qint64 id);
    void replyStarted(int index);  // the reply at `index` (the last message) streams in
    void replyContinued(int index);  // the reply at `index` streams on after its text
    void replyText(const QString& text);
    void replyReasoning(const QString& text);
    void replyReasoningTimed(double milliseconds);  // before replyEnded, for a reply that reasoned
    void replyEnded(double tokensPerSecond, double firstTokenMs, const QString& modelName);
    // Its state.
    void stateChanged();  // model ready, generating
    void modelLoaded(const QString& description, bool chatTemplate);
    void generationStarted();
    // end: why the reply ended ("turn", "limit", "context", "stopped": GenerationWorker::finished).
    void replyFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end);
    void failed(const QString& message);       // loading or generating failed
    // While a model loads: bytes of weights copied in of all; then cancelled, or unloaded to make
    // room (the device memory that freed).
    void loadProgress(qint64 done, qint64 total);
    void loadCancelled();
    void modelUnloaded(const QString& name, qint64 freedDeviceBytes);
    void storeFailed(const QString& message);  // the history could not be read or written
    void historyOpened(const QString& recoveryNote);
    void conversationsListed(int count);
    void conversationShown(qint64 id);
    // The conversation just opened talks to another catalog model than the one loaded.
    void conversationModelWanted(qint64 modelId);
    void settingsChanged(const spillway::ui::GenerationSettings& settings);
    // What the model answering offers of thinking (its template's switch, effort, budget).
    void thinkingOffered(const spillway::ui::ThinkingOptions& options);
    void exported(const QString& path, int count);
    void imported(int count, qint64 lastConversation);
    void presetsChanged();
    void replyStored(qint64 conversation);
    // Requests to the worker and the store (queued).
    void loadRequested(const QString& path);
    void generateRequested(const QVector<spillway::ui::MessageItem>& conversation,
                           const spillway::ui::GenerationSettings& settings, bool continueLast);
    void storeOpen(const QString& folder);
    void storeList(const QString& query);
    void storeCreate(const QString& title, qint64 modelId);
    void storeSetModel(qint64 conversation, qint64 modelId);
    void storeLoad(qint64 conversation);
    void storeAppend(qint64 conversation, const QString& role, const QString& content, double tokensPerSecond,
                     double firstTokenMs, const QString& modelName, const QString& reasoning, double reasoningMs);
    void storeRename(qint64 conversation, const QString& title);
    void storeVersion(qint64 conversation, qint64 message, const QString& kind, const QString& content,
                      double tokensPerSecond, double firstTokenMs, const QString& modelName, const QString& reasoning,
                      double reasoningMs);
    void storeSelectVersion(qint64 conversation, qint64 message, int number);
    void storeTruncate(qint64 conversation, qint64 message);
    void storeRemove(qint64 conversation);
    void storeReadSetting(const QString& key);
    void storeWriteSetting(const QString& key, const QString& valueJson);
    void storeExport(const QList<qint64>& conversations, const QString& path, const QString& format);
    void storeExportAll(const QString& path, const QString& format);
    void storeImport(const QString& path);

private:
    GenerationSettings replySettings() const;  // m_settings with replyLimit()
    void onModelLoaded(const QString& description, bool chatTemplate);
    void onTokens(const QString& text);
    void onReasoning(const QString& text);
    void onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end);
    void onFailed(const QString& message);
    void onListed(const QString& query, const QVector<spillway::ui::ConversationItem>& items);
    void onCreated(qint64 conversation);
    void onLoaded(qint64 conversation, const QVector<spillway::ui::MessageItem>& messages);
    void onConversationModel(qint64 conversation, qint64 modelId);
    void onSetting(const QString& key, const QString& valueJson);
    void saveSettings();  // the chat's, once it is stored
    void onStored(qint64 conversation, qint64 message);

    void beginExchange();
    void startReply(int index, qint64 replacesMessage);
    void storeLastPrompt();
    void requestGeneration();
    void setMessages(const QVector<MessageItem>& messages);
    void truncate(int count);

    GenerationWorker* m_worker;
    ChatStore* m_store;
    ConversationListModel* m_list;
    QVector<MessageItem> m_messages;
    QString m_query;                       // the conversation list's search
    qint64 m_conversation = 0;             // 0: a new conversation, not stored yet
    bool m_awaitingConversation = false;   // a prompt was sent before its conversation existed
    int m_replyIndex = -1;                 // the reply being generated (index in the messages)
    qint64 m_replacesMessage = 0;          // it is a new version of this stored message, or 0
    bool m_continuing = false;             // the reply goes on from its text
    QString m_continuedFrom;               // ... which was this
    int m_pendingStores = 0;               // writes sent to the store, not yet answered
    QVector<int> m_storeTargets;           // per pending write: the message index it stores, -1: a version
    QString m_modelDescription;
    QString m_modelPath;                   // the model that answers
    qint64 m_modelId = 0;
    bool m_loading = false;
    QString m_loadingPath;                 // the model being loaded
    qint64 m_loadingId = 0;
    GenerationSettings m_settings;
    QVector<GenerationPreset> m_presets;
    bool m_modelReady = false;
    bool m_chatTemplate = false;  // the model answering formats a conversation (else it continues)
    ThinkingOptions m_thinking;   // what its template offers
    bool m_generating = false;
};

}  // namespace spillway::ui
