#pragma once
// What the bottleneck view says about a trace, apart from drawing it: each token's bottleneck
// attribution added up over the shown tokens, the token boundaries, and the one-sentence
// headline. Computed when the shown spans change, never per frame.

#include <QString>
#include <cstdint>
#include <span>
#include <vector>

#include "core/trace/trace.h"

namespace spillway::ui {

struct TokenStats {
    // trace::summarizePerToken() added up: windowNs is the sum of the tokens' own windows
    // (first span start .. last span end of each token), so idle time between tokens (sampling,
    // the GUI) does not count; attributedNs and lanes[].busyNs are sums, busyFraction and
    // bytesPerSecond are recomputed from them; tokens = how many tokens.
    trace::Summary total;
    // Token boundaries, ascending by time: where each token's first span starts.
    std::vector<uint64_t> tokenStartsNs;
    std::vector<uint32_t> tokenIds;  // parallel to tokenStartsNs
    // The wall time per token as the status line counts it: the mean time from one token's first
    // span to the next's, over the pairs of consecutive tokens (ids n and n+1) shown; it adds to
    // total.nsPerToken what passes between the tokens' spans (sampling, detokenizing, handing the
    // text to the window). A prompt batch's pass and the token after it are no such pair (the
    // time to first token). 0 with no such pair.
    double wallNsPerToken = 0;
};

TokenStats computeTokenStats(std::span<const trace::Span> spans);

// A cache per layer over the shown spans: the neuron cache's "neuron bundles" transfers (active
// neurons asked for and found resident, bytes loaded) or a mixture of experts' expert cache's
// "experts" reads (experts the tokens chose and found in a slot, bytes read from the SSD).
struct CacheLayerStats {
    int layer = 0;
    uint64_t lookups = 0, hits = 0, bytes = 0;
    double hitRate() const { return lookups ? double(hits) / double(lookups) : 1.0; }
};
// Layers in ascending order, from the spans of `op` (trace::kNeuronBundlesOp or
// trace::kExpertsOp); empty when none of them carries lookups (that cache did not run).
std::vector<CacheLayerStats> computeCacheStats(std::span<const trace::Span> spans, const char* op);

// One sentence about the largest share of each token: "71% of each token waits on SSD reads",
// "64% of each token is device compute", … Names the dominant category and, for compute,
// which of the device and the CPU was busier.
// computeOnHost: the device is the host's CPU (its compute is the CPU's).
QString headlineFor(const trace::Summary& total, bool computeOnHost = false);

// "1.52 ms", "35.2 µs", "820 ns".
QString formatDuration(double ns);
// "4.00 MiB", "512 B".
QString formatBytes(uint64_t bytes);

}  // namespace spillway::ui
