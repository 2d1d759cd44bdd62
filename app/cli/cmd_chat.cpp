// spillway-cli chat: an interactive chat in the terminal, with the model's chat template, on a
// local model or a remote OpenAI-compatible endpoint (--endpoint).

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/engine/conversation.h"
#include "core/engine/engine.h"
#include "core/model/llama_model.h"
#include "offload.h"
#include "server/openai_client.h"

namespace spillway::cli {

namespace {

using nlohmann::json;

// Ctrl-C stops the reply in progress; a second one (or one at the prompt) quits.
std::atomic<bool> g_replying{false}, g_stopReply{false}, g_quit{false};
void onInterrupt(int)
{
    if (g_replying.load()) {
        if (g_stopReply.load()) g_quit.store(true);
        g_stopReply.store(true);
    } else {
        g_quit.store(true);
    }
}

struct ChatOptions {
    std::string model;
    ModelLoadOptions load;
    std::string system;
    int tokens = 0;
    int threads = 0;
    int context = 0;
    std::string backend = "cpu";
    SamplerSettings sampling;
    int64_t seed = -1;
    bool json = false;
    std::string endpoint, apiKeyFile, remoteModel;
    OffloadOptions offload;
    // Thinking, for templates that take it: "" (the template's default), "on", "off"; the effort
    // ("" default, low, medium, high); the most tokens a reply thinks for (-1: no limit).
    std::string think, reasoningEffort;
    int reasoningBudget = -1;
};

// One reply, local or remote, as the loop sees it.
struct Turn {
    std::string text;       // the answer
    std::string reasoning;  // the model's thinking, apart (where its template marks it)
    std::string finish;  // "stop", "length", "" when stopped
    int promptTokens = 0, completionTokens = 0;
    double firstTokenMs = 0, tokensPerSecond = 0;
    bool remote = false;
};

// Gets the reply as it comes, by parts (reasoning, answer).
using OnText = std::function<bool(engine::ReplyPart, std::string_view)>;

struct Backend {
    std::function<Result<Turn>(const std::vector<engine::Message>&, const OnText&)> reply;
    std::function<void()> reset;
};

void emitJson(const json& j)
{
    std::fputs((j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n").c_str(), stdout);
    std::fflush(stdout);
}

bool saveConversation(const std::vector<engine::Message>& history, const std::string& file, const std::string& model)
{
    json list = json::array();
    for (const auto& m : history) list.push_back({{"role", m.role}, {"content", m.content}});
    std::ofstream out(file, std::ios::trunc);
    out << json{{"model", model}, {"messages", list}}.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    return bool(out.flush());
}

int runChat(ChatOptions o)
{
    const bool tty = ::isatty(STDIN_FILENO);
    const bool pretty = tty && !o.json;
    o.sampling.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();
    std::string modelName;
    Backend backend;
    // Local: the engine and one conversation (its KV cache kept between turns).
    std::unique_ptr<OffloadRun> local;
    std::unique_ptr<engine::Conversation> conversation;
    std::unique_ptr<server::OpenAiClient> remote;
    if (!o.endpoint.empty()) {
        server::EndpointOptions e;
        e.url = o.endpoint;
        e.model = o.remoteModel;
        if (!o.apiKeyFile.empty()) {
            auto key = readApiKeyFile(o.apiKeyFile);
            if (!key) return reportError(key.error());
            e.apiKey = std::move(*key);
        }
        auto client = server::OpenAiClient::open(e);
        if (!client) return reportError(client.error());
        remote = std::move(*client);
        auto id = remote->model();
        if (!id) return reportError(id.error());
        modelName = *id;
        if (!o.json)
            std::fprintf(stderr, "spillway-cli: chatting with %s at %s (remote: the compute is on that machine)\n",
                         modelName.c_str(), o.endpoint.c_str());
        backend.reply = [&](const std::vector<engine::Message>& history, const OnText& onText) -> Result<Turn> {
            auto r = remote->chat(
                history, o.sampling, o.tokens,
                [&](std::string_view text) { return onText(engine::ReplyPart::Content, text); }, &g_stopReply);
            if (!r) return r.error();
            return Turn{r->text, {}, r->finishReason, r->promptTokens, r->completionTokens, r->timeToFirstToken * 1e3,
                        r->tokensPerSecond(), true};
        };
        backend.reset = [] {};
    } else {
        auto loaded = LlamaModel::load(o.model, o.load);
        if (!loaded) return reportError(loaded.error());
        std::shared_ptr<const LlamaModel> model = std::move(*loaded);
        auto run = prepareOffload(model, o.backend, o.threads, o.context, o.offload, false);
        if (!run) return reportError(run.error());
        local = std::make_unique<OffloadRun>(std::move(*run));
        conversation = local->engine->conversation();
        modelName = o.model;
        if (!o.json && !local->engine->chat().chatting())
            std::fprintf(stderr, "spillway-cli: %s has no chat template: each reply continues your last message\n",
                         o.model.c_str());
        backend.reply = [&](const std::vector<engine::Message>& history, const OnText& onText) -> Result<Turn> {
            engine::ReplyOptions r;
            r.maxNewTokens = o.tokens;
            r.sampling = o.sampling;
            r.stop = &g_stopReply;
            if (!o.think.empty()) r.prompt.thinking = o.think == "on";
            r.prompt.reasoningEffort = o.reasoningEffort;
            r.reasoningBudget = o.reasoningBudget;
            Turn t;
            r.onPart = onText;
            auto s = conversation->reply(history, r);
            if (!s) return s.error();
            t.text = s->content;
            t.reasoning = s->reasoning;
            t.finish = s->end == engine::ReplyStats::End::Stopped ? ""
                       : s->end == engine::ReplyStats::End::Turn  ? "stop"
                                                                  : "length";
            t.promptTokens = s->promptTokens;
            t.completionTokens = s->generatedTokens;
            t.firstTokenMs = s->timeToFirstToken * 1e3;
            t.tokensPerSecond = s->decodeTokensPerSecond();
            if (s->droppedMessages > 0 && !o.json)
                std::fprintf(stderr, "spillway-cli: the oldest %d messages no longer fit the context and were left out\n",
                             s->droppedMessages);
            return t;
        };
        backend.reset = [&] { conversation->reset(); };
    }

    struct sigaction sa{};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt ends the read
    sigaction(SIGINT, &sa, nullptr);

    std::vector<engine::Message> history;
    if (!o.system.empty()) history.push_back({"system", o.system});
    if (pretty)
        std::fprintf(stderr, "Type a message; /reset starts over, /save FILE writes the conversation, /quit ends. "
                             "Ctrl-C stops a reply, twice quits.\n");
    std::string line;
    while (!g_quit.load()) {
        if (pretty) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        std::string message = line;
        std::string command, argument;
        if (o.json) {
            json in = json::parse(line, nullptr, false);
            if (in.is_discarded() || !in.is_object()) {
                emitJson({{"type", "error"}, {"message", "each line must be a JSON object: {\"content\": ...} or {\"command\": ...}"}});
                continue;
            }
            if (in.contains("command") && in["command"].is_string()) {
                command = "/" + in["command"].get<std::string>();
                argument = in.value("file", "");
            } else if (in.contains("content") && in["content"].is_string()) {
                message = in["content"];
            } else {
                emitJson({{"type", "error"}, {"message", "a line needs 'content' (a string) or 'command'"}});
                continue;
            }
        } else {
            while (!message.empty() && message.back() == '\\' && std::getline(std::cin, line))  // "\" continues the line
                message = message.substr(0, message.size() - 1) + "\n" + line;
            if (!message.empty() && message[0] == '/') {
                const size_t space = message.find(' ');
                command = message.substr(0, space);
                argument = space == std::string::npos ? "" : message.substr(space + 1);
            }
        }
        if (!command.empty()) {
            std::string result;
            bool failed = false;
            if (command == "/quit" || command == "/exit") break;
            if (command == "/reset") {
                history.clear();
                if (!o.system.empty()) history.push_back({"system", o.system});
                backend.reset();
                result = "the conversation starts over";
            } else if (command == "/save") {
                failed = argument.empty() || !saveConversation(history, argument, modelName);
                result = argument.empty() ? "/save needs a file name" : failed ? "cannot write " + argument : "saved to " + argument;
            } else {
                failed = true;
                result = "unknown command " + command + " (/reset, /save FILE, /quit)";
            }
            if (o.json)
                emitJson({{"type", failed ? "error" : "command"}, {failed ? "message" : "result", result}});
            else
                std::fprintf(stderr, "%s\n", result.c_str());
            continue;
        }
        if (message.empty()) continue;
        history.push_back({"user", message});
        g_stopReply.store(false);
        g_replying.store(true);
        // The reasoning streams apart from the answer: dimmed before it on a terminal, on stderr
        // when stdout is a pipe (which then holds the answer alone), as "reasoning" events in JSON.
        bool thinking = false;
        auto turn = backend.reply(history, [&](engine::ReplyPart part, std::string_view text) {
            const bool thought = part == engine::ReplyPart::Reasoning;
            if (o.json) {
                emitJson({{"type", thought ? "reasoning" : "token"}, {"text", std::string(text)}});
                return true;
            }
            FILE* out = thought && !pretty ? stderr : stdout;
            if (pretty && thought != thinking) std::fputs(thought ? "\x1b[2m" : "\x1b[0m\n\n", stdout);
            thinking = thought;
            std::fwrite(text.data(), 1, text.size(), out);
            std::fflush(out);
            return true;
        });
        if (pretty && thinking) std::fputs("\x1b[0m", stdout);
        g_replying.store(false);
        if (!turn) {
            history.pop_back();
            if (o.json)
                emitJson({{"type", "error"}, {"message", turn.error().message}});
            else
                std::fprintf(stderr, "\nspillway-cli: %s\n", turn.error().message.c_str());
            continue;
        }
        history.push_back({"assistant", turn->text});
        if (o.json) {
            emitJson({{"type", "reply"},
                      {"text", turn->text},
                      {"reasoning", turn->reasoning},
                      {"finish_reason", turn->finish.empty() ? json(nullptr) : json(turn->finish)},
                      {"prompt_tokens", turn->promptTokens},
                      {"completion_tokens", turn->completionTokens},
                      {"time_to_first_token_ms", turn->firstTokenMs},
                      {"tokens_per_s", turn->tokensPerSecond},
                      {"remote", turn->remote}});
        } else {
            std::fputc('\n', stdout);
            std::fflush(stdout);
            std::fprintf(stderr, "[%s%d tokens, %.1f tokens/s, first token %.0f ms%s%s]\n", turn->remote ? "remote: " : "",
                         turn->completionTokens, turn->tokensPerSecond, turn->firstTokenMs,
                         turn->finish.empty() ? ", stopped" : "", turn->finish == "length" ? ", cut at the length limit" : "");
        }
    }
    if (pretty) std::fputc('\n', stdout);
    conversation.reset();  // before the engine
    return g_quit.load() ? ExitInterrupted : ExitOk;
}

}  // namespace

void addChatCommand(CLI::App& app, int& exitCode)
{
    auto o = std::make_shared<ChatOptions>();
    auto* cmd = app.add_subcommand("chat", "Chat in the terminal with a model (its chat template, history, streaming), "
                                           "local or at an OpenAI-compatible endpoint");
    addModelOptions(cmd, o->model, o->load.architecture, o->load.tokenizerPath);
    cmd->add_option("--system", o->system, "System prompt");
    cmd->add_option("-n,--tokens", o->tokens, "Most tokens per reply (0: until the model ends its turn or the context is full)")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--temp", o->sampling.temperature, "Temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
    cmd->add_option("--top-k", o->sampling.topK, "Keep the k most likely tokens (0 = off)");
    cmd->add_option("--top-p", o->sampling.topP, "Nucleus sampling threshold (1 = off)")->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--min-p", o->sampling.minP, "Drop tokens below min-p times the best (0 = off)")->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--repeat-penalty", o->sampling.repeatPenalty, "Repetition penalty (1 = off)")->check(CLI::Range(0.01, 100.0));
    cmd->add_option("--presence-penalty", o->sampling.presencePenalty, "Subtract this from the logit of a token seen among the recent ones (0 = off)")
        ->check(CLI::Range(-2.0, 2.0));
    cmd->add_option("--frequency-penalty", o->sampling.frequencyPenalty, "Subtract this per time a token was seen among the recent ones (0 = off)")
        ->check(CLI::Range(-2.0, 2.0));
    cmd->add_option("--seed", o->seed, "Random seed (default: random)");
    cmd->add_option("--think", o->think, "A thinking model thinks before it answers (on) or not (off), where its "
                                         "template takes enable_thinking (default: the template's)")
        ->check(CLI::IsMember({"on", "off"}));
    cmd->add_option("--reasoning-effort", o->reasoningEffort, "low, medium or high, where the template takes "
                                                              "reasoning_effort (gpt-oss)")
        ->check(CLI::IsMember({"low", "medium", "high"}));
    cmd->add_option("--reasoning-budget", o->reasoningBudget,
                    "The most tokens a reply may think for before it answers (0: at once; default -1: no limit)")
        ->check(CLI::Range(-1, 1 << 20));
    cmd->add_option("-t,--threads", o->threads, "CPU threads (default: one per core)")->check(CLI::Range(0, 1024));
    cmd->add_option("-c,--ctx", o->context, "Context length (default: trained, at most 4096)")->check(CLI::Range(0, 1 << 22));
    cmd->add_option("--backend", o->backend, "Compute backend: cpu, cuda, vulkan, auto");
    cmd->add_flag("--json", o->json, "JSON lines: read {\"content\": ...} or {\"command\": \"reset\"|\"save\", \"file\": ...} per line, "
                                     "write {\"type\": \"token\"|\"reply\"|\"command\"|\"error\", ...} per line");
    cmd->add_option("--endpoint", o->endpoint, "Chat with an OpenAI-compatible server instead, e.g. http://127.0.0.1:8080/v1");
    cmd->add_option("--api-key-file", o->apiKeyFile, "The endpoint's API key, first line of this file (keep it chmod 600)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--remote-model", o->remoteModel, "The endpoint's model to use (default: the first it lists)");
    addOffloadOptions(cmd, o->offload, false);
    cmd->callback([o, &exitCode] { exitCode = runChat(*o); });
}

}  // namespace spillway::cli
