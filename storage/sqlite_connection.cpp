#include "storage/sqlite_connection.h"

#include <sqlite3.h>

#include <cassert>
#include <utility>

namespace spillway::storage::sql {

ErrorCode errorCodeFor(int sqliteCode)
{
    switch (sqliteCode & 0xff) {
    case SQLITE_FULL: return ErrorCode::DiskFull;
    case SQLITE_IOERR: return ErrorCode::Io;
    case SQLITE_CONSTRAINT: return ErrorCode::InvalidArgument;
    case SQLITE_NOMEM: return ErrorCode::OutOfMemory;
    default: return ErrorCode::Sql;
    }
}

// ---- Statement ----------------------------------------------------------------------------------

Statement::~Statement()
{
    if (m_stmt) {
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }
}

// A failed bind is a programming error (index out of range) or out of memory; the step that
// follows reports the latter, so binds only assert.
Statement& Statement::bind(int index, int64_t value)
{
    [[maybe_unused]] const int rc = sqlite3_bind_int64(m_stmt, index, value);
    assert(rc == SQLITE_OK);
    return *this;
}

Statement& Statement::bind(int index, double value)
{
    [[maybe_unused]] const int rc = sqlite3_bind_double(m_stmt, index, value);
    assert(rc == SQLITE_OK);
    return *this;
}

Statement& Statement::bind(int index, std::string_view text)
{
    [[maybe_unused]] const int rc =
        sqlite3_bind_text64(m_stmt, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    assert(rc == SQLITE_OK || rc == SQLITE_NOMEM || rc == SQLITE_TOOBIG);
    return *this;
}

Statement& Statement::bind(int index, const std::optional<int64_t>& value)
{
    return value ? bind(index, *value) : bindNull(index);
}

Statement& Statement::bind(int index, const std::optional<double>& value)
{
    return value ? bind(index, *value) : bindNull(index);
}

Statement& Statement::bindNull(int index)
{
    [[maybe_unused]] const int rc = sqlite3_bind_null(m_stmt, index);
    assert(rc == SQLITE_OK);
    return *this;
}

Statement& Statement::bindTextOrNull(int index, const std::string& text)
{
    return text.empty() ? bindNull(index) : bind(index, text);
}

Result<bool> Statement::step()
{
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3* db = sqlite3_db_handle(m_stmt);
    std::string message = *m_dbPath + ": " + sqlite3_errmsg(db);
    const char* sqlText = sqlite3_sql(m_stmt);
    if (sqlText) message += " (in: " + std::string(sqlText).substr(0, 80) + ")";
    return makeError(errorCodeFor(sqlite3_extended_errcode(db)), std::move(message));
}

Status Statement::run()
{
    for (;;) {
        auto row = step();
        if (!row) return row.error();
        if (!*row) return {};
    }
}

bool Statement::isNull(int column) const
{
    return sqlite3_column_type(m_stmt, column) == SQLITE_NULL;
}

int64_t Statement::int64(int column) const { return sqlite3_column_int64(m_stmt, column); }

double Statement::real(int column) const { return sqlite3_column_double(m_stmt, column); }

std::string Statement::text(int column) const
{
    const auto* p = sqlite3_column_text(m_stmt, column);
    if (!p) return {};
    return std::string(reinterpret_cast<const char*>(p),
                       size_t(sqlite3_column_bytes(m_stmt, column)));
}

std::optional<int64_t> Statement::optInt64(int column) const
{
    if (isNull(column)) return std::nullopt;
    return int64(column);
}

std::optional<double> Statement::optReal(int column) const
{
    if (isNull(column)) return std::nullopt;
    return real(column);
}

// ---- Connection ---------------------------------------------------------------------------------

Connection::Connection(sqlite3* db, std::string path)
    : m_db(db), m_path(std::make_unique<std::string>(std::move(path)))
{
}

Result<Connection> Connection::open(const std::string& path, int flags)
{
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string message =
            path + ": cannot open: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        const int code = db ? sqlite3_extended_errcode(db) : rc;
        sqlite3_close_v2(db);
        return makeError(errorCodeFor(code), std::move(message));
    }
    sqlite3_extended_result_codes(db, 1);
    return Connection(db, path);
}

Connection::Connection(Connection&& o) noexcept
    : m_db(std::exchange(o.m_db, nullptr)), m_path(std::move(o.m_path)),
      m_cache(std::move(o.m_cache))
{
    o.m_cache.clear();
}

Connection& Connection::operator=(Connection&& o) noexcept
{
    if (this != &o) {
        close();
        m_db = std::exchange(o.m_db, nullptr);
        m_path = std::move(o.m_path);
        m_cache = std::move(o.m_cache);
        o.m_cache.clear();
    }
    return *this;
}

Connection::~Connection() { close(); }

void Connection::close()
{
    for (auto& [text, stmt] : m_cache) sqlite3_finalize(stmt);
    m_cache.clear();
    if (m_db) sqlite3_close_v2(m_db);
    m_db = nullptr;
}

Result<Statement> Connection::prepare(const char* sqlText)
{
    auto it = m_cache.find(sqlText);
    if (it == m_cache.end()) {
        sqlite3_stmt* stmt = nullptr;
        const int rc =
            sqlite3_prepare_v3(m_db, sqlText, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) return lastError(std::string("cannot prepare \"") + sqlText + "\"");
        it = m_cache.emplace(sqlText, stmt).first;
    }
    return Statement(it->second, m_path.get());
}

Status Connection::exec(const char* sqlText)
{
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, sqlText, nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return {};
    std::string text = *m_path + ": " + (message ? message : sqlite3_errstr(rc));
    sqlite3_free(message);
    return makeError(errorCodeFor(sqlite3_extended_errcode(m_db)), std::move(text));
}

Result<std::string> Connection::queryText(const char* sqlText)
{
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(m_db, sqlText, -1, &stmt, nullptr) != SQLITE_OK) {
        return lastError(std::string("cannot prepare \"") + sqlText + "\"");
    }
    std::string value;
    Result<bool> row = false;
    {
        Statement s(stmt, m_path.get());  // resets before the finalize below
        row = s.step();
        if (row && *row) value = s.text(0);
    }
    sqlite3_finalize(stmt);
    if (!row) return row.error();
    return value;
}

Result<int64_t> Connection::queryInt64(const char* sqlText)
{
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(m_db, sqlText, -1, &stmt, nullptr) != SQLITE_OK) {
        return lastError(std::string("cannot prepare \"") + sqlText + "\"");
    }
    int64_t value = 0;
    Result<bool> row = false;
    {
        Statement s(stmt, m_path.get());  // resets before the finalize below
        row = s.step();
        if (row && *row) value = s.int64(0);
    }
    sqlite3_finalize(stmt);
    if (!row) return row.error();
    return value;
}

int64_t Connection::lastInsertRowid() const { return sqlite3_last_insert_rowid(m_db); }

int Connection::changes() const { return sqlite3_changes(m_db); }

bool Connection::inTransaction() const { return sqlite3_get_autocommit(m_db) == 0; }

Error Connection::lastError(const std::string& what) const
{
    return makeError(errorCodeFor(sqlite3_extended_errcode(m_db)),
                     *m_path + ": " + what + ": " + sqlite3_errmsg(m_db));
}

// ---- Transaction --------------------------------------------------------------------------------

Result<Transaction> Transaction::begin(Connection& db)
{
    const bool nested = db.inTransaction();
    SPILLWAY_TRY(db.exec(nested ? "SAVEPOINT nested" : "BEGIN IMMEDIATE"));
    return Transaction(&db, nested);
}

Transaction::~Transaction()
{
    if (!m_db) return;
    // A failed rollback leaves nothing better to do; the error is visible on the next statement.
    if (m_nested) {
        (void)m_db->exec("ROLLBACK TO nested; RELEASE nested");
    } else if (m_db->inTransaction()) {
        (void)m_db->exec("ROLLBACK");
    }
}

Status Transaction::commit()
{
    Connection* db = std::exchange(m_db, nullptr);
    auto st = db->exec(m_nested ? "RELEASE nested" : "COMMIT");
    if (!st.ok()) {
        // COMMIT can fail with the transaction still open (SQLITE_BUSY); end it.
        if (m_nested) {
            (void)db->exec("ROLLBACK TO nested; RELEASE nested");
        } else if (db->inTransaction()) {
            (void)db->exec("ROLLBACK");
        }
    }
    return st;
}

}  // namespace spillway::storage::sql
