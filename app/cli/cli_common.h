#pragma once
// Shared pieces of spillway-cli's subcommands.

#include <CLI/CLI.hpp>
#include <string>

#include "base/result.h"

namespace spillway::cli {

// Exit codes (documented in --help): 0 success, 1 the work failed (bad or unsupported model
// file, I/O, out of memory), 2 the command line is wrong, 130 interrupted.
enum ExitCode { ExitOk = 0, ExitFailed = 1, ExitUsage = 2, ExitInterrupted = 130 };

// Prints "spillway-cli: <message>" on stderr and returns the exit code for the error.
int reportError(const Error& error);

// "1.23 GiB", "512 B": bytes in the largest binary unit under them.
std::string humanBytes(double bytes);

// The bundled demo model (installed beside the binary, or in the source tree for a build).
std::string demoModelPath();

// -m/--model (default: the demo model), --arch and --tokenizer, for the commands that open one
// model (chat, serve).
void addModelOptions(CLI::App* cmd, std::string& model, std::string& architecture, std::string& tokenizerPath);
// The app's data folder (its library, spillway.db): $XDG_DATA_HOME/spillway, else
// ~/.local/share/spillway (QStandardPaths' AppDataLocation for the app "spillway").
std::string appDataFolder();

// An API key from the first line of `path` (trailing spaces and CR dropped), with a warning on
// stderr when other users can read the file. Io when it cannot be read; InvalidArgument when empty.
Result<std::string> readApiKeyFile(const std::string& path);
// A small text file whole (a JSON Schema, a chat template): Io when it cannot be read,
// InvalidArgument when it is larger than `limit`.
Result<std::string> readTextFile(const std::string& path, size_t limit = 1u << 20);

void addGenerateCommand(CLI::App& app, int& exitCode);
void addInfoCommand(CLI::App& app, int& exitCode);
void addSyntheticCommand(CLI::App& app, int& exitCode);
void addBenchCommand(CLI::App& app, int& exitCode);
void addPlanCommand(CLI::App& app, int& exitCode);
void addProbeCommand(CLI::App& app, int& exitCode);
void addCompressCommand(CLI::App& app, int& exitCode);
void addConvertCommand(CLI::App& app, int& exitCode);
void addSparsityCommand(CLI::App& app, int& exitCode);
void addServeCommand(CLI::App& app, int& exitCode);
void addChatCommand(CLI::App& app, int& exitCode);
void addPullCommands(CLI::App& app, int& exitCode);  // search, pull
void addLibraryCommand(CLI::App& app, int& exitCode);
// Puts a model in the app's library (cmd_library.cpp), as the app's Discover view does; a file
// the engine cannot open stays out, and it says why (false).
bool addToLibrary(const std::string& file);

}  // namespace spillway::cli
