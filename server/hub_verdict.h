#pragma once
// The planner's verdict on a repository's GGUF files before anything is downloaded (issue 32):
// each file's header and tensor table by ranged requests (HubClient::fetchHeader, cached), the
// planner run on it for this machine, and the recommendation: the largest file predicted at or
// above a tokens/s floor (where none is, the fastest). Shared by `spillway-cli pull` and the
// app's Discover view.

#include <string>
#include <vector>

#include "server/hub.h"

namespace spillway::hw {
struct HardwareProfile;
}

namespace spillway::server {

struct FileVerdict {
    HubFile file;                  // the file (a sharded model's first part)
    std::vector<HubFile> parts;    // every file the model needs (file first; one unless sharded)
    uint64_t bytes = 0;            // of all its parts
    bool planned = false;
    std::string why;               // no verdict: why
    uint64_t tiers[3] = {};        // bytes on the device, in RAM, on the SSD
    double tokensPerSecond = 0;
    bool fits = false;             // no layer weights read from the SSD each token
    bool fromCache = false;        // the header came from the cache (nothing fetched)
};

bool isGgufPath(const std::string& path);
// "model-00002-of-00003.gguf": a part other than the first of a sharded model.
bool isLaterShard(const std::string& path);
// The parts of the model whose first file is `first` (first itself first; just it unless sharded).
std::vector<HubFile> modelParts(const std::vector<HubFile>& files, const HubFile& first);

// Where headers are kept: headers/ beside the hardware profile's cache (~/.cache/spillway).
std::string defaultHeaderCacheDir();

// The verdict on one model of `repo` (a file that is no later shard) for this machine.
// `files`: the repository's files (for a sharded model's other parts). A split GGUF (parts
// NAME-0000k-of-0000N.gguf) is judged from every part's header, each fetched by ranged requests
// into a folder of its own under cacheDir, loaded as one model.
FileVerdict judgeFile(HubClient& hub, const std::string& repo, const HubFile& file, const std::vector<HubFile>& files,
                      const hw::HardwareProfile& profile, const std::string& backend, const std::string& cacheDir);
// Every GGUF model of a repository's listing, not judged yet: its file (a sharded model's first
// part), its parts and their bytes.
std::vector<FileVerdict> repositoryModels(const std::vector<HubFile>& files);
// The recommendation's index in `verdicts`, or -1 when no file has a verdict.
int recommend(const std::vector<FileVerdict>& verdicts, double minTokensPerSecond);

}  // namespace spillway::server
