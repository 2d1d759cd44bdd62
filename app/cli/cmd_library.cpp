// spillway-cli library: the app's library (its model catalog, spillway.db in the data folder) from
// the terminal: list it, add files to it, remove them from it (the files stay), as the app's
// Models view does; `serve --library` serves what it holds.

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "core/model/llama_model.h"
#include "storage/chat_db.h"

namespace spillway::cli {

namespace {

namespace fs = std::filesystem;

storage::ModelFormat formatOf(const std::string& path)
{
    std::error_code ec;
    if (fs::is_directory(path, ec))
        return fs::exists(fs::path(path) / "manifest.json", ec) ? storage::ModelFormat::Package : storage::ModelFormat::HfFolder;
    return path.ends_with(".safetensors") ? storage::ModelFormat::Safetensors : storage::ModelFormat::Gguf;
}

int runList()
{
    auto db = storage::ChatDatabase::open(appDataFolder());
    if (!db) return reportError(db.error());
    auto models = db->models();
    if (!models) return reportError(models.error());
    if (models->empty()) std::fprintf(stderr, "the library (%s/spillway.db) is empty\n", appDataFolder().c_str());
    for (const storage::ModelRecord& m : *models) {
        std::error_code ec;
        const bool there = fs::exists(m.path, ec);
        std::printf("%-40s %10s  %-10s %-12s %s%s\n", fs::path(m.path).filename().string().c_str(),
                    humanBytes(double(m.sizeBytes)).c_str(), storage::modelFormatName(m.format), m.architecture.c_str(),
                    m.path.c_str(), there ? "" : "  (missing)");
    }
    return ExitOk;
}

int runRemove(const std::vector<std::string>& names)
{
    auto db = storage::ChatDatabase::open(appDataFolder());
    if (!db) return reportError(db.error());
    auto models = db->models();
    if (!models) return reportError(models.error());
    int status = ExitOk;
    for (const std::string& name : names) {
        std::error_code ec;
        const std::string canonical = fs::weakly_canonical(name, ec).string();
        bool found = false;
        for (const storage::ModelRecord& m : *models) {
            if (m.path != name && m.path != canonical && fs::path(m.path).filename().string() != name) continue;
            found = true;
            if (Status s = db->removeModel(m.id); !s) status = reportError(s.error());
            else std::fprintf(stderr, "removed %s from the library (the file stays)\n", m.path.c_str());
        }
        if (!found) status = reportError(makeError(ErrorCode::InvalidArgument, "'" + name + "' is not in the library"));
    }
    return status;
}

}  // namespace

bool addToLibrary(const std::string& file)
{
    std::error_code ec;
    const std::string path = fs::weakly_canonical(file, ec).string();
    auto model = LlamaModel::load(path);
    if (!model) {
        std::fprintf(stderr, "not added to the library: %s\n", model.error().message.c_str());
        return false;
    }
    auto db = storage::ChatDatabase::open(appDataFolder());
    if (!db) {
        std::fprintf(stderr, "not added to the library: %s\n", db.error().message.c_str());
        return false;
    }
    auto known = db->modelByPath((*model)->path());
    if (known && *known) {
        std::fprintf(stderr, "%s is in the library already\n", (*model)->path().c_str());
        return true;
    }
    storage::ModelRecord r;
    r.path = (*model)->path();  // a split model's first part, whichever was named
    r.format = formatOf(r.path);
    r.architecture = (*model)->config().architecture;
    r.parameterCount = int64_t((*model)->parameterCount());
    r.sizeBytes = 0;
    for (const std::string& part : (*model)->dataFiles()) r.sizeBytes += int64_t(fs::file_size(part, ec));  // every part
    auto added = db->addModel(r);
    if (!added) {
        std::fprintf(stderr, "not added to the library: %s\n", added.error().message.c_str());
        return false;
    }
    std::fprintf(stderr, "added to the library: %s (%s/spillway.db)\n", r.path.c_str(), appDataFolder().c_str());
    return true;
}

void addLibraryCommand(CLI::App& app, int& exitCode)
{
    auto* cmd = app.add_subcommand("library", "The app's library of models (spillway.db in its data folder): list, add, remove");
    cmd->require_subcommand(1);
    auto* list = cmd->add_subcommand("list", "The models in the library: name, size, format, architecture, path");
    list->callback([&exitCode] { exitCode = runList(); });
    auto files = std::make_shared<std::vector<std::string>>();
    auto* add = cmd->add_subcommand("add", "Add model files or folders (checked by opening them; a file that does not open stays out)");
    add->add_option("files", *files, "GGUF files, Hugging Face folders or model packages")->required()->check(CLI::ExistingPath);
    add->callback([files, &exitCode] {
        exitCode = ExitOk;
        for (const std::string& f : *files)
            if (!addToLibrary(f)) exitCode = ExitFailed;
    });
    auto names = std::make_shared<std::vector<std::string>>();
    auto* remove = cmd->add_subcommand("remove", "Remove models from the library by name or path (their files stay)");
    remove->add_option("models", *names, "File names (as listed) or paths")->required();
    remove->callback([names, &exitCode] { exitCode = runRemove(*names); });
}

}  // namespace spillway::cli
