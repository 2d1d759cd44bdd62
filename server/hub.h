#pragma once
// Hugging Face Hub: model search, a repository's files, and downloads users can trust (issue 32).
// One implementation below the UI, so that the CLI and the app share it; HTTP is cpp-httplib
// (Debian's, with OpenSSL), SHA-256 is OpenSSL's.
//
// The API shapes (those huggingface_hub uses):
//   GET {endpoint}/api/models?search=Q&filter=gguf&limit=N   -> [{"id", "downloads", "likes", ...}]
//   GET {endpoint}/api/models/{repo}/tree/main?recursive=true -> [{"type": "file", "path", "size",
//                                                                  "lfs": {"oid": sha256, "size"}}]
//   GET {endpoint}/{repo}/resolve/main/{path}                 -> the file, usually after a redirect
//                                                                  to a CDN; Range honoured there
// The endpoint is $HF_ENDPOINT (a mirror) when set, else https://huggingface.co. The access token
// for gated repositories: HubOptions::token, else $HF_TOKEN, else the file huggingface-cli writes
// ($HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token). It is sent only as a
// bearer header and never written to any message.
//
// A download goes to DEST.part first and is resumed from there (an HTTP Range request) after a
// dropped connection, a pause or a restart; the whole file's SHA-256 is checked against the
// repository's LFS oid before DEST.part becomes DEST (a rename), so nothing half-written or
// corrupt is ever at DEST. A mismatch deletes DEST.part and says so; so does a cancel.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace spillway::server {

struct HubOptions {
    std::string endpoint;   // "": $HF_ENDPOINT, else https://huggingface.co
    std::string token;      // "": hubToken()
    int timeoutSeconds = 30;
};

struct HubModel {
    std::string id;         // "owner/name"
    int64_t downloads = 0;
    int64_t likes = 0;
    bool gated = false;
};

struct HubFile {
    std::string path;       // within the repository ("model-Q4_K_M.gguf", "sub/part-00001-of-00002.gguf")
    uint64_t size = 0;
    std::string sha256;     // the LFS oid (lower-case hex); "" for a file outside LFS (no check)
};

struct DownloadProgress {
    uint64_t done = 0;            // bytes of the file at DEST.part
    uint64_t total = 0;           // the file's size (0: unknown)
    double bytesPerSecond = 0;    // over this call's transfer so far
    double secondsLeft() const { return bytesPerSecond > 0 && total > done ? double(total - done) / bytesPerSecond : 0; }
};

enum class DownloadControl { Continue, Pause, Cancel };

struct DownloadOptions {
    // Called as bytes arrive (and once at the start): Pause stops and keeps DEST.part for a later
    // call to resume; Cancel stops and deletes it. Both end the call with ErrorCode::Cancelled.
    std::function<DownloadControl(const DownloadProgress&)> progress;
    // Free bytes on the file system of a folder (default: statvfs); tests make a disk full here.
    std::function<uint64_t(const std::string& folder)> freeSpace;
};

struct DownloadReport {
    uint64_t bytes = 0;           // the file's size
    uint64_t fetched = 0;         // bytes this call received over the network
    uint64_t resumedFrom = 0;     // bytes already in DEST.part at the start
    bool verified = false;        // its SHA-256 was checked against the LFS oid
};

// The token huggingface-cli would use ("" when there is none).
std::string hubToken();
// Lower-case hex SHA-256 of a file (an error names the file).
Result<std::string> fileSha256(const std::string& path);

struct HeaderFetch {
    uint64_t headerBytes = 0;     // the GGUF's header and tensor table (to the data section)
    uint64_t fetched = 0;         // bytes received for it (at most headerBytes + 64 KiB)
    int requests = 0;
};

class HubClient {
public:
    static Result<std::unique_ptr<HubClient>> open(HubOptions options = {});
    ~HubClient();
    HubClient(const HubClient&) = delete;
    HubClient& operator=(const HubClient&) = delete;

    const std::string& endpoint() const { return m_endpoint; }
    bool hasToken() const { return !m_token.empty(); }

    // Repositories with GGUF files matching `query`, most downloaded first.
    Result<std::vector<HubModel>> search(const std::string& query, int limit = 20);
    // Every file of a repository's main branch, with sizes and LFS oids.
    Result<std::vector<HubFile>> files(const std::string& repo);
    // The file to `dest` (its folder must exist), resumed from dest + ".part" where one is there.
    Result<DownloadReport> download(const std::string& repo, const HubFile& file, const std::string& dest,
                                    const DownloadOptions& options = {});
    // A GGUF file's header and tensor table only, by ranged requests (the first 64 KiB, then to
    // 64 KiB past what the part read so far shows must be there), written to `dest` as a sparse
    // file of the whole file's size whose tensor data reads as zeros: what the planner needs to
    // say where the model's tensors would live on this machine, before any weight is downloaded.
    // A file that is no GGUF, or a header over 256 MiB, is refused.
    Result<HeaderFetch> fetchHeader(const std::string& repo, const HubFile& file, const std::string& dest);

private:
    HubClient() = default;
    struct Impl;
    std::unique_ptr<Impl> m;
    std::string m_endpoint, m_token;
    HubOptions m_options;
};

}  // namespace spillway::server
