// Opening the chat database: file modes, migration from a real version 1 file, a newer schema
// refused without touching the file, corrupt files (random bytes, a text file, a truncated and
// a damaged real database) moved aside with a fresh database made, and crash safety: a writer
// process killed with SIGKILL at random moments never loses a message whose commit returned
// and never leaves a database that fails PRAGMA integrity_check.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "storage/chat_db.h"

extern char** environ;

using namespace spillway;
using namespace spillway::storage;
namespace fs = std::filesystem;

namespace {

// A folder for one test, removed when the test ends (passed or not).
struct TestDir {
    testing_support::TempDir tmp{"spillway-chatdb-open"};
    fs::path path() const { return fs::path(tmp / "db"); }
};

// Runs SQL on a plain connection (outside ChatDatabase); returns the first column of the last
// row, or "ERROR: ..." .
std::string rawQuery(const fs::path& file, const std::string& sqlText)
{
    sqlite3* db = nullptr;
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
        std::string e = "ERROR: " + std::string(sqlite3_errmsg(db));
        sqlite3_close(db);
        return e;
    }
    std::string last;
    auto cb = [](void* out, int n, char** values, char**) -> int {
        *static_cast<std::string*>(out) = (n > 0 && values[0]) ? values[0] : "";
        return 0;
    };
    char* err = nullptr;
    if (sqlite3_exec(db, sqlText.c_str(), cb, &last, &err) != SQLITE_OK) {
        last = "ERROR: " + std::string(err ? err : "?");
        sqlite3_free(err);
    }
    sqlite3_close(db);
    return last;
}

std::vector<fs::path> corruptCopies(const fs::path& dir)
{
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        const bool sibling =
            name.ends_with("-wal") || name.ends_with("-shm") || name.ends_with("-journal");
        if (name.find(".corrupt-") != std::string::npos && !sibling) out.push_back(e.path());
    }
    return out;
}

void writeBytes(const fs::path& p, const std::string& bytes)
{
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << bytes;
}

std::string readBytes(const fs::path& p)
{
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// A closed database (WAL checkpointed away) with `count` messages of about 1 KiB.
void makeRealDatabase(const fs::path& dir, int count)
{
    auto db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto c = db->createConversation("real");
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE(db->transaction([&]() -> Status {
                      for (int i = 0; i < count; ++i) {
                          auto id = db->appendMessage(*c, Role::User,
                                                      "message " + std::to_string(i) +
                                                          std::string(1000, 'z'));
                          if (!id) return id.error();
                      }
                      return {};
                  }).ok());
}

// Opens a folder whose spillway.db is bad: a fresh database, the bad bytes kept aside.
void expectMovedAside(const fs::path& dir, const std::string& badBytes, const char* reasonWord)
{
    auto db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    ASSERT_FALSE(db->recoveredFrom().empty());
    EXPECT_NE(db->recoveryReason().find(reasonWord), std::string::npos) << db->recoveryReason();
    EXPECT_NE(db->recoveryReason().find("moved to"), std::string::npos) << db->recoveryReason();
    auto copies = corruptCopies(dir);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0].string(), db->recoveredFrom());
    EXPECT_EQ(readBytes(copies[0]), badBytes);  // kept byte for byte
    // The fresh database works.
    auto c = db->createConversation("after recovery");
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_TRUE(db->appendMessage(*c, Role::User, "works").ok());
    auto conversations = db->conversations();
    ASSERT_TRUE(conversations.ok()) << conversations.error().message;
    EXPECT_EQ(conversations->size(), 1u);
}

}  // namespace

TEST(ChatDbOpen, FilesArePrivateAndWalIsOn)
{
    TestDir t;
    const fs::path dir = t.path() / "nested";
    const mode_t old = ::umask(022);
    {
        auto db = ChatDatabase::open(dir.string());
        ASSERT_TRUE(db.ok()) << db.error().message;
        auto c = db->createConversation("x");
        ASSERT_TRUE(c.ok()) << c.error().message;
        ASSERT_TRUE(db->appendMessage(*c, Role::User, "private").ok());
        struct stat st {};
        ASSERT_EQ(::stat((dir / "spillway.db").c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        ASSERT_EQ(::stat((dir / "spillway.db-wal").c_str(), &st), 0);  // WAL mode: the log exists
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        ASSERT_EQ(::stat((dir / "spillway.db-shm").c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        ASSERT_EQ(::stat(dir.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0700u);
    }
    ::umask(old);
    EXPECT_EQ(rawQuery(dir / "spillway.db", "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(rawQuery(dir / "spillway.db", "PRAGMA user_version"),
              std::to_string(kChatSchemaVersion));
}

TEST(ChatDbOpen, MigratesARealVersion1File)
{
    TestDir t;
    const fs::path dir = t.path();
    fs::create_directories(dir);
    const fs::path file = dir / "spillway.db";
    // A version 1 database, built with the version 1 SQL, as an older Spillway left it.
    const std::string v1 = std::string(chatSchemaSteps().at(0)) + R"sql(
        PRAGMA user_version = 1;
        INSERT INTO models (id, path, format, architecture, added_ms)
            VALUES (1, '/m/a.gguf', 'gguf', 'llama', 5);
        INSERT INTO models (id, path, format, parent_id, added_ms)
            VALUES (2, '/m/a.spw', 'package', 1, 6);
        INSERT INTO conversations (id, title, created_ms, updated_ms, model_id)
            VALUES (1, 'Old chat', 10, 20, 1);
        INSERT INTO messages (id, conversation_id, role, content, created_ms)
            VALUES (1, 1, 'user', 'ancient question about volcanoes', 11);
        INSERT INTO messages (id, conversation_id, role, content, created_ms, model_id, model_name,
                              tokens_per_second, first_token_ms, placement_json)
            VALUES (2, 1, 'assistant', 'volcanoes erupt', 12, 1, 'a', 9.5, 200, '{"p":1}');
        INSERT INTO settings (key, value) VALUES ('theme', '"dark"');
        INSERT INTO benchmark_runs (model_id, created_ms, summary_json) VALUES (1, 30, '{}');
    )sql";
    ASSERT_EQ(rawQuery(file, v1), "");
    ASSERT_EQ(rawQuery(file, "PRAGMA user_version"), "1");
    ASSERT_NE(rawQuery(file, "SELECT count(*) FROM messages_fts").find("no such table"),
              std::string::npos);

    auto db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    EXPECT_TRUE(db->recoveredFrom().empty());

    // The data is kept.
    auto c = db->conversation(1);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->title, "Old chat");
    EXPECT_EQ(c->updatedMs, 20);
    EXPECT_EQ(c->modelId, 1);
    auto list = db->messages(1);
    ASSERT_TRUE(list.ok()) << list.error().message;
    ASSERT_EQ(list->size(), 2u);
    EXPECT_EQ((*list)[1].content, "volcanoes erupt");
    ASSERT_TRUE((*list)[1].generation.tokensPerSecond.has_value());
    EXPECT_DOUBLE_EQ(*(*list)[1].generation.tokensPerSecond, 9.5);
    EXPECT_EQ((*list)[1].generation.placementJson, R"({"p":1})");
    auto theme = db->setting("theme");
    ASSERT_TRUE(theme.ok()) << theme.error().message;
    EXPECT_EQ(*theme, R"("dark")");
    auto package = db->model(2);
    ASSERT_TRUE(package.ok()) << package.error().message;
    EXPECT_EQ(package->parentId, 1);
    auto runs = db->benchmarkRuns();
    ASSERT_TRUE(runs.ok()) << runs.error().message;
    EXPECT_EQ(runs->size(), 1u);

    // The new features work on the old rows: each message is version 1 of itself, the old
    // contents are indexed, and new versions can be added.
    auto vs = db->versions(2);
    ASSERT_TRUE(vs.ok()) << vs.error().message;
    ASSERT_EQ(vs->size(), 1u);
    EXPECT_TRUE((*vs)[0].current);
    EXPECT_EQ((*vs)[0].content, "volcanoes erupt");
    EXPECT_EQ((*vs)[0].generation.modelName, "a");
    EXPECT_EQ((*list)[1].currentVersionId, (*vs)[0].id);
    // Old replies have no reasoning (schema step 5), and a new one keeps its own.
    EXPECT_EQ((*list)[1].generation.reasoning, "");
    EXPECT_FALSE((*list)[1].generation.reasoningMs);
    EXPECT_EQ(rawQuery(file, "PRAGMA user_version"), std::to_string(kChatSchemaVersion));
    auto hits = db->search("volcano");
    ASSERT_TRUE(hits.ok()) << hits.error().message;
    EXPECT_EQ(hits->size(), 2u);
    ASSERT_TRUE(db->addVersion(2, VersionKind::Regeneration, "lava flows").ok());
    // The replaced words now match the earlier version only (the index of versions is built
    // from the migrated rows too).
    auto volcano = db->search("volcano");
    ASSERT_TRUE(volcano.ok()) << volcano.error().message;
    ASSERT_EQ(volcano->size(), 2u);
    EXPECT_EQ((*volcano)[0].version, 0);
    EXPECT_EQ((*volcano)[1].version, 1);
    auto lava = db->search("lava");
    ASSERT_TRUE(lava.ok()) << lava.error().message;
    EXPECT_EQ(lava->size(), 1u);
    auto m = db->appendMessage(1, Role::User, "new question");
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_GT(*m, 2);
    auto versionsAfter = db->versions(2);
    ASSERT_TRUE(versionsAfter.ok()) << versionsAfter.error().message;
    EXPECT_EQ(versionsAfter->size(), 2u);
    // A later open finds version 2 and changes nothing.
    db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto messagesAfter = db->messages(1);
    ASSERT_TRUE(messagesAfter.ok()) << messagesAfter.error().message;
    EXPECT_EQ(messagesAfter->size(), 3u);
    EXPECT_EQ(rawQuery(file, "PRAGMA user_version"), std::to_string(kChatSchemaVersion));
}

TEST(ChatDbOpen, Version3ModelsTableIsRebuiltWithItsLinksKept)
{
    // Version 4 rebuilds the models table (a new format, 'endpoint'): every row that refers to a
    // model keeps its link, and deleting a model afterwards still clears them (foreign keys on).
    TestDir t;
    const fs::path dir = t.path();
    fs::create_directories(dir);
    const fs::path file = dir / "spillway.db";
    std::string v3;
    for (size_t step = 0; step < 3; ++step) v3 += chatSchemaSteps().at(step);
    v3 += R"sql(
        PRAGMA user_version = 3;
        INSERT INTO models (id, path, format, architecture, size_bytes, added_ms)
            VALUES (1, '/m/a.gguf', 'gguf', 'llama', 1234, 5);
        INSERT INTO models (id, path, format, parent_id, quality_json, added_ms)
            VALUES (2, '/m/a-fast', 'package', 1, '{"top1":0.99}', 6);
        INSERT INTO conversations (id, title, created_ms, updated_ms, model_id)
            VALUES (1, 'Chat', 10, 20, 2);
        INSERT INTO messages (id, conversation_id, role, content, created_ms, model_id, model_name)
            VALUES (1, 1, 'assistant', 'hello', 11, 2, 'a-fast');
        INSERT INTO message_versions (message_id, number, kind, content, created_ms, model_id)
            VALUES (1, 1, 'original', 'hello', 11, 2);
        UPDATE messages SET current_version_id = 1;
        INSERT INTO benchmark_runs (model_id, created_ms, summary_json) VALUES (1, 30, '{}');
    )sql";
    ASSERT_EQ(rawQuery(file, v3), "");
    ASSERT_NE(rawQuery(file, "INSERT INTO models (path, format, added_ms) VALUES ('http://h/v1#m', 'endpoint', 1)")
                  .find("CHECK constraint failed"),
              std::string::npos);

    auto db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    EXPECT_EQ(rawQuery(file, "PRAGMA user_version"), std::to_string(kChatSchemaVersion));
    auto package = db->model(2);
    ASSERT_TRUE(package.ok()) << package.error().message;
    EXPECT_EQ(package->parentId, 1);
    EXPECT_EQ(package->qualityJson, R"({"top1":0.99})");
    auto source = db->model(1);
    ASSERT_TRUE(source.ok()) << source.error().message;
    EXPECT_EQ(source->sizeBytes, 1234);
    auto c = db->conversation(1);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->modelId, 2);
    EXPECT_EQ(rawQuery(file, "SELECT model_id FROM messages WHERE id = 1"), "2");
    EXPECT_EQ(rawQuery(file, "SELECT model_id FROM message_versions WHERE message_id = 1"), "2");
    EXPECT_EQ(rawQuery(file, "SELECT model_id FROM benchmark_runs"), "1");
    EXPECT_EQ(rawQuery(file, "SELECT count(*) FROM pragma_foreign_key_check"), "0");

    // The new format, and the foreign keys' actions after the rebuild.
    ModelRecord endpoint;
    endpoint.path = "http://127.0.0.1:8080/v1#stories260K";
    endpoint.format = ModelFormat::Endpoint;
    endpoint.architecture = "remote";
    auto id = db->addModel(endpoint);
    ASSERT_TRUE(id.ok()) << id.error().message;
    auto back = db->model(*id);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->format, ModelFormat::Endpoint);
    ASSERT_TRUE(db->removeModel(2).ok());
    c = db->conversation(1);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_FALSE(c->modelId.has_value());
    EXPECT_EQ(rawQuery(file, "SELECT model_id IS NULL FROM message_versions WHERE message_id = 1"), "1");
}

TEST(ChatDbOpen, NewerSchemaIsRefusedAndLeftAlone)
{
    TestDir t;
    const fs::path dir = t.path();
    {
        auto db = ChatDatabase::open(dir.string());
        ASSERT_TRUE(db.ok()) << db.error().message;
        ASSERT_TRUE(db->createConversation("from the future").ok());
    }
    const fs::path file = dir / "spillway.db";
    ASSERT_EQ(rawQuery(file, "PRAGMA user_version = 99"), "");
    const std::string before = readBytes(file);

    auto db = ChatDatabase::open(dir.string());
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.error().code, ErrorCode::Sql);
    EXPECT_NE(db.error().message.find("schema version 99"), std::string::npos)
        << db.error().message;
    EXPECT_NE(db.error().message.find("newer"), std::string::npos) << db.error().message;
    EXPECT_TRUE(corruptCopies(dir).empty());
    EXPECT_EQ(readBytes(file), before);
    EXPECT_EQ(rawQuery(file, "PRAGMA user_version"), "99");
}

TEST(ChatDbOpen, RandomBytesAreMovedAside)
{
    TestDir t;
    const fs::path dir = t.path();
    fs::create_directories(dir);
    std::mt19937 rng(7);
    std::string bytes(64 * 1024, '\0');
    for (auto& b : bytes) b = char(rng());
    writeBytes(dir / "spillway.db", bytes);
    writeBytes(dir / "spillway.db-wal", "stale wal");
    ASSERT_NO_FATAL_FAILURE(expectMovedAside(dir, bytes, "not an SQLite database"));
    // The -wal file went along, beside the moved file (the two stay usable together).
    auto copies = corruptCopies(dir);
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(readBytes(copies[0].string() + "-wal"), "stale wal");
}

TEST(ChatDbOpen, TextFileIsMovedAside)
{
    TestDir t;
    const fs::path dir = t.path();
    fs::create_directories(dir);
    const std::string text = "These are my notes, not a database.\n";
    writeBytes(dir / "spillway.db", text);
    expectMovedAside(dir, text, "SQLite");
}

TEST(ChatDbOpen, TruncatedDatabaseIsMovedAside)
{
    TestDir t;
    const fs::path dir = t.path();
    ASSERT_NO_FATAL_FAILURE(makeRealDatabase(dir, 300));
    const fs::path file = dir / "spillway.db";
    ASSERT_FALSE(fs::exists(dir / "spillway.db-wal"));  // checkpointed at close
    const auto size = fs::file_size(file);
    ASSERT_GT(size, 200'000u);
    fs::resize_file(file, size / 2);
    expectMovedAside(dir, readBytes(file), "truncated");
}

TEST(ChatDbOpen, DamagedPagesAreFoundByTheIntegrityCheck)
{
    TestDir t;
    const fs::path dir = t.path();
    ASSERT_NO_FATAL_FAILURE(makeRealDatabase(dir, 300));
    const fs::path file = dir / "spillway.db";
    std::string bytes = readBytes(file);
    // Garbage over pages 3..20: the header stays valid, the b-trees do not.
    std::mt19937 rng(11);
    for (size_t i = 2 * 4096; i < 20 * 4096 && i < bytes.size(); ++i) bytes[i] = char(rng());
    writeBytes(file, bytes);
    auto db = ChatDatabase::open(dir.string());
    ASSERT_TRUE(db.ok()) << db.error().message;
    EXPECT_FALSE(db->recoveredFrom().empty());
    EXPECT_FALSE(db->recoveryReason().empty());
    EXPECT_EQ(corruptCopies(dir).size(), 1u);
    auto conversations = db->conversations();
    ASSERT_TRUE(conversations.ok()) << conversations.error().message;
    EXPECT_TRUE(conversations->empty());
}

// ---- crash safety -------------------------------------------------------------------------------

namespace {

struct HelperRun {
    std::vector<int64_t> ids;  // every complete line the helper printed
    int signal = 0;            // the signal that ended it, 0 if it exited
    int exitCode = 0;
};

HelperRun runAndKill(const fs::path& dir, int killAfterMs)
{
    HelperRun run;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return run;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    const std::string helper = CHAT_DB_CRASH_HELPER;
    const std::string folder = dir.string();
    char* argv[] = {const_cast<char*>(helper.c_str()), const_cast<char*>(folder.c_str()), nullptr};
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, helper.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        ADD_FAILURE() << "posix_spawn " << helper << ": " << rc;
        return run;
    }

    std::string out;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(killAfterMs);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) break;
        pollfd p{fds[0], POLLIN, 0};
        if (::poll(&p, 1, int(left)) > 0) {
            const ssize_t n = ::read(fds[0], buf, sizeof buf);
            if (n <= 0) break;  // the helper ended by itself (an error: reported below)
            out.append(buf, size_t(n));
        }
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // What it wrote before the kill is still in the pipe.
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    ::close(fds[0]);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
    if (WIFEXITED(status)) run.exitCode = WEXITSTATUS(status);

    size_t start = 0;
    for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
        run.ids.push_back(std::stoll(out.substr(start, nl - start)));
    }
    return run;  // a last line without its newline was cut by the kill: not a promise
}

}  // namespace

TEST(ChatDbOpen, SigkillNeverLosesACommittedMessage)
{
    TestDir t;
    const fs::path dir = t.path();
    const unsigned seed = unsigned(std::random_device{}());
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> delayMs(5, 50);
    // Kills land anywhere from the helper's start (open, migration) to mid-stream; go on until
    // at least kWritingKills of them hit a writer that had committed messages (on a loaded
    // machine the start alone can take longer than 50 ms), at most kMaxRounds rounds.
    constexpr int kWritingKills = 20;
    constexpr int kMaxRounds = 80;
    std::set<int64_t> promised;
    int runsThatWrote = 0;
    int round = 0;
    for (; round < kMaxRounds && runsThatWrote < kWritingKills; ++round) {
        // Some rounds let the writer get going, some kill it while it opens or migrates.
        const int delay = delayMs(rng);
        HelperRun run = runAndKill(dir, delay);
        ASSERT_EQ(run.signal, SIGKILL)
            << "round " << round << ": the helper exited by itself with " << run.exitCode;
        if (!run.ids.empty()) ++runsThatWrote;
        promised.insert(run.ids.begin(), run.ids.end());

        // The file as the kill left it (WAL and all) must be intact.
        const fs::path file = dir / "spillway.db";
        if (run.ids.empty() && !fs::exists(file)) continue;  // killed before it made the file
        ASSERT_EQ(rawQuery(file, "PRAGMA integrity_check"), "ok") << "round " << round;
        if (!run.ids.empty()) {
            ASSERT_EQ(
                rawQuery(file,
                         "INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')"),
                "")
                << "round " << round;
        }
        auto db = ChatDatabase::open(dir.string());
        ASSERT_TRUE(db.ok()) << "round " << round << ": " << db.error().message;
        ASSERT_TRUE(db->recoveredFrom().empty())
            << "round " << round << ": " << db->recoveryReason();
        for (int64_t id : promised) {
            auto m = db->message(id);
            ASSERT_TRUE(m.ok()) << "round " << round << " (killed after " << delay
                                << " ms): message " << id << " was committed and is gone";
        }
    }
    // The test means something only if the writer was killed mid-stream many times.
    EXPECT_GE(runsThatWrote, kWritingKills);
    EXPECT_GT(promised.size(), 100u);
    std::printf("%d kills, %d while writing, %zu committed messages checked\n", round,
                runsThatWrote, promised.size());
}
