#include "server/hub.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "core/formats/gguf.h"

namespace spillway::server {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string envOr(const char* name, const std::string& fallback)
{
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

std::string trimmed(std::string s)
{
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i);
}

// %-encoding of a query value or a path segment (RFC 3986 unreserved characters kept; '/' kept in
// paths, since repository ids and file paths are made of segments).
std::string encoded(const std::string& s, bool keepSlash)
{
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keepSlash && c == '/')) {
            out += char(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string mib(uint64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

// An answer other than success, as users should read it.
Error statusError(const std::string& what, int status, bool hasToken)
{
    if (status == 401 || status == 403)
        return makeError(ErrorCode::InvalidArgument,
                         what + ": access denied (HTTP " + std::to_string(status) + "): the repository is gated or private; " +
                             (hasToken ? "the access token in use is not allowed to read it (accept the model's terms on its page)"
                                       : "add an access token (in the app: Discover, Access token…; or huggingface-cli login, or HF_TOKEN)"));
    if (status == 404) return makeError(ErrorCode::InvalidArgument, what + ": not found (HTTP 404)");
    return makeError(ErrorCode::Io, what + ": the server answered HTTP " + std::to_string(status));
}

// A request that got no answer, said with its cause and what to do about it.
Error connectionError(const std::string& what, httplib::Error e, const std::string& endpoint)
{
    const size_t scheme = endpoint.find("://");
    const std::string host = scheme == std::string::npos ? endpoint : endpoint.substr(scheme + 3);
    std::string why;
    switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
        why = "could not connect to " + host +
              ": this computer seems to be offline, or " + host + " cannot be reached from it. Check the network "
              "connection (and a proxy, if one is needed), or set HF_ENDPOINT to a mirror that can be reached, then "
              "try again";
        break;
    case httplib::Error::ConnectionTimeout:
        why = host + " did not answer in time: the network may be slow or down. Try again, or set HF_ENDPOINT to a "
              "closer mirror";
        break;
    case httplib::Error::Read:
    case httplib::Error::Write:
        why = "the connection to " + host + " broke off. Try again (a download goes on where it stopped)";
        break;
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
        why = "the secure connection to " + host + " failed (" + httplib::to_string(e) +
              "): check the system's date and its certificates (the ca-certificates package), or a proxy "
              "that rewrites connections";
        break;
    default:
        why = "no answer from " + host + " (" + httplib::to_string(e) + "). Check the network connection and try again";
        break;
    }
    return makeError(ErrorCode::Io, what + ": " + why);
}

// GET `path`: its JSON array, or the error as users should read it.
Result<json> getList(httplib::Client& http, const std::string& endpoint, const std::string& path, const std::string& what,
                     bool hasToken,
                     const char* listOf)
{
    auto r = http.Get(path);
    if (!r) return connectionError(what, r.error(), endpoint);
    if (r->status != 200) return statusError(what, r->status, hasToken);
    json j = json::parse(r->body, nullptr, false);
    if (!j.is_array()) return makeError(ErrorCode::Io, what + ": the answer is not a list of " + listOf);
    return j;
}

class Sha256 {
public:
    Sha256() : m_ctx(EVP_MD_CTX_new()) { EVP_DigestInit_ex(m_ctx, EVP_sha256(), nullptr); }
    ~Sha256() { EVP_MD_CTX_free(m_ctx); }
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void add(const void* data, size_t n) { EVP_DigestUpdate(m_ctx, data, n); }
    std::string hex()
    {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(m_ctx, digest, &n);
        static const char* digits = "0123456789abcdef";
        std::string out;
        for (unsigned int i = 0; i < n; ++i) {
            out += digits[digest[i] >> 4];
            out += digits[digest[i] & 15];
        }
        return out;
    }

private:
    EVP_MD_CTX* m_ctx;
};

// Adds a file's first `bytes` bytes to the hash.
Status hashFile(const std::string& path, uint64_t bytes, Sha256& hash)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return makeError(ErrorCode::Io, path + ": cannot open it to check its SHA-256");
    std::vector<char> buf(size_t{1} << 20);
    while (bytes > 0) {
        const size_t n = size_t(std::min<uint64_t>(bytes, buf.size()));
        in.read(buf.data(), std::streamsize(n));
        if (size_t(in.gcount()) != n) return makeError(ErrorCode::Io, path + ": read failed while checking its SHA-256");
        hash.add(buf.data(), n);
        bytes -= n;
    }
    return {};
}

uint64_t statvfsFree(const std::string& folder)
{
    struct statvfs vfs {};
    if (::statvfs(folder.c_str(), &vfs) != 0) return UINT64_MAX;  // unknown: let the write say
    return uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
}

}  // namespace

std::string hubToken()
{
    if (const char* t = std::getenv("HF_TOKEN"); t && *t) return trimmed(t);
    const char* home = std::getenv("HOME");
    const std::string hfHome = envOr("HF_HOME", envOr("XDG_CACHE_HOME", home ? std::string(home) + "/.cache" : ".") +
                                                    "/huggingface");
    std::ifstream in(envOr("HF_TOKEN_PATH", hfHome + "/token"));
    std::string token;
    if (in) std::getline(in, token);
    return trimmed(token);
}

Result<std::string> fileSha256(const std::string& path)
{
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) return makeError(ErrorCode::Io, path + ": " + ec.message());
    Sha256 hash;
    SPILLWAY_TRY(hashFile(path, size, hash));
    return hash.hex();
}

struct HubClient::Impl {
    std::unique_ptr<httplib::Client> http;
};

HubClient::~HubClient() = default;

Result<std::unique_ptr<HubClient>> HubClient::open(HubOptions options)
{
    std::string endpoint = options.endpoint.empty() ? envOr("HF_ENDPOINT", "https://huggingface.co") : options.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    const size_t scheme = endpoint.find("://");
    if (scheme == std::string::npos || (endpoint.substr(0, scheme) != "http" && endpoint.substr(0, scheme) != "https") ||
        endpoint.find('/', scheme + 3) != std::string::npos || endpoint.size() <= scheme + 3)
        return makeError(ErrorCode::InvalidArgument,
                         "'" + endpoint + "' is not a hub address (http:// or https:// and a host, as HF_ENDPOINT)");
    std::unique_ptr<HubClient> c(new HubClient());
    c->m = std::make_unique<Impl>();
    c->m_endpoint = endpoint;
    c->m_token = options.token.empty() ? hubToken() : options.token;
    c->m_options = options;
    c->m->http = std::make_unique<httplib::Client>(endpoint);
    if (!c->m->http->is_valid()) return makeError(ErrorCode::InvalidArgument, "'" + endpoint + "' is not a usable address");
    httplib::Client& h = *c->m->http;
    h.set_follow_location(true);
    h.set_connection_timeout(10, 0);
    h.set_read_timeout(options.timeoutSeconds, 0);
    h.set_write_timeout(30, 0);
    if (!c->m_token.empty()) h.set_bearer_token_auth(c->m_token);
    return c;
}

Result<std::vector<HubModel>> HubClient::search(const std::string& query, int limit)
{
    const std::string path = "/api/models?search=" + encoded(query, false) + "&filter=gguf&sort=downloads&direction=-1&limit=" +
                             std::to_string(std::max(1, limit));
    auto j = getList(*m->http, m_endpoint, path, "search for '" + query + "'", hasToken(), "models");
    if (!j) return j.error();
    std::vector<HubModel> models;
    for (const json& x : *j) {
        if (!x.is_object() || !x.contains("id") || !x["id"].is_string()) continue;
        HubModel m;
        m.id = x["id"].get<std::string>();
        if (x.contains("downloads") && x["downloads"].is_number_integer()) m.downloads = x["downloads"].get<int64_t>();
        if (x.contains("likes") && x["likes"].is_number_integer()) m.likes = x["likes"].get<int64_t>();
        if (x.contains("gated")) m.gated = x["gated"].is_string() || (x["gated"].is_boolean() && x["gated"].get<bool>());
        models.push_back(std::move(m));
    }
    return models;
}

Result<std::vector<HubFile>> HubClient::files(const std::string& repo)
{
    const std::string what = m_endpoint + "/" + repo;
    if (repo.empty() || repo.find("..") != std::string::npos || repo.front() == '/')
        return makeError(ErrorCode::InvalidArgument, "'" + repo + "' is not a repository id (owner/name)");
    auto j = getList(*m->http, m_endpoint, "/api/models/" + encoded(repo, true) + "/tree/main?recursive=true", what, hasToken(),
                     "files");
    if (!j) return j.error();
    std::vector<HubFile> files;
    for (const json& x : *j) {
        if (!x.is_object() || x.value("type", "") != "file" || !x.contains("path") || !x["path"].is_string()) continue;
        HubFile f;
        f.path = x["path"].get<std::string>();
        if (x.contains("size") && x["size"].is_number_unsigned()) f.size = x["size"].get<uint64_t>();
        if (x.contains("lfs") && x["lfs"].is_object()) {
            const json& lfs = x["lfs"];
            if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lfs["oid"].get<std::string>();
            if (lfs.contains("size") && lfs["size"].is_number_unsigned()) f.size = lfs["size"].get<uint64_t>();
        }
        files.push_back(std::move(f));
    }
    return files;
}

Result<DownloadReport> HubClient::download(const std::string& repo, const HubFile& file, const std::string& dest,
                                           const DownloadOptions& options)
{
    const std::string what = repo + "/" + file.path;
    if (file.path.empty() || file.path.find("..") != std::string::npos)
        return makeError(ErrorCode::InvalidArgument, "'" + file.path + "' is not a file of a repository");
    const std::string part = dest + ".part";
    const fs::path folder = fs::path(dest).parent_path().empty() ? fs::path(".") : fs::path(dest).parent_path();
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) return makeError(ErrorCode::InvalidArgument, folder.string() + ": no such folder");

    DownloadReport report;
    report.bytes = file.size;
    uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
    if (ec) have = 0;
    if (file.size > 0 && have > file.size) {  // not this file's beginning: start again
        fs::remove(part, ec);
        have = 0;
    }
    const uint64_t free = options.freeSpace ? options.freeSpace(folder.string()) : statvfsFree(folder.string());
    if (file.size > have && file.size - have > free)
        return makeError(ErrorCode::DiskFull, what + ": needs " + mib(file.size - have) + " more on " + folder.string() +
                                                  ", which has " + mib(free) + " free");
    auto hash = std::make_unique<Sha256>();
    if (have > 0) SPILLWAY_TRY(hashFile(part, have, *hash));
    report.resumedFrom = have;

    const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return makeError(ErrorCode::Io, part + ": " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};

    DownloadControl control = DownloadControl::Continue;
    const auto started = std::chrono::steady_clock::now();
    const auto tell = [&](uint64_t done) {
        if (!options.progress) return;
        DownloadProgress p;
        p.done = done;
        p.total = file.size;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        p.bytesPerSecond = seconds > 0 ? double(report.fetched) / seconds : 0;
        control = options.progress(p);
    };
    tell(have);
    Error writeError;
    int status = 0;
    if (control == DownloadControl::Continue && (file.size == 0 || have < file.size)) {
        httplib::Headers headers;
        if (have > 0) headers.emplace("Range", "bytes=" + std::to_string(have) + "-");
        auto r = m->http->Get(
            "/" + encoded(repo, true) + "/resolve/main/" + encoded(file.path, true), headers,
            [&](const httplib::Response& res) {
                status = res.status;
                if (res.status == 200 && have > 0) {
                    // The server sent the whole file: start the part again.
                    if (::ftruncate(fd, 0) != 0) return false;
                    hash = std::make_unique<Sha256>();
                    have = 0;
                }
                return res.status == 200 || res.status == 206;
            },
            [&](const char* data, size_t n) {
                size_t off = 0;
                while (off < n) {
                    const ssize_t w = ::write(fd, data + off, n - off);
                    if (w < 0 && errno == EINTR) continue;
                    if (w < 0) {
                        writeError = makeError(errno == ENOSPC ? ErrorCode::DiskFull : ErrorCode::Io,
                                               part + ": " + std::strerror(errno));
                        return false;
                    }
                    off += size_t(w);
                }
                hash->add(data, n);
                have += n;
                report.fetched += n;
                tell(have);
                return control == DownloadControl::Continue;
            });
        if (!writeError.message.empty()) return writeError;
        if (control == DownloadControl::Continue && status != 0 && status != 200 && status != 206 && !(status == 416 && have == file.size)) {
            if (have == 0) fs::remove(part, ec);
            return statusError(what, status, hasToken());
        }
        if (control == DownloadControl::Continue && !r && !(status == 416 && have == file.size))
            return makeError(ErrorCode::Io, what + ": interrupted at " + mib(have) + " of " + mib(file.size) + " (" +
                                                httplib::to_string(r.error()) +
                                                "); the partial file is kept and the next download resumes there");
    }
    if (control != DownloadControl::Continue) {  // paused or cancelled, before or during the transfer
        if (control == DownloadControl::Cancel) fs::remove(part, ec);
        return makeError(ErrorCode::Cancelled, what + (control == DownloadControl::Cancel
                                                           ? ": cancelled (the partial file was removed)"
                                                           : ": paused at " + mib(have) + " of " + mib(file.size) +
                                                                 " (the next download of it resumes there)"));
    }
    if (::fsync(fd) != 0) return makeError(ErrorCode::Io, part + ": " + std::strerror(errno));
    if (file.size > 0 && have != file.size)
        return makeError(ErrorCode::Io, what + ": the transfer ended at " + mib(have) + " of " + mib(file.size) +
                                            "; the partial file is kept and the next download resumes there");
    if (!file.sha256.empty()) {
        const std::string got = hash->hex();
        if (got != file.sha256) {
            fs::remove(part, ec);
            return makeError(ErrorCode::ModelFileInvalid, what + ": the download is corrupt: its SHA-256 is " + got +
                                                              ", the repository says " + file.sha256 +
                                                              " (the file was deleted; download it again)");
        }
        report.verified = true;
    }
    fs::rename(part, dest, ec);
    if (ec) return makeError(ErrorCode::Io, dest + ": " + ec.message());
    report.bytes = have;
    return report;
}

Result<HeaderFetch> HubClient::fetchHeader(const std::string& repo, const HubFile& file, const std::string& dest)
{
    const std::string what = repo + "/" + file.path;
    if (file.path.empty() || file.path.find("..") != std::string::npos)
        return makeError(ErrorCode::InvalidArgument, "'" + file.path + "' is not a file of a repository");
    constexpr uint64_t kStep = uint64_t{64} << 10, kMost = uint64_t{256} << 20;
    const std::string path = "/" + encoded(repo, true) + "/resolve/main/" + encoded(file.path, true);
    HeaderFetch f;
    std::string prefix;
    gguf::HeaderExtent extent;
    uint64_t want = kStep;
    for (;;) {
        if (file.size > 0) want = std::min(want, file.size);
        if (want <= prefix.size()) return makeError(ErrorCode::ModelFileInvalid, what + ": the file ends inside its GGUF header");
        httplib::Headers headers{{"Range", "bytes=" + std::to_string(prefix.size()) + "-" + std::to_string(want - 1)}};
        const uint64_t before = prefix.size();
        int status = 0;
        auto r = m->http->Get(
            path, headers,
            [&](const httplib::Response& res) {
                status = res.status;
                return res.status == 206 || (res.status == 200 && before == 0);
            },
            [&](const char* data, size_t n) {
                // A server that ignores the range sends the whole file: keep only what was asked.
                const size_t keep = size_t(std::min<uint64_t>(n, want - prefix.size()));
                prefix.append(data, keep);
                f.fetched += n;
                return prefix.size() < want;
            });
        ++f.requests;
        if (status != 0 && status != 200 && status != 206) return statusError(what, status, hasToken());
        if (!r && prefix.size() < want) return connectionError(what, r.error(), m_endpoint);
        extent = gguf::headerExtent(reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size());
        if (!extent.error.empty()) return makeError(ErrorCode::ModelFileInvalid, what + ": " + extent.error);
        if (extent.complete) break;
        if (extent.bytes > kMost) return makeError(ErrorCode::ModelFileInvalid, what + ": a GGUF header of over 256 MiB");
        want = std::max<uint64_t>(extent.bytes, prefix.size()) + kStep;
    }
    f.headerBytes = extent.bytes;
    if (file.size > 0 && extent.bytes > file.size)
        return makeError(ErrorCode::ModelFileInvalid, what + ": its GGUF header runs past the end of the file");
    const int fd = ::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return makeError(ErrorCode::Io, dest + ": " + std::strerror(errno));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    const size_t header = size_t(std::min<uint64_t>(extent.bytes, prefix.size()));
    if (::write(fd, prefix.data(), header) != ssize_t(header) ||
        ::ftruncate(fd, off_t(std::max<uint64_t>(file.size, extent.bytes))) != 0)
        return makeError(ErrorCode::Io, dest + ": " + std::strerror(errno));
    return f;
}

}  // namespace spillway::server
