#pragma once
// Synthetic models for benchmarks: the real shapes of well-known models with random weights, and
// a built-in 32,000-token SentencePiece-style vocabulary. Their metadata says they are synthetic
// (spillway.synthetic = true, and in general.name), so no figure from one passes for a real model.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "gpu/dtype.h"

namespace spillway {

struct SyntheticPreset {
    std::string name;          // "tinyllama-1.1b"
    std::string architecture;  // "llama", "opt", "qwen3moe", "olmoe", "gpt-oss" or "qwen35moe"
    int dim, nLayers, nHeads, nKvHeads, ffnDim, vocabSize, context;
    float ropeBase;
    int headDim = 0;  // 0: dim / nHeads
    // Mixtures of experts: experts of ffnDim each, expertsUsed per token (0: a dense model).
    int experts = 0, expertsUsed = 0;
    // gpt-oss's parts: attention.sliding_window (0: none; the file's family decides which layers
    // slide), q/k/v/o, router and expert biases, attention sinks, YaRN RoPE of this factor over
    // yarnOriginalContext (0: none), the FFN norm named post_attention_norm.
    int slidingWindow = 0;
    bool biases = false, sinks = false;
    float yarnFactor = 0.0f;
    int yarnOriginalContext = 0;
    const char* ffnNormName = "ffn_norm";
    // Qwen3.5's hybrids (qwen35moe): Gated DeltaNet layers of linearKHeads key and linearVHeads
    // value heads of linearHeadDim (a convolution of convKernel taps) and every
    // fullAttentionInterval-th layer gated full attention (q with its output gate, QK norm,
    // multi-section RoPE over ropeDims); the routed experts with a shared one of sharedFfn.
    int linearKHeads = 0, linearVHeads = 0, linearHeadDim = 0, convKernel = 0, fullAttentionInterval = 0;
    int sharedFfn = 0, ropeDims = 0;
};

const std::vector<SyntheticPreset>& syntheticPresets();

struct SyntheticOptions {
    std::string preset;
    gpu::DType type = gpu::DType::F16;  // type of the matrices; norms stay F32
    int layers = 0;                     // 0: the preset's
    uint64_t seed = 1;
    // Tensor data alignment. 4096 lays the file out for direct I/O: every tensor starts on a
    // page, so the runtime reads exactly its bytes with O_DIRECT.
    uint64_t alignment = 4096;
    // OPT presets (ReLU FFNs): the share of FFN neurons each layer's ReLU lets through, per
    // layer (one value: every layer; more: spread linearly over the layers, as a measured
    // profile such as `spillway-cli sparsity --json` gives). Made with ffn_up.bias: the random
    // fc1 outputs are about N(0, 1), so neuron j's bias is a + spread * g_j, g_j ~ N(0, 1), with
    // a chosen so that the expected share is the target; spread > 0 makes some neurons hot and
    // others cold, as in trained models (PowerInfer's power law), 0 makes them all alike.
    // Empty: biases 0 (about half of the neurons active).
    std::vector<double> ffnDensity;
    double ffnDensitySpread = 1.0;
};

// Writes the model as GGUF (atomically: no partial file on failure).
Status writeSyntheticModel(const SyntheticOptions& options, const std::string& path);

// The built-in vocabulary: <unk>, <s>, </s>, 256 byte-fallback tokens, then pieces (single
// characters, "▁"-prefixed and bare letter pairs and triples, ...) up to `size` tokens.
struct SyntheticVocabulary {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};
SyntheticVocabulary makeSyntheticVocabulary(int size);

}  // namespace spillway
