#pragma once
// The chat history on its own thread: a QObject that owns the storage::ChatDatabase and lives on
// the "storage" QThread (ARCHITECTURE.md: the GUI thread does no SQL). The GUI sends requests
// by queued signals and gets results back as signals; requests run in the order they were sent.

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QVector>
#include <memory>

#include "model_worker.h"

namespace spillway::storage {
class ChatDatabase;
}

namespace spillway::ui {

struct ConversationItem {
    qint64 id = 0;
    QString title;
    qint64 updatedMs = 0;
};

struct MessageItem {
    qint64 id = 0;
    QString role;  // "user", "assistant", "system"
    QString content;
    double tokensPerSecond = 0;  // 0 when unknown
    double firstTokenMs = 0;
    QString modelName;
    int versionNumber = 1;  // which of its versions (edits, regenerations) is shown
    int versionCount = 1;
    // A reply's reasoning (the model's thinking, where its template marks it), shown apart from
    // the answer and never sent back to the model; stored with the reply (the chat database's
    // reasoning column) and loaded with it.
    QString reasoning;
    double reasoningMs = 0;  // how long it reasoned; 0 when unknown
};

// A reply about to stream in at `index`: the message there is emptied (its figures too) and what
// followed it dropped, or, at the end, a new assistant message is appended. Returns its index.
int startReplyAt(QVector<MessageItem>& messages, int index);

class ChatStore : public QObject {
    Q_OBJECT
public:
    explicit ChatStore(QObject* parent = nullptr);
    ~ChatStore() override;

public slots:
    // Opens (or creates, or recovers) spillway.db in `folder`; then lists the conversations.
    void open(const QString& folder);
    // Every conversation (empty query) or those with a message matching it (full-text search).
    void list(const QString& query);
    // A new conversation with the catalog model it talks to (0: none known).
    void create(const QString& title, qint64 modelId);
    // The conversation's messages (loaded), after the catalog model it talks to (conversationModel).
    void load(qint64 conversation);
    // The conversation talks to catalog model `modelId` from now on.
    void setConversationModel(qint64 conversation, qint64 modelId);
    // `reasoning`: a reply's thinking, stored apart from its content; `reasoningMs` its time (0: unknown).
    void append(qint64 conversation, const QString& role, const QString& content, double tokensPerSecond,
                double firstTokenMs, const QString& modelName, const QString& reasoning = {}, double reasoningMs = 0);
    // A new version of a stored message (kind "edit" or "regeneration"), made current; answered
    // by stored(conversation, message).
    void addVersion(qint64 conversation, qint64 message, const QString& kind, const QString& content,
                    double tokensPerSecond, double firstTokenMs, const QString& modelName, const QString& reasoning = {},
                    double reasoningMs = 0);
    // Shows version `number` (1-based) of a message from now on; then loads the conversation.
    void selectVersion(qint64 conversation, qint64 message, int number);
    // Removes every message of the conversation after `message` (edit-and-resend of an earlier
    // prompt), in one transaction; answered by truncated().
    void truncateAfter(qint64 conversation, qint64 message);
    void rename(qint64 conversation, const QString& title);
    void remove(qint64 conversation);
    // Writes conversations to `path` (replaced whole, or left as it was on failure): "markdown"
    // (current versions, one after another) or "json" (every version: Spillway's export format;
    // several conversations make a JSON array). Answered by exported(path, count).
    void exportConversations(const QList<qint64>& conversations, const QString& path, const QString& format);
    // Every conversation, the same way.
    void exportAll(const QString& path, const QString& format);
    // Reads a Spillway JSON export (one conversation or an array of them) into new conversations;
    // answered by imported(count, last id), then the list changes.
    void importFile(const QString& path);
    // Settings (JSON texts) by key: answered by setting(key, valueJson), "" when unset.
    void readSetting(const QString& key);
    void writeSetting(const QString& key, const QString& valueJson);
    // The model catalog: adds (or finds, by path) a model, then lists them all.
    void addModel(const spillway::ui::ModelItem& model);
    void listModels();
    // Takes a model out of the catalog (its files stay; its packages stay, without a parent;
    // chats that talked to it keep their messages); then lists them all.
    void removeModel(qint64 id);

signals:
    void opened(const QString& path, const QString& recoveryNote);  // note empty unless recovered
    void listed(const QString& query, const QVector<spillway::ui::ConversationItem>& items);
    void created(qint64 conversation);
    void loaded(qint64 conversation, const QVector<spillway::ui::MessageItem>& messages);
    void conversationModel(qint64 conversation, qint64 modelId);  // 0: none recorded
    void stored(qint64 conversation, qint64 message);
    void changed();  // a conversation was renamed or removed
    void truncated(qint64 conversation);
    void setting(const QString& key, const QString& valueJson);
    void modelAdded(qint64 id, const QString& path);
    void modelsListed(const QVector<spillway::ui::ModelItem>& models);
    void exported(const QString& path, int count);
    void imported(int count, qint64 lastConversation);
    void failed(const QString& message);

private:
    bool ready();
    std::unique_ptr<storage::ChatDatabase> m_db;
};

}  // namespace spillway::ui

Q_DECLARE_METATYPE(spillway::ui::ConversationItem)
Q_DECLARE_METATYPE(spillway::ui::MessageItem)
