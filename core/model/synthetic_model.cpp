#include "core/model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "core/formats/ggml_quants.h"
#include "gpu/block_fields.h"
#include "core/formats/gguf.h"

namespace spillway {

namespace {

SyntheticPreset gptOss(const char* name, int layers, int experts)
{
    SyntheticPreset p{name, "gpt-oss", 2880, layers, 64, 8, 2880, 201088, 131072, 150000.0f, 64, experts, 4};
    p.slidingWindow = 128;
    p.biases = p.sinks = true;
    p.yarnFactor = 32.0f;
    p.yarnOriginalContext = 4096;
    p.ffnNormName = "post_attention_norm";
    return p;
}

// Qwen3.5-35B-A3B and -122B-A10B (config.json: head_dim 256 with 2 KV heads, partial rotary
// 0.25, linear attention of 16 key and 32 / 64 value heads of 128, full attention every 4th
// layer, 256 experts, 8 used, and a shared one).
SyntheticPreset qwen35moe(const char* name, int dim, int layers, int heads, int vHeads, int expertFfn)
{
    SyntheticPreset p{name, "qwen35moe", dim, layers, heads, 2, expertFfn, 248320, 262144, 10000000.0f, 256, 256, 8};
    p.linearKHeads = 16;
    p.linearVHeads = vHeads;
    p.linearHeadDim = 128;
    p.convKernel = 4;
    p.fullAttentionInterval = 4;
    p.sharedFfn = expertFfn;
    p.ropeDims = 64;
    p.ffnNormName = "post_attention_norm";
    return p;
}

}  // namespace

const std::vector<SyntheticPreset>& syntheticPresets()
{
    // Shapes from the models' published configurations.
    static const std::vector<SyntheticPreset> presets = {
        {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f},
        {"llama2-7b", "llama", 4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f},
        {"llama2-13b", "llama", 5120, 40, 40, 40, 13824, 32000, 4096, 10000.0f},
        {"llama2-70b", "llama", 8192, 80, 64, 8, 28672, 32000, 4096, 10000.0f},
        {"mistral-7b", "llama", 4096, 32, 32, 8, 14336, 32000, 32768, 1000000.0f},
        {"opt-125m", "opt", 768, 12, 12, 12, 3072, 50272, 2048, 0.0f},
        {"opt-6.7b", "opt", 4096, 32, 32, 32, 16384, 50272, 2048, 0.0f},
        {"opt-13b", "opt", 5120, 40, 40, 40, 20480, 50272, 2048, 0.0f},
        // Mixtures of experts (ffnDim: one expert's): Qwen3-30B-A3B (head_dim 128, so q is
        // 4096 wide on a 2048 stream; QK norm per head), Mixtral 8x7B (GGUF `llama` with
        // experts), OLMoE-1B-7B-0924 (QK norm over the whole projection).
        {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 768, 151936, 40960, 1000000.0f, 128, 128, 8},
        {"mixtral-8x7b", "llama", 4096, 32, 32, 8, 14336, 32000, 32768, 1000000.0f, 0, 8, 2},
        {"olmoe-1b-7b", "olmoe", 2048, 16, 16, 16, 1024, 50304, 4096, 10000.0f, 0, 64, 8},
        // gpt-oss-20b and -120b (head_dim 64: q 4096 wide on a 2880 stream; sinks, a window of
        // 128 on every other layer, YaRN 32 over 4096, biases everywhere; their real files keep
        // the experts in MXFP4: make them with --type MXFP4).
        gptOss("gpt-oss-20b", 24, 32),
        gptOss("gpt-oss-120b", 36, 128),
        // Hybrids: Gated DeltaNet beside gated attention.
        qwen35moe("qwen3.5-35b-a3b", 2048, 40, 16, 32, 512),
        qwen35moe("qwen3.5-122b-a10b", 3072, 48, 32, 64, 1024),
    };
    return presets;
}

SyntheticVocabulary makeSyntheticVocabulary(int size)
{
    SyntheticVocabulary v;
    std::unordered_set<std::string> seen;
    auto add = [&](std::string piece, float score, int32_t type) {
        if (int(v.tokens.size()) >= size || !seen.insert(piece).second) return;
        v.tokens.push_back(std::move(piece));
        v.scores.push_back(score);
        v.types.push_back(type);
    };
    add("<unk>", 0.0f, 2);
    add("<s>", 0.0f, 3);
    add("</s>", 0.0f, 3);
    char hex[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        add(hex, 0.0f, 6);
    }
    const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space
    // Shorter pieces get higher scores, so merges build longer pieces from them.
    float score = -1.0f;
    add(space, score, 1);
    for (char c = 33; c < 127; ++c) add(std::string(1, c), score -= 1.0f, 1);
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";  // English letter frequency order
    for (char a : letters) add(space + a, score -= 1.0f, 1);
    for (char a : letters)
        for (char b : letters) {
            add(std::string{a, b}, score -= 1.0f, 1);
            add(space + a + b, score -= 1.0f, 1);
        }
    for (char a : letters)
        for (char b : letters)
            for (char c : letters) {
                add(std::string{a, b, c}, score -= 1.0f, 1);
                add(space + a + b + c, score -= 1.0f, 1);
            }
    // Vocabularies of Qwen's and gpt-oss's size (150k and more): JSON's punctuation after two
    // letters (about 3 % of the tokens hold a quote, as in Qwen's), then four letters with and
    // without the space, so that every token is text (a constrained decoder's mask has as many
    // tokens to judge as a real vocabulary's).
    for (char a : letters)
        for (char b : letters)
            for (const char* p : {"\",", "\":", "\"}", ",\"", "\",\n", "\"]"})
                add(std::string{a, b} + p, score -= 1.0f, 1);
    for (char a : letters)
        for (char b : letters)
            for (char c : letters)
                for (char d : letters) {
                    if (int(v.tokens.size()) >= size) break;
                    add(std::string{a, b, c, d}, score -= 1.0f, 1);
                    add(space + a + b + c + d, score -= 1.0f, 1);
                }
    for (int i = 0; int(v.tokens.size()) < size; ++i)  // only for sizes past what is above
        add("<extra_" + std::to_string(i) + ">", score -= 1.0f, 5);
    return v;
}

namespace {

// llama.cpp's llama_ftype for a file whose matrices are all of one type (its "mostly" names:
// llama-bench and llama-cli print them); not ggml's type number.
uint32_t llamaFileType(gpu::DType type)
{
    switch (type) {
    case gpu::DType::F32: return 0;
    case gpu::DType::F16: return 1;
    case gpu::DType::Q4_0: return 2;
    case gpu::DType::Q4_1: return 3;
    case gpu::DType::Q8_0: return 7;
    case gpu::DType::Q5_0: return 8;
    case gpu::DType::Q4_K: return 14;  // Q4_K_S: every matrix Q4_K
    case gpu::DType::Q5_K: return 16;  // Q5_K_S
    case gpu::DType::Q6_K: return 18;
    case gpu::DType::BF16: return 32;
    case gpu::DType::Q5_1: return 9;
    case gpu::DType::Q2_K: return 10;
    case gpu::DType::Q3_K: return 11;  // Q3_K_S
    case gpu::DType::IQ2_XXS: return 19;
    case gpu::DType::IQ2_XS: return 20;
    case gpu::DType::IQ3_XXS: return 23;
    case gpu::DType::IQ1_S: return 24;
    case gpu::DType::IQ4_NL: return 25;
    case gpu::DType::IQ3_S: return 26;
    case gpu::DType::IQ2_S: return 28;
    case gpu::DType::IQ4_XS: return 30;
    case gpu::DType::IQ1_M: return 31;
    case gpu::DType::MXFP4: return 38;
    default: return 0;
    }
}


// splitmix64: fast, seedable, and good enough for random weights.
struct Random {
    uint64_t state;
    uint64_t next()
    {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [-1, 1).
    float uniform() { return float(int64_t(next() >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23)); }
};

// The standard normal's quantile, by bisection on erfc (exact to float precision; called once
// per layer).
double normalQuantile(double p)
{
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

// The target density of layer l of `layers`, from one value or a profile spread over the layers.
double densityOf(const std::vector<double>& profile, int l, int layers)
{
    if (profile.size() == 1 || layers <= 1) return profile.front();
    const double at = double(l) / double(layers - 1) * double(profile.size() - 1);
    const size_t i = std::min(profile.size() - 2, size_t(at));
    const double f = at - double(i);
    return profile[i] * (1.0 - f) + profile[i + 1] * f;
}

// Fills `out` with `rows x cols` values uniform in [-amplitude, amplitude], in `type`. The
// quantized values are drawn symmetric about zero: Q4_0's nibble 0 (-8) and Q8_0's -128 would
// otherwise give every row a mean of half a step, a common direction each matrix passes on
// amplified (by about sqrt(3 dim) / 16 for Q4_0) until it dominates the residual stream, and then
// a mixture of experts' routers choose the same experts for every token.
void fillRandom(std::span<uint8_t> out, gpu::DType type, float amplitude, uint64_t seed)
{
    Random rng{seed};
    switch (type) {
    case gpu::DType::F32:
        for (size_t i = 0; i + 4 <= out.size(); i += 4) {
            const float f = amplitude * rng.uniform();
            std::memcpy(&out[i], &f, 4);
        }
        break;
    case gpu::DType::F16:
    case gpu::DType::BF16:
        for (size_t i = 0; i + 2 <= out.size(); i += 2) {
            const float f = amplitude * rng.uniform();
            const uint16_t h = type == gpu::DType::F16 ? gpu::fp32ToFp16(f) : gpu::fp32ToBf16(f);
            std::memcpy(&out[i], &h, 2);
        }
        break;
    case gpu::DType::Q8_0:
    case gpu::DType::Q4_0: {
        const bool q8 = type == gpu::DType::Q8_0;
        const size_t blockBytes = q8 ? 34 : 18;
        const uint16_t d = gpu::fp32ToFp16(amplitude / (q8 ? 127.0f : 8.0f));
        for (size_t i = 0; i + blockBytes <= out.size(); i += blockBytes) {
            std::memcpy(&out[i], &d, 2);
            for (size_t j = 2; j < blockBytes; j += 8) {
                const uint64_t r = rng.next();
                std::memcpy(&out[i + j], &r, std::min<size_t>(8, blockBytes - j));
            }
            for (size_t j = 2; j < blockBytes; ++j) {
                uint8_t& v = out[i + j];
                if (q8) {
                    if (v == 0x80) v = 0;  // -128 -> 0: -127 ... 127
                } else {
                    if ((v & 0x0F) == 0) v |= 0x08;  // nibble 0 (-8) -> 8 (0): -7 ... 7
                    if ((v & 0xF0) == 0) v |= 0x80;
                }
            }
        }
        break;
    }
    case gpu::DType::Q4_1:
    case gpu::DType::Q5_0:
    case gpu::DType::Q4_K:
    case gpu::DType::Q5_K:
    case gpu::DType::Q6_K: {
        // Random floats, one block at a time, through the straightforward quantizer.
        const auto& traits = gpu::dtypeTraits(type);
        const size_t blockBytes = size_t(traits.blockBytes);
        std::vector<float> values(size_t(traits.blockSize));
        for (size_t i = 0; i + blockBytes <= out.size(); i += blockBytes) {
            for (float& v : values) v = amplitude * rng.uniform();
            gguf::quantizeRow(type, values.data(), traits.blockSize, &out[i]);
        }
        break;
    }
    case gpu::DType::BitmapSparse:  // never asked for: the generator writes GGUF,
    case gpu::DType::Q8_G64: break;  // which holds neither
    default: {
        // ggml's other block types (read, not written, by gguf::quantizeRow): random codes, every
        // grid index and sign pattern, with a block scale that keeps values near the amplitude.
        const auto& traits = gpu::dtypeTraits(type);
        const size_t blockBytes = size_t(traits.blockBytes);
        for (size_t i = 0; i + blockBytes <= out.size(); i += blockBytes) {
            for (size_t j = 0; j < blockBytes; j += 8) {
                const uint64_t r = rng.next();
                std::memcpy(&out[i + j], &r, std::min<size_t>(8, blockBytes - j));
            }
            gpu::setBlockScale(type, &out[i], amplitude / 256.0f);
        }
        break;
    }
    }
}

}  // namespace

Status writeSyntheticModel(const SyntheticOptions& options, const std::string& path)
{
    const SyntheticPreset* preset = nullptr;
    for (const auto& p : syntheticPresets())
        if (p.name == options.preset) preset = &p;
    if (!preset) {
        std::string names;
        for (const auto& p : syntheticPresets()) names += (names.empty() ? "" : ", ") + p.name;
        return makeError(ErrorCode::InvalidArgument,
                         "unknown preset '" + options.preset + "' (known: " + names + ")");
    }
    const int layers = options.layers > 0 ? options.layers : preset->nLayers;
    const int64_t dim = preset->dim, ffn = preset->ffnDim, vocab = preset->vocabSize;
    const int64_t headDim = preset->headDim > 0 ? preset->headDim : dim / preset->nHeads;
    const int64_t qDim = headDim * preset->nHeads, kvDim = headDim * preset->nKvHeads;
    const int64_t experts = preset->experts;
    const bool opt = preset->architecture == "opt";
    const std::string arch = preset->architecture;
    if (!options.ffnDensity.empty()) {
        if (!opt)
            return makeError(ErrorCode::InvalidArgument,
                             "an FFN density needs a ReLU model: an opt-* preset, not " + preset->name);
        for (double d : options.ffnDensity)
            if (!(d > 0.0 && d < 1.0))
                return makeError(ErrorCode::InvalidArgument, "FFN densities must be in (0, 1)");
        if (!(options.ffnDensitySpread >= 0.0 && options.ffnDensitySpread <= 10.0))
            return makeError(ErrorCode::InvalidArgument, "the FFN density spread must be in [0, 10]");
    }

    gguf::Writer w(options.alignment);
    w.setString("general.architecture", arch);
    w.setString("general.name", "synthetic " + preset->name + " (random weights)");
    w.setString("general.description",
                "Made by spillway-cli make-synthetic: the shapes of " + preset->name +
                    " with random weights, for benchmarks. It generates no meaningful text.");
    w.setBool("spillway.synthetic", true);
    if (!options.ffnDensity.empty()) {
        std::vector<float> targets;
        for (int l = 0; l < layers; ++l) targets.push_back(float(densityOf(options.ffnDensity, l, layers)));
        w.setFloat32Array("spillway.synthetic_ffn_density", std::move(targets));
        w.setFloat32("spillway.synthetic_ffn_density_spread", float(options.ffnDensitySpread));
    }
    w.setUInt32("general.file_type", llamaFileType(options.type));
    w.setUInt32(arch + ".context_length", uint32_t(preset->context));
    w.setUInt32(arch + ".embedding_length", uint32_t(dim));
    w.setUInt32(arch + ".block_count", uint32_t(layers));
    w.setUInt32(arch + ".feed_forward_length", uint32_t(ffn));
    w.setUInt32(arch + ".attention.head_count", uint32_t(preset->nHeads));
    w.setUInt32(arch + ".attention.head_count_kv", uint32_t(preset->nKvHeads));
    if (preset->headDim > 0) {
        w.setUInt32(arch + ".attention.key_length", uint32_t(headDim));
        w.setUInt32(arch + ".attention.value_length", uint32_t(headDim));
    }
    if (experts > 0) {
        w.setUInt32(arch + ".expert_count", uint32_t(experts));
        w.setUInt32(arch + ".expert_used_count", uint32_t(preset->expertsUsed));
        w.setUInt32(arch + ".expert_feed_forward_length", uint32_t(ffn));
    }
    if (opt) {
        w.setFloat32(arch + ".attention.layer_norm_epsilon", 1e-5f);
    } else {
        w.setFloat32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
        w.setFloat32(arch + ".rope.freq_base", preset->ropeBase);
        w.setUInt32(arch + ".rope.dimension_count", uint32_t(preset->ropeDims > 0 ? preset->ropeDims : headDim));
    }
    const bool hybrid = preset->linearVHeads > 0;
    const int64_t keyDim = int64_t(preset->linearKHeads) * preset->linearHeadDim;
    const int64_t valueDim = int64_t(preset->linearVHeads) * preset->linearHeadDim;
    if (hybrid) {
        // Qwen3.5's sections over the rotated pairs (text, height, width; the text model uses the
        // first: every pair rotates by the position).
        w.setInt32Array(arch + ".rope.dimension_sections", {11, 11, 10, 0});
        w.setUInt32(arch + ".full_attention_interval", uint32_t(preset->fullAttentionInterval));
        w.setUInt32(arch + ".nextn_predict_layers", 0);
        w.setUInt32(arch + ".expert_shared_feed_forward_length", uint32_t(preset->sharedFfn));
        w.setUInt32(arch + ".ssm.conv_kernel", uint32_t(preset->convKernel));
        w.setUInt32(arch + ".ssm.inner_size", uint32_t(valueDim));
        w.setUInt32(arch + ".ssm.state_size", uint32_t(preset->linearHeadDim));
        w.setUInt32(arch + ".ssm.time_step_rank", uint32_t(preset->linearVHeads));
        w.setUInt32(arch + ".ssm.group_count", uint32_t(preset->linearKHeads));
    }
    if (preset->slidingWindow > 0) w.setUInt32(arch + ".attention.sliding_window", uint32_t(preset->slidingWindow));
    if (preset->yarnFactor > 0.0f) {
        w.setString(arch + ".rope.scaling.type", "yarn");
        w.setFloat32(arch + ".rope.scaling.factor", preset->yarnFactor);
        w.setUInt32(arch + ".rope.scaling.original_context_length", uint32_t(preset->yarnOriginalContext));
    }
    auto vocabulary = makeSyntheticVocabulary(int(vocab));
    w.setString("tokenizer.ggml.model", "llama");
    w.setStringArray("tokenizer.ggml.tokens", std::move(vocabulary.tokens));
    w.setFloat32Array("tokenizer.ggml.scores", std::move(vocabulary.scores));
    w.setInt32Array("tokenizer.ggml.token_type", std::move(vocabulary.types));
    w.setUInt32("tokenizer.ggml.bos_token_id", 1);
    w.setUInt32("tokenizer.ggml.eos_token_id", 2);
    w.setUInt32("tokenizer.ggml.unknown_token_id", 0);
    w.setBool("tokenizer.ggml.add_bos_token", true);

    uint64_t seed = options.seed * 0x100000001B3ull;
    // Random weights of `type` in GGUF dims (dims[0] the columns), of unit-variance outputs.
    auto weights = [&](const std::string& name, std::vector<int64_t> dims, gpu::DType type) {
        const float amplitude = std::sqrt(3.0f / float(dims[0]));
        const uint64_t s = ++seed;
        w.addTensor(name, type, std::move(dims), [=](std::span<uint8_t> out) { fillRandom(out, type, amplitude, s); });
    };
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) { weights(name, {cols, rows}, options.type); };
    auto stacked = [&](const std::string& name, int64_t count, int64_t rows, int64_t cols) {
        weights(name, {cols, rows, count}, options.type);
    };
    auto vector = [&](const std::string& name, int64_t n, float center) {
        const uint64_t s = ++seed;
        w.addTensor(name, gpu::DType::F32, {n}, [=](std::span<uint8_t> out) {
            Random rng{s};
            for (size_t i = 0; i + 4 <= out.size(); i += 4) {
                const float f = center + 0.05f * rng.uniform();
                std::memcpy(&out[i], &f, 4);
            }
        });
    };
    matrix("token_embd.weight", vocab, dim);
    if (opt) matrix("position_embd.weight", preset->context + 2, dim);
    for (int l = 0; l < layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        vector(b + "attn_norm.weight", dim, 1.0f);
        if (opt) vector(b + "attn_norm.bias", dim, 0.0f);
        if (hybrid && (l + 1) % preset->fullAttentionInterval != 0) {
            // A Gated DeltaNet mixer: [q | k | v] for the convolution, z, beta and alpha, the
            // convolution's taps, the gates' parameters (A negative: -exp(A_log)), the output's
            // norm over a head, ssm_out.
            const int64_t convDim = 2 * keyDim + valueDim, vHeads = preset->linearVHeads;
            matrix(b + "attn_qkv.weight", convDim, dim);
            matrix(b + "attn_gate.weight", valueDim, dim);
            matrix(b + "ssm_beta.weight", vHeads, dim);
            matrix(b + "ssm_alpha.weight", vHeads, dim);
            weights(b + "ssm_conv1d.weight", {preset->convKernel, convDim}, gpu::DType::F32);
            vector(b + "ssm_dt.bias", vHeads, 0.0f);
            vector(b + "ssm_a", vHeads, -1.0f);
            vector(b + "ssm_norm.weight", preset->linearHeadDim, 1.0f);
            matrix(b + "ssm_out.weight", dim, valueDim);
        } else if (hybrid) {
            matrix(b + "attn_q.weight", 2 * qDim, dim);  // q and its output gate, per head
            matrix(b + "attn_k.weight", kvDim, dim);
            matrix(b + "attn_v.weight", kvDim, dim);
            matrix(b + "attn_output.weight", dim, qDim);
            vector(b + "attn_q_norm.weight", headDim, 1.0f);
            vector(b + "attn_k_norm.weight", headDim, 1.0f);
        }
        if (!hybrid) matrix(b + "attn_q.weight", qDim, dim);
        if (!hybrid) {
            matrix(b + "attn_k.weight", kvDim, dim);
            matrix(b + "attn_v.weight", kvDim, dim);
            matrix(b + "attn_output.weight", dim, qDim);
        }
        if (arch == "qwen3moe") {  // RMSNorm of each head of q and k
            vector(b + "attn_q_norm.weight", headDim, 1.0f);
            vector(b + "attn_k_norm.weight", headDim, 1.0f);
        } else if (arch == "olmoe") {  // of the whole projections
            vector(b + "attn_q_norm.weight", qDim, 1.0f);
            vector(b + "attn_k_norm.weight", kvDim, 1.0f);
        }
        if (opt || preset->biases) {
            vector(b + "attn_q.bias", opt ? dim : qDim, 0.0f);
            vector(b + "attn_k.bias", kvDim, 0.0f);
            vector(b + "attn_v.bias", kvDim, 0.0f);
            vector(b + "attn_output.bias", dim, 0.0f);
        }
        if (preset->sinks) vector(b + "attn_sinks.weight", preset->nHeads, 0.0f);
        vector(b + preset->ffnNormName + ".weight", dim, 1.0f);
        if (opt) vector(b + "ffn_norm.bias", dim, 0.0f);
        if (experts > 0) {
            // The router stays F32 (llama.cpp's quantize leaves ffn_gate_inp as it is); the
            // experts stacked, one 3-D tensor per matrix.
            weights(b + "ffn_gate_inp.weight", {dim, experts}, gpu::DType::F32);
            stacked(b + "ffn_gate_exps.weight", experts, ffn, dim);
            stacked(b + "ffn_up_exps.weight", experts, ffn, dim);
            stacked(b + "ffn_down_exps.weight", experts, dim, ffn);
            if (preset->sharedFfn > 0) {  // the shared expert and its gate (one row)
                weights(b + "ffn_gate_inp_shexp.weight", {dim}, gpu::DType::F32);
                matrix(b + "ffn_gate_shexp.weight", preset->sharedFfn, dim);
                matrix(b + "ffn_up_shexp.weight", preset->sharedFfn, dim);
                matrix(b + "ffn_down_shexp.weight", dim, preset->sharedFfn);
            }
            if (preset->biases) {  // one row per expert, as the stacks
                weights(b + "ffn_gate_inp.bias", {experts}, gpu::DType::F32);
                weights(b + "ffn_gate_exps.bias", {ffn, experts}, gpu::DType::F32);
                weights(b + "ffn_up_exps.bias", {ffn, experts}, gpu::DType::F32);
                weights(b + "ffn_down_exps.bias", {dim, experts}, gpu::DType::F32);
            }
            continue;
        }
        if (!opt) matrix(b + "ffn_gate.weight", ffn, dim);
        matrix(b + "ffn_up.weight", ffn, dim);
        matrix(b + "ffn_down.weight", dim, ffn);
        if (opt && !options.ffnDensity.empty()) {
            const double spread = options.ffnDensitySpread;
            const double a = normalQuantile(densityOf(options.ffnDensity, l, layers)) * std::sqrt(1.0 + spread * spread);
            const uint64_t s = ++seed;
            w.addTensor(b + "ffn_up.bias", gpu::DType::F32, {ffn}, [=](std::span<uint8_t> out) {
                Random rng{s};
                for (size_t i = 0; i + 4 <= out.size(); i += 4) {
                    // Box-Muller: a standard normal from two uniforms in (0, 1].
                    const double u1 = (double(rng.next() >> 11) + 1.0) / 9007199254740992.0;
                    const double u2 = double(rng.next() >> 11) / 9007199254740992.0;
                    const double g = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
                    const float f = float(a + spread * g);
                    std::memcpy(&out[i], &f, 4);
                }
            });
            vector(b + "ffn_down.bias", dim, 0.0f);
        } else if (opt) {
            vector(b + "ffn_up.bias", ffn, 0.0f);
            vector(b + "ffn_down.bias", dim, 0.0f);
        }
    }
    vector("output_norm.weight", dim, 1.0f);
    if (opt) vector("output_norm.bias", dim, 0.0f);
    matrix("output.weight", vocab, dim);
    return w.write(path);
}

}  // namespace spillway
