#include "fixture_hub.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/hub.h"

namespace spillway::testing_support {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string s)
{
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

FixtureHub::FixtureHub(const std::string& hubDir, int port, uint64_t bytesPerSecond)
    : m_server(std::make_unique<httplib::Server>())
{
    m_rate = bytesPerSecond;
    if (!load(hubDir)) return;
    routes();
    const int bound = port ? (m_server->bind_to_port("127.0.0.1", port) ? port : -1) : m_server->bind_to_any_port("127.0.0.1");
    if (bound <= 0) {
        m_error = "cannot listen on 127.0.0.1 port " + std::to_string(port);
        return;
    }
    m_thread = std::thread([this] { m_server->listen_after_bind(); });
    while (!m_server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m_port = bound;
}

FixtureHub::~FixtureHub()
{
    m_server->stop();
    if (m_thread.joinable()) m_thread.join();
}

std::string FixtureHub::url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

bool FixtureHub::load(const std::string& hubDir)
{
    std::ifstream in(fs::path(hubDir) / "repos.json");
    const json j = json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("repositories")) {
        m_error = hubDir + "/repos.json is missing or not the fixture's JSON";
        return false;
    }
    m_token = j.value("token", "");
    for (const auto& r : j["repositories"]) {
        Repo repo;
        repo.id = r.value("id", "");
        repo.downloads = r.value("downloads", int64_t(0));
        repo.likes = r.value("likes", int64_t(0));
        repo.gated = r.value("gated", "");
        for (const auto& t : r.value("tags", json::array())) repo.tags.push_back(t.get<std::string>());
        for (const auto& f : r.value("files", json::array())) {
            File file;
            file.path = f.value("path", "");
            file.source = (fs::path(hubDir) / f.value("source", "")).string();
            file.lfs = f.value("lfs", true);
            std::ifstream src(file.source, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
            if (!src.good() && !src.eof()) {
                m_error = "cannot read " + file.source;
                return false;
            }
            auto sha = server::fileSha256(file.source);
            if (!sha) {
                m_error = sha.error().message;
                return false;
            }
            file.sha256 = *sha;
            file.size = bytes.size();
            m_content[repo.id + "/" + file.path] = std::move(bytes);
            repo.files.push_back(file);
        }
        m_repos.push_back(std::move(repo));
    }
    return true;
}

bool FixtureHub::corrupt(const std::string& repoFile, size_t at)
{
    const auto it = m_content.find(repoFile);
    if (it == m_content.end() || at >= it->second.size()) return false;
    it->second[at] ^= 0x20;
    return true;
}

const FixtureHub::Repo* FixtureHub::repo(const std::string& id) const
{
    for (const auto& r : m_repos)
        if (r.id == id) return &r;
    return nullptr;
}

void FixtureHub::routes()
{
    // The gated repository's refusal, as the Hub words it; true when the request may go on.
    auto allowed = [this](const Repo& r, const httplib::Request& req, httplib::Response& res) {
        if (r.gated.empty() || req.get_header_value("Authorization") == "Bearer " + m_token) return true;
        res.status = 401;
        res.set_content(json{{"error", "Access to model " + r.id + " is restricted. You must have access to it and be authenticated to access it."}}.dump(),
                        "application/json");
        return false;
    };
    auto notFound = [](httplib::Response& res) {
        res.status = 404;
        res.set_content(R"({"error":"Repository not found"})", "application/json");
    };
    m_server->Get("/api/models", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string words = lower(req.get_param_value("search")), filter = req.get_param_value("filter");
        const int limit = req.has_param("limit") ? std::max(1, std::atoi(req.get_param_value("limit").c_str())) : 1000;
        std::vector<const Repo*> found;
        for (const auto& r : m_repos) {
            bool all = true;  // every word of the query in the id
            size_t at = 0;
            while (all && at < words.size()) {
                const size_t end = std::min(words.find(' ', at), words.size());
                if (end > at) all = lower(r.id).find(words.substr(at, end - at)) != std::string::npos;
                at = end + 1;
            }
            if (all && (filter.empty() || std::find(r.tags.begin(), r.tags.end(), filter) != r.tags.end()))
                found.push_back(&r);
        }
        std::stable_sort(found.begin(), found.end(), [](const Repo* a, const Repo* b) { return a->downloads > b->downloads; });
        json j = json::array();
        for (const Repo* r : found) {
            if (int(j.size()) == limit) break;
            json m = {{"id", r->id}, {"downloads", r->downloads}, {"likes", r->likes}, {"tags", r->tags}};
            m["gated"] = r->gated.empty() ? json(false) : json(r->gated);
            j.push_back(m);
        }
        res.set_content(j.dump(), "application/json");
    });
    m_server->Get(R"(/api/models/([^/]+/[^/]+)/tree/main)", [=, this](const httplib::Request& req, httplib::Response& res) {
        const Repo* r = repo(req.matches[1]);
        if (!r) return notFound(res);
        if (!allowed(*r, req, res)) return;
        json j = json::array();
        for (const auto& f : r->files) {
            json e = {{"type", "file"}, {"path", f.path}, {"size", f.size}};
            if (f.lfs) e["lfs"] = {{"oid", f.sha256}, {"size", f.size}};
            j.push_back(e);
        }
        res.set_content(j.dump(), "application/json");
    });
    m_server->Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))", [=, this](const httplib::Request& req, httplib::Response& res) {
        const Repo* r = repo(req.matches[1]);
        if (!r) return notFound(res);
        if (!allowed(*r, req, res)) return;
        if (!m_content.count(std::string(req.matches[1]) + "/" + std::string(req.matches[2]))) return notFound(res);
        res.set_redirect("/cdn/" + std::string(req.matches[1]) + "/" + std::string(req.matches[2]), 302);
    });
    m_server->Get(R"(/cdn/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
        const auto it = m_content.find(req.matches[1]);
        if (it == m_content.end()) {
            res.status = 404;
            return;
        }
        const std::string* bytes = &it->second;
        res.set_content_provider(bytes->size(), "application/octet-stream",
                                 [this, bytes](size_t offset, size_t length, httplib::DataSink& sink) {
                                     const size_t n = std::min<size_t>(length, 16 << 10);
                                     if (const uint64_t rate = m_rate.load())
                                         std::this_thread::sleep_for(std::chrono::microseconds(n * 1'000'000 / rate));
                                     m_sent += n;
                                     return sink.write(bytes->data() + offset, n);
                                 });
    });
}

}  // namespace spillway::testing_support
