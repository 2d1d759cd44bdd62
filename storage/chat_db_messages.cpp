// ChatDatabase: messages and their versions. The messages row mirrors its current version
// (content and generation figures), so listing a conversation and the full-text index read one
// table; message_versions keeps every version, the current one included.

#include <algorithm>

#include "storage/chat_db.h"
#include "storage/chat_db_internal.h"

namespace spillway::storage {

namespace {

Generation readGeneration(const sql::Statement& row, int first)
{
    return Generation{row.optInt64(first), row.text(first + 1), row.optReal(first + 2),
                      row.optReal(first + 3), row.text(first + 4)};
}

void bindGeneration(sql::Statement& s, int first, const Generation& g)
{
    s.bind(first, g.modelId)
        .bind(first + 1, g.modelName)
        .bind(first + 2, g.tokensPerSecond)
        .bind(first + 3, g.firstTokenMs)
        .bindTextOrNull(first + 4, g.placementJson);
}

// Makes version `versionId` the current one of `messageId`: copies its content and figures
// into the messages row (the FTS triggers follow the content). InvalidArgument when the version
// does not belong to the message.
Status makeCurrent(sql::Connection& db, int64_t messageId, int64_t versionId)
{
    auto s = db.prepare(
        "UPDATE messages SET (content, model_id, model_name, tokens_per_second, first_token_ms, "
        "placement_json, reasoning, reasoning_ms) = (SELECT content, model_id, model_name, tokens_per_second, "
        "first_token_ms, placement_json, reasoning, reasoning_ms FROM message_versions WHERE id = ?2), "
        "current_version_id = ?2 "
        "WHERE id = ?1 AND EXISTS (SELECT 1 FROM message_versions WHERE id = ?2 AND message_id = "
        "?1)");
    if (!s) return s.error();
    s->bind(1, messageId).bind(2, versionId);
    SPILLWAY_TRY(s->run());
    if (db.changes() == 0) {
        return makeError(ErrorCode::InvalidArgument, "message " + std::to_string(messageId) +
                                                         " has no version with id " +
                                                         std::to_string(versionId));
    }
    return {};
}

// Sets the conversation's updated time; InvalidArgument if it does not exist.
Status touchConversation(sql::Connection& db, int64_t conversationId, int64_t whenMs)
{
    auto s = db.prepare("UPDATE conversations SET updated_ms = max(updated_ms, ?2) WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, conversationId).bind(2, whenMs);
    SPILLWAY_TRY(s->run());
    if (db.changes() == 0) return notFound("conversation", conversationId);
    return {};
}

Result<int64_t> insertVersion(sql::Connection& db, int64_t messageId, int number,
                              const MessageVersion& v)
{
    auto s = db.prepare(
        "INSERT INTO message_versions (message_id, number, kind, content, created_ms, model_id, "
        "model_name, tokens_per_second, first_token_ms, placement_json, reasoning, reasoning_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    if (!s) return s.error();
    s->bind(1, messageId).bind(2, number).bind(3, versionKindName(v.kind)).bind(4, v.content);
    s->bind(5, v.createdMs);
    bindGeneration(*s, 6, v.generation);
    s->bind(11, v.generation.reasoning).bind(12, v.generation.reasoningMs);
    SPILLWAY_TRY(s->run());
    return db.lastInsertRowid();
}

Result<int64_t> conversationOf(sql::Connection& db, int64_t messageId)
{
    auto s = db.prepare("SELECT conversation_id FROM messages WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, messageId);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return notFound("message", messageId);
    return s->int64(0);
}

}  // namespace

Message readMessage(const sql::Statement& row)
{
    Message m;
    m.id = row.int64(0);
    m.conversationId = row.int64(1);
    m.role = parseRole(row.text(2)).value_or(Role::User);  // the CHECK constraint allows no other
    m.content = row.text(3);
    m.createdMs = row.int64(4);
    m.generation = readGeneration(row, 5);
    m.currentVersionId = row.int64(10);
    m.versionCount = int(row.int64(11));
    m.generation.reasoning = row.text(12);
    m.generation.reasoningMs = row.optReal(13);
    return m;
}

MessageVersion readVersion(const sql::Statement& row, int64_t currentVersionId)
{
    MessageVersion v;
    v.id = row.int64(0);
    v.messageId = row.int64(1);
    v.number = int(row.int64(2));
    v.kind = parseVersionKind(row.text(3)).value_or(VersionKind::Original);
    v.content = row.text(4);
    v.createdMs = row.int64(5);
    v.generation = readGeneration(row, 6);
    v.generation.reasoning = row.text(11);
    v.generation.reasoningMs = row.optReal(12);
    v.current = v.id == currentVersionId;
    return v;
}

Result<int64_t> insertMessage(sql::Connection& db, int64_t conversationId, Role role,
                              int64_t createdMs, const std::vector<MessageVersion>& versions,
                              size_t current)
{
    if (versions.empty() || current >= versions.size()) {
        return makeError(ErrorCode::InvalidArgument, "a message needs its current version");
    }
    auto tx = sql::Transaction::begin(db);
    if (!tx) return tx.error();
    int64_t latest = createdMs;
    for (const auto& v : versions) latest = std::max(latest, v.createdMs);
    SPILLWAY_TRY(touchConversation(db, conversationId, latest));

    auto s = db.prepare("INSERT INTO messages (conversation_id, role, content, created_ms, "
                        "model_id, model_name, tokens_per_second, first_token_ms, placement_json, "
                        "reasoning, reasoning_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    if (!s) return s.error();
    const MessageVersion& shown = versions[current];
    s->bind(1, conversationId).bind(2, roleName(role)).bind(3, shown.content).bind(4, createdMs);
    bindGeneration(*s, 5, shown.generation);
    s->bind(10, shown.generation.reasoning).bind(11, shown.generation.reasoningMs);
    SPILLWAY_TRY(s->run());
    const int64_t messageId = db.lastInsertRowid();

    int64_t currentId = 0;
    for (size_t i = 0; i < versions.size(); ++i) {
        auto id = insertVersion(db, messageId, int(i + 1), versions[i]);
        if (!id) return id.error();
        if (i == current) currentId = *id;
    }
    auto link = db.prepare("UPDATE messages SET current_version_id = ?2 WHERE id = ?1");
    if (!link) return link.error();
    link->bind(1, messageId).bind(2, currentId);
    SPILLWAY_TRY(link->run());
    SPILLWAY_TRY(tx->commit());
    return messageId;
}

Result<int64_t> ChatDatabase::appendMessage(int64_t conversationId, Role role,
                                            const std::string& content,
                                            const Generation& generation)
{
    const int64_t now = nowMs();
    MessageVersion v;
    v.kind = VersionKind::Original;
    v.content = content;
    v.createdMs = now;
    v.generation = generation;
    return insertMessage(db(), conversationId, role, now, {v}, 0);
}

Result<Message> ChatDatabase::message(int64_t id)
{
    auto s = db().prepare("SELECT " SPILLWAY_MESSAGE_COLUMNS " FROM messages m WHERE m.id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return notFound("message", id);
    return readMessage(*s);
}

Result<std::vector<Message>> ChatDatabase::messages(int64_t conversationId)
{
    auto s = db().prepare("SELECT " SPILLWAY_MESSAGE_COLUMNS
                          " FROM messages m WHERE m.conversation_id = ?1 ORDER BY m.id");
    if (!s) return s.error();
    s->bind(1, conversationId);
    std::vector<Message> out;
    for (;;) {
        auto row = s->step();
        if (!row) return row.error();
        if (!*row) break;
        out.push_back(readMessage(*s));
    }
    return out;
}

Status ChatDatabase::deleteMessage(int64_t id)
{
    auto tx = sql::Transaction::begin(db());
    if (!tx) return tx.error();
    auto conversationId = conversationOf(db(), id);
    if (!conversationId) return conversationId.error();
    auto s = db().prepare("DELETE FROM messages WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    SPILLWAY_TRY(s->run());
    SPILLWAY_TRY(touchConversation(db(), *conversationId, nowMs()));
    return tx->commit();
}

Result<int64_t> ChatDatabase::addVersion(int64_t messageId, VersionKind kind,
                                         const std::string& content, const Generation& generation)
{
    auto tx = sql::Transaction::begin(db());
    if (!tx) return tx.error();
    auto conversationId = conversationOf(db(), messageId);
    if (!conversationId) return conversationId.error();
    int number = 0;
    {
        auto last = db().prepare(
            "SELECT coalesce(max(number), 0) FROM message_versions WHERE message_id = ?1");
        if (!last) return last.error();
        last->bind(1, messageId);
        auto row = last->step();
        if (!row) return row.error();
        number = int(last->int64(0)) + 1;
    }  // the statement is reset here, before the writes

    MessageVersion v;
    v.kind = kind;
    v.content = content;
    v.createdMs = nowMs();
    v.generation = generation;
    auto versionId = insertVersion(db(), messageId, number, v);
    if (!versionId) return versionId.error();
    SPILLWAY_TRY(makeCurrent(db(), messageId, *versionId));
    SPILLWAY_TRY(touchConversation(db(), *conversationId, v.createdMs));
    SPILLWAY_TRY(tx->commit());
    return *versionId;
}

Result<std::vector<MessageVersion>> ChatDatabase::versions(int64_t messageId)
{
    auto s = db().prepare("SELECT " SPILLWAY_VERSION_COLUMNS ", m.current_version_id "
                          "FROM message_versions v JOIN messages m ON m.id = v.message_id "
                          "WHERE v.message_id = ?1 ORDER BY v.number");
    if (!s) return s.error();
    s->bind(1, messageId);
    std::vector<MessageVersion> out;
    for (;;) {
        auto row = s->step();
        if (!row) return row.error();
        if (!*row) break;
        out.push_back(readVersion(*s, s->int64(13)));
    }
    if (out.empty()) return notFound("message", messageId);
    return out;
}

Status ChatDatabase::setCurrentVersion(int64_t messageId, int64_t versionId)
{
    auto tx = sql::Transaction::begin(db());
    if (!tx) return tx.error();
    auto conversationId = conversationOf(db(), messageId);
    if (!conversationId) return conversationId.error();
    SPILLWAY_TRY(makeCurrent(db(), messageId, versionId));
    SPILLWAY_TRY(touchConversation(db(), *conversationId, nowMs()));
    return tx->commit();
}

}  // namespace spillway::storage
