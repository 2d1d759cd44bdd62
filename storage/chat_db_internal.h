#pragma once
// What the chat_db*.cpp files share (internal to storage).

#include <cstdint>
#include <string>

#include "base/result.h"
#include "storage/chat_db.h"
#include "storage/sqlite_connection.h"

namespace spillway::storage {

struct ChatDatabase::State {
    sql::Connection db;
    std::string path;
    std::string recoveredFrom;
    std::string recoveryReason;
};

int64_t nowMs();

// Brings the schema to kChatSchemaVersion, one transaction per step. Sql when the file's
// version is newer than this code's (nothing is changed then).
Status migrateChatSchema(sql::Connection& db);

// "conversation 42" style not-found error.
inline Error notFound(const char* what, int64_t id)
{
    return makeError(ErrorCode::InvalidArgument,
                     std::string("no ") + what + " with id " + std::to_string(id));
}

// The columns of a message row in this order, for the SELECTs of chat_db_messages.cpp and the
// export: id, conversation_id, role, content, created_ms, model_id, model_name,
// tokens_per_second, first_token_ms, placement_json, current_version_id, version count,
// reasoning, reasoning_ms.
#define SPILLWAY_MESSAGE_COLUMNS                                                                   \
    "m.id, m.conversation_id, m.role, m.content, m.created_ms, m.model_id, m.model_name, "         \
    "m.tokens_per_second, m.first_token_ms, m.placement_json, m.current_version_id, "              \
    "(SELECT count(*) FROM message_versions v WHERE v.message_id = m.id), m.reasoning, m.reasoning_ms"
Message readMessage(const sql::Statement& row);

// id, message_id, number, kind, content, created_ms, model_id, model_name, tokens_per_second,
// first_token_ms, placement_json, reasoning, reasoning_ms
#define SPILLWAY_VERSION_COLUMNS                                                                   \
    "v.id, v.message_id, v.number, v.kind, v.content, v.created_ms, v.model_id, v.model_name, "    \
    "v.tokens_per_second, v.first_token_ms, v.placement_json, v.reasoning, v.reasoning_ms"
MessageVersion readVersion(const sql::Statement& row, int64_t currentVersionId);

// Inserts a message with explicit times and versions (appendMessage and importJson).
// versions must not be empty; `current` indexes it. Returns the message id.
Result<int64_t> insertMessage(sql::Connection& db, int64_t conversationId, Role role,
                              int64_t createdMs, const std::vector<MessageVersion>& versions,
                              size_t current);

}  // namespace spillway::storage
