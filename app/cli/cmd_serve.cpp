// spillway-cli serve: the model behind an OpenAI-compatible HTTP server (server/server.h).

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli_common.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"
#include "offload.h"
#include "server/server.h"
#include "storage/chat_db.h"

namespace spillway::cli {

namespace {

std::atomic<bool> g_stop{false};
void onStopSignal(int) { g_stop.store(true); }

struct ServeOptions {
    std::string model;
    ModelLoadOptions load;
    server::ServerOptions server;
    std::string apiKeyFile;
    std::string chatTemplateFile;  // a template of the user's own in place of the model's
    int threads = 0;
    int context = 0;
    std::string backend = "cpu";
    OffloadOptions offload;
    bool library = false;  // the app's library beside the model, loaded when a request names one
};

// The models of the app's library (its catalog in the data folder), named by their file's name.
std::vector<server::LibraryModel> libraryModels()
{
    std::vector<server::LibraryModel> out;
    auto db = storage::ChatDatabase::open(appDataFolder());
    if (!db) return out;
    auto models = db->models();
    if (!models) return out;
    for (const storage::ModelRecord& r : *models) {
        server::LibraryModel m;
        m.path = r.path;
        m.name = std::filesystem::path(r.path).filename().string();
        m.architecture = r.architecture;
        m.bytes = uint64_t(std::max<int64_t>(0, r.sizeBytes));
        m.parameters = uint64_t(std::max<int64_t>(0, r.parameterCount));
        m.modified = r.addedMs / 1000;
        out.push_back(std::move(m));
    }
    return out;
}

int runServe(ServeOptions o)
{
    if (!o.apiKeyFile.empty()) {
        auto key = readApiKeyFile(o.apiKeyFile);
        if (!key) return reportError(key.error());
        o.server.apiKey = std::move(*key);
    }
    // The address and options before the model loads (which may take minutes).
    if (auto ok = server::checkOptions(o.server); !ok) return reportError(ok.error());
    auto loaded = LlamaModel::load(o.model, o.load);
    if (!loaded) return reportError(loaded.error());
    std::shared_ptr<const LlamaModel> model = std::move(*loaded);
    // Traced always: /metrics reports each lane's busy time from the timeline.
    auto run = prepareOffload(model, o.backend, o.threads, o.context, o.offload, true);
    if (!run) return reportError(run.error());
    o.server.trace = run->recorder.get();
    if (!o.chatTemplateFile.empty()) {
        auto source = readTextFile(o.chatTemplateFile);
        if (!source) return reportError(source.error());
        const Vocabulary& v = run->engine->model().tokenizer().vocabulary();
        auto text = [&](int32_t id) { return id >= 0 && size_t(id) < v.tokens.size() ? v.tokens[size_t(id)] : std::string(); };
        auto format = engine::ChatFormat::fromSource(*source, text(v.bos), text(v.eos));
        if (!format) return reportError(format.error());
        run->engine->setChatFormat(std::move(*format));
    }
    if (o.server.modelId.empty()) o.server.modelId = std::filesystem::path(o.model).filename().string();
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-reply is an error on its socket, no more
    const auto& info = run->engine->device().info();
    const std::string deviceName = info.name;
    const bool chatting = run->engine->chat().chatting();
    std::optional<server::Server> serving;
    if (o.library) {
        // The server owns the model: it unloads it when a request names another of the library,
        // which loads with the same options.
        server::ModelLibrary library;
        library.list = libraryModels;
        library.open = [o](const server::LibraryModel& m) -> Result<server::LoadedModel> {
            auto loaded = LlamaModel::load(m.path, o.load);
            if (!loaded) return loaded.error();
            auto next = prepareOffload(std::move(*loaded), o.backend, o.threads, o.context, o.offload, true);
            if (!next) return next.error();
            server::LoadedModel out;
            out.trace = std::move(next->recorder);
            out.engine = std::move(next->engine);
            return out;
        };
        o.server.library = std::move(library);
        server::LoadedModel first;
        first.trace = std::move(run->recorder);
        first.engine = std::move(run->engine);
        serving.emplace(std::move(first), o.server);
        std::fprintf(stderr, "spillway-cli: the library's %zu models are listed and load when a request names one (%s/spillway.db)\n",
                     libraryModels().size(), appDataFolder().c_str());
    } else {
        serving.emplace(*run->engine, o.server);
    }
    auto port = serving->bind();
    if (!port) return reportError(port.error());
    std::fprintf(stderr, "spillway-cli: serving %s on http://%s:%d/v1 (%d slot%s, %s, %s%s)\n", o.server.modelId.c_str(),
                 o.server.host.c_str(), *port, o.server.parallel, o.server.parallel == 1 ? "" : "s", deviceName.c_str(),
                 chatting ? "chat template" : "no chat template: replies continue the last user message",
                 o.server.apiKey.empty() ? "" : ", API key required");
    std::printf("%d\n", *port);  // the port alone on stdout, for scripts that asked for port 0
    std::fflush(stdout);
    g_stop.store(false);
    std::signal(SIGINT, onStopSignal);
    std::signal(SIGTERM, onStopSignal);
    std::atomic<bool> done{false};
    std::thread watcher([&] {
        while (!done.load() && !g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        serving->stop();
    });
    serving->run();
    done.store(true);
    watcher.join();
    serving.reset();  // its conversations before the engine
    std::fprintf(stderr, "spillway-cli: server stopped\n");
    return ExitOk;
}

}  // namespace

void addServeCommand(CLI::App& app, int& exitCode)
{
    auto o = std::make_shared<ServeOptions>();
    auto* cmd = app.add_subcommand("serve", "Serve a model over the OpenAI API (chat completions, completions, models, "
                                            "health, metrics) on this machine");
    addModelOptions(cmd, o->model, o->load.architecture, o->load.tokenizerPath);
    cmd->add_option("--host", o->server.host, "Address to listen on (default 127.0.0.1; any other needs an API key)");
    cmd->add_option("--port", o->server.port, "Port (0: any free one, printed on stdout)")->check(CLI::Range(0, 65535));
    cmd->add_option("--api-key", o->server.apiKey, "Require 'Authorization: Bearer KEY'");
    cmd->add_option("--api-key-file", o->apiKeyFile, "Read the API key from this file's first line")->check(CLI::ExistingFile);
    cmd->add_option("--chat-template-file", o->chatTemplateFile,
                    "A Jinja chat template to use in place of the model's own (tokenizer.chat_template)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--reasoning-budget", o->server.reasoningBudget,
                    "The most tokens a thinking model's reply may think for before it answers (0: it answers "
                    "at once; default -1: no limit)")
        ->check(CLI::Range(-1, 1 << 20));
    cmd->add_option("--parallel", o->server.parallel, "Conversation slots (each its own KV cache; default 1)")
        ->check(CLI::Range(1, 64));
    cmd->add_option("--queue", o->server.maxQueue, "Requests that may wait for a slot; more get 503 (default 16)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--max-body", o->server.maxBodyBytes, "Largest request body in bytes (default 4 MiB)")
        ->check(CLI::Range(size_t(1024), size_t(1) << 30));
    cmd->add_option("--timeout", o->server.headerTimeoutSeconds, "Seconds a client has to send its request (default 10)")
        ->check(CLI::Range(1, 3600));
    cmd->add_option("--cors", o->server.cors, "Allow browser pages from this origin (e.g. http://localhost:3000)");
    cmd->add_option("--alias", o->server.modelId, "The model's name in /v1/models (default: the file name)");
    cmd->add_flag("--library", o->library,
                  "List the app's library (its models in the data folder's spillway.db) beside the model, and load "
                  "one when a request names it (the model before is unloaded first: one at a time)");
    cmd->add_option("-t,--threads", o->threads, "CPU threads (default: one per core)")->check(CLI::Range(0, 1024));
    cmd->add_option("-c,--ctx", o->context, "Context length per slot (default: trained, at most 4096)")
        ->check(CLI::Range(0, 1 << 22));
    cmd->add_option("--backend", o->backend, "Compute backend: cpu, cuda, vulkan, auto");
    addOffloadOptions(cmd, o->offload, false);
    cmd->callback([o, &exitCode] { exitCode = runServe(*o); });
}

}  // namespace spillway::cli
