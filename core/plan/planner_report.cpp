// Human and JSON forms of a plan.

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/plan/planner.h"

namespace spillway::plan {

namespace {

std::string format(const char* fmt, auto... args)
{
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return buf;
}

double mibOf(uint64_t bytes) { return double(bytes) / double(1 << 20); }

}  // namespace

std::string planText(const PlanResult& r, bool perTensor)
{
    std::string out;
    out += format("device: %s\n", r.deviceName.c_str());
    out += format("budgets: device %.1f MiB, pinned RAM %.1f MiB\n", mibOf(r.vramBudget), mibOf(r.ramBudget));
    if (perTensor) {
        out += format("\n%-28s %-6s %10s %6s %9s %9s %9s  %s\n", "tensor", "tier", "MiB", "alpha", "ssd ms",
                      "copy ms", "comp ms", "reason");
        for (size_t i = 0; i < r.placement.tensors.size(); ++i) {
            const auto& t = r.placement.tensors[i];
            const auto& c = r.costs[i];
            out += format("%-28s %-6s %10.2f %6.2f %9.3f %9.3f %9.3f  %s\n", t.name.c_str(), tierName(t.tier),
                          mibOf(t.bytes), t.tier == Tier::Device ? 1.0 : c.hetegenAlpha,
                          t.tier == Tier::Ssd ? c.ssdSeconds * 1e3 : 0.0,
                          t.tier == Tier::Device ? 0.0 : c.copySeconds * 1e3, c.computeSeconds * 1e3,
                          t.reason.c_str());
        }
    }
    out += "\nmemory per tier\n";
    out += format("  device  %10.1f MiB = weights %.1f + %d slot(s) %.1f + KV cache/activations %.1f  (budget %.1f)\n",
                  mibOf(r.deviceTotal()), mibOf(r.deviceWeightBytes), r.slotCount, mibOf(r.deviceSlotBytes),
                  mibOf(r.deviceWorkingBytes), mibOf(r.vramBudget));
    out += format("          KV cache %.1f MiB (%s)\n", mibOf(r.kvCacheBytes), gpu::kvTypeName(r.kvType));
    if (r.recurrentStateBytes > 0)
        out += format("          recurrent state %.1f MiB (linear-attention layers: the same at every context length)\n",
                      mibOf(r.recurrentStateBytes));
    out += format("  RAM     %10.1f MiB = weights %.1f + staging %.1f", mibOf(r.hostTotal()), mibOf(r.hostWeightBytes),
                  mibOf(r.stagingBytes));
    if (r.stateSnapshotBytes > 0) out += format(" + state snapshots %.1f", mibOf(r.stateSnapshotBytes));
    out += format("  (budget %.1f)\n", mibOf(r.ramBudget));
    out += format("  SSD     %10.1f MiB read per token\n", mibOf(r.ssdBytes));
    out += format("prefetch depth %d%s\n", r.placement.prefetchDepth,
                  r.placement.prefetchDepth == 0 ? " (naive: each unit loaded right before use)" : "");
    // Calibrated by earlier runs (core/hw/calibration.h): each figure beside the probe's alone.
    const std::pair<const char*, double LaneTimes::*> lanes[] = {
        {"SSD read      ", &LaneTimes::ssdRead},        {"host->device  ", &LaneTimes::hostToDevice},
        {"decompress    ", &LaneTimes::decompress},     {"device compute", &LaneTimes::deviceCompute},
        {"CPU compute   ", &LaneTimes::cpuCompute}};
    bool calibrated = r.probeSecondsPerToken > 0 && r.secondsPerToken != r.probeSecondsPerToken;
    for (const auto& [name, lane] : lanes) calibrated |= r.probeSecondsPerToken > 0 && r.lanes.*lane != r.probeLanes.*lane;
    out += calibrated ? "\npredicted per token (lanes overlap), calibrated by runs | the probe's figures alone\n"
                      : "\npredicted per token (lanes overlap)\n";
    for (const auto& [name, lane] : lanes)
        out += calibrated ? format("  %s  %9.2f ms | %9.2f ms\n", name, r.lanes.*lane * 1e3, r.probeLanes.*lane * 1e3)
                          : format("  %s  %9.2f ms\n", name, r.lanes.*lane * 1e3);
    out += format("  token           %9.2f ms  = %.2f tokens/s", r.secondsPerToken * 1e3, r.tokensPerSecond());
    out += calibrated ? format(" | %.2f ms = %.2f tokens/s (%d run%s)\n", r.probeSecondsPerToken * 1e3,
                               1.0 / r.probeSecondsPerToken, r.calibrationRuns, r.calibrationRuns == 1 ? "" : "s")
                      : std::string("\n");
    if (!r.expertLayers.empty()) {
        // Per layer, runs of layers alike in one line.
        out += "\nexperts per layer; routing " + r.routing + "\n";
        auto where = [](const ExpertLayerPlan& x) {
            if (x.cached)
                return format("expert cache: %d slots on the device, %d experts in RAM, %d on the SSD; "
                              "expected %.1f%% in slots, %.1f%% from RAM, %.1f%% from the SSD",
                              x.deviceSlots, x.hostExperts, x.ssdExperts, 100 * x.hitRate, 100 * x.hostRate,
                              100 * (1 - x.hitRate - x.hostRate));
            if (x.split) return std::string("split across tiers (streamed whole)");
            return format("all on the %s%s", x.tier == Tier::Device ? "device" : x.tier == Tier::Host ? "RAM" : "SSD",
                          x.tier == Tier::Device ? "" : " (streamed whole)");
        };
        for (size_t i = 0; i < r.expertLayers.size();) {
            const std::string text = where(r.expertLayers[i]);
            size_t j = i + 1;
            while (j < r.expertLayers.size() && r.expertLayers[j].layer == r.expertLayers[j - 1].layer + 1 &&
                   where(r.expertLayers[j]) == text)
                ++j;
            const int first = r.expertLayers[i].layer, last = r.expertLayers[j - 1].layer;
            out += first == last ? format("  layer %-7d %s\n", first, text.c_str())
                                 : format("  layers %d-%-4d %s\n", first, last, text.c_str());
            i = j;
        }
    }
    for (const auto& n : r.notes) out += "note: " + n + "\n";
    return out;
}

std::string planJson(const PlanResult& r)
{
    nlohmann::json tensors = nlohmann::json::array();
    for (size_t i = 0; i < r.placement.tensors.size(); ++i) {
        const auto& t = r.placement.tensors[i];
        const auto& c = r.costs[i];
        tensors.push_back({{"name", t.name},
                           {"unit", t.unit},
                           {"bytes", t.bytes},
                           {"tier", tierName(t.tier)},
                           {"device_fraction", t.deviceFraction},
                           {"hetegen_alpha", c.hetegenAlpha},
                           {"ssd_seconds", c.ssdSeconds},
                           {"copy_seconds", c.copySeconds},
                           {"compute_seconds", c.computeSeconds},
                           {"reason", t.reason}});
    }
    // Each lane's busy seconds per token and the token's, calibrated, then the probe's alone.
    const auto lanesJson = [](const LaneTimes& l, double secondsPerToken) {
        return nlohmann::json{{"ssd_read_s", l.ssdRead},
                              {"host_to_device_s", l.hostToDevice},
                              {"decompress_s", l.decompress},
                              {"device_compute_s", l.deviceCompute},
                              {"cpu_compute_s", l.cpuCompute},
                              {"seconds_per_token", secondsPerToken}};
    };
    nlohmann::json predicted = lanesJson(r.lanes, r.secondsPerToken);
    predicted["tokens_per_s"] = r.tokensPerSecond();
    predicted["bottleneck"] = r.bottleneck;
    predicted["calibration_runs"] = r.calibrationRuns;
    predicted["size_class"] = r.sizeClass;
    predicted["weight_format"] = r.weightFormat;
    predicted["probe_only"] = lanesJson(r.probeLanes, r.probeSecondsPerToken);
    nlohmann::json j = {
        {"device", r.deviceName},
        {"budgets", {{"device_bytes", r.vramBudget}, {"ram_bytes", r.ramBudget}}},
        {"memory",
         {{"device_weight_bytes", r.deviceWeightBytes},
          {"device_slot_bytes", r.deviceSlotBytes},
          {"slots", r.slotCount},
          {"device_working_bytes", r.deviceWorkingBytes},
          {"kv_cache_bytes", r.kvCacheBytes},
          {"recurrent_state_bytes", r.recurrentStateBytes},
          {"state_snapshot_bytes", r.stateSnapshotBytes},
          {"kv_type", gpu::kvTypeName(r.kvType)},
          {"device_total_bytes", r.deviceTotal()},
          {"ram_weight_bytes", r.hostWeightBytes},
          {"staging_bytes", r.stagingBytes},
          {"ram_total_bytes", r.hostTotal()},
          {"ssd_bytes_per_token", r.ssdBytes}}},
        {"prefetch_depth", r.placement.prefetchDepth},
        {"predicted", predicted},
        {"notes", r.notes},
        {"tensors", tensors},
    };
    if (!r.expertLayers.empty()) {
        nlohmann::json layers = nlohmann::json::array();
        for (const ExpertLayerPlan& x : r.expertLayers) {
            nlohmann::json l = {{"layer", x.layer}, {"cached", x.cached}};
            if (x.cached) {
                l["device_slots"] = x.deviceSlots;
                l["ram_experts"] = x.hostExperts;
                l["ssd_experts"] = x.ssdExperts;
                l["hit_rate"] = x.hitRate;
                l["ram_rate"] = x.hostRate;
                if (const ExpertPlacement* p = r.placement.expertsOf(x.layer)) {
                    l["slots_start_with"] = p->device;
                    l["in_ram"] = p->host;
                }
            } else {
                l["tier"] = x.split ? "split" : tierName(x.tier);
            }
            layers.push_back(l);
        }
        j["experts"] = {{"routing", r.routing}, {"layers", layers}};
    }
    return j.dump(2);
}

}  // namespace spillway::plan
