// spillway-cli search QUERY: GGUF repositories on the Hugging Face Hub.
// spillway-cli pull REPO[:FILE|:QUANT]: the planner's verdict on each GGUF file of a repository
// for this machine (from its header alone: a few ranged requests per file), then the chosen or
// recommended file downloaded, resumably and checked against its SHA-256 (server/hub.h).

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/hw/probe.h"
#include "core/model/llama_model.h"
#include "server/hub.h"
#include "storage/chat_db.h"
#include "server/hub_verdict.h"

namespace spillway::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string lower(std::string s)
{
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string bytesText(uint64_t bytes) { return humanBytes(double(bytes)); }

struct SearchCommand {
    std::string query;
    int limit = 20;
    bool json = false;
    std::string endpoint;
};

int runSearch(const SearchCommand& c)
{
    server::HubOptions o;
    o.endpoint = c.endpoint;
    auto hub = server::HubClient::open(o);
    if (!hub) return reportError(hub.error());
    auto models = (*hub)->search(c.query, c.limit);
    if (!models) return reportError(models.error());
    if (c.json) {
        json j = json::array();
        for (const auto& m : *models)
            j.push_back({{"id", m.id}, {"downloads", m.downloads}, {"likes", m.likes}, {"gated", m.gated}});
        std::printf("%s\n", j.dump(2).c_str());
        return ExitOk;
    }
    if (models->empty()) std::printf("no GGUF repositories match '%s' on %s\n", c.query.c_str(), (*hub)->endpoint().c_str());
    for (const auto& m : *models)
        std::printf("%-60s %10lld downloads %6lld likes%s\n", m.id.c_str(), (long long)m.downloads, (long long)m.likes,
                    m.gated ? "  (gated: needs an access token)" : "");
    return ExitOk;
}

struct PullCommand {
    std::string target;       // REPO[:FILE|:QUANT]
    std::string dir;
    std::string backend = "cpu";
    std::string endpoint;
    double minTokensPerSecond = 5.0;
    bool planOnly = false;
    bool json = false;
    bool quickProbe = false;
    bool noLibrary = false;
};

int runPull(const PullCommand& c)
{
    const size_t colon = c.target.find(':');
    const std::string repo = c.target.substr(0, colon);
    const std::string pick = colon == std::string::npos ? "" : c.target.substr(colon + 1);
    server::HubOptions o;
    o.endpoint = c.endpoint;
    auto hub = server::HubClient::open(o);
    if (!hub) return reportError(hub.error());
    auto files = (*hub)->files(repo);
    if (!files) return reportError(files.error());
    std::vector<server::HubFile> ggufs;  // a sharded model's first part stands for it
    for (const auto& m : server::repositoryModels(*files)) ggufs.push_back(m.file);
    if (ggufs.empty())
        return reportError(makeError(ErrorCode::InvalidArgument,
                                     repo + " has no GGUF files (" + std::to_string(files->size()) +
                                         " files; a Hugging Face folder of safetensors can be downloaded with "
                                         "huggingface-cli and converted with `spillway-cli convert`)"));
    // The files asked for: one named, or those whose name holds the quantization, else all.
    std::vector<server::HubFile> chosen;
    for (const auto& f : ggufs)
        if (pick.empty() || f.path == pick || lower(fs::path(f.path).filename().string()).find(lower(pick)) != std::string::npos)
            chosen.push_back(f);
    if (chosen.empty())
        return reportError(makeError(ErrorCode::InvalidArgument, repo + " has no GGUF file matching '" + pick + "'"));

    hw::ProbeOptions probe;
    probe.quick = c.quickProbe;
    auto profile = hw::probeHardware(probe);
    if (!profile) return reportError(profile.error());
    std::vector<server::FileVerdict> verdicts;
    for (const auto& f : chosen)
        verdicts.push_back(server::judgeFile(**hub, repo, f, *files, *profile, c.backend, server::defaultHeaderCacheDir()));
    // The largest file predicted at or above the floor; where none is, the fastest.
    const int recommended = server::recommend(verdicts, c.minTokensPerSecond);
    const server::FileVerdict* best = recommended < 0 ? nullptr : &verdicts[size_t(recommended)];
    if (c.json) {
        json j = {{"repo", repo}, {"backend", c.backend}, {"min_tokens_per_second", c.minTokensPerSecond}};
        for (const auto& v : verdicts) {
            json f = {{"file", v.file.path}, {"size", v.bytes}, {"sha256", v.file.sha256}};
            if (v.parts.size() > 1) f["parts"] = v.parts.size();
            if (v.planned) {
                f["device_bytes"] = v.tiers[0];
                f["ram_bytes"] = v.tiers[1];
                f["ssd_bytes"] = v.tiers[2];
                f["predicted_tokens_per_second"] = v.tokensPerSecond;
                f["fits"] = v.fits;
            } else {
                f["no_verdict"] = v.why;
            }
            f["recommended"] = &v == best;
            j["files"].push_back(f);
        }
        if (c.planOnly) std::printf("%s\n", j.dump(2).c_str());
        else std::fprintf(stderr, "%s\n", j.dump(2).c_str());
    } else {
        std::fprintf(stderr, "%s on this machine (%s), from each file's header:\n", repo.c_str(), c.backend.c_str());
        for (const auto& v : verdicts) {
            if (!v.planned) {
                std::fprintf(stderr, "  %-44s %10s  (%s)\n", v.file.path.c_str(), bytesText(v.bytes).c_str(), v.why.c_str());
                continue;
            }
            std::fprintf(stderr, "  %-44s %10s  device %s, RAM %s, SSD %s: %.1f tokens/s predicted%s%s\n",
                         v.file.path.c_str(), bytesText(v.bytes).c_str(), bytesText(v.tiers[0]).c_str(), bytesText(v.tiers[1]).c_str(),
                         bytesText(v.tiers[2]).c_str(), v.tokensPerSecond, v.fits ? "" : " (streams from the SSD)",
                         &v == best ? "  <- recommended" : "");
        }
    }
    if (c.planOnly) return ExitOk;
    if (chosen.size() > 1 && !best)
        return reportError(makeError(ErrorCode::InvalidArgument, "no file to recommend; name one: " + repo + ":FILE"));
    // A sharded model: every part, as one download.
    const std::vector<server::HubFile> parts = chosen.size() == 1 ? verdicts.front().parts : best->parts;
    const std::string dir = c.dir.empty() ? (fs::path(appDataFolder()) / "models").string() : c.dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir, ec)) return reportError(makeError(ErrorCode::Io, dir + ": cannot create the folder"));
    for (const auto& part : parts) {
        const std::string dest = (fs::path(dir) / fs::path(part.path).filename()).string();
        if (fs::exists(dest, ec) && fs::file_size(dest, ec) == part.size) {
            std::fprintf(stderr, "%s: already there\n", dest.c_str());
            continue;
        }
        server::DownloadOptions d;
        auto last = std::chrono::steady_clock::now() - std::chrono::seconds(2);
        d.progress = [&](const server::DownloadProgress& p) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last >= std::chrono::seconds(1) || (p.total && p.done == p.total)) {
                last = now;
                std::fprintf(stderr, "\r%s: %s of %s (%.0f%%), %.1f MiB/s, %.0f s left   ", part.path.c_str(),
                             bytesText(p.done).c_str(), bytesText(p.total).c_str(), p.total ? 100.0 * double(p.done) / double(p.total) : 0.0,
                             p.bytesPerSecond / double(1 << 20), p.secondsLeft());
            }
            return server::DownloadControl::Continue;
        };
        auto r = (*hub)->download(repo, part, dest, d);
        std::fprintf(stderr, "\n");
        if (!r) return reportError(r.error());
        std::fprintf(stderr, "%s: %s%s%s\n", dest.c_str(), bytesText(r->bytes).c_str(),
                     r->resumedFrom ? (", resumed at " + bytesText(r->resumedFrom)).c_str() : "",
                     r->verified ? ", SHA-256 checked" : " (no checksum in the repository)");
        if (&part == &parts.front()) std::printf("%s\n", dest.c_str());
    }
    if (!c.noLibrary) addToLibrary((fs::path(dir) / fs::path(parts.front().path).filename()).string());
    return ExitOk;
}

}  // namespace

void addPullCommands(CLI::App& app, int& exitCode)
{
    auto s = std::make_shared<SearchCommand>();
    auto* search = app.add_subcommand("search", "Find GGUF models on the Hugging Face Hub (HF_ENDPOINT for a mirror)");
    search->add_option("query", s->query, "Words to look for")->required();
    search->add_option("--limit", s->limit, "How many repositories (most downloaded first)")->check(CLI::Range(1, 1000));
    search->add_flag("--json", s->json, "Print JSON");
    search->add_option("--endpoint", s->endpoint, "The hub's address (default: HF_ENDPOINT, else https://huggingface.co)");
    search->callback([s, &exitCode] { exitCode = runSearch(*s); });

    auto c = std::make_shared<PullCommand>();
    auto* pull = app.add_subcommand(
        "pull", "Say where each GGUF file of a Hugging Face repository would live on this machine and how fast it "
                "would run (from its header alone), then download the chosen or recommended one, resumably, checked "
                "against its SHA-256");
    pull->add_option("target", c->target, "REPO, REPO:FILE or REPO:QUANT (e.g. owner/name:Q4_K_M)")->required();
    pull->add_option("--dir", c->dir, "Where to put it (default: the app's models folder, ~/.local/share/spillway/models)");
    pull->add_flag("--no-library", c->noLibrary, "Do not add it to the app's library (spillway.db in its data folder)");
    pull->add_option("--backend", c->backend, "Device to plan for: cpu, cuda, vulkan, auto");
    pull->add_option("--min-tps", c->minTokensPerSecond,
                     "Recommend the largest file predicted at least this fast (tokens/s; default 5)");
    pull->add_flag("--plan-only", c->planOnly, "Only the verdicts; download nothing");
    pull->add_flag("--json", c->json, "The verdicts as JSON (on stdout with --plan-only, else on stderr)");
    pull->add_flag("--quick-probe", c->quickProbe, "Small, rough hardware measurements where none are cached (for tests)");
    pull->add_option("--endpoint", c->endpoint, "The hub's address (default: HF_ENDPOINT, else https://huggingface.co)");
    pull->callback([c, &exitCode] { exitCode = runPull(*c); });
}

}  // namespace spillway::cli
