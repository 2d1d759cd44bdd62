// The chat database's schema as an ordered list of migration steps. A new database runs every
// step from 0; an older file runs the steps it lacks. Never edit a shipped step: add one.

#include <string>

#include "storage/chat_db_internal.h"

namespace spillway::storage {

namespace {

// Version 1: conversations, messages with their generation figures, the model catalog,
// settings and benchmark runs. Times in ms since the Unix epoch.
const char* const kSchemaV1 = R"sql(
CREATE TABLE models (
    id              INTEGER PRIMARY KEY,
    path            TEXT NOT NULL UNIQUE,
    format          TEXT NOT NULL CHECK (format IN ('gguf', 'safetensors', 'hf-folder', 'package')),
    architecture    TEXT NOT NULL DEFAULT '',
    parameter_count INTEGER NOT NULL DEFAULT 0,
    size_bytes      INTEGER NOT NULL DEFAULT 0,
    checksum        TEXT NOT NULL DEFAULT '',
    quality_json    TEXT,
    placement_json  TEXT,
    parent_id       INTEGER REFERENCES models(id) ON DELETE SET NULL,
    added_ms        INTEGER NOT NULL
);
CREATE INDEX models_by_parent ON models(parent_id);

CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    model_id    INTEGER REFERENCES models(id) ON DELETE SET NULL
);
CREATE INDEX conversations_by_update ON conversations(updated_ms);
CREATE INDEX conversations_by_model ON conversations(model_id);

CREATE TABLE messages (
    id                INTEGER PRIMARY KEY,
    conversation_id   INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role              TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content           TEXT NOT NULL,
    created_ms        INTEGER NOT NULL,
    model_id          INTEGER REFERENCES models(id) ON DELETE SET NULL,
    model_name        TEXT NOT NULL DEFAULT '',
    tokens_per_second REAL,
    first_token_ms    REAL,
    placement_json    TEXT
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX messages_by_model ON messages(model_id);

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE benchmark_runs (
    id           INTEGER PRIMARY KEY,
    model_id     INTEGER REFERENCES models(id) ON DELETE SET NULL,
    created_ms   INTEGER NOT NULL,
    summary_json TEXT NOT NULL,
    trace_path   TEXT
);
CREATE INDEX benchmark_runs_by_model ON benchmark_runs(model_id, created_ms);
)sql";

// Version 2: message versions (edits and regenerations kept; the messages row mirrors its
// current version) and a full-text index over the current contents. Every existing message
// becomes version 1 of itself; the index is built from the existing rows.
const char* const kSchemaV2 = R"sql(
CREATE TABLE message_versions (
    id                INTEGER PRIMARY KEY,
    message_id        INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    number            INTEGER NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('original', 'edit', 'regeneration')),
    content           TEXT NOT NULL,
    created_ms        INTEGER NOT NULL,
    model_id          INTEGER REFERENCES models(id) ON DELETE SET NULL,
    model_name        TEXT NOT NULL DEFAULT '',
    tokens_per_second REAL,
    first_token_ms    REAL,
    placement_json    TEXT,
    UNIQUE (message_id, number)
);
CREATE INDEX message_versions_by_model ON message_versions(model_id);

INSERT INTO message_versions (message_id, number, kind, content, created_ms, model_id,
                              model_name, tokens_per_second, first_token_ms, placement_json)
    SELECT id, 1, 'original', content, created_ms, model_id, model_name, tokens_per_second,
           first_token_ms, placement_json
    FROM messages;

-- No foreign key: the version row is written after the message row. The code keeps it valid.
ALTER TABLE messages ADD COLUMN current_version_id INTEGER;
UPDATE messages SET current_version_id =
    (SELECT v.id FROM message_versions v WHERE v.message_id = messages.id AND v.number = 1);

-- External-content FTS5 index over messages.content, kept in step by triggers (which also fire
-- for rows removed by ON DELETE CASCADE).
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
)sql";

// Version 3: search finds words in earlier versions too (an edited prompt, a regenerated reply):
// an external-content FTS5 index over every version's content, built from the existing rows.
const char* const kSchemaV3 = R"sql(
CREATE VIRTUAL TABLE message_versions_fts USING fts5(
    content, content = 'message_versions', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER message_versions_fts_insert AFTER INSERT ON message_versions BEGIN
    INSERT INTO message_versions_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER message_versions_fts_delete AFTER DELETE ON message_versions BEGIN
    INSERT INTO message_versions_fts (message_versions_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER message_versions_fts_update AFTER UPDATE OF content ON message_versions BEGIN
    INSERT INTO message_versions_fts (message_versions_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO message_versions_fts (rowid, content) VALUES (new.id, new.content);
END;
INSERT INTO message_versions_fts (message_versions_fts) VALUES ('rebuild');
)sql";

// Version 4: a remote endpoint's model (an OpenAI-compatible server; path "URL#model") is a
// catalog row too: format 'endpoint'. SQLite cannot change a CHECK in place, so the table is
// rebuilt the way SQLite's documentation prescribes (its rows and ids kept; foreign keys are off
// while the schema migrates, so the rebuild neither fires the children's ON DELETE SET NULL nor
// rewrites their references; migrateChatSchema checks them before the commit).
const char* const kSchemaV4 = R"sql(
CREATE TABLE models_v4 (
    id              INTEGER PRIMARY KEY,
    path            TEXT NOT NULL UNIQUE,
    format          TEXT NOT NULL CHECK (format IN ('gguf', 'safetensors', 'hf-folder', 'package', 'endpoint')),
    architecture    TEXT NOT NULL DEFAULT '',
    parameter_count INTEGER NOT NULL DEFAULT 0,
    size_bytes      INTEGER NOT NULL DEFAULT 0,
    checksum        TEXT NOT NULL DEFAULT '',
    quality_json    TEXT,
    placement_json  TEXT,
    parent_id       INTEGER REFERENCES models(id) ON DELETE SET NULL,
    added_ms        INTEGER NOT NULL
);
INSERT INTO models_v4 (id, path, format, architecture, parameter_count, size_bytes, checksum,
                       quality_json, placement_json, parent_id, added_ms)
    SELECT id, path, format, architecture, parameter_count, size_bytes, checksum, quality_json,
           placement_json, parent_id, added_ms
    FROM models;
DROP TABLE models;
ALTER TABLE models_v4 RENAME TO models;
CREATE INDEX models_by_parent ON models(parent_id);
)sql";

// Version 5: a reply's reasoning (a thinking model's thought before its answer) and how long it
// took, beside the content, in the messages row and in each version. Existing replies have none.
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE message_versions ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
ALTER TABLE message_versions ADD COLUMN reasoning_ms REAL;
ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN reasoning_ms REAL;
)sql";

}  // namespace

const std::vector<const char*>& chatSchemaSteps()
{
    static const std::vector<const char*> steps = {kSchemaV1, kSchemaV2, kSchemaV3, kSchemaV4, kSchemaV5};
    static_assert(kChatSchemaVersion == 5, "add the new step to the list");
    return steps;
}

Status migrateChatSchema(sql::Connection& db)
{
    auto version = db.queryInt64("PRAGMA user_version");
    if (!version) return version.error();
    const auto& steps = chatSchemaSteps();
    if (*version > int64_t(steps.size())) {
        return makeError(ErrorCode::Sql,
                         db.path() + ": the database has schema version " +
                             std::to_string(*version) + ", newer than this Spillway knows (" +
                             std::to_string(steps.size()) +
                             "); it was written by a newer Spillway. Update Spillway; the file "
                             "was left unchanged");
    }
    if (*version < 0) {
        return makeError(ErrorCode::Sql,
                         db.path() + ": invalid schema version " + std::to_string(*version));
    }
    for (size_t step = size_t(*version); step < steps.size(); ++step) {
        auto tx = sql::Transaction::begin(db);
        if (!tx) return tx.error();
        // Another process may have migrated while we waited for the write lock.
        auto now = db.queryInt64("PRAGMA user_version");
        if (!now) return now.error();
        if (*now > int64_t(step)) continue;  // the Transaction rolls back (nothing to undo)
        auto st = db.exec(steps[step]);
        if (!st) {
            return makeError(st.error().code, "migrating the schema to version " +
                                                  std::to_string(step + 1) + ": " +
                                                  st.error().message);
        }
        // Foreign keys are off while the schema migrates (ChatDatabase::open turns them on
        // after): a step that rebuilds a table must leave every reference valid.
        auto dangling = db.queryText("SELECT count(*) FROM pragma_foreign_key_check");
        if (!dangling) return dangling.error();
        if (*dangling != "0")
            return makeError(ErrorCode::Sql, "migrating the schema to version " + std::to_string(step + 1) + ": " +
                                                 *dangling + " foreign key(s) would be left dangling; the file was left unchanged");
        const std::string bump = "PRAGMA user_version = " + std::to_string(step + 1);
        SPILLWAY_TRY(db.exec(bump.c_str()));
        SPILLWAY_TRY(tx->commit());
    }
    return {};
}

}  // namespace spillway::storage
