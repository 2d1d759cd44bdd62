#pragma once
// The app's database: one SQLite file `spillway.db` in a folder the app chooses (storage knows no
// Qt and no standard locations). It holds the conversations and their messages (with every
// edit and regeneration kept as a message version), the model catalog, settings and benchmark
// runs, plus a full-text index over the messages.
//
// On disk: WAL journal, foreign keys on, a 5 s busy timeout, the file created with mode 0600
// (SQLite gives the -wal and -shm files the same mode). The schema version is PRAGMA
// user_version; opening an older file migrates it step by step (each step one transaction),
// a newer one is refused with a clear error and left untouched.
//
// A file that is not SQLite, or is corrupt, is never deleted: open() renames it (with its -wal
// and -shm files) to `spillway.db.corrupt-<UTC time>`, creates a fresh database and says so in
// recoveredFrom()/recoveryReason(), for the UI to tell the user.
//
// Threads: a ChatDatabase is one SQLite connection with cached prepared statements. Use it from
// one thread at a time (the app's storage thread owns it); move it there, do not share it.
//
// Times are milliseconds since the Unix epoch (UTC). Ids are SQLite rowids (> 0). JSON columns
// are opaque JSON texts to storage; an empty string stands for "none" (NULL on disk).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace spillway::storage {

namespace sql {
class Connection;
}

inline constexpr int kChatSchemaVersion = 5;  // PRAGMA user_version this code writes
inline constexpr const char* kChatDbFileName = "spillway.db";

// Values stored on disk as text ('system', 'user', 'assistant'): never rename one.
enum class Role { System, User, Assistant };
const char* roleName(Role role);
std::optional<Role> parseRole(const std::string& name);

// Values stored on disk as text ('original', 'edit', 'regeneration'): never rename one.
enum class VersionKind { Original, Edit, Regeneration };
const char* versionKindName(VersionKind kind);
std::optional<VersionKind> parseVersionKind(const std::string& name);

// Values stored on disk as text ('gguf', 'safetensors', 'hf-folder', 'package', 'endpoint': a
// remote OpenAI-compatible server's model, its path "URL#model").
enum class ModelFormat { Gguf, Safetensors, HfFolder, Package, Endpoint };
const char* modelFormatName(ModelFormat format);
std::optional<ModelFormat> parseModelFormat(const std::string& name);

// How a message (version) was generated; all empty for user and system messages.
struct Generation {
    std::optional<int64_t> modelId;         // catalog id; cleared when the model is removed
    std::string modelName;                  // shown to the user; kept when the model is removed
    std::optional<double> tokensPerSecond;  // decode speed, tokens/s
    std::optional<double> firstTokenMs;     // time to first token, ms
    std::string placementJson;              // the placement plan used (JSON text), or ""
    // A thinking model's reasoning before its answer (kept apart from the content: the app
    // folds it, templates leave it out of later turns), and how long it took.
    std::string reasoning;
    std::optional<double> reasoningMs;
};

struct Conversation {
    int64_t id = 0;
    std::string title;
    int64_t createdMs = 0;
    int64_t updatedMs = 0;           // last change to it or one of its messages
    std::optional<int64_t> modelId;  // the model it talks to, if chosen
};

// A message as shown: the fields of its current version.
struct Message {
    int64_t id = 0;
    int64_t conversationId = 0;
    Role role = Role::User;
    std::string content;
    int64_t createdMs = 0;  // when the message was first added
    Generation generation;
    int64_t currentVersionId = 0;
    int versionCount = 1;
};

struct MessageVersion {
    int64_t id = 0;
    int64_t messageId = 0;
    int number = 1;  // 1, 2, ... in the order they were added
    VersionKind kind = VersionKind::Original;
    std::string content;
    int64_t createdMs = 0;
    Generation generation;
    bool current = false;
};

struct ModelRecord {
    int64_t id = 0;    // 0 when adding
    std::string path;  // file or folder; unique in the catalog
    ModelFormat format = ModelFormat::Gguf;
    std::string architecture;  // e.g. "llama"
    int64_t parameterCount = 0;
    int64_t sizeBytes = 0;
    std::string checksum;             // e.g. "xxh3:0123456789abcdef"; opaque here
    std::string qualityJson;          // quality report of a compressed package, or ""
    std::string placementJson;        // last placement plan, or ""
    std::optional<int64_t> parentId;  // the source model a package was made from
    int64_t addedMs = 0;
};

struct BenchmarkRun {
    int64_t id = 0;                  // 0 when adding
    std::optional<int64_t> modelId;  // cleared when the model is removed
    int64_t createdMs = 0;           // 0 when adding: now
    std::string summaryJson;         // a JSON object's text
    std::string tracePath;           // Chrome-trace file, or ""
};

struct SearchHit {
    int64_t conversationId = 0;
    int64_t messageId = 0;
    std::string conversationTitle;
    Role role = Role::User;
    std::string snippet;  // matched words between the highlight marks
    int64_t createdMs = 0;
    // 0: the message as it reads now; else the earlier version (its number) that matched, for
    // words an edit or a regeneration replaced.
    int version = 0;
};

struct SearchOptions {
    int limit = 50;
    std::string highlightOpen = "[";
    std::string highlightClose = "]";
    int snippetTokens = 16;  // words around the match, 1..64
};

struct ChatDatabaseOptions {
    // false: synchronous=NORMAL. In WAL mode a commit is then written to the WAL file (the OS
    // page cache) before it returns but not fsynced: it survives a crash or SIGKILL of the
    // process (tested), a power cut may lose the last commits (never corrupts the file).
    // true: synchronous=FULL, an fsync per commit, for durability across power loss.
    bool durableAgainstPowerLoss = false;
    // PRAGMA quick_check at open (reads every page: ~tens of ms per 100 MB), so a damaged file
    // is found and moved aside at start rather than failing later in the session.
    bool checkIntegrityAtOpen = true;
};

class ChatDatabase {
public:
    // Opens or creates `folder`/spillway.db (creating `folder`, mode 0700, if missing; an
    // existing file keeps its mode). Errors: Io (folder unusable, file unreadable, a corrupt
    // file that cannot be renamed), Sql (schema newer than this code, a failed migration, the
    // file locked by another process past the busy timeout), DiskFull.
    static Result<ChatDatabase> open(const std::string& folder,
                                     const ChatDatabaseOptions& options = {});
    ChatDatabase(ChatDatabase&&) noexcept;
    ChatDatabase& operator=(ChatDatabase&&) noexcept;
    ChatDatabase(const ChatDatabase&) = delete;
    ChatDatabase& operator=(const ChatDatabase&) = delete;
    ~ChatDatabase();

    const std::string& path() const;
    // Non-empty when open() found a corrupt file and moved it to this path.
    const std::string& recoveredFrom() const;
    const std::string& recoveryReason() const;  // what was wrong with it, for the user

    // Runs body in one transaction (nests: inside another it is a savepoint). Commits when body
    // succeeds, rolls back everything it did when it fails. For batches of writes.
    Status transaction(const std::function<Status()>& body);

    // ---- conversations (chat_db.cpp) ----
    Result<int64_t> createConversation(const std::string& title,
                                       std::optional<int64_t> modelId = {});
    Result<Conversation> conversation(int64_t id);
    Result<std::vector<Conversation>> conversations();  // most recently updated first
    Status renameConversation(int64_t id, const std::string& title);
    Status setConversationModel(int64_t id, std::optional<int64_t> modelId);
    Status deleteConversation(int64_t id);  // its messages and versions go with it

    // ---- messages and versions (chat_db_messages.cpp) ----
    // Appends a message with its first version (kind Original); bumps the conversation's
    // updatedMs. InvalidArgument for an unknown conversation.
    Result<int64_t> appendMessage(int64_t conversationId, Role role, const std::string& content,
                                  const Generation& generation = {});
    Result<Message> message(int64_t id);
    Result<std::vector<Message>> messages(int64_t conversationId);  // in order of id
    Status deleteMessage(int64_t id);
    // Adds a version (an edit or a regeneration) and makes it current; returns its id.
    Result<int64_t> addVersion(int64_t messageId, VersionKind kind, const std::string& content,
                               const Generation& generation = {});
    Result<std::vector<MessageVersion>> versions(int64_t messageId);  // by number
    Status setCurrentVersion(int64_t messageId, int64_t versionId);

    // ---- full-text search over the messages, current versions first, then earlier ones
    //      (chat_db_export.cpp) ----
    // Every word of `query` must occur (as a word prefix, case and accents ignored); FTS
    // syntax in the query is taken literally. Best matches first.
    Result<std::vector<SearchHit>> search(const std::string& query,
                                          const SearchOptions& options = {});

    // ---- export and import (chat_db_export.cpp) ----
    // systemPrompt: the chat's system prompt, which the app keeps with its settings (not as a
    // message); exported first where it is not empty ("systemPrompt" in the JSON).
    Result<std::string> exportMarkdown(int64_t conversationId, const std::string& systemPrompt = {});  // current versions only
    // Every version, generation figures and placements; importJson reads it back into a new
    // conversation (model ids are resolved through the catalog by path, else left empty). It
    // also reads a chat as a plain list of messages, `{"messages": [{"role", "content"}, ...]}`
    // (OpenAI's shape, which `spillway-cli chat`'s /save writes): one version each, titled by its
    // first prompt. *systemPrompt (when given) gets the export's system prompt, or the list's
    // leading system message, which is not stored as a message.
    Result<std::string> exportJson(int64_t conversationId, const std::string& systemPrompt = {});
    Result<int64_t> importJson(const std::string& json, std::string* systemPrompt = nullptr);

    // ---- settings (chat_db.cpp) ----
    Status setSetting(const std::string& key, const std::string& valueJson);
    Result<std::optional<std::string>> setting(const std::string& key);
    Status removeSetting(const std::string& key);

    // ---- model catalog and benchmark runs (chat_db_catalog.cpp) ----
    Result<int64_t> addModel(const ModelRecord& model);  // InvalidArgument if the path is there
    Status updateModel(const ModelRecord& model);        // by id, every field
    Result<ModelRecord> model(int64_t id);
    Result<std::optional<ModelRecord>> modelByPath(const std::string& path);
    Result<std::vector<ModelRecord>> models();  // by id
    Result<std::vector<ModelRecord>> packagesOf(int64_t parentId);
    Status setModelPlacement(int64_t id, const std::string& placementJson);
    Status removeModel(int64_t id);  // its packages keep existing with parentId cleared

    Result<int64_t> addBenchmarkRun(const BenchmarkRun& run);
    Result<std::vector<BenchmarkRun>>
    benchmarkRuns(std::optional<int64_t> modelId = {});  // newest first
    Status deleteBenchmarkRun(int64_t id);

private:
    struct State;
    explicit ChatDatabase(std::unique_ptr<State> state);
    sql::Connection& db();
    std::unique_ptr<State> m_state;
};

// ---- schema (chat_db_schema.cpp) ----

// The migration steps in order: step i (0-based) takes user_version i to i + 1. Step 0 is the
// complete version 1 schema. Exposed for the migration tests, which build a real v1 file.
const std::vector<const char*>& chatSchemaSteps();

}  // namespace spillway::storage
