// The Hugging Face Hub client (server/hub.h) against a local server on 127.0.0.1 that answers in
// the Hub's API shapes from data made here: search, a repository's file tree with LFS oids,
// resolve with a redirect to a "CDN" path that honours Range. Full downloads, one interrupted at
// 40 % and resumed (bytes sent in all at most 1.1 x the file), a corrupted byte caught by the
// checksum, a gated repository (401) without and with a token, a 404, a full disk, pause and
// cancel. Label download.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "core/formats/gguf.h"
#include "core/model/llama_model.h"
#include "core/model/synthetic_model.h"
#include "core/plan/planner.h"
#include "server/hub.h"
#include "server/hub_verdict.h"
#include "storage/chat_db.h"
#include "../common/cli_run.h"
#include "../common/fixture_hub.h"
#include "../common/made_up_hardware.h"
#include "../common/same_tensors.h"
#include "../common/temp_dir.h"

using namespace spillway;
using namespace spillway::server;
namespace fs = std::filesystem;

namespace {

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A Hub in miniature: repository "owner/tiny-GGUF" (a 3 MiB model file and a README), and the
// gated "owner/gated-GGUF" that wants the bearer token "good-token".
class FakeHub {
public:
    FakeHub()
    {
        std::mt19937 rng(7);
        model.resize(size_t(3) << 20);
        for (char& c : model) c = char(rng());
        std::memcpy(model.data(), "GGUF", 4);
        server.Get("/api/models", [this](const httplib::Request& req, httplib::Response& res) {
            lastQuery = req.get_param_value("search") + "|" + req.get_param_value("filter");
            nlohmann::json j = nlohmann::json::array();
            j.push_back({{"id", "owner/tiny-GGUF"}, {"downloads", 1200}, {"likes", 3}});
            j.push_back({{"id", "owner/gated-GGUF"}, {"downloads", 40}, {"likes", 1}, {"gated", "manual"}});
            res.set_content(j.dump(), "application/json");
        });
        server.Get(R"(/api/models/(.+)/tree/main)", [this](const httplib::Request& req, httplib::Response& res) {
            if (!allowed(req, res)) return;
            if (!knownRepo(req.matches[1])) {
                res.status = 404;
                res.set_content(R"({"error":"Repository not found"})", "application/json");
                return;
            }
            nlohmann::json j = nlohmann::json::array();
            j.push_back({{"type", "directory"}, {"path", "sub"}});
            j.push_back({{"type", "file"}, {"path", "README.md"}, {"size", 12}});
            j.push_back({{"type", "file"},
                         {"path", "tiny-Q4_K_M.gguf"},
                         {"size", model.size()},
                         {"lfs", {{"oid", sha}, {"size", model.size()}}}});
            if (!big.empty())
                j.push_back({{"type", "file"},
                             {"path", "big-Q4_K.gguf"},
                             {"size", big.size()},
                             {"lfs", {{"oid", bigSha}, {"size", big.size()}}}});
            res.set_content(j.dump(), "application/json");
        });
        // resolve: a redirect to the content, as the Hub's to its CDN.
        server.Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            if (!allowed(req, res)) return;
            if (!knownRepo(req.matches[1]) || (req.matches[2] != "tiny-Q4_K_M.gguf" && req.matches[2] != "big-Q4_K.gguf")) {
                res.status = 404;
                return;
            }
            res.set_redirect("/cdn/" + std::string(req.matches[2]), 302);
        });
        server.Get(R"(/cdn/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            if (req.matches[1] == "big-Q4_K.gguf") {  // the header tests' file, bytes counted
                res.set_content_provider(big.size(), "application/octet-stream",
                                         [this](size_t offset, size_t length, httplib::DataSink& sink) {
                                             const size_t n = std::min<size_t>(length, 64 << 10);
                                             sent += n;
                                             return sink.write(big.data() + offset, n);
                                         });
                return;
            }
            res.set_content_provider(model.size(), "application/octet-stream",
                                     [this](size_t offset, size_t length, httplib::DataSink& sink) {
                                         const size_t n = std::min<size_t>(length, 64 << 10);
                                         if (dropAt && offset + n > dropAt) return false;  // the connection drops
                                         std::string chunk = model.substr(offset, n);
                                         if (corruptAt >= offset && corruptAt < offset + n) chunk[corruptAt - offset] ^= 1;
                                         sent += n;
                                         return sink.write(chunk.data(), chunk.size());
                                     });
        });
        port = server.bind_to_any_port("127.0.0.1");
        thread = std::thread([this] { server.listen_after_bind(); });
        while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ~FakeHub()
    {
        server.stop();
        thread.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

    std::string model, sha, lastQuery;
    std::string big, bigSha;    // a real GGUF for the header and CLI tests (listed once set)
    std::atomic<uint64_t> sent{0};
    size_t dropAt = 0;          // nonzero: the connection drops before this byte
    size_t corruptAt = SIZE_MAX;

private:
    static bool knownRepo(const std::string& repo) { return repo == "owner/tiny-GGUF" || repo == "owner/gated-GGUF"; }
    bool allowed(const httplib::Request& req, httplib::Response& res)
    {
        if (std::string(req.matches[1]) != "owner/gated-GGUF" || req.get_header_value("Authorization") == "Bearer good-token")
            return true;
        res.status = 401;
        res.set_content(R"({"error":"Access to model owner/gated-GGUF is restricted."})", "application/json");
        return false;
    }
    httplib::Server server;
    std::thread thread;
    int port = 0;
};

class Hub : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_FALSE(dir.path().empty());
        const std::string copy = dir.path() + "/expected.bin";
        std::ofstream(copy, std::ios::binary) << hub.model;
        auto sha = fileSha256(copy);
        ASSERT_TRUE(sha) << sha.error().message;
        hub.sha = *sha;
        fs::remove(copy);
        HubOptions o;
        o.endpoint = hub.url();
        o.token = "none";  // not the user's own token
        auto c = HubClient::open(o);
        ASSERT_TRUE(c) << c.error().message;
        client = std::move(*c);
    }
    HubFile modelFile()
    {
        auto files = client->files("owner/tiny-GGUF");
        EXPECT_TRUE(files) << files.error().message;
        for (const HubFile& f : *files)
            if (f.path == "tiny-Q4_K_M.gguf") return f;
        ADD_FAILURE() << "no model file in the tree";
        return {};
    }
    spillway::testing_support::TempDir dir;
    FakeHub hub;
    std::unique_ptr<HubClient> client;
};

}  // namespace

TEST(HubSha256, KnownAnswer)
{
    spillway::testing_support::TempDir dir;
    const std::string path = dir.path() + "/abc";
    std::ofstream(path) << "abc";
    auto sha = fileSha256(path);
    ASSERT_TRUE(sha) << sha.error().message;
    EXPECT_EQ(*sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// A sharded model's parts are one model: later parts are folded into the first (in part order),
// their sizes summed, and it gets no planner verdict (the engine reads one-file GGUFs) but says why.
TEST(HubVerdict, ShardsAreOneModel)
{
    auto file = [](const std::string& path, uint64_t size) {
        HubFile f;
        f.path = path;
        f.size = size;
        return f;
    };
    const std::vector<HubFile> files = {file("Q8_0/m-Q8_0-00002-of-00002.gguf", 20), file("Q8_0/m-Q8_0-00001-of-00002.gguf", 30),
                                        file("m-Q4_K_M.gguf", 25), file("m-Q4_K_M-00001-of-00002.txt", 1),
                                        file("other-00002-of-00002.gguf", 7)};
    EXPECT_TRUE(isGgufPath("a/B.GGUF"));
    EXPECT_FALSE(isGgufPath("model.safetensors"));
    EXPECT_TRUE(isLaterShard("Q8_0/m-Q8_0-00002-of-00002.gguf"));
    EXPECT_FALSE(isLaterShard("Q8_0/m-Q8_0-00001-of-00002.gguf"));
    EXPECT_FALSE(isLaterShard("m-Q4_K_M.gguf"));
    EXPECT_FALSE(isLaterShard("notes-of-2.gguf"));
    const auto parts = modelParts(files, files[1]);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].path, "Q8_0/m-Q8_0-00001-of-00002.gguf");
    EXPECT_EQ(parts[1].path, "Q8_0/m-Q8_0-00002-of-00002.gguf");
    EXPECT_EQ(modelParts(files, files[2]).size(), 1u);

    // Judged from every part's header (HubSplit below): a hub that cannot be reached gives no
    // verdict, and says why.
    spillway::testing_support::TempDir dir;
    auto hub = HubClient::open({"http://127.0.0.1:9", "none", 1});
    ASSERT_TRUE(hub) << hub.error().message;
    const FileVerdict v = judgeFile(**hub, "owner/m", files[1], files, spillway::testing_support::madeUpHardware(), "cpu",
                                    dir.path());
    EXPECT_FALSE(v.planned);
    EXPECT_EQ(v.bytes, 50u);
    EXPECT_FALSE(v.why.empty());

    // The recommendation: the largest at or above the floor, else the fastest.
    std::vector<FileVerdict> vs(3);
    vs[0].planned = vs[1].planned = true;
    vs[0].bytes = 10, vs[0].tokensPerSecond = 20;
    vs[1].bytes = 30, vs[1].tokensPerSecond = 6;
    vs[2].bytes = 99;  // no verdict: never recommended
    EXPECT_EQ(recommend(vs, 5), 1);
    EXPECT_EQ(recommend(vs, 10), 0);
    EXPECT_EQ(recommend(vs, 100), 0);
    vs[0].planned = vs[1].planned = false;
    EXPECT_EQ(recommend(vs, 5), -1);
}

TEST_F(Hub, SearchesGgufModelsAndListsFiles)
{
    auto models = client->search("tiny llama");
    ASSERT_TRUE(models) << models.error().message;
    EXPECT_EQ(hub.lastQuery, "tiny llama|gguf");
    ASSERT_EQ(models->size(), 2u);
    EXPECT_EQ((*models)[0].id, "owner/tiny-GGUF");
    EXPECT_EQ((*models)[0].downloads, 1200);
    EXPECT_FALSE((*models)[0].gated);
    EXPECT_TRUE((*models)[1].gated);
    auto files = client->files("owner/tiny-GGUF");
    ASSERT_TRUE(files) << files.error().message;
    ASSERT_EQ(files->size(), 2u) << "directories are not files";
    EXPECT_EQ((*files)[0].path, "README.md");
    EXPECT_TRUE((*files)[0].sha256.empty());
    EXPECT_EQ((*files)[1].size, hub.model.size());
    EXPECT_EQ((*files)[1].sha256, hub.sha);
}

TEST_F(Hub, DownloadsThroughTheRedirectAndVerifies)
{
    const std::string dest = dir.path() + "/tiny-Q4_K_M.gguf";
    uint64_t lastDone = 0, calls = 0;
    DownloadOptions o;
    o.progress = [&](const DownloadProgress& p) {
        EXPECT_EQ(p.total, hub.model.size());
        EXPECT_GE(p.done, lastDone);
        lastDone = p.done;
        ++calls;
        return DownloadControl::Continue;
    };
    auto r = client->download("owner/tiny-GGUF", modelFile(), dest, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->fetched, hub.model.size());
    EXPECT_EQ(r->resumedFrom, 0u);
    EXPECT_EQ(lastDone, hub.model.size());
    EXPECT_GT(calls, 2u);
    EXPECT_TRUE(readFile(dest) == hub.model);
    EXPECT_FALSE(fs::exists(dest + ".part"));
}

TEST_F(Hub, AnInterruptedDownloadResumesWhereItStopped)
{
    const std::string dest = dir.path() + "/tiny-Q4_K_M.gguf";
    const HubFile file = modelFile();
    hub.dropAt = hub.model.size() * 4 / 10;
    auto first = client->download("owner/tiny-GGUF", file, dest);
    ASSERT_FALSE(first);
    EXPECT_EQ(first.error().code, ErrorCode::Io);
    EXPECT_NE(first.error().message.find("resumes there"), std::string::npos) << first.error().message;
    EXPECT_FALSE(fs::exists(dest)) << "nothing half-written at the destination";
    ASSERT_TRUE(fs::exists(dest + ".part"));
    const uint64_t kept = fs::file_size(dest + ".part");
    EXPECT_GT(kept, hub.model.size() / 4);
    EXPECT_LE(kept, hub.dropAt);

    hub.dropAt = 0;
    auto second = client->download("owner/tiny-GGUF", file, dest);
    ASSERT_TRUE(second) << second.error().message;
    EXPECT_EQ(second->resumedFrom, kept);
    EXPECT_EQ(second->fetched, hub.model.size() - kept);
    EXPECT_TRUE(second->verified);
    EXPECT_TRUE(readFile(dest) == hub.model);
    std::printf("[ INFO     ] interrupted at %llu of %zu bytes; sent in all %llu (%.3f x the file)\n",
                (unsigned long long)kept, hub.model.size(), (unsigned long long)hub.sent.load(),
                double(hub.sent.load()) / double(hub.model.size()));
    EXPECT_LE(double(hub.sent.load()), 1.1 * double(hub.model.size()));
}

TEST_F(Hub, ACorruptedByteIsCaughtAndNothingIsKept)
{
    const std::string dest = dir.path() + "/tiny-Q4_K_M.gguf";
    hub.corruptAt = 1234567;
    auto r = client->download("owner/tiny-GGUF", modelFile(), dest);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(r.error().message.find("corrupt"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(hub.sha), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(dest));
    EXPECT_FALSE(fs::exists(dest + ".part"));
}

TEST_F(Hub, AGatedRepositoryWantsAToken)
{
    auto refused = client->files("owner/gated-GGUF");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("401"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("not allowed"), std::string::npos) << refused.error().message;
    HubOptions o;
    o.endpoint = hub.url();
    o.token = "good-token";
    auto withToken = HubClient::open(o);
    ASSERT_TRUE(withToken) << withToken.error().message;
    auto files = (*withToken)->files("owner/gated-GGUF");
    ASSERT_TRUE(files) << files.error().message;
    const std::string dest = dir.path() + "/gated.gguf";
    auto r = (*withToken)->download("owner/gated-GGUF", files->back(), dest);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->verified);
    // No token at all: the message says how to add one, and the token never shows.
    o.token.clear();
    setenv("HF_TOKEN", "", 1);
    setenv("HF_TOKEN_PATH", (dir.path() + "/no-token").c_str(), 1);
    auto anonymous = HubClient::open(o);
    ASSERT_TRUE(anonymous) << anonymous.error().message;
    auto denied = (*anonymous)->download("owner/gated-GGUF", files->back(), dir.path() + "/gated2.gguf");
    ASSERT_FALSE(denied);
    EXPECT_NE(denied.error().message.find("add an access token"), std::string::npos) << denied.error().message;
    EXPECT_FALSE(fs::exists(dir.path() + "/gated2.gguf.part"));
    unsetenv("HF_TOKEN_PATH");
}

TEST_F(Hub, MissingRepositoryOrFileIs404)
{
    auto files = client->files("owner/nothing-here");
    ASSERT_FALSE(files);
    EXPECT_NE(files.error().message.find("not found"), std::string::npos) << files.error().message;
    HubFile ghost;
    ghost.path = "ghost.gguf";
    ghost.size = 10;
    auto r = client->download("owner/tiny-GGUF", ghost, dir.path() + "/ghost.gguf");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("404"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(dir.path() + "/ghost.gguf.part"));
}

TEST_F(Hub, AFullDiskIsRefusedBeforeTheFirstByte)
{
    DownloadOptions o;
    o.freeSpace = [&](const std::string&) { return uint64_t(hub.model.size() / 2); };
    const std::string dest = dir.path() + "/tiny-Q4_K_M.gguf";
    auto r = client->download("owner/tiny-GGUF", modelFile(), dest, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::DiskFull);
    EXPECT_NE(r.error().message.find("3.0 MiB"), std::string::npos) << r.error().message;
    EXPECT_EQ(hub.sent.load(), 0u);
    EXPECT_FALSE(fs::exists(dest + ".part"));
}

TEST_F(Hub, PauseKeepsThePartCancelRemovesIt)
{
    const std::string dest = dir.path() + "/tiny-Q4_K_M.gguf";
    const HubFile file = modelFile();
    DownloadOptions o;
    o.progress = [](const DownloadProgress& p) {
        return p.done >= (uint64_t(1) << 20) ? DownloadControl::Pause : DownloadControl::Continue;
    };
    auto paused = client->download("owner/tiny-GGUF", file, dest, o);
    ASSERT_FALSE(paused);
    EXPECT_EQ(paused.error().code, ErrorCode::Cancelled);
    EXPECT_NE(paused.error().message.find("paused"), std::string::npos) << paused.error().message;
    ASSERT_TRUE(fs::exists(dest + ".part"));
    EXPECT_GE(fs::file_size(dest + ".part"), uint64_t(1) << 20);
    o.progress = [](const DownloadProgress& p) {
        return p.done >= (uint64_t(2) << 20) ? DownloadControl::Cancel : DownloadControl::Continue;
    };
    auto cancelled = client->download("owner/tiny-GGUF", file, dest, o);
    ASSERT_FALSE(cancelled);
    EXPECT_EQ(cancelled.error().code, ErrorCode::Cancelled);
    EXPECT_FALSE(fs::exists(dest + ".part"));
    EXPECT_FALSE(fs::exists(dest));
    // Paused before the first byte (a queue's paused entry): nothing is fetched.
    hub.sent = 0;
    o.progress = [](const DownloadProgress&) { return DownloadControl::Pause; };
    auto before = client->download("owner/tiny-GGUF", file, dest, o);
    ASSERT_FALSE(before);
    EXPECT_EQ(before.error().code, ErrorCode::Cancelled);
    EXPECT_NE(before.error().message.find("paused"), std::string::npos) << before.error().message;
    EXPECT_EQ(hub.sent.load(), 0u);
}

// The planner's verdict before the download: a GGUF's header and tensor table fetched by ranged
// requests (a TinyLlama-shaped file with its 32,000-token vocabulary, 2 layers, Q4_K, random
// weights: a header of several 64 KiB steps) become a sparse file the planner reads as it reads
// the whole file: the same tier for every tensor and the same predicted time per token, at a
// budget that puts part of it on each tier. The fetch reads at most the header + 64 KiB.
TEST_F(Hub, HeaderOnlyVerdictEqualsTheFullFilesVerdict)
{
    SyntheticOptions so;
    so.preset = "tinyllama-1.1b";
    so.type = gpu::DType::Q4_K;
    so.layers = 2;
    const std::string full = dir.path() + "/full.gguf";
    const Status written = writeSyntheticModel(so, full);
    ASSERT_TRUE(written.ok()) << written.error().message;
    hub.big = readFile(full);
    auto parsed = gguf::File::open(full);
    ASSERT_TRUE(parsed) << parsed.error().message;
    const uint64_t dataOffset = (*parsed)->dataOffset();
    HubFile file;
    file.path = "big-Q4_K.gguf";
    file.size = hub.big.size();
    const std::string header = dir.path() + "/header.gguf";
    hub.sent = 0;
    auto f = client->fetchHeader("owner/tiny-GGUF", file, header);
    ASSERT_TRUE(f) << f.error().message;
    std::printf("[ INFO     ] header %llu bytes of a %zu-byte file: %llu fetched in %d requests (server sent %llu)\n",
                (unsigned long long)f->headerBytes, hub.big.size(), (unsigned long long)f->fetched, f->requests,
                (unsigned long long)hub.sent.load());
    EXPECT_EQ(f->headerBytes, dataOffset);
    EXPECT_GT(f->requests, 1) << "a header over 64 KiB";
    EXPECT_LE(f->fetched, dataOffset + (64u << 10));
    EXPECT_LE(hub.sent.load(), dataOffset + (64u << 10));
    EXPECT_EQ(fs::file_size(header), hub.big.size());

    auto a = LlamaModel::load(full);
    auto b = LlamaModel::load(header);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    plan::PlannerInput in;
    in.profile = spillway::testing_support::madeUpHardware();
    in.contextLength = 256;
    in.vramBudget = hub.big.size() / 3;
    in.ramBudget = hub.big.size() / 3;
    in.model = a->get();
    auto pa = plan::planPlacement(in);
    in.model = b->get();
    auto pb = plan::planPlacement(in);
    ASSERT_TRUE(pa) << pa.error().message;
    ASSERT_TRUE(pb) << pb.error().message;
    ASSERT_EQ(pa->placement.tensors.size(), pb->placement.tensors.size());
    int tiers[3] = {};
    for (size_t i = 0; i < pa->placement.tensors.size(); ++i) {
        EXPECT_EQ(pa->placement.tensors[i].name, pb->placement.tensors[i].name);
        EXPECT_EQ(pa->placement.tensors[i].tier, pb->placement.tensors[i].tier) << pa->placement.tensors[i].name;
        ++tiers[int(pa->placement.tensors[i].tier)];
    }
    EXPECT_GT(tiers[0] * tiers[1] + tiers[0] * tiers[2] + tiers[1] * tiers[2], 0) << "more than one tier in use";
    EXPECT_EQ(pa->secondsPerToken, pb->secondsPerToken);
    EXPECT_EQ(plan::planText(*pa, false), plan::planText(*pb, false));

    // No GGUF at all: refused after the first step.
    HubFile notGguf;
    notGguf.path = "tiny-Q4_K_M.gguf";  // random bytes after a "GGUF" magic: an impossible version
    notGguf.size = hub.model.size();
    auto refused = client->fetchHeader("owner/tiny-GGUF", notGguf, dir.path() + "/bad.gguf");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::ModelFileInvalid);
    EXPECT_NE(refused.error().message.find("GGUF version"), std::string::npos) << refused.error().message;
}

// spillway-cli search and pull against the same local hub: the search lists the repositories;
// pull REPO --plan-only --json gives a verdict per GGUF file (none for the file that is no GGUF,
// with the reason) and recommends the real one; pull REPO:big downloads it into --dir, checked,
// and prints its path, and adds it to the app's library (the catalog in $XDG_DATA_HOME/spillway);
// pulling it again finds it there.
TEST_F(Hub, CliSearchesJudgesAndPulls)
{
    const std::string full = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/stories260K.gguf";  // a real GGUF
    hub.big = readFile(full);
    ASSERT_FALSE(hub.big.empty());
    auto sha = fileSha256(full);
    ASSERT_TRUE(sha) << sha.error().message;
    hub.bigSha = *sha;
    const std::string cli = std::string(SPILLWAY_BIN_DIR) + "/spillway-cli";
    const std::string env = "XDG_CACHE_HOME='" + dir.path() + "/cache' XDG_DATA_HOME='" + dir.path() +
                            "/data' HF_TOKEN_PATH='" + dir.path() + "/none' ";
    const std::string at = " --endpoint " + hub.url();

    auto r = ::testing_support::runProgram(cli, "search tiny" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("owner/tiny-GGUF"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("gated"), std::string::npos) << r.out;

    r = ::testing_support::runProgram(cli, "pull owner/tiny-GGUF --plan-only --json --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("files")) << r.out;
    ASSERT_EQ(j["files"].size(), 2u) << r.out;
    for (const auto& f : j["files"]) {
        if (f["file"] == "big-Q4_K.gguf") {
            EXPECT_GT(f.value("predicted_tokens_per_second", 0.0), 0.0) << f.dump();
            EXPECT_TRUE(f.value("recommended", false)) << f.dump();
        } else {
            EXPECT_TRUE(f.contains("no_verdict")) << f.dump();
            EXPECT_FALSE(f.value("recommended", true)) << f.dump();
        }
    }
    EXPECT_FALSE(fs::exists(dir.path() + "/models")) << "--plan-only downloads nothing";

    const std::string models = dir.path() + "/models";
    r = ::testing_support::runProgram(cli, "pull owner/tiny-GGUF:big --dir '" + models + "' --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, models + "/big-Q4_K.gguf\n");
    EXPECT_NE(r.err.find("SHA-256 checked"), std::string::npos) << r.err;
    EXPECT_TRUE(readFile(models + "/big-Q4_K.gguf") == hub.big);
    // ... and it is in the app's library (the catalog in its data folder).
    EXPECT_NE(r.err.find("added to the library"), std::string::npos) << r.err;
    {
        auto db = storage::ChatDatabase::open(dir.path() + "/data/spillway");
        ASSERT_TRUE(db) << db.error().message;
        auto row = db->modelByPath(models + "/big-Q4_K.gguf");
        ASSERT_TRUE(row && *row) << "not in the catalog";
        EXPECT_EQ((*row)->architecture, "llama");
        EXPECT_EQ((*row)->sizeBytes, int64_t(hub.big.size()));
    }
    r = ::testing_support::runProgram(cli, "pull owner/tiny-GGUF:big --dir '" + models + "' --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("already there"), std::string::npos) << r.err;

    r = ::testing_support::runProgram(cli, "pull owner/tiny-GGUF:Q9_Z --plan-only --quick-probe" + at, dir.path(), env);
    EXPECT_EQ(r.exitCode, 2) << "a selector that names nothing: the command line is wrong";
    EXPECT_NE(r.err.find("no GGUF file matching 'Q9_Z'"), std::string::npos) << r.err;
}

// A split GGUF on the Hub: the fixture's mixtral-split-GGUF, the three parts llama.cpp's
// llama-gguf-split made of tiny-mixtral.gguf. One model in the listing; one verdict, made from the
// three parts' headers alone (ranged requests), the whole file's; every part downloaded, each
// checked against its own SHA-256, one of them paused mid-way and resumed from its .part; the parts
// load as one model holding the whole file's tensors. Then spillway-cli pull: one row, all parts,
// one library entry (the first part, with every part's bytes), and nothing new when pulled again.
TEST(HubSplit, OneModelOneVerdictEveryPartDownloadedResumedAndOneLibraryEntry)
{
    using spillway::testing_support::FixtureHub;
    const std::string repo = "spillway-test/mixtral-split-GGUF";
    const std::string whole = std::string(SPILLWAY_TEST_DATA_DIR) + "/models/moe/tiny-mixtral.gguf";
    FixtureHub fixture(std::string(SPILLWAY_TEST_DATA_DIR) + "/hub");
    ASSERT_TRUE(fixture.ok()) << fixture.error();
    HubOptions o;
    o.endpoint = fixture.url();
    o.token = "none";
    auto client = HubClient::open(o);
    ASSERT_TRUE(client) << client.error().message;
    auto files = (*client)->files(repo);
    ASSERT_TRUE(files) << files.error().message;
    const std::vector<FileVerdict> models = repositoryModels(*files);
    ASSERT_EQ(models.size(), 1u) << "three parts, one model";
    EXPECT_EQ(models[0].file.path, "tiny-mixtral-00001-of-00003.gguf");
    ASSERT_EQ(models[0].parts.size(), 3u);

    spillway::testing_support::TempDir dir;
    const hw::HardwareProfile profile = spillway::testing_support::madeUpHardware();
    uint64_t sent = fixture.contentBytesSent();
    const FileVerdict v = judgeFile(**client, repo, models[0].file, *files, profile, "cpu", dir.path() + "/headers");
    ASSERT_TRUE(v.planned) << v.why;
    EXPECT_FALSE(v.fromCache);
    uint64_t total = 0;
    for (const HubFile& p : models[0].parts) total += p.size;
    EXPECT_EQ(v.bytes, total);
    EXPECT_LT(fixture.contentBytesSent() - sent, total / 2) << "the verdict fetched the headers, not the weights";
    // The whole file's verdict.
    auto model = LlamaModel::load(whole);
    ASSERT_TRUE(model) << model.error().message;
    engine::PlanSettings settings;
    settings.backend = "cpu";
    auto plan = plan::planPlacement(engine::plannerInput(**model, profile, settings, {}));
    ASSERT_TRUE(plan) << plan.error().message;
    uint64_t tiers[3] = {};
    for (const auto& t : plan->placement.tensors) tiers[int(t.tier)] += t.bytes;
    for (int t = 0; t < 3; ++t) EXPECT_EQ(v.tiers[t], tiers[t]) << "tier " << t;
    EXPECT_NEAR(v.tokensPerSecond, plan->tokensPerSecond(), 1e-9 * plan->tokensPerSecond());
    sent = fixture.contentBytesSent();
    const FileVerdict again = judgeFile(**client, repo, models[0].file, *files, profile, "cpu", dir.path() + "/headers");
    EXPECT_TRUE(again.planned && again.fromCache) << again.why;
    EXPECT_EQ(fixture.contentBytesSent(), sent) << "every part's header came from the cache";

    // Every part, the second paused after 100 kB and resumed.
    const std::string folder = dir.path() + "/models";
    fs::create_directories(folder);
    for (const HubFile& part : models[0].parts) {
        const std::string dest = folder + "/" + part.path;
        DownloadOptions d;
        if (&part == &models[0].parts[1]) {
            d.progress = [](const DownloadProgress& p) {
                return p.done >= 100'000 ? DownloadControl::Pause : DownloadControl::Continue;
            };
            auto paused = (*client)->download(repo, part, dest, d);
            ASSERT_FALSE(paused);
            EXPECT_EQ(paused.error().code, ErrorCode::Cancelled) << paused.error().message;
            ASSERT_TRUE(fs::exists(dest + ".part"));
            EXPECT_FALSE(fs::exists(dest));
            d.progress = {};
        }
        const uint64_t before = fixture.contentBytesSent();
        auto r = (*client)->download(repo, part, dest, d);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_TRUE(r->verified) << part.path;
        if (&part == &models[0].parts[1]) {
            EXPECT_GE(r->resumedFrom, 100'000u);
            EXPECT_LE(fixture.contentBytesSent() - before, part.size - r->resumedFrom + (64u << 10))
                << "the resume fetched what the .part held again";
        }
        EXPECT_FALSE(fs::exists(dest + ".part"));
    }
    auto downloaded = LlamaModel::load(folder + "/" + models[0].parts[2].path);
    ASSERT_TRUE(downloaded) << downloaded.error().message;
    EXPECT_EQ((*downloaded)->path(), folder + "/tiny-mixtral-00001-of-00003.gguf");
    EXPECT_EQ((*downloaded)->dataFiles().size(), 3u);
    spillway::testing_support::expectSameTensors(**downloaded, **model);

    // spillway-cli pull: one row with its three parts; all of them; one entry in the library.
    const std::string cli = std::string(SPILLWAY_BIN_DIR) + "/spillway-cli";
    const std::string env = "XDG_CACHE_HOME='" + dir.path() + "/cache' XDG_DATA_HOME='" + dir.path() +
                            "/data' HF_TOKEN_PATH='" + dir.path() + "/none' ";
    const std::string at = " --endpoint " + fixture.url();
    auto r = ::testing_support::runProgram(cli, "pull " + repo + " --plan-only --json --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("files")) << r.out;
    ASSERT_EQ(j["files"].size(), 1u) << r.out;
    EXPECT_EQ(j["files"][0].value("parts", 0), 3) << r.out;
    EXPECT_EQ(j["files"][0].value("size", uint64_t(0)), total) << r.out;
    EXPECT_GT(j["files"][0].value("predicted_tokens_per_second", 0.0), 0.0) << r.out;
    const std::string pulled = dir.path() + "/pulled";
    r = ::testing_support::runProgram(cli, "pull " + repo + " --dir '" + pulled + "' --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, pulled + "/tiny-mixtral-00001-of-00003.gguf\n");
    for (const HubFile& part : models[0].parts)
        EXPECT_TRUE(readFile(pulled + "/" + part.path) ==
                    readFile(std::string(SPILLWAY_TEST_DATA_DIR) + "/models/moe/split/" + part.path))
            << part.path;
    EXPECT_NE(r.err.find("added to the library"), std::string::npos) << r.err;
    r = ::testing_support::runProgram(cli, "pull " + repo + " --dir '" + pulled + "' --quick-probe" + at, dir.path(), env);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("already there"), std::string::npos) << r.err;
    auto db = storage::ChatDatabase::open(dir.path() + "/data/spillway");
    ASSERT_TRUE(db) << db.error().message;
    auto rows = db->models();
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 1u) << "one library entry for the three parts";
    EXPECT_EQ(rows->front().path, pulled + "/tiny-mixtral-00001-of-00003.gguf");
    EXPECT_EQ(rows->front().sizeBytes, int64_t(total));
}
