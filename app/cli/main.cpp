// spillway-cli: the engine from the command line (generate, info, make-synthetic, bench).

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"

namespace spillway::cli {

int reportError(const Error& error)
{
    std::fprintf(stderr, "spillway-cli: %s\n", error.message.c_str());
    switch (error.code) {
    case ErrorCode::InvalidArgument: return ExitUsage;
    case ErrorCode::Cancelled: return ExitInterrupted;
    default: return ExitFailed;
    }
}

std::string demoModelPath()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto installed = exe.parent_path().parent_path() / "share/spillway/models/stories260K.gguf";
        if (std::filesystem::exists(installed, ec)) return installed.string();
    }
    return SPILLWAY_DEMO_MODEL_BUILD;
}

void addModelOptions(CLI::App* cmd, std::string& model, std::string& architecture, std::string& tokenizerPath)
{
    model = demoModelPath();
    cmd->add_option("-m,--model", model, "GGUF file, model package folder or llama2.c checkpoint (default: the bundled demo model)")
        ->check(CLI::ExistingPath);
    cmd->add_option("--arch", architecture, "llama2.c checkpoints: the architecture the file does not record (llama, relu-llama)");
    cmd->add_option("--tokenizer", tokenizerPath, "llama2.c checkpoints: tokenizer.bin (default: tokenizer.bin or tok<vocab>.bin beside it)")
        ->check(CLI::ExistingFile);
}

std::string appDataFolder()
{
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    const std::string data = xdg && *xdg ? xdg : std::string(home && *home ? home : ".") + "/.local/share";
    return data + "/spillway";
}

std::string humanBytes(double bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
    return buf;
}

Result<std::string> readApiKeyFile(const std::string& path)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077))
        std::fprintf(stderr, "spillway-cli: %s can be read by other users; keep API keys in a file only you can read (chmod 600)\n",
                     path.c_str());
    std::ifstream in(path);
    std::string key;
    if (!in) return Error{ErrorCode::Io, "cannot read the API key file " + path};
    std::getline(in, key);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
    if (key.empty()) return Error{ErrorCode::InvalidArgument, "the API key file " + path + " is empty"};
    return key;
}

Result<std::string> readTextFile(const std::string& path, size_t limit)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error{ErrorCode::Io, "cannot read " + path};
    std::string text(limit + 1, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    if (text.size() > limit) return Error{ErrorCode::InvalidArgument, path + " is larger than " + std::to_string(limit) + " bytes"};
    return text;
}

}  // namespace spillway::cli

int main(int argc, char** argv)
{
    using namespace spillway::cli;
    CLI::App app{"spillway-cli: run language models bigger than your GPU's memory.\n"
                 "Exit codes: 0 success, 1 the work failed (bad model file, I/O, memory), "
                 "2 wrong command line, 130 interrupted."};
    app.set_version_flag("--version", std::string("spillway-cli ") + SPILLWAY_VERSION);
    app.require_subcommand(1);
    int exitCode = ExitOk;
    addGenerateCommand(app, exitCode);
    addInfoCommand(app, exitCode);
    addSyntheticCommand(app, exitCode);
    addBenchCommand(app, exitCode);
    addPlanCommand(app, exitCode);
    addProbeCommand(app, exitCode);
    addCompressCommand(app, exitCode);
    addConvertCommand(app, exitCode);
    addSparsityCommand(app, exitCode);
    addServeCommand(app, exitCode);
    addChatCommand(app, exitCode);
    addPullCommands(app, exitCode);
    addLibraryCommand(app, exitCode);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? ExitOk : ExitUsage;
    }
    return exitCode;
}
