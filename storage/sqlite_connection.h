#pragma once
// A thin RAII layer over the SQLite C API (internal to storage; sqlite3.h stays out of every
// public header). A Connection owns one sqlite3 handle and a cache of prepared statements keyed
// by their SQL text; a Statement borrows a cached one and resets it (and clears its bindings)
// when it goes out of scope, so the next user finds it ready.
//
// Not thread-safe: a Connection is used by one thread at a time (see chat_db.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace spillway::storage::sql {

// Maps an SQLite result code to our codes: SQLITE_FULL -> DiskFull, SQLITE_IOERR -> Io,
// SQLITE_CONSTRAINT -> InvalidArgument, the rest -> Sql.
ErrorCode errorCodeFor(int sqliteCode);

class Statement {
public:
    Statement(sqlite3_stmt* stmt, const std::string* dbPath) : m_stmt(stmt), m_dbPath(dbPath) {}
    Statement(Statement&& o) noexcept : m_stmt(o.m_stmt), m_dbPath(o.m_dbPath)
    {
        o.m_stmt = nullptr;
    }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    ~Statement();

    // Parameters are 1-based, like SQLite's. An empty optional binds NULL.
    Statement& bind(int index, int64_t value);
    Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view text);
    Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
    Statement& bind(int index, const std::string& text)
    {
        return bind(index, std::string_view(text));
    }
    Statement& bind(int index, const std::optional<int64_t>& value);
    Statement& bind(int index, const std::optional<double>& value);
    Statement& bindNull(int index);
    // NULL for an empty text (optional JSON columns).
    Statement& bindTextOrNull(int index, const std::string& text);

    // One step: true when a row is ready, false when the statement is done.
    Result<bool> step();
    // Steps to the end (an INSERT, UPDATE or DELETE).
    Status run();

    // Columns are 0-based, like SQLite's.
    bool isNull(int column) const;
    int64_t int64(int column) const;
    double real(int column) const;
    std::string text(int column) const;  // "" for NULL
    std::optional<int64_t> optInt64(int column) const;
    std::optional<double> optReal(int column) const;

private:
    sqlite3_stmt* m_stmt = nullptr;
    const std::string* m_dbPath = nullptr;  // for error messages; owned by the Connection
};

class Connection {
public:
    // flags: SQLITE_OPEN_* (READWRITE | CREATE are the usual). On failure the handle is closed.
    static Result<Connection> open(const std::string& path, int flags);
    Connection(Connection&&) noexcept;
    Connection& operator=(Connection&&) noexcept;
    Connection(const Connection&) = delete;
    ~Connection();

    // A cached prepared statement (prepared on first use). SQL errors here are programming
    // errors or a corrupt schema: Sql naming the database and the statement.
    Result<Statement> prepare(const char* sqlText);
    // Runs one or more statements without caching (schema steps, pragmas).
    Status exec(const char* sqlText);
    // The first column of the first row of a one-row query, as text ("" for none).
    Result<std::string> queryText(const char* sqlText);
    Result<int64_t> queryInt64(const char* sqlText);

    int64_t lastInsertRowid() const;
    int changes() const;
    bool inTransaction() const;

    // An Error for the most recent failure on this handle: "<path>: <what>: <sqlite message>".
    Error lastError(const std::string& what) const;
    const std::string& path() const { return *m_path; }
    sqlite3* handle() const { return m_db; }

private:
    Connection(sqlite3* db, std::string path);
    void close();
    sqlite3* m_db = nullptr;
    std::unique_ptr<std::string> m_path;  // stable address: statements point at it
    std::unordered_map<std::string, sqlite3_stmt*> m_cache;
};

// A transaction that nests: at the top level BEGIN IMMEDIATE ... COMMIT (the write lock is taken
// at once, so a read-then-write never fails half-way with SQLITE_BUSY), inside another one a
// SAVEPOINT. Rolled back when destroyed without commit().
class Transaction {
public:
    static Result<Transaction> begin(Connection& db);
    Transaction(Transaction&& o) noexcept : m_db(o.m_db), m_nested(o.m_nested) { o.m_db = nullptr; }
    Transaction(const Transaction&) = delete;
    ~Transaction();
    Status commit();

private:
    Transaction(Connection* db, bool nested) : m_db(db), m_nested(nested) {}
    Connection* m_db = nullptr;  // null once committed or rolled back
    bool m_nested = false;
};

}  // namespace spillway::storage::sql
