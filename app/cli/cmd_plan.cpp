// spillway-cli plan: where each tensor of a model would live under given budgets, why, and the
// predicted per-token time of every lane.

#include <cstdio>

#include "cli_common.h"
#include "core/model/llama_model.h"
#include "offload.h"

namespace spillway::cli {

namespace {

struct PlanCommand {
    std::string model;
    int context = 0;
    int threads = 0;
    bool json = false;
    std::string backend = "cpu";
    OffloadOptions offload;
};

int runPlan(PlanCommand& c)
{
    auto model = LlamaModel::load(c.model);
    if (!model) return reportError(model.error());
    c.offload.alwaysPlan = true;
    auto run = prepareOffload(std::move(*model), c.backend, c.threads, c.context, c.offload, false);
    if (!run) return reportError(run.error());
    const std::string text = c.json ? plan::planJson(*run->plan()) + "\n" : plan::planText(*run->plan(), true);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return ExitOk;
}

}  // namespace

void addPlanCommand(CLI::App& app, int& exitCode)
{
    auto c = std::make_shared<PlanCommand>();
    c->model = demoModelPath();
    auto* cmd = app.add_subcommand("plan", "Show where each tensor would live under given budgets, and why");
    cmd->add_option("-m,--model", c->model, "GGUF model file or model package folder")->check(CLI::ExistingPath);
    cmd->add_option("-c,--ctx", c->context, "Context length the KV cache is sized for (default: trained, at most 4096)");
    cmd->add_option("-t,--threads", c->threads, "CPU threads (default: one per core)");
    cmd->add_flag("--json", c->json, "Print the plan as JSON");
    cmd->add_option("--backend", c->backend, "Device to plan for: cpu, cuda, vulkan, auto");
    addOffloadOptions(cmd, c->offload, false);
    addNeuronCacheOptions(cmd, c->offload);
    cmd->callback([c, &exitCode] { exitCode = runPlan(*c); });
}

}  // namespace spillway::cli
