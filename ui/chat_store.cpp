#include "chat_store.h"

#include "core/formats/llama2c.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <set>

#include "generation_settings.h"
#include "storage/chat_db.h"

namespace spillway::ui {

int startReplyAt(QVector<MessageItem>& messages, int index)
{
    if (index < messages.size()) {
        messages.resize(index + 1);
        messages[index].content.clear();
        messages[index].reasoning.clear();
        messages[index].reasoningMs = 0;
        messages[index].tokensPerSecond = messages[index].firstTokenMs = 0;
        return index;
    }
    MessageItem reply;
    reply.role = QStringLiteral("assistant");
    messages.push_back(reply);
    return int(messages.size()) - 1;
}

namespace {

// How a reply was made; zero figures are unknown.
storage::Generation generationOf(double tokensPerSecond, double firstTokenMs, const QString& modelName,
                                 const QString& reasoning = {}, double reasoningMs = 0)
{
    storage::Generation g;
    g.reasoning = reasoning.toStdString();
    if (reasoningMs > 0) g.reasoningMs = reasoningMs;
    g.modelName = modelName.toStdString();
    if (tokensPerSecond > 0) g.tokensPerSecond = tokensPerSecond;
    if (firstTokenMs > 0) g.firstTokenMs = firstTokenMs;
    return g;
}

}  // namespace

ChatStore::ChatStore(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<ConversationItem>();
    qRegisterMetaType<MessageItem>();
    qRegisterMetaType<QVector<ConversationItem>>();
    qRegisterMetaType<QVector<MessageItem>>();
    qRegisterMetaType<ModelItem>();
    qRegisterMetaType<QVector<ModelItem>>();
}

ChatStore::~ChatStore() = default;

bool ChatStore::ready()
{
    if (!m_db) emit failed(tr("the chat history is not open"));
    return m_db != nullptr;
}

void ChatStore::open(const QString& folder)
{
    auto db = storage::ChatDatabase::open(folder.toStdString());
    if (!db) {
        emit failed(tr("cannot open the chat history: %1").arg(QString::fromStdString(db.error().message)));
        return;
    }
    m_db = std::make_unique<storage::ChatDatabase>(std::move(db.value()));
    emit opened(QString::fromStdString(m_db->path()), QString::fromStdString(m_db->recoveryReason()));
    list(QString());
    listModels();
}

void ChatStore::list(const QString& query)
{
    if (!ready()) return;
    auto all = m_db->conversations();
    if (!all) return emit failed(QString::fromStdString(all.error().message));
    std::set<int64_t> matching;
    if (!query.trimmed().isEmpty()) {
        storage::SearchOptions options;
        options.limit = 500;
        auto hits = m_db->search(query.toStdString(), options);
        if (!hits) return emit failed(QString::fromStdString(hits.error().message));
        for (const auto& h : *hits) matching.insert(h.conversationId);
    }
    QVector<ConversationItem> items;
    for (const auto& c : *all) {
        if (!query.trimmed().isEmpty() && !matching.count(c.id)) continue;
        items.push_back({c.id, QString::fromStdString(c.title), c.updatedMs});
    }
    emit listed(query, items);
}

void ChatStore::create(const QString& title, qint64 modelId)
{
    if (!ready()) return;
    auto id = m_db->createConversation(title.toStdString(), modelId > 0 ? std::optional<int64_t>(modelId) : std::nullopt);
    if (!id) return emit failed(QString::fromStdString(id.error().message));
    emit created(*id);
}

void ChatStore::load(qint64 conversation)
{
    if (!ready()) return;
    auto record = m_db->conversation(conversation);
    if (!record) return emit failed(QString::fromStdString(record.error().message));
    emit conversationModel(conversation, record->modelId.value_or(0));
    auto messages = m_db->messages(conversation);
    if (!messages) return emit failed(QString::fromStdString(messages.error().message));
    QVector<MessageItem> items;
    for (const auto& m : *messages)
        items.push_back({m.id, QString::fromUtf8(storage::roleName(m.role)), QString::fromStdString(m.content),
                         m.generation.tokensPerSecond.value_or(0.0), m.generation.firstTokenMs.value_or(0.0),
                         QString::fromStdString(m.generation.modelName), 1, m.versionCount,
                         QString::fromStdString(m.generation.reasoning), m.generation.reasoningMs.value_or(0.0)});
    for (MessageItem& item : items) {  // which version is current, for "‹ 2/3 ›"
        if (item.versionCount < 2) continue;
        auto versions = m_db->versions(item.id);
        if (!versions) return emit failed(QString::fromStdString(versions.error().message));
        for (const auto& v : *versions)
            if (v.current) item.versionNumber = v.number;
    }
    emit loaded(conversation, items);
}

void ChatStore::append(qint64 conversation, const QString& role, const QString& content, double tokensPerSecond,
                       double firstTokenMs, const QString& modelName, const QString& reasoning, double reasoningMs)
{
    if (!ready()) return;
    const auto r = storage::parseRole(role.toStdString());
    if (!r) return emit failed(tr("unknown message role '%1'").arg(role));
    const storage::Generation g = generationOf(tokensPerSecond, firstTokenMs, modelName, reasoning, reasoningMs);
    auto id = m_db->appendMessage(conversation, *r, content.toStdString(), g);
    if (!id) return emit failed(QString::fromStdString(id.error().message));
    emit stored(conversation, *id);
}

void ChatStore::addVersion(qint64 conversation, qint64 message, const QString& kind, const QString& content,
                           double tokensPerSecond, double firstTokenMs, const QString& modelName, const QString& reasoning,
                           double reasoningMs)
{
    if (!ready()) return;
    const auto k = storage::parseVersionKind(kind.toStdString());
    if (!k) return emit failed(tr("unknown version kind '%1'").arg(kind));
    const storage::Generation g = generationOf(tokensPerSecond, firstTokenMs, modelName, reasoning, reasoningMs);
    auto id = m_db->addVersion(message, *k, content.toStdString(), g);
    if (!id) return emit failed(QString::fromStdString(id.error().message));
    emit stored(conversation, message);
}

namespace {

// Which version goes with which across a prompt and its reply: a reply version answers the prompt
// version that was the latest when it was made (by creation time, then id; imports keep both).
bool madeBefore(const storage::MessageVersion& a, const storage::MessageVersion& b)
{
    return a.createdMs != b.createdMs ? a.createdMs < b.createdMs : a.id < b.id;
}

// The prompt version `reply` answers: the latest made before it (null when none was).
const storage::MessageVersion* answeredBy(const std::vector<storage::MessageVersion>& prompt,
                                          const storage::MessageVersion& reply)
{
    const storage::MessageVersion* found = nullptr;
    for (const auto& p : prompt)
        if (madeBefore(p, reply) && (!found || madeBefore(*found, p))) found = &p;
    return found;
}

// The latest reply version that answers `prompt` (null when every one answers another version).
const storage::MessageVersion* answerTo(const std::vector<storage::MessageVersion>& promptVersions,
                                        const storage::MessageVersion& prompt,
                                        const std::vector<storage::MessageVersion>& reply)
{
    const storage::MessageVersion* found = nullptr;
    for (const auto& r : reply)
        if (const auto* answered = answeredBy(promptVersions, r); answered && answered->id == prompt.id)
            if (!found || madeBefore(*found, r)) found = &r;
    return found;
}

}  // namespace

void ChatStore::selectVersion(qint64 conversation, qint64 message, int number)
{
    if (!ready()) return;
    auto versions = m_db->versions(message);
    if (!versions) return emit failed(QString::fromStdString(versions.error().message));
    const storage::MessageVersion* chosen = nullptr;
    for (const auto& v : *versions)
        if (v.number == number) chosen = &v;
    if (!chosen) return load(conversation);
    // The prompt and its reply move together: the chosen prompt version shows the reply made for
    // it, the chosen reply version the prompt it answered.
    const Status s = m_db->transaction([&]() -> Status {
        if (Status c = m_db->setCurrentVersion(message, chosen->id); !c) return c;
        auto messages = m_db->messages(conversation);
        if (!messages) return messages.error();
        for (size_t i = 0; i < messages->size(); ++i) {
            if ((*messages)[i].id != message) continue;
            const bool prompt = (*messages)[i].role == storage::Role::User;
            const size_t partner = prompt ? i + 1 : i - 1;
            if ((!prompt && i == 0) || partner >= messages->size()) break;
            const auto& other = (*messages)[partner];
            if (other.role != (prompt ? storage::Role::Assistant : storage::Role::User)) break;
            auto otherVersions = m_db->versions(other.id);
            if (!otherVersions) return otherVersions.error();
            const storage::MessageVersion* match = prompt ? answerTo(*versions, *chosen, *otherVersions)
                                                          : answeredBy(*otherVersions, *chosen);
            if (match && match->id != other.currentVersionId) return m_db->setCurrentVersion(other.id, match->id);
            break;
        }
        return {};
    });
    if (!s) emit failed(QString::fromStdString(s.error().message));
    load(conversation);
}

void ChatStore::truncateAfter(qint64 conversation, qint64 message)
{
    if (!ready()) return;
    auto messages = m_db->messages(conversation);
    if (!messages) return emit failed(QString::fromStdString(messages.error().message));
    const Status s = m_db->transaction([&]() -> Status {
        for (const auto& m : *messages)
            if (m.id > message)
                if (Status d = m_db->deleteMessage(m.id); !d) return d;
        return {};
    });
    if (!s) return emit failed(QString::fromStdString(s.error().message));
    emit truncated(conversation);
}

void ChatStore::readSetting(const QString& key)
{
    if (!ready()) return;
    auto value = m_db->setting(key.toStdString());
    if (!value) return emit failed(QString::fromStdString(value.error().message));
    emit setting(key, value->has_value() ? QString::fromStdString(**value) : QString());
}

void ChatStore::writeSetting(const QString& key, const QString& valueJson)
{
    if (!ready()) return;
    const Status s = m_db->setSetting(key.toStdString(), valueJson.toStdString());
    if (!s) return emit failed(QString::fromStdString(s.error().message));
}

void ChatStore::rename(qint64 conversation, const QString& title)
{
    if (!ready()) return;
    const Status s = m_db->renameConversation(conversation, title.toStdString());
    if (!s) return emit failed(QString::fromStdString(s.error().message));
    emit changed();
}

void ChatStore::exportConversations(const QList<qint64>& conversations, const QString& path, const QString& format)
{
    if (!ready()) return;
    // JSON: one conversation is the export itself (what importJson reads), none or several an
    // array of them; Markdown: one after another.
    const bool json = format == QLatin1String("json");
    QByteArray out;
    if (json && conversations.size() != 1) out = "[\n";
    for (qsizetype i = 0; i < conversations.size(); ++i) {
        // The chat's system prompt travels with it (the app keeps it with the chat's settings).
        std::string systemPrompt;
        if (auto stored = m_db->setting(chatSettingsKey(conversations[i]).toStdString()); stored && *stored)
            systemPrompt = GenerationSettings::fromJson(QJsonDocument::fromJson(QByteArray::fromStdString(**stored)).object())
                               .systemPrompt.toStdString();
        auto text = json ? m_db->exportJson(conversations[i], systemPrompt) : m_db->exportMarkdown(conversations[i], systemPrompt);
        if (!text) return emit failed(QString::fromStdString(text.error().message));
        if (i > 0) out += json ? ",\n" : "\n---\n\n";
        out += QByteArray::fromStdString(*text);
    }
    if (json && conversations.size() != 1) out += "\n]\n";
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(out) != out.size() || !file.commit())
        return emit failed(tr("cannot write %1: %2").arg(path, file.errorString()));
    emit exported(path, int(conversations.size()));
}

void ChatStore::exportAll(const QString& path, const QString& format)
{
    if (!ready()) return;
    auto all = m_db->conversations();
    if (!all) return emit failed(QString::fromStdString(all.error().message));
    QList<qint64> ids;
    for (const auto& c : *all) ids << c.id;
    exportConversations(ids, path, format);
}

void ChatStore::importFile(const QString& path)
{
    if (!ready()) return;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) return emit failed(tr("cannot read %1: %2").arg(path, file.errorString()));
    const QByteArray bytes = file.readAll();
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
    if (doc.isNull())
        return emit failed(tr("%1 is not a chat export (Spillway's, or a list of messages): %2").arg(path, error.errorString()));
    QList<QByteArray> exports;
    if (doc.isArray()) {
        for (const QJsonValue& v : doc.array()) exports << QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact);
    } else {
        exports << bytes;
    }
    int count = 0;
    qint64 last = 0;
    for (const QByteArray& one : exports) {
        std::string systemPrompt;
        auto id = m_db->importJson(one.toStdString(), &systemPrompt);
        if (id) {
            // Told apart from its original in the list, and with the system prompt it had.
            if (auto c = m_db->conversation(*id); c && !QString::fromStdString(c->title).endsWith(tr(" (imported)")))
                (void)m_db->renameConversation(*id, c->title + tr(" (imported)").toStdString());
            if (!systemPrompt.empty()) {
                GenerationSettings settings;
                settings.systemPrompt = QString::fromStdString(systemPrompt);
                (void)m_db->setSetting(chatSettingsKey(*id).toStdString(),
                                       QJsonDocument(settings.toJson()).toJson(QJsonDocument::Compact).toStdString());
            }
        }
        if (!id) {
            emit failed(tr("%1: conversation %2 of %3 not imported: %4")
                            .arg(path)
                            .arg(count + 1)
                            .arg(exports.size())
                            .arg(QString::fromStdString(id.error().message)));
            break;
        }
        ++count;
        last = *id;
    }
    if (count > 0) {
        emit imported(count, last);
        emit changed();
    }
}

void ChatStore::setConversationModel(qint64 conversation, qint64 modelId)
{
    if (!ready()) return;
    const Status s =
        m_db->setConversationModel(conversation, modelId > 0 ? std::optional<int64_t>(modelId) : std::nullopt);
    if (!s) return emit failed(QString::fromStdString(s.error().message));
}

void ChatStore::remove(qint64 conversation)
{
    if (!ready()) return;
    const Status s = m_db->deleteConversation(conversation);
    if (!s) return emit failed(QString::fromStdString(s.error().message));
    emit changed();
}

void ChatStore::addModel(const ModelItem& model)
{
    if (!ready()) return;
    auto existing = m_db->modelByPath(model.path.toStdString());
    if (!existing) return emit failed(QString::fromStdString(existing.error().message));
    int64_t id = 0;
    if (*existing) {
        id = (*existing)->id;
    } else {
        storage::ModelRecord r;
        r.path = model.path.toStdString();
        r.format = storage::parseModelFormat(model.format.toStdString()).value_or(storage::ModelFormat::Gguf);
        r.architecture = model.architecture.toStdString();
        r.parameterCount = model.parameters;
        r.sizeBytes = model.sizeBytes;
        r.qualityJson = model.qualityJson.toStdString();
        if (model.parentId > 0) r.parentId = model.parentId;
        auto added = m_db->addModel(r);
        if (!added) return emit failed(QString::fromStdString(added.error().message));
        id = *added;
    }
    emit modelAdded(id, model.path);
    listModels();
}

void ChatStore::removeModel(qint64 id)
{
    if (!ready()) return;
    if (const Status s = m_db->removeModel(id); !s) return emit failed(QString::fromStdString(s.error().message));
    listModels();
}

void ChatStore::listModels()
{
    if (!ready()) return;
    auto models = m_db->models();
    if (!models) return emit failed(QString::fromStdString(models.error().message));
    QVector<ModelItem> items;
    for (const auto& m : *models) {
        ModelItem item;
        item.id = m.id;
        item.path = QString::fromStdString(m.path);
        item.format = QString::fromUtf8(storage::modelFormatName(m.format));
        // The catalog keeps a llama2.c checkpoint as its descriptor, a file read like a GGUF.
        if (m.path.ends_with(llama2c::kDescriptorSuffix)) item.format = QStringLiteral("llama2.c");
        item.architecture = QString::fromStdString(m.architecture);
        item.parameters = m.parameterCount;
        item.sizeBytes = m.sizeBytes;
        item.qualityJson = QString::fromStdString(m.qualityJson);
        item.parentId = m.parentId.value_or(0);
        items.push_back(item);
    }
    emit modelsListed(items);
}

}  // namespace spillway::ui
