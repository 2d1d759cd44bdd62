// ChatDatabase: opening (pragmas, corruption recovery, migration), conversations, settings.

#include "storage/chat_db.h"

#include <sqlite3.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/chat_db_internal.h"

namespace spillway::storage {

namespace fs = std::filesystem;

int64_t nowMs()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// ---- enums <-> text -----------------------------------------------------------------------------

const char* roleName(Role role)
{
    switch (role) {
    case Role::System: return "system";
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
    }
    return "user";
}

std::optional<Role> parseRole(const std::string& name)
{
    if (name == "system") return Role::System;
    if (name == "user") return Role::User;
    if (name == "assistant") return Role::Assistant;
    return std::nullopt;
}

const char* versionKindName(VersionKind kind)
{
    switch (kind) {
    case VersionKind::Original: return "original";
    case VersionKind::Edit: return "edit";
    case VersionKind::Regeneration: return "regeneration";
    }
    return "original";
}

std::optional<VersionKind> parseVersionKind(const std::string& name)
{
    if (name == "original") return VersionKind::Original;
    if (name == "edit") return VersionKind::Edit;
    if (name == "regeneration") return VersionKind::Regeneration;
    return std::nullopt;
}

const char* modelFormatName(ModelFormat format)
{
    switch (format) {
    case ModelFormat::Gguf: return "gguf";
    case ModelFormat::Safetensors: return "safetensors";
    case ModelFormat::HfFolder: return "hf-folder";
    case ModelFormat::Package: return "package";
    case ModelFormat::Endpoint: return "endpoint";
    }
    return "gguf";
}

std::optional<ModelFormat> parseModelFormat(const std::string& name)
{
    if (name == "gguf") return ModelFormat::Gguf;
    if (name == "safetensors") return ModelFormat::Safetensors;
    if (name == "hf-folder") return ModelFormat::HfFolder;
    if (name == "package") return ModelFormat::Package;
    if (name == "endpoint") return ModelFormat::Endpoint;
    return std::nullopt;
}

// ---- opening ------------------------------------------------------------------------------------

namespace {

// A failed open: `corrupt` says the file itself is bad (move it aside), otherwise the error is
// about the environment (locked, unreadable, full disk, newer schema) and the file stays.
struct OpenFailure {
    Error error;
    bool corrupt = false;
};

bool sqliteSaysCorrupt(const sql::Connection& db)
{
    const int code = sqlite3_extended_errcode(db.handle()) & 0xff;
    return code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
}

uint32_t bigEndian(const unsigned char* p, int bytes)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
    return v;
}

// Cheap checks of the file header before SQLite reads it: the magic string, and (when no WAL
// holds newer pages) a file shorter than the page count its header states, as a truncated copy
// is. Returns the reason the file is bad, or "".
std::string headerProblem(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};  // SQLite reports the open error itself
    struct stat st {};
    unsigned char header[100] = {};
    const bool statOk = ::fstat(fd, &st) == 0;
    const ssize_t n = statOk ? ::pread(fd, header, sizeof header, 0) : -1;
    ::close(fd);
    if (!statOk || n < 0 || st.st_size == 0) return {};  // an empty file is a new database
    if (n < 100) {
        return "the file is " + std::to_string(n) + " bytes, shorter than an SQLite header";
    }
    if (std::memcmp(header, "SQLite format 3", 16) != 0) {
        return "not an SQLite database (its first bytes are not the SQLite header)";
    }
    uint64_t pageSize = bigEndian(header + 16, 2);
    if (pageSize == 1) pageSize = 65536;
    const uint32_t pages = bigEndian(header + 28, 4);
    // The in-header page count is valid when the change counter matches "version valid for".
    const bool countValid = bigEndian(header + 24, 4) == bigEndian(header + 92, 4) && pages > 0;
    struct stat wal {};
    const bool walHasPages = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
    if (countValid && !walHasPages && uint64_t(st.st_size) < pages * pageSize) {
        return "truncated: its header counts " + std::to_string(pages) + " pages of " +
               std::to_string(pageSize) + " bytes, the file has " + std::to_string(st.st_size) +
               " bytes";
    }
    return {};
}

Result<sql::Connection> openChecked(const std::string& path, const ChatDatabaseOptions& options,
                                    OpenFailure& failure)
{
    auto fail = [&](Error e, bool corrupt) -> Result<sql::Connection> {
        failure = {e, corrupt};
        return e;
    };
    if (const std::string problem = headerProblem(path); !problem.empty()) {
        return fail(makeError(ErrorCode::Sql, path + ": " + problem), true);
    }
    auto opened = sql::Connection::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                  SQLITE_OPEN_NOMUTEX);
    if (!opened) return fail(opened.error(), false);
    sql::Connection db = std::move(opened).value();

    auto step = [&](const char* sqlText) -> Status {
        auto st = db.exec(sqlText);
        if (!st) failure = {st.error(), sqliteSaysCorrupt(db)};
        return st;
    };
    // The busy timeout first: every later statement may wait for another connection's lock.
    if (!step("PRAGMA busy_timeout = 5000")) return failure.error;
    // Reading the schema is where a file that is not SQLite (or a damaged page 1) shows up.
    if (!step("SELECT count(*) FROM sqlite_master")) return failure.error;
    if (!step("PRAGMA journal_mode = WAL")) return failure.error;
    if (options.checkIntegrityAtOpen) {
        auto check = db.queryText("PRAGMA quick_check");
        if (!check) return fail(check.error(), sqliteSaysCorrupt(db));
        if (*check != "ok") {
            return fail(makeError(ErrorCode::Sql, path + ": damaged: " + *check), true);
        }
    }
    // See ChatDatabaseOptions::durableAgainstPowerLoss: NORMAL keeps every returned commit
    // across a process crash or SIGKILL (the WAL write happened before COMMIT returned; the
    // kernel has the bytes), FULL adds an fsync per commit for power loss.
    if (!step(options.durableAgainstPowerLoss ? "PRAGMA synchronous = FULL"
                                              : "PRAGMA synchronous = NORMAL")) {
        return failure.error;
    }
    if (auto st = migrateChatSchema(db); !st) return fail(st.error(), sqliteSaysCorrupt(db));
    // After the migration: a step may rebuild a table that others reference (chat_db_schema.cpp).
    if (!step("PRAGMA foreign_keys = ON")) return failure.error;
    return db;
}

std::string utcStamp()
{
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    return buf;
}

// Renames path (and its -wal, -shm, -journal files, keeping them usable together) to
// path.corrupt-<UTC time>[-n]. Never deletes. Returns the new path of the main file.
Result<std::string> moveAside(const std::string& path)
{
    std::string target = path + ".corrupt-" + utcStamp();
    for (int n = 2; fs::exists(target); ++n) {
        target = path + ".corrupt-" + utcStamp() + "-" + std::to_string(n);
    }
    if (::rename(path.c_str(), target.c_str()) != 0) {
        const int e = errno;
        return makeError(ErrorCode::Io, path + ": damaged, and it cannot be moved aside to " +
                                            target + ": " + std::strerror(e));
    }
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        const std::string from = path + suffix;
        const std::string to = target + suffix;
        if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) {
            const int e = errno;
            return makeError(ErrorCode::Io,
                             from + ": cannot move aside to " + to + ": " + std::strerror(e));
        }
    }
    return target;
}

// Creates an empty file with mode 0600 so SQLite (which copies the database file's mode to the
// -wal and -shm files) never makes the chat history readable by other users.
Status createPrivateFile(const std::string& path)
{
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        const int e = errno;
        if (e == EEXIST) return {};
        return makeError(e == ENOSPC ? ErrorCode::DiskFull : ErrorCode::Io,
                         path + ": cannot create: " + std::strerror(e));
    }
    ::fchmod(fd, 0600);  // whatever the umask
    ::close(fd);
    return {};
}

}  // namespace

Result<ChatDatabase> ChatDatabase::open(const std::string& folder,
                                        const ChatDatabaseOptions& options)
{
    if (folder.empty()) {
        return makeError(ErrorCode::InvalidArgument, "chat database: empty folder path");
    }
    std::error_code ec;
    if (fs::create_directories(folder, ec)) {
        fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    if (ec || !fs::is_directory(folder)) {
        return makeError(ErrorCode::Io, folder + ": cannot use as the database folder: " +
                                            (ec ? ec.message() : "not a folder"));
    }
    const std::string path = (fs::path(folder) / kChatDbFileName).string();
    SPILLWAY_TRY(createPrivateFile(path));

    OpenFailure failure;
    std::string recoveredFrom, recoveryReason;
    auto db = openChecked(path, options, failure);
    if (!db && failure.corrupt) {
        auto moved = moveAside(path);
        if (!moved) return moved.error();
        recoveredFrom = *moved;
        recoveryReason = failure.error.message + "; it was moved to " + *moved +
                         " and a new, empty database was created";
        SPILLWAY_TRY(createPrivateFile(path));
        db = openChecked(path, options, failure);
    }
    if (!db) return db.error();
    return ChatDatabase(std::make_unique<State>(
        State{std::move(db).value(), path, std::move(recoveredFrom), std::move(recoveryReason)}));
}

ChatDatabase::ChatDatabase(std::unique_ptr<State> state) : m_state(std::move(state)) {}
ChatDatabase::ChatDatabase(ChatDatabase&&) noexcept = default;
ChatDatabase& ChatDatabase::operator=(ChatDatabase&&) noexcept = default;
ChatDatabase::~ChatDatabase() = default;

sql::Connection& ChatDatabase::db() { return m_state->db; }
const std::string& ChatDatabase::path() const { return m_state->path; }
const std::string& ChatDatabase::recoveredFrom() const { return m_state->recoveredFrom; }
const std::string& ChatDatabase::recoveryReason() const { return m_state->recoveryReason; }

Status ChatDatabase::transaction(const std::function<Status()>& body)
{
    auto tx = sql::Transaction::begin(db());
    if (!tx) return tx.error();
    SPILLWAY_TRY(body());
    return tx->commit();
}

// ---- conversations ------------------------------------------------------------------------------

Result<int64_t> ChatDatabase::createConversation(const std::string& title,
                                                 std::optional<int64_t> modelId)
{
    auto s = db().prepare("INSERT INTO conversations (title, created_ms, updated_ms, model_id) "
                          "VALUES (?1, ?2, ?2, ?3)");
    if (!s) return s.error();
    s->bind(1, title).bind(2, nowMs()).bind(3, modelId);
    SPILLWAY_TRY(s->run());
    return db().lastInsertRowid();
}

namespace {
Conversation readConversation(const sql::Statement& row)
{
    return Conversation{row.int64(0), row.text(1), row.int64(2), row.int64(3), row.optInt64(4)};
}
}  // namespace

Result<Conversation> ChatDatabase::conversation(int64_t id)
{
    auto s = db().prepare(
        "SELECT id, title, created_ms, updated_ms, model_id FROM conversations WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return notFound("conversation", id);
    return readConversation(*s);
}

Result<std::vector<Conversation>> ChatDatabase::conversations()
{
    auto s = db().prepare("SELECT id, title, created_ms, updated_ms, model_id FROM conversations "
                          "ORDER BY updated_ms DESC, id DESC");
    if (!s) return s.error();
    std::vector<Conversation> out;
    for (;;) {
        auto row = s->step();
        if (!row) return row.error();
        if (!*row) break;
        out.push_back(readConversation(*s));
    }
    return out;
}

Status ChatDatabase::renameConversation(int64_t id, const std::string& title)
{
    auto s = db().prepare("UPDATE conversations SET title = ?2, updated_ms = ?3 WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id).bind(2, title).bind(3, nowMs());
    SPILLWAY_TRY(s->run());
    if (db().changes() == 0) return notFound("conversation", id);
    return {};
}

Status ChatDatabase::setConversationModel(int64_t id, std::optional<int64_t> modelId)
{
    auto s = db().prepare("UPDATE conversations SET model_id = ?2, updated_ms = ?3 WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id).bind(2, modelId).bind(3, nowMs());
    SPILLWAY_TRY(s->run());
    if (db().changes() == 0) return notFound("conversation", id);
    return {};
}

Status ChatDatabase::deleteConversation(int64_t id)
{
    auto s = db().prepare("DELETE FROM conversations WHERE id = ?1");
    if (!s) return s.error();
    s->bind(1, id);
    SPILLWAY_TRY(s->run());
    if (db().changes() == 0) return notFound("conversation", id);
    return {};
}

// ---- settings -----------------------------------------------------------------------------------

Status ChatDatabase::setSetting(const std::string& key, const std::string& valueJson)
{
    auto s = db().prepare("INSERT INTO settings (key, value) VALUES (?1, ?2) "
                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
    if (!s) return s.error();
    s->bind(1, key).bind(2, valueJson);
    return s->run();
}

Result<std::optional<std::string>> ChatDatabase::setting(const std::string& key)
{
    auto s = db().prepare("SELECT value FROM settings WHERE key = ?1");
    if (!s) return s.error();
    s->bind(1, key);
    auto row = s->step();
    if (!row) return row.error();
    if (!*row) return std::optional<std::string>();
    return std::optional<std::string>(s->text(0));
}

Status ChatDatabase::removeSetting(const std::string& key)
{
    auto s = db().prepare("DELETE FROM settings WHERE key = ?1");
    if (!s) return s.error();
    s->bind(1, key);
    return s->run();
}

}  // namespace spillway::storage
