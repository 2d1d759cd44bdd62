// The chat database's API: conversations and messages (with the cascades), message versions,
// settings, the model catalog with packages and their parent, benchmark runs, full-text
// search following inserts, edits and deletes, and the Markdown / JSON export with a JSON
// import round trip.

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "../common/temp_dir.h"
#include "storage/chat_db.h"

using namespace spillway;
using namespace spillway::storage;
namespace fs = std::filesystem;

namespace {

class ChatDbTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_FALSE(m_tmp.path().empty());
        m_dir = fs::path(m_tmp / "db");
        auto db = ChatDatabase::open(m_dir.string());
        ASSERT_TRUE(db.ok()) << db.error().message;
        m_db = std::make_unique<ChatDatabase>(std::move(db).value());
    }
    void TearDown() override { m_db.reset(); }
    ChatDatabase& db() { return *m_db; }

    testing_support::TempDir m_tmp{"spillway-chatdb"};
    fs::path m_dir;
    std::unique_ptr<ChatDatabase> m_db;
};

template <class T>
T must(Result<T> r)
{
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) throw std::runtime_error(r.error().message);
    return std::move(r).value();
}

void must(const Status& s) { ASSERT_TRUE(s.ok()) << s.error().message; }

}  // namespace

TEST_F(ChatDbTest, ConversationsAndMessagesWithCascade)
{
    EXPECT_TRUE(db().recoveredFrom().empty());
    const int64_t a = must(db().createConversation("First"));
    const int64_t b = must(db().createConversation("Second"));
    EXPECT_NE(a, b);

    Generation g;
    g.modelName = "tiny.gguf";
    g.tokensPerSecond = 12.5;
    g.firstTokenMs = 340;
    g.placementJson = R"({"device":1024})";
    const int64_t m1 = must(db().appendMessage(a, Role::User, "hello there"));
    const int64_t m2 = must(db().appendMessage(a, Role::Assistant, "general kenobi", g));
    must(db().appendMessage(b, Role::System, "you are terse"));

    auto list = must(db().messages(a));
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].id, m1);
    EXPECT_EQ(list[0].role, Role::User);
    EXPECT_EQ(list[0].content, "hello there");
    EXPECT_FALSE(list[0].generation.tokensPerSecond.has_value());
    EXPECT_EQ(list[1].id, m2);
    EXPECT_EQ(list[1].generation.modelName, "tiny.gguf");
    ASSERT_TRUE(list[1].generation.tokensPerSecond.has_value());
    ASSERT_TRUE(list[1].generation.firstTokenMs.has_value());
    EXPECT_DOUBLE_EQ(*list[1].generation.tokensPerSecond, 12.5);
    EXPECT_DOUBLE_EQ(*list[1].generation.firstTokenMs, 340);
    EXPECT_EQ(list[1].generation.placementJson, R"({"device":1024})");
    EXPECT_EQ(list[1].versionCount, 1);

    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // times are in ms
    must(db().renameConversation(a, "Renamed"));
    EXPECT_EQ(must(db().conversation(a)).title, "Renamed");
    auto all = must(db().conversations());
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].id, a);  // most recently updated first

    // Unknown ids are errors, not silent no-ops.
    EXPECT_FALSE(db().appendMessage(999, Role::User, "x").ok());
    EXPECT_FALSE(db().conversation(999).ok());
    EXPECT_FALSE(db().renameConversation(999, "x").ok());

    must(db().deleteMessage(m1));
    EXPECT_EQ(must(db().messages(a)).size(), 1u);

    // Deleting a conversation takes its messages and their versions with it.
    must(db().deleteConversation(a));
    EXPECT_FALSE(db().message(m2).ok());
    EXPECT_FALSE(db().versions(m2).ok());
    EXPECT_EQ(must(db().messages(b)).size(), 1u);
    EXPECT_EQ(must(db().conversations()).size(), 1u);
}

TEST_F(ChatDbTest, VersionsKeepEditsAndRegenerations)
{
    const int64_t c = must(db().createConversation("v"));
    const int64_t m = must(db().appendMessage(c, Role::Assistant, "first answer"));
    Generation g;
    g.modelName = "other.gguf";
    g.tokensPerSecond = 20;
    const int64_t v2 = must(db().addVersion(m, VersionKind::Regeneration, "second answer", g));
    const int64_t v3 = must(db().addVersion(m, VersionKind::Edit, "edited answer"));

    auto msg = must(db().message(m));
    EXPECT_EQ(msg.content, "edited answer");
    EXPECT_EQ(msg.currentVersionId, v3);
    EXPECT_EQ(msg.versionCount, 3);

    auto vs = must(db().versions(m));
    ASSERT_EQ(vs.size(), 3u);
    EXPECT_EQ(vs[0].number, 1);
    EXPECT_EQ(vs[0].kind, VersionKind::Original);
    EXPECT_EQ(vs[0].content, "first answer");
    EXPECT_EQ(vs[1].kind, VersionKind::Regeneration);
    EXPECT_EQ(vs[1].generation.modelName, "other.gguf");
    EXPECT_EQ(vs[2].kind, VersionKind::Edit);
    EXPECT_FALSE(vs[0].current);
    EXPECT_TRUE(vs[2].current);

    // Switching back shows that version's content and figures.
    must(db().setCurrentVersion(m, v2));
    msg = must(db().message(m));
    EXPECT_EQ(msg.content, "second answer");
    EXPECT_EQ(msg.generation.modelName, "other.gguf");
    ASSERT_TRUE(msg.generation.tokensPerSecond.has_value());
    EXPECT_DOUBLE_EQ(*msg.generation.tokensPerSecond, 20);
    EXPECT_EQ(msg.currentVersionId, v2);

    // A version of another message is refused and changes nothing.
    const int64_t other = must(db().appendMessage(c, Role::User, "other"));
    const int64_t otherVersion = must(db().message(other)).currentVersionId;
    EXPECT_FALSE(db().setCurrentVersion(m, otherVersion).ok());
    EXPECT_EQ(must(db().message(m)).content, "second answer");
    EXPECT_FALSE(db().addVersion(12345, VersionKind::Edit, "x").ok());
}

TEST_F(ChatDbTest, Settings)
{
    EXPECT_FALSE(must(db().setting("theme")).has_value());
    must(db().setSetting("theme", R"("dark")"));
    must(db().setSetting("threads", "8"));
    EXPECT_EQ(must(db().setting("theme")), R"("dark")");
    must(db().setSetting("theme", R"("light")"));
    EXPECT_EQ(must(db().setting("theme")), R"("light")");
    must(db().removeSetting("theme"));
    EXPECT_FALSE(must(db().setting("theme")).has_value());
    EXPECT_EQ(must(db().setting("threads")), "8");
}

TEST_F(ChatDbTest, CatalogWithPackagesAndBenchmarkRuns)
{
    ModelRecord source;
    source.path = "/models/llama-7b.gguf";
    source.format = ModelFormat::Gguf;
    source.architecture = "llama";
    source.parameterCount = 6'738'415'616;
    source.sizeBytes = int64_t{13'478'104'576};
    source.checksum = "xxh3:0123456789abcdef";
    const int64_t sourceId = must(db().addModel(source));
    EXPECT_FALSE(db().addModel(source).ok());  // path already there

    ModelRecord package;
    package.path = "/models/llama-7b.spw";
    package.format = ModelFormat::Package;
    package.architecture = "llama";
    package.qualityJson = R"({"meanKl":0.012})";
    package.parentId = sourceId;
    const int64_t packageId = must(db().addModel(package));

    auto got = must(db().model(packageId));
    EXPECT_EQ(got.format, ModelFormat::Package);
    EXPECT_EQ(got.parentId, sourceId);
    EXPECT_EQ(got.qualityJson, R"({"meanKl":0.012})");
    EXPECT_TRUE(got.placementJson.empty());
    EXPECT_GT(got.addedMs, 0);
    auto packages = must(db().packagesOf(sourceId));
    ASSERT_EQ(packages.size(), 1u);
    EXPECT_EQ(packages[0].id, packageId);

    must(db().setModelPlacement(sourceId, R"({"tiers":[]})"));
    auto src = must(db().model(sourceId));
    EXPECT_EQ(src.placementJson, R"({"tiers":[]})");
    EXPECT_EQ(src.parameterCount, 6'738'415'616);
    src.architecture = "llama2";
    must(db().updateModel(src));
    const auto byPath = must(db().modelByPath(source.path));
    ASSERT_TRUE(byPath.has_value());
    EXPECT_EQ(byPath->architecture, "llama2");
    EXPECT_FALSE(must(db().modelByPath("/nowhere")).has_value());

    BenchmarkRun run;
    run.modelId = sourceId;
    run.summaryJson = R"({"tokensPerSecond":4.2})";
    run.tracePath = "/tmp/trace.json";
    const int64_t runId = must(db().addBenchmarkRun(run));
    run.modelId = packageId;
    must(db().addBenchmarkRun(run));
    EXPECT_EQ(must(db().benchmarkRuns()).size(), 2u);
    auto forSource = must(db().benchmarkRuns(sourceId));
    ASSERT_EQ(forSource.size(), 1u);
    EXPECT_EQ(forSource[0].id, runId);
    EXPECT_EQ(forSource[0].tracePath, "/tmp/trace.json");

    // A conversation and a message using the source model.
    const int64_t c = must(db().createConversation("uses source", sourceId));
    Generation g;
    g.modelId = sourceId;
    g.modelName = "llama-7b";
    const int64_t m = must(db().appendMessage(c, Role::Assistant, "hi", g));

    // Removing the source keeps the package (parent cleared), the runs and the chat.
    must(db().removeModel(sourceId));
    EXPECT_FALSE(must(db().model(packageId)).parentId.has_value());
    EXPECT_FALSE(must(db().conversation(c)).modelId.has_value());
    auto msg = must(db().message(m));
    EXPECT_FALSE(msg.generation.modelId.has_value());
    EXPECT_EQ(msg.generation.modelName, "llama-7b");
    EXPECT_EQ(must(db().benchmarkRuns()).size(), 2u);
    must(db().deleteBenchmarkRun(runId));
    EXPECT_EQ(must(db().benchmarkRuns()).size(), 1u);
    EXPECT_FALSE(db().removeModel(sourceId).ok());
}

TEST_F(ChatDbTest, SearchFollowsInsertsEditsAndDeletes)
{
    const int64_t c1 = must(db().createConversation("Cooking"));
    const int64_t c2 = must(db().createConversation("Travel"));
    const int64_t m1 = must(db().appendMessage(c1, Role::User, "How long should I boil an egg?"));
    const int64_t m2 = must(db().appendMessage(c1, Role::Assistant, "Boil it for seven minutes."));
    const int64_t m3 =
        must(db().appendMessage(c2, Role::User, "Best time to visit Kyoto? Café tips too."));

    auto hits = must(db().search("boil"));
    ASSERT_EQ(hits.size(), 2u);
    for (const auto& h : hits) {
        EXPECT_EQ(h.conversationId, c1);
        EXPECT_EQ(h.conversationTitle, "Cooking");
        std::string lower = h.snippet;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        EXPECT_NE(lower.find("[boil]"), std::string::npos) << h.snippet;
    }

    // Case, accents and prefixes; every word must occur.
    hits = must(db().search("KYOTO cafe"));
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].messageId, m3);
    EXPECT_EQ(hits[0].conversationId, c2);
    EXPECT_EQ(must(db().search("kyo")).size(), 1u);
    EXPECT_TRUE(must(db().search("kyoto boil")).empty());

    // FTS syntax is taken literally, never an error.
    EXPECT_TRUE(db().search("\"unbalanced AND (").ok());
    EXPECT_TRUE(db().search("NEAR(a b) OR content:x *").ok());
    EXPECT_TRUE(must(db().search("   ")).empty());

    // An edit re-indexes the message: its new words are current, its old ones are found in the
    // earlier version (after every current match), named by its number.
    must(db().addVersion(m2, VersionKind::Edit, "Simmer it for seven minutes."));
    hits = must(db().search("boil"));
    ASSERT_EQ(hits.size(), 2u);
    EXPECT_EQ(hits[0].messageId, m1);
    EXPECT_EQ(hits[0].version, 0);
    EXPECT_EQ(hits[1].messageId, m2);
    EXPECT_EQ(hits[1].version, 1);
    EXPECT_NE(hits[1].snippet.find("[Boil]"), std::string::npos) << hits[1].snippet;
    hits = must(db().search("simmer"));
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].version, 0);
    // Words of both versions: the message once, as it reads now.
    hits = must(db().search("seven"));
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].version, 0);
    // A second edit back to boiling: the current text matches, the message comes once.
    must(db().addVersion(m2, VersionKind::Edit, "Boil it for eight minutes."));
    hits = must(db().search("boil"));
    ASSERT_EQ(hits.size(), 2u);
    EXPECT_EQ(hits[0].version + hits[1].version, 0);
    EXPECT_EQ(must(db().search("simmer"))[0].version, 2);

    // Deletes, direct and by cascade, leave both indexes.
    must(db().deleteMessage(m1));
    EXPECT_EQ(must(db().search("boil")).size(), 1u);
    must(db().deleteConversation(c1));
    EXPECT_TRUE(must(db().search("boil")).empty());
    EXPECT_TRUE(must(db().search("simmer")).empty());
    EXPECT_EQ(must(db().search("kyoto")).size(), 1u);

    SearchOptions opts;
    opts.highlightOpen = "<b>";
    opts.highlightClose = "</b>";
    hits = must(db().search("kyoto", opts));
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_NE(hits[0].snippet.find("<b>Kyoto</b>"), std::string::npos) << hits[0].snippet;
}

TEST_F(ChatDbTest, ExportMarkdownAndJsonRoundTrip)
{
    ModelRecord model;
    model.path = "/models/tiny.gguf";
    const int64_t modelId = must(db().addModel(model));
    const int64_t c = must(db().createConversation("Round \"trip\" ✓", modelId));
    must(db().appendMessage(c, Role::System, "Be brief."));
    must(db().appendMessage(c, Role::User, "Line one\nLine two with `code`"));
    Generation g;
    g.modelId = modelId;
    g.modelName = "tiny";
    g.tokensPerSecond = 31.25;
    g.firstTokenMs = 120;
    g.placementJson = R"({"layers":[{"tier":"device","alpha":0.5}]})";
    const int64_t answer = must(db().appendMessage(c, Role::Assistant, "Answer one", g));
    const int64_t v2 = must(db().addVersion(answer, VersionKind::Regeneration, "Answer two", g));
    must(db().addVersion(answer, VersionKind::Edit, "Answer three"));
    must(db().setCurrentVersion(answer, v2));

    const std::string md = must(db().exportMarkdown(c));
    EXPECT_NE(md.find("# Round \"trip\" ✓"), std::string::npos) << md;
    EXPECT_NE(md.find("## User"), std::string::npos);
    EXPECT_NE(md.find("Line one\nLine two with `code`"), std::string::npos);
    EXPECT_NE(md.find("## Assistant (tiny, 31.2 tokens/s)"), std::string::npos) << md;
    EXPECT_NE(md.find("Answer two"), std::string::npos);
    EXPECT_EQ(md.find("Answer three"), std::string::npos);  // current versions only

    const std::string json = must(db().exportJson(c));
    const int64_t copy = must(db().importJson(json));
    EXPECT_NE(copy, c);

    auto orig = must(db().conversation(c));
    auto back = must(db().conversation(copy));
    EXPECT_EQ(back.title, orig.title);
    EXPECT_EQ(back.createdMs, orig.createdMs);
    EXPECT_EQ(back.updatedMs, orig.updatedMs);
    EXPECT_EQ(back.modelId, modelId);  // resolved through the catalog path
    auto a = must(db().messages(c));
    auto b = must(db().messages(copy));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].role, b[i].role);
        EXPECT_EQ(a[i].content, b[i].content);
        EXPECT_EQ(a[i].createdMs, b[i].createdMs);
        EXPECT_EQ(a[i].versionCount, b[i].versionCount);
        auto va = must(db().versions(a[i].id));
        auto vb = must(db().versions(b[i].id));
        ASSERT_EQ(va.size(), vb.size());
        for (size_t k = 0; k < va.size(); ++k) {
            EXPECT_EQ(va[k].kind, vb[k].kind);
            EXPECT_EQ(va[k].content, vb[k].content);
            EXPECT_EQ(va[k].createdMs, vb[k].createdMs);
            EXPECT_EQ(va[k].current, vb[k].current);
            EXPECT_EQ(va[k].generation.modelId, vb[k].generation.modelId);
            EXPECT_EQ(va[k].generation.modelName, vb[k].generation.modelName);
            EXPECT_EQ(va[k].generation.tokensPerSecond, vb[k].generation.tokensPerSecond);
            EXPECT_EQ(va[k].generation.firstTokenMs, vb[k].generation.firstTokenMs);
            if (va[k].generation.placementJson.empty()) {
                EXPECT_TRUE(vb[k].generation.placementJson.empty());
            } else {
                EXPECT_EQ(nlohmann::json::parse(va[k].generation.placementJson),
                          nlohmann::json::parse(vb[k].generation.placementJson));
            }
        }
    }
    // Exporting the copy gives the same document.
    EXPECT_EQ(must(db().exportJson(copy)), json);
    // The imported text is searchable.
    EXPECT_EQ(must(db().search("answer two")).size(), 2u);
}

TEST_F(ChatDbTest, ImportRejectsBadDocumentsAndLeavesNothing)
{
    const auto before = must(db().conversations()).size();
    for (const char* bad : {
             "not json",
             "[]",
             R"({"format":"other","version":1})",
             R"({"format":"spillway-conversation","version":9,"title":"t","created":1,"updated":1,
                 "messages":[]})",
             R"({"format":"spillway-conversation","version":1,"title":"t","created":1,"updated":1,
                 "messages":[{"role":"robot","created":1,"current":0,"versions":[]}]})",
             R"({"format":"spillway-conversation","version":1,"title":"t","created":1,"updated":1,
                 "messages":[{"role":"user","created":1,"current":3,
                              "versions":[{"kind":"original","content":"x","created":1}]}]})",
             R"({"format":"spillway-conversation","version":1,"title":"t","created":1,"updated":1,
                 "messages":[{"role":"user","created":1,"current":0,
                              "versions":[{"kind":"original","content":"ok","created":1}]},
                             {"role":"user","created":1,"current":0,
                              "versions":[{"kind":"original","content":7,"created":1}]}]})",
         }) {
        auto r = db().importJson(bad);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(r.error().message.find("conversation JSON"), std::string::npos)
            << r.error().message;
    }
    // The last one failed on its second message: the first was rolled back with it.
    EXPECT_EQ(must(db().conversations()).size(), before);
    EXPECT_TRUE(must(db().search("ok")).empty());
}

// A chat as a plain list of messages (spillway-cli chat's /save): imported with its messages, its
// leading system message handed back as the system prompt, titled by its first prompt cut where a
// character begins (a long prompt of two-byte letters), and a role it cannot store refused.
TEST_F(ChatDbTest, ImportsAPlainMessageList)
{
    std::string prompt = "a";
    for (int i = 0; i < 40; ++i) prompt += "\xc3\xa9";  // "a" and "é" x 40: 81 bytes, byte 60 inside an "é"
    const std::string list = R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
                             R"({"role":"user","content":")" + prompt + R"("},{"role":"assistant","content":"Yes."}]})";
    std::string system;
    const int64_t id = must(db().importJson(list, &system));
    EXPECT_EQ(system, "Be brief.");
    const auto title = must(db().conversation(id)).title;
    EXPECT_EQ(title, prompt.substr(0, 59));  // "a" and 29 whole letters, not half of the 30th
    const auto messages = must(db().messages(id));
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].content, prompt);
    EXPECT_EQ(messages[1].content, "Yes.");
    EXPECT_FALSE(db().importJson(R"({"messages":[{"role":"tool","content":"x"}]})").ok());
}

TEST_F(ChatDbTest, TransactionsCommitOrRollBackTogether)
{
    const int64_t c = must(db().createConversation("tx"));
    must(db().transaction([&]() -> Status {
        for (int i = 0; i < 10; ++i) {
            auto id = db().appendMessage(c, Role::User, "batched " + std::to_string(i));
            if (!id) return id.error();
        }
        return {};
    }));
    EXPECT_EQ(must(db().messages(c)).size(), 10u);

    auto failed = db().transaction([&]() -> Status {
        auto id = db().appendMessage(c, Role::User, "rolled back");
        if (!id) return id.error();
        return makeError(ErrorCode::Cancelled, "stop");
    });
    EXPECT_FALSE(failed.ok());
    EXPECT_EQ(must(db().messages(c)).size(), 10u);
    EXPECT_TRUE(must(db().search("rolled")).empty());
}

TEST_F(ChatDbTest, MovedDatabaseStillWorks)
{
    const int64_t c = must(db().createConversation("moved"));
    ChatDatabase moved = std::move(*m_db);
    must(moved.appendMessage(c, Role::User, "after the move"));
    EXPECT_EQ(must(moved.messages(c)).size(), 1u);
    EXPECT_EQ(moved.path(), (m_dir / "spillway.db").string());
}

// A thinking model's reasoning is stored apart from its answer, in each version (a regenerated
// reply has its own), follows the current version, and travels in both exports.
TEST_F(ChatDbTest, ReasoningIsKeptApartAndExported)
{
    const int64_t c = must(db().createConversation("thinking"));
    must(db().appendMessage(c, Role::User, "What is 2+2?"));
    Generation g;
    g.reasoning = "Two and two.\nThat is four.";
    g.reasoningMs = 1500;
    const int64_t m = must(db().appendMessage(c, Role::Assistant, "4", g));
    Generation other;
    other.reasoning = "Quick sum.";
    const int64_t v2 = must(db().addVersion(m, VersionKind::Regeneration, "Four.", other));
    auto msg = must(db().message(m));
    EXPECT_EQ(msg.content, "Four.");
    EXPECT_EQ(msg.generation.reasoning, "Quick sum.");
    EXPECT_FALSE(msg.generation.reasoningMs);
    const auto vs = must(db().versions(m));
    ASSERT_EQ(vs.size(), 2u);
    must(db().setCurrentVersion(m, vs[0].id));
    msg = must(db().message(m));
    EXPECT_EQ(msg.content, "4");
    EXPECT_EQ(msg.generation.reasoning, "Two and two.\nThat is four.");
    EXPECT_EQ(msg.generation.reasoningMs, std::optional<double>(1500));
    EXPECT_NE(v2, vs[0].id);

    const std::string md = must(db().exportMarkdown(c));
    EXPECT_NE(md.find("> **Thought for 2 s**\n>\n> Two and two.\n> That is four.\n\n4\n"), std::string::npos) << md;
    const std::string json = must(db().exportJson(c));
    const int64_t copy = must(db().importJson(json));
    const auto copied = must(db().messages(copy));
    ASSERT_EQ(copied.size(), 2u);
    EXPECT_EQ(copied[1].generation.reasoning, "Two and two.\nThat is four.");
    EXPECT_EQ(copied[1].generation.reasoningMs, std::optional<double>(1500));
    EXPECT_EQ(must(db().versions(copied[1].id))[1].generation.reasoning, "Quick sum.");
    EXPECT_EQ(copied[0].generation.reasoning, "");  // the user's message has none
}
