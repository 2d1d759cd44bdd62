#include "chat_controller.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "conversation_list_model.h"
#include "generation_worker.h"

namespace spillway::ui {

ChatController::ChatController(GenerationWorker* worker, ChatStore* store, QObject* parent)
    : QObject(parent), m_worker(worker), m_store(store), m_list(new ConversationListModel(this))
{
    qRegisterMetaType<MessageItem>();
    qRegisterMetaType<QVector<MessageItem>>();
    qRegisterMetaType<GenerationSettings>();
    m_presets = builtInPresets();
    connect(this, &ChatController::loadRequested, worker, &GenerationWorker::loadModel, Qt::QueuedConnection);
    connect(this, &ChatController::generateRequested, worker, &GenerationWorker::generateWith, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::modelLoaded, this, &ChatController::onModelLoaded, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::failed, this, &ChatController::onFailed, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::loadProgress, this, [this](qint64 done, qint64 total) {
        if (m_loading) emit loadProgress(done, total);
    }, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::unloaded, this, &ChatController::modelUnloaded, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::loadCancelled, this, [this](const QString& description) {
        if (!m_loading) return;
        m_loading = false;
        if (!description.isEmpty()) m_modelDescription = description;
        emit loadCancelled();
        emit stateChanged();
    }, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::tokens, this, &ChatController::onTokens, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::reasoningText, this, &ChatController::onReasoning, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::reasoningTimed, this, [this](double ms) {
        if (!m_generating || m_replyIndex < 0 || m_replyIndex >= m_messages.size()) return;
        m_messages[m_replyIndex].reasoningMs += ms;  // a continued reply's adds to it
        emit replyReasoningTimed(m_messages[m_replyIndex].reasoningMs);
    }, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::thinkingOffered, this, [this](const ThinkingOptions& options) {
        m_thinking = options;
        emit thinkingOffered(options);
    }, Qt::QueuedConnection);
    connect(worker, &GenerationWorker::finished, this, &ChatController::onFinished, Qt::QueuedConnection);
    if (!store) return;
    connect(this, &ChatController::storeOpen, store, &ChatStore::open, Qt::QueuedConnection);
    connect(this, &ChatController::storeList, store, &ChatStore::list, Qt::QueuedConnection);
    connect(this, &ChatController::storeCreate, store, &ChatStore::create, Qt::QueuedConnection);
    connect(this, &ChatController::storeSetModel, store, &ChatStore::setConversationModel, Qt::QueuedConnection);
    connect(store, &ChatStore::conversationModel, this, &ChatController::onConversationModel, Qt::QueuedConnection);
    connect(this, &ChatController::storeLoad, store, &ChatStore::load, Qt::QueuedConnection);
    connect(this, &ChatController::storeAppend, store, &ChatStore::append, Qt::QueuedConnection);
    connect(this, &ChatController::storeRename, store, &ChatStore::rename, Qt::QueuedConnection);
    connect(this, &ChatController::storeVersion, store, &ChatStore::addVersion, Qt::QueuedConnection);
    connect(this, &ChatController::storeSelectVersion, store, &ChatStore::selectVersion, Qt::QueuedConnection);
    connect(this, &ChatController::storeTruncate, store, &ChatStore::truncateAfter, Qt::QueuedConnection);
    connect(this, &ChatController::storeRemove, store, &ChatStore::remove, Qt::QueuedConnection);
    connect(store, &ChatStore::opened, this, [this](const QString&, const QString& note) { emit historyOpened(note); },
            Qt::QueuedConnection);
    connect(store, &ChatStore::listed, this, &ChatController::onListed, Qt::QueuedConnection);
    connect(store, &ChatStore::created, this, &ChatController::onCreated, Qt::QueuedConnection);
    connect(store, &ChatStore::loaded, this, &ChatController::onLoaded, Qt::QueuedConnection);
    connect(store, &ChatStore::stored, this, &ChatController::onStored, Qt::QueuedConnection);
    connect(store, &ChatStore::changed, this, [this] { emit storeList(m_query); }, Qt::QueuedConnection);
    connect(store, &ChatStore::failed, this, &ChatController::storeFailed, Qt::QueuedConnection);
    connect(this, &ChatController::storeReadSetting, store, &ChatStore::readSetting, Qt::QueuedConnection);
    connect(this, &ChatController::storeWriteSetting, store, &ChatStore::writeSetting, Qt::QueuedConnection);
    connect(store, &ChatStore::setting, this, &ChatController::onSetting, Qt::QueuedConnection);
    connect(this, &ChatController::storeExport, store, &ChatStore::exportConversations, Qt::QueuedConnection);
    connect(this, &ChatController::storeExportAll, store, &ChatStore::exportAll, Qt::QueuedConnection);
    connect(this, &ChatController::storeImport, store, &ChatStore::importFile, Qt::QueuedConnection);
    connect(store, &ChatStore::exported, this, &ChatController::exported, Qt::QueuedConnection);
    connect(store, &ChatStore::imported, this, [this](int count, qint64 last) {
        emit imported(count, last);
        openConversation(last);
    }, Qt::QueuedConnection);
}

void ChatController::exportConversation(qint64 id, const QString& path, const QString& format)
{
    if (m_store && id > 0) emit storeExport({id}, path, format);
}

void ChatController::exportAll(const QString& path, const QString& format)
{
    if (m_store) emit storeExportAll(path, format);
}

void ChatController::importFile(const QString& path)
{
    if (m_store) emit storeImport(path);
}

void ChatController::setSettings(const GenerationSettings& settings)
{
    if (settings == m_settings) return;
    m_settings = settings;
    saveSettings();
    emit settingsChanged(m_settings);
}

void ChatController::setTemperature(double temperature)
{
    GenerationSettings s = m_settings;
    s.temperature = temperature;
    setSettings(s);
}

void ChatController::setMaxTokens(int maxTokens)
{
    GenerationSettings s = m_settings;
    s.maxTokens = maxTokens;
    setSettings(s);
}

int ChatController::replyLimit() const
{
    if (m_settings.maxTokens > 0) return m_settings.maxTokens;
    return m_modelReady && !m_chatTemplate ? kBaseModelReplyTokens : 0;
}

GenerationSettings ChatController::replySettings() const
{
    GenerationSettings s = m_settings;
    s.maxTokens = replyLimit();
    return s;
}

void ChatController::saveSettings()
{
    if (!m_store) return;
    const auto text = [](const GenerationSettings& s) {
        return QString::fromUtf8(QJsonDocument(s.toJson()).toJson(QJsonDocument::Compact));
    };
    if (m_conversation) emit storeWriteSetting(chatSettingsKey(m_conversation), text(m_settings));
    GenerationSettings next = m_settings;  // the next session's new chat: all but the system prompt
    next.systemPrompt.clear();
    emit storeWriteSetting(QString::fromLatin1(kNewChatKey), text(next));
}

bool ChatController::applyPreset(const QString& name)
{
    for (const GenerationPreset& p : m_presets) {
        if (p.name != name) continue;
        GenerationSettings s = p.settings.withThinkingOf(m_settings);
        if (s.systemPrompt.isEmpty()) s.systemPrompt = m_settings.systemPrompt;
        setSettings(s);
        return true;
    }
    return false;
}

bool ChatController::savePreset(const QString& name)
{
    const QString trimmed = name.trimmed();
    if (trimmed.isEmpty()) return false;
    for (const GenerationPreset& p : m_presets)
        if (p.builtIn && p.name.compare(trimmed, Qt::CaseInsensitive) == 0) return false;
    bool replaced = false;
    for (GenerationPreset& p : m_presets)
        if (p.name == trimmed) {
            p.settings = m_settings;
            replaced = true;
        }
    if (!replaced) m_presets.push_back({trimmed, m_settings, false});
    QJsonArray mine;
    for (const GenerationPreset& p : m_presets)
        if (!p.builtIn) mine.append(QJsonObject{{"name", p.name}, {"settings", p.settings.toJson()}});
    if (m_store) emit storeWriteSetting(QString::fromLatin1(kPresetsKey), QString::fromUtf8(QJsonDocument(mine).toJson(QJsonDocument::Compact)));
    emit presetsChanged();
    return true;
}

void ChatController::onSetting(const QString& key, const QString& valueJson)
{
    if (key == QLatin1String(kPresetsKey)) {
        m_presets = builtInPresets();
        for (const QJsonValue& v : QJsonDocument::fromJson(valueJson.toUtf8()).array()) {
            const QJsonObject o = v.toObject();
            const QString name = o.value("name").toString().trimmed();
            if (!name.isEmpty()) m_presets.push_back({name, GenerationSettings::fromJson(o.value("settings").toObject()), false});
        }
        emit presetsChanged();
        return;
    }
    // A chat's own settings, as it opens (none stored: it keeps what is set now); the new chat a
    // session starts with takes those set last.
    const bool newChat = key == QLatin1String(kNewChatKey) && m_conversation == 0 && m_messages.isEmpty();
    if ((newChat || key == chatSettingsKey(m_conversation)) && !valueJson.isEmpty() && !m_generating) {
        const GenerationSettings stored = GenerationSettings::fromJson(QJsonDocument::fromJson(valueJson.toUtf8()).object());
        if (!(stored == m_settings)) {
            m_settings = stored;
            emit settingsChanged(m_settings);
        }
    }
}

void ChatController::identifyModel(const QString& path, qint64 id)
{
    if (m_loading && !m_loadingId && path == m_loadingPath) m_loadingId = id;
    if (!m_modelId && path == m_modelPath) m_modelId = id;
}

void ChatController::setAnsweringModel(const QString& path, qint64 id)
{
    m_modelPath = path;
    m_modelId = id;
    if (m_store && m_conversation && m_modelId) emit storeSetModel(m_conversation, m_modelId);
}

bool ChatController::loadModel(const QString& path, qint64 modelId)
{
    if (m_generating || path.isEmpty()) return false;
    m_loading = true;
    m_loadingPath = path;
    m_loadingId = modelId;
    m_worker->clearCancelLoad();
    emit loadRequested(path);
    emit stateChanged();
    return true;
}

void ChatController::cancelLoad()
{
    if (m_loading) m_worker->requestCancelLoad();
}

void ChatController::openHistory(const QString& folder)
{
    if (!m_store) return;
    emit storeOpen(folder);
    emit storeReadSetting(QString::fromLatin1(kPresetsKey));
    emit storeReadSetting(QString::fromLatin1(kNewChatKey));
}

bool ChatController::send(const QString& prompt)
{
    if (!m_modelReady || m_generating || m_loading || prompt.trimmed().isEmpty()) return false;
    beginExchange();
    MessageItem user;
    user.role = QStringLiteral("user");
    user.content = prompt;
    m_messages.push_back(user);
    emit messageAppended(user);
    startReply(int(m_messages.size()), 0);
    if (m_store && m_conversation == 0) {
        // The conversation is created first; the prompt is stored and sent once it exists.
        m_awaitingConversation = true;
        emit storeCreate(prompt.left(60).simplified(), m_modelId);
        return true;
    }
    storeLastPrompt();
    requestGeneration();
    return true;
}

void ChatController::beginExchange()
{
    m_generating = true;
    emit generationStarted();
    emit stateChanged();
}

void ChatController::startReply(int index, qint64 replacesMessage)
{
    m_replacesMessage = replacesMessage;
    m_replyIndex = startReplyAt(m_messages, index);
    emit replyStarted(index);
}

void ChatController::storeLastPrompt()
{
    // The prompt is the message just before the reply.
    const int index = m_replyIndex - 1;
    if (!m_store || !m_conversation || index < 0) return;
    ++m_pendingStores;
    m_storeTargets.push_back(index);
    emit storeAppend(m_conversation, QStringLiteral("user"), m_messages[index].content, 0, 0, QString(), QString(), 0);
}

void ChatController::requestGeneration()
{
    m_worker->clearStop();
    m_continuing = false;
    emit generateRequested(m_messages.mid(0, m_replyIndex), replySettings(), false);
}

bool ChatController::continueReply()
{
    if (!m_modelReady || m_generating || m_loading || m_pendingStores > 0 || m_messages.isEmpty() ||
        m_messages.back().role != QLatin1String("assistant"))
        return false;
    const int index = int(m_messages.size()) - 1;
    beginExchange();
    m_replyIndex = index;
    m_replacesMessage = m_messages[index].id;
    m_continuing = true;
    m_continuedFrom = m_messages[index].content;
    emit replyContinued(index);
    m_worker->clearStop();
    emit generateRequested(m_messages, replySettings(), true);
    return true;
}

bool ChatController::regenerate(int index)
{
    if (!m_modelReady || m_generating || m_loading || m_pendingStores > 0 || index != m_messages.size() - 1 ||
        m_messages[index].role != QLatin1String("assistant"))
        return false;
    const qint64 replaces = m_messages[index].id;
    beginExchange();
    startReply(index, replaces);
    requestGeneration();
    return true;
}

bool ChatController::editAndResend(int index, const QString& text)
{
    if (!m_modelReady || m_generating || m_loading || m_pendingStores > 0 || text.trimmed().isEmpty() || index < 0 ||
        index >= m_messages.size() || m_messages[index].role != QLatin1String("user"))
        return false;
    MessageItem edited = m_messages[index];
    const qint64 promptId = edited.id;
    // The last prompt keeps its reply as an earlier version; an earlier prompt drops what followed.
    const bool lastExchange = index >= m_messages.size() - 2;
    const qint64 replyId = lastExchange && index + 1 < m_messages.size() ? m_messages[index + 1].id : 0;
    if (m_store && m_conversation && promptId) {
        if (!lastExchange) emit storeTruncate(m_conversation, promptId);
        ++m_pendingStores;
        m_storeTargets.push_back(-1);
        emit storeVersion(m_conversation, promptId, QStringLiteral("edit"), text, 0, 0, QString(), QString(), 0);
        edited.versionCount += 1;
        edited.versionNumber = edited.versionCount;
    }
    edited.content = text;
    beginExchange();
    truncate(index);
    m_messages.push_back(edited);
    emit messageAppended(edited);
    startReply(index + 1, replyId);
    requestGeneration();
    return true;
}

void ChatController::showVersion(int index, int number)
{
    if (m_generating || !m_store || index < 0 || index >= m_messages.size() || !m_messages[index].id) return;
    emit storeSelectVersion(m_conversation, m_messages[index].id, number);
}

void ChatController::stop()
{
    if (m_generating) m_worker->requestStop();
}

void ChatController::newConversation()
{
    if (m_generating) return;
    m_conversation = 0;
    setMessages({});
}

void ChatController::openConversation(qint64 id)
{
    if (m_generating || !m_store) return;
    emit storeLoad(id);
}

void ChatController::renameConversation(qint64 id, const QString& title)
{
    if (m_store && !title.trimmed().isEmpty()) emit storeRename(id, title.trimmed());
}

void ChatController::deleteConversation(qint64 id)
{
    if (!m_store || (m_generating && id == m_conversation)) return;
    if (id == m_conversation) newConversation();
    emit storeRemove(id);
}

void ChatController::setSearch(const QString& query)
{
    m_query = query;
    if (m_store) emit storeList(query);
}

void ChatController::setMessages(const QVector<MessageItem>& messages)
{
    m_messages = messages;
    emit messagesReset(m_messages);
}

void ChatController::truncate(int count)
{
    if (count >= m_messages.size()) return;
    m_messages.resize(std::max(0, count));
    emit messagesTruncated(count);
}

void ChatController::onModelLoaded(const QString& description, bool chatTemplate)
{
    m_modelReady = true;
    m_chatTemplate = chatTemplate;
    m_modelDescription = description;
    if (m_loading) {  // (a plan for another variant loads it too, unasked: setAnsweringModel)
        m_loading = false;
        setAnsweringModel(m_loadingPath, m_loadingId);
    }
    emit modelLoaded(description, chatTemplate);
    emit stateChanged();
}

void ChatController::onTokens(const QString& text)
{
    if (!m_generating || m_replyIndex < 0 || m_replyIndex >= m_messages.size()) return;
    m_messages[m_replyIndex].content += text;
    emit replyText(text);
}

void ChatController::onReasoning(const QString& text)
{
    if (!m_generating || m_replyIndex < 0 || m_replyIndex >= m_messages.size()) return;
    m_messages[m_replyIndex].reasoning += text;
    emit replyReasoning(text);
}

void ChatController::onFailed(const QString& message)
{
    if (m_loading && !m_generating) {  // the model that answered so far stays
        m_loading = false;
        emit failed(m_modelReady ? tr("%1 (the model loaded before goes on answering)").arg(message) : message);
        emit stateChanged();
        return;
    }
    const bool wasGenerating = m_generating;
    if (m_generating && m_continuing && m_replyIndex >= 0 && m_replyIndex < m_messages.size()) {
        // A failed continuation leaves the reply as it was.
        emit replyEnded(0, 0, QString());
        m_messages[m_replyIndex].content = m_continuedFrom;
        m_generating = false;
        m_continuing = false;
        emit messagesReset(m_messages);
        emit failed(message);
        emit stateChanged();
        return;
    }
    if (m_generating && m_replyIndex >= 0) {  // the failed reply goes; its prompt stays
        emit replyEnded(0, 0, QString());
        truncate(m_replyIndex);
    }
    m_generating = false;
    m_awaitingConversation = false;
    // A failed regeneration cleared the reply it replaced: show the stored conversation again.
    if (wasGenerating && m_replacesMessage && m_store && m_conversation && m_pendingStores == 0)
        emit storeLoad(m_conversation);
    emit failed(message);
    emit stateChanged();
}

void ChatController::onFinished(double tokensPerSecond, double timeToFirstTokenMs, int tokens, const QString& end)
{
    m_generating = false;
    m_continuing = false;
    if (m_replyIndex >= 0 && m_replyIndex < m_messages.size()) {
        MessageItem& m = m_messages[m_replyIndex];
        m.tokensPerSecond = tokensPerSecond;
        m.firstTokenMs = timeToFirstTokenMs;
        m.modelName = m_modelDescription;
    }
    emit replyEnded(tokensPerSecond, timeToFirstTokenMs, m_modelDescription);
    const QString reply = m_messages.value(m_replyIndex).content;
    const QString reasoning = m_messages.value(m_replyIndex).reasoning;
    const double reasoningMs = m_messages.value(m_replyIndex).reasoningMs;
    if (m_store && m_conversation) {
        ++m_pendingStores;
        if (m_replacesMessage) {
            m_storeTargets.push_back(-1);
            emit storeVersion(m_conversation, m_replacesMessage, QStringLiteral("regeneration"), reply, tokensPerSecond,
                              timeToFirstTokenMs, m_modelDescription, reasoning, reasoningMs);  // (a continued reply too)
        } else {
            m_storeTargets.push_back(m_replyIndex);
            emit storeAppend(m_conversation, QStringLiteral("assistant"), reply, tokensPerSecond, timeToFirstTokenMs,
                             m_modelDescription, reasoning, reasoningMs);
        }
    }
    emit stateChanged();
    emit replyFinished(tokensPerSecond, timeToFirstTokenMs, tokens, end);
}

void ChatController::onListed(const QString& query, const QVector<ConversationItem>& items)
{
    if (query != m_query) return;  // a newer search is on its way
    m_list->setItems(items);
    emit conversationsListed(int(items.size()));
}

void ChatController::onCreated(qint64 conversation)
{
    m_conversation = conversation;
    saveSettings();
    if (m_awaitingConversation) {
        m_awaitingConversation = false;
        if (m_generating) {
            storeLastPrompt();
            requestGeneration();
        }
    }
    emit storeList(m_query);
}

void ChatController::onLoaded(qint64 conversation, const QVector<MessageItem>& messages)
{
    if (m_generating) return;
    const bool opened = conversation != m_conversation;
    m_conversation = conversation;
    if (opened) emit storeReadSetting(chatSettingsKey(conversation));  // its own settings
    setMessages(messages);
    emit conversationShown(conversation);
}

void ChatController::onConversationModel(qint64 conversation, qint64 modelId)
{
    if (m_generating || modelId <= 0 || modelId == m_modelId) return;
    Q_UNUSED(conversation);
    emit conversationModelWanted(modelId);
}

void ChatController::onStored(qint64 conversation, qint64 message)
{
    // Stores are answered in the order they were sent: the last one of an exchange is its reply.
    const int target = m_storeTargets.isEmpty() ? -1 : m_storeTargets.takeFirst();
    if (conversation == m_conversation && target >= 0 && target < m_messages.size()) {
        m_messages[target].id = message;
        emit messageIdSet(target, message);
    }
    if (--m_pendingStores > 0 || m_generating) return;
    if (target < 0 && conversation == m_conversation) emit storeLoad(conversation);  // new version counts
    emit replyStored(conversation);
}

}  // namespace spillway::ui
