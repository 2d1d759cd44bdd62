#include "hub_verdict.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/engine/engine.h"
#include "core/hw/probe.h"
#include "core/model/llama_model.h"
#include "core/plan/planner.h"

namespace spillway::server {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s)
{
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// "-00001-of-00003.gguf": where the part number starts, or npos.
size_t shardMark(const std::string& path)
{
    const size_t of = path.rfind("-of-");
    return of != std::string::npos && of >= 6 && path[of - 6] == '-' ? of - 5 : std::string::npos;
}

}  // namespace

bool isGgufPath(const std::string& path) { return path.size() > 5 && lower(path).ends_with(".gguf"); }

bool isLaterShard(const std::string& path)
{
    const size_t at = shardMark(path);
    return at != std::string::npos && path.compare(at, 5, "00001") != 0;
}

std::vector<HubFile> modelParts(const std::vector<HubFile>& files, const HubFile& first)
{
    std::vector<HubFile> parts = {first};
    const size_t at = shardMark(first.path);
    if (at == std::string::npos) return parts;
    const std::string stem = first.path.substr(0, at), tail = first.path.substr(at + 5);
    for (const auto& f : files)
        if (f.path != first.path && f.path.size() == first.path.size() && f.path.starts_with(stem) && f.path.ends_with(tail))
            parts.push_back(f);
    std::sort(parts.begin() + 1, parts.end(), [](const HubFile& a, const HubFile& b) { return a.path < b.path; });
    return parts;
}

namespace {

// A model of the listing not judged yet: its file, its parts and their bytes.
FileVerdict unjudged(const std::vector<HubFile>& files, const HubFile& file)
{
    FileVerdict v;
    v.file = file;
    v.parts = modelParts(files, file);
    for (const auto& p : v.parts) v.bytes += p.size;
    return v;
}

}  // namespace

std::string defaultHeaderCacheDir() { return (fs::path(hw::defaultProbeCacheFile()).parent_path() / "headers").string(); }

FileVerdict judgeFile(HubClient& hub, const std::string& repo, const HubFile& file, const std::vector<HubFile>& files,
                      const hw::HardwareProfile& profile, const std::string& backend, const std::string& cacheDir)
{
    FileVerdict v = unjudged(files, file);
    std::error_code ec;
    fs::create_directories(cacheDir, ec);
    // Keyed by the content's checksum where there is one: a changed file is fetched again.
    std::string name = repo + "--" + file.path;
    std::replace(name.begin(), name.end(), '/', '-');
    if (!file.sha256.empty()) name.append(".").append(file.sha256, 0, 16);
    std::string header = (fs::path(cacheDir) / name).string();
    if (v.parts.size() > 1) {
        // A split GGUF: every part's header under the part's own name, in a folder of the model's
        // (the reader finds the parts by their names), so that it loads as the downloaded parts do.
        const fs::path folder = fs::path(cacheDir) / (name + ".parts");
        fs::create_directories(folder, ec);
        header = (folder / fs::path(file.path).filename()).string();
    }
    v.fromCache = true;
    for (const HubFile& part : v.parts) {
        const std::string at = v.parts.size() > 1 ? (fs::path(header).parent_path() / fs::path(part.path).filename()).string()
                                                  : header;
        if (fs::exists(at, ec) && fs::file_size(at, ec) == part.size) continue;
        v.fromCache = false;
        auto fetched = hub.fetchHeader(repo, part, at);
        if (!fetched) {
            v.why = fetched.error().message;
            return v;
        }
    }
    auto model = LlamaModel::load(header);
    if (!model) {
        v.why = model.error().message;
        return v;
    }
    engine::PlanSettings s;
    s.backend = backend;
    auto plan = plan::planPlacement(engine::plannerInput(**model, profile, s, {}));
    if (!plan) {
        v.why = plan.error().message;
        return v;
    }
    v.planned = true;
    uint64_t streamed = 0;  // from the SSD each token (the embedding table's one row a token is not)
    for (const auto& t : plan->placement.tensors) {
        v.tiers[int(t.tier)] += t.bytes;
        if (t.tier == plan::Tier::Ssd && t.name != "token_embd.weight") streamed += t.bytes;
    }
    v.tokensPerSecond = plan->tokensPerSecond();
    v.fits = streamed == 0;
    return v;
}

std::vector<FileVerdict> repositoryModels(const std::vector<HubFile>& files)
{
    std::vector<FileVerdict> models;
    for (const auto& f : files)
        if (isGgufPath(f.path) && !isLaterShard(f.path)) models.push_back(unjudged(files, f));
    return models;
}

int recommend(const std::vector<FileVerdict>& verdicts, double minTokensPerSecond)
{
    int best = -1;
    for (size_t i = 0; i < verdicts.size(); ++i)
        if (verdicts[i].planned && verdicts[i].tokensPerSecond >= minTokensPerSecond &&
            (best < 0 || verdicts[i].bytes > verdicts[size_t(best)].bytes))
            best = int(i);
    if (best >= 0) return best;
    for (size_t i = 0; i < verdicts.size(); ++i)
        if (verdicts[i].planned && (best < 0 || verdicts[i].tokensPerSecond > verdicts[size_t(best)].tokensPerSecond))
            best = int(i);
    return best;
}

}  // namespace spillway::server
