// bench-chat-db: the chat database at 100,000 messages.
//   1. insert, one commit per message (as the app appends: message + its version + FTS row +
//      the conversation's updated time), synchronous=NORMAL;
//   2. the same messages in transactions of --batch messages;
//   3. a sample with synchronous=FULL (an fsync per commit: the price of power-loss durability);
//   4. FTS search latency (median, p95) over --queries one- and two-word queries, 20 hits each;
//   5. open time of the full database with and without the PRAGMA quick_check.
// Message texts are 10..120 words drawn (Zipf-like) from 5,000 made-up words, 100 messages per
// conversation. The ceiling to compare with is the disk: a per-message commit writes ~2-3 WAL
// pages (4 KiB each) without fsync, so its floor is the page cache's write speed, not the SSD.
//
//   bench-chat-db [--messages N] [--batch N] [--queries N] [--durable N] [--dir DIR] [--json FILE]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/chat_db.h"

using namespace spillway;
using namespace spillway::storage;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p)
{
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i =
        std::min(v.size() - 1, size_t(std::ceil(p * double(v.size()))) - (p > 0 ? 1 : 0));
    return v[i];
}

std::vector<std::string> makeVocabulary(size_t n, std::mt19937& rng)
{
    static const char* syllables[] = {"ka",  "lo",  "mi",  "ra",  "te",  "su",  "no",
                                      "vi",  "den", "par", "qua", "zen", "bor", "lin",
                                      "tor", "ex",  "am",  "ul",  "ip",  "os"};
    std::vector<std::string> words;
    std::uniform_int_distribution<int> syl(0, 19), len(2, 4);
    while (words.size() < n) {
        std::string w;
        for (int k = len(rng); k > 0; --k) w += syllables[syl(rng)];
        words.push_back(w + std::to_string(words.size() % 10));  // unique enough, searchable
    }
    return words;
}

struct Corpus {
    std::vector<std::string> vocabulary;
    std::vector<std::string> texts;
};

Corpus makeCorpus(size_t messages, std::mt19937& rng)
{
    Corpus c;
    c.vocabulary = makeVocabulary(5000, rng);
    // Zipf-like ranks: word i drawn with weight 1/(i+1).
    std::vector<double> weights(c.vocabulary.size());
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 / double(i + 1);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    std::uniform_int_distribution<int> words(10, 120);
    c.texts.reserve(messages);
    for (size_t m = 0; m < messages; ++m) {
        std::string t;
        for (int k = words(rng); k > 0; --k) {
            if (!t.empty()) t += ' ';
            t += c.vocabulary[pick(rng)];
        }
        c.texts.push_back(std::move(t));
    }
    return c;
}

[[noreturn]] void die(const std::string& what, const Error& e)
{
    std::fprintf(stderr, "bench-chat-db: %s: %s\n", what.c_str(), e.message.c_str());
    std::exit(1);
}

ChatDatabase openOrDie(const fs::path& dir, bool durable = false)
{
    fs::remove_all(dir);
    ChatDatabaseOptions options;
    options.durableAgainstPowerLoss = durable;
    auto db = ChatDatabase::open(dir.string(), options);
    if (!db) die("open " + dir.string(), db.error());
    return std::move(db).value();
}

struct InsertFigures {
    double seconds = 0;
    size_t messages = 0;
    std::vector<double> commitMs;  // per commit (a message, or a batch)
    double perSecond() const { return seconds > 0 ? double(messages) / seconds : 0; }
};

// Appends texts[0..count) in conversations of 100 messages, `batch` messages per transaction
// (1: one commit per message, no explicit transaction).
InsertFigures insertAll(ChatDatabase& db, const Corpus& corpus, size_t count, size_t batch)
{
    InsertFigures f;
    f.messages = count;
    int64_t conversation = 0;
    const auto t0 = Clock::now();
    for (size_t start = 0; start < count; start += batch) {
        const size_t end = std::min(count, start + batch);
        const auto c0 = Clock::now();
        auto body = [&]() -> Status {
            for (size_t i = start; i < end; ++i) {
                if (i % 100 == 0) {
                    auto c = db.createConversation("conversation " + std::to_string(i / 100));
                    if (!c) return c.error();
                    conversation = *c;
                }
                Generation g;
                const Role role = i % 2 ? Role::Assistant : Role::User;
                if (role == Role::Assistant) {
                    g.modelName = "bench.gguf";
                    g.tokensPerSecond = 12.5;
                    g.firstTokenMs = 250;
                }
                auto id = db.appendMessage(conversation, role, corpus.texts[i], g);
                if (!id) return id.error();
            }
            return {};
        };
        const Status st = batch == 1 ? body() : db.transaction(body);
        if (!st) die("insert", st.error());
        f.commitMs.push_back(secondsSince(c0) * 1e3);
    }
    f.seconds = secondsSince(t0);
    return f;
}

}  // namespace

int main(int argc, char** argv)
{
    size_t messages = 100'000, batch = 1000, queries = 200, durable = 2000;
    std::string jsonPath;
    fs::path dir = fs::temp_directory_path() / ("bench-chat-db-" + std::to_string(::getpid()));
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench-chat-db: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--messages") {
            messages = std::stoul(next());
        } else if (a == "--batch") {
            batch = std::max<size_t>(1, std::stoul(next()));
        } else if (a == "--queries") {
            queries = std::stoul(next());
        } else if (a == "--durable") {
            durable = std::stoul(next());
        } else if (a == "--dir") {
            dir = next();
        } else if (a == "--json") {
            jsonPath = next();
        } else {
            std::fprintf(stderr, "usage: bench-chat-db [--messages N] [--batch N] [--queries N] "
                                 "[--durable N] [--dir DIR] [--json FILE]\n");
            return 2;
        }
    }

    std::mt19937 rng(12345);
    const Corpus corpus = makeCorpus(messages, rng);
    std::printf("bench-chat-db: %zu messages (10-120 words each), 100 per conversation, in %s\n\n",
                messages, dir.c_str());

    // 1 and 2: per-message commits, then batched, each into a fresh database.
    ChatDatabase db = openOrDie(dir / "per-message");
    const InsertFigures single = insertAll(db, corpus, messages, 1);
    InsertFigures batched;
    {
        ChatDatabase other = openOrDie(dir / "batched");
        batched = insertAll(other, corpus, messages, batch);
    }
    // 3: synchronous=FULL sample.
    InsertFigures full;
    {
        ChatDatabase other = openOrDie(dir / "durable", true);
        full = insertAll(other, corpus, std::min(durable, messages), 1);
    }

    std::printf("%-38s %10s %12s %12s %12s\n", "insert", "messages", "msgs/s", "median ms",
                "p99 ms");
    auto row = [](const char* name, const InsertFigures& f) {
        std::printf("%-38s %10zu %12.0f %12.3f %12.3f\n", name, f.messages, f.perSecond(),
                    percentile(f.commitMs, 0.5), percentile(f.commitMs, 0.99));
    };
    row("one commit per message (NORMAL)", single);
    const std::string batchName = "batches of " + std::to_string(batch) + " (per batch)";
    row(batchName.c_str(), batched);
    row("one commit per message (FULL, fsync)", full);

    // 4: search latency on the per-message database.
    std::vector<double> searchMs;
    double hitsTotal = 0;
    std::uniform_int_distribution<size_t> common(0, 199), any(0, corpus.vocabulary.size() - 1);
    std::uniform_int_distribution<int> coin(0, 1);
    SearchOptions options;
    options.limit = 20;
    for (size_t q = 0; q < queries; ++q) {
        // Half one rarer word, half a common word with a rarer one.
        std::string query = corpus.vocabulary[any(rng)];
        if (coin(rng)) query = corpus.vocabulary[common(rng)] + " " + query;
        const auto t0 = Clock::now();
        auto hits = db.search(query, options);
        searchMs.push_back(secondsSince(t0) * 1e3);
        if (!hits) die("search", hits.error());
        hitsTotal += double(hits->size());
    }
    const double searchMedian = percentile(searchMs, 0.5), searchP95 = percentile(searchMs, 0.95);
    std::printf("\n%-38s %10s %12s %12s %12s\n", "search (limit 20)", "queries", "mean hits",
                "median ms", "p95 ms");
    std::printf("%-38s %10zu %12.1f %12.3f %12.3f\n", "1-2 words, prefix match, ranked", queries,
                queries ? hitsTotal / double(queries) : 0.0, searchMedian, searchP95);

    // 5: open time of the full database.
    const fs::path file = dir / "per-message" / kChatDbFileName;
    db = openOrDie(dir / "scratch");  // closes the per-message database (checkpoint)
    const uint64_t fileBytes = fs::file_size(file);
    auto timeOpen = [&](bool check) {
        ChatDatabaseOptions o;
        o.checkIntegrityAtOpen = check;
        const auto t0 = Clock::now();
        auto d = ChatDatabase::open((dir / "per-message").string(), o);
        if (!d) die("reopen", d.error());
        return secondsSince(t0) * 1e3;
    };
    const double openChecked = timeOpen(true);
    const double openPlain = timeOpen(false);
    std::printf("\n%-38s %10.1f MB\n", "database file", double(fileBytes) / 1e6);
    std::printf("%-38s %10.1f ms\n", "open with quick_check", openChecked);
    std::printf("%-38s %10.1f ms\n", "open without quick_check", openPlain);

    if (!jsonPath.empty()) {
        nlohmann::json out;
        out["messages"] = messages;
        auto figures = [](const InsertFigures& f) {
            return nlohmann::json{{"messages", f.messages},
                                  {"seconds", f.seconds},
                                  {"messagesPerSecond", f.perSecond()},
                                  {"commitMedianMs", percentile(f.commitMs, 0.5)},
                                  {"commitP99Ms", percentile(f.commitMs, 0.99)}};
        };
        out["insertPerMessage"] = figures(single);
        out["insertBatched"] = figures(batched);
        out["insertBatched"]["batch"] = batch;
        out["insertPerMessageFullSync"] = figures(full);
        out["search"] = {{"queries", queries},
                         {"limit", options.limit},
                         {"medianMs", searchMedian},
                         {"p95Ms", searchP95},
                         {"meanHits", queries ? hitsTotal / double(queries) : 0.0}};
        out["databaseBytes"] = fileBytes;
        out["openWithQuickCheckMs"] = openChecked;
        out["openWithoutQuickCheckMs"] = openPlain;
        std::ofstream f(jsonPath);
        f << out.dump(2) << "\n";
        if (!f) {
            std::fprintf(stderr, "cannot write %s\n", jsonPath.c_str());
            return 1;
        }
    }
    db = openOrDie(dir / "scratch2");
    fs::remove_all(dir);
    return 0;
}
