#pragma once
// The options of `spillway-cli bench`, shared by its in-memory and offloaded forms.

#include <string>

#include "offload.h"

namespace spillway::cli {

struct BenchCommand {
    std::string model;
    int tokens = 32;
    int promptTokens = 64;  // the prompt measurement (CPU bench): batched against one token per pass
    int batch = 0;          // prompt tokens per pass; 0: the session's default
    int threads = 0;
    int repeats = 5;
    std::string json;
    int bandwidthMiB = 0;  // > 0: the ceiling reads a buffer of its own of this size, not the weights
    int context = 0;
    std::string backend = "cpu";
    OffloadOptions offload;
    bool quality = false;  // with a neuron cache: also compare its text quality with the dense model
    bool noBaseline = false;  // offloaded runs: skip the naive load-before-use baseline
    bool randomTokens = false;  // offloaded runs: decode seeded random tokens, not the greedy text
    bool noCalibrate = false;   // offloaded runs: leave the hardware profile's calibration as it is
};

// Decode with budgets (cmd_bench_offload.cpp).
int runOffloadBench(BenchCommand& b);

}  // namespace spillway::cli
