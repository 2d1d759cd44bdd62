#pragma once
// A Hugging Face Hub in miniature on 127.0.0.1, serving the repositories of
// tests/data/hub/repos.json (their files are files of the test tree) in the Hub's API shapes:
//   GET /api/models?search=Q&filter=gguf&limit=N   the repositories whose id holds each word of Q
//                                                   (any case) and that carry the filter's tag, most
//                                                   downloaded first
//   GET /api/models/REPO/tree/main?recursive=true   its files, with sizes and LFS oids
//   GET /REPO/resolve/main/FILE                     a 302 to /cdn/REPO/FILE, which honours Range
// A gated repository answers 401 without the bearer token repos.json names. Used by the Discover
// view's Qt test and, as the program spillway-fixture-hub, by the screenshot script.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace spillway::testing_support {

class FixtureHub {
public:
    // hubDir: the folder of repos.json. port 0: any free port. bytesPerSecond: the content's pace
    // (0: as fast as it goes), so that a download can be seen, paused and resumed mid-way.
    explicit FixtureHub(const std::string& hubDir, int port = 0, uint64_t bytesPerSecond = 0);
    ~FixtureHub();
    FixtureHub(const FixtureHub&) = delete;
    FixtureHub& operator=(const FixtureHub&) = delete;

    bool ok() const { return m_port > 0; }
    const std::string& error() const { return m_error; }  // why it did not start
    std::string url() const;                              // http://127.0.0.1:PORT
    std::string token() const { return m_token; }         // what the gated repository wants
    uint64_t contentBytesSent() const { return m_sent.load(); }
    void setBytesPerSecond(uint64_t rate) { m_rate.store(rate); }
    // Flips one byte of what is served for "REPO/FILE" (its listed SHA-256 stays): a download of
    // it fails its check. Call it while no request is served; false for an unknown file.
    bool corrupt(const std::string& repoFile, size_t at);

private:
    struct File {
        std::string path, source, sha256;
        uint64_t size = 0;
        bool lfs = true;
    };
    struct Repo {
        std::string id;
        int64_t downloads = 0, likes = 0;
        std::vector<std::string> tags;
        std::string gated;
        std::vector<File> files;
    };
    bool load(const std::string& hubDir);
    void routes();
    const Repo* repo(const std::string& id) const;

    std::unique_ptr<httplib::Server> m_server;
    std::thread m_thread;
    std::vector<Repo> m_repos;
    std::map<std::string, std::string> m_content;  // "REPO/FILE" -> bytes
    std::string m_token, m_error;
    int m_port = 0;
    std::atomic<uint64_t> m_sent{0}, m_rate{0};
};

}  // namespace spillway::testing_support
