// How the *.reference.json files of tests/data/models are made: a small program against a peer's
// C API (llama.cpp's or ik_llama.cpp's llama.h; not part of Spillway's build). For each prompt
// (one per line of a text file): the ids the peer tokenizes it to (add_special, parse_special),
// the prompt decoded as one batch, the logits at its last position, then `steps` greedy tokens
// one at a time (argmax), with each step's margin between the top two logits. CPU, one thread,
// f32 K and V caches (so that the peer's KV rounding is not in the comparison) or, with PEER_KV=f16,
// f16 ones (ik_llama.cpp's only choice without flash attention), no flash attention.
//
//   c++ -O2 -std=c++17 peer_reference.cpp -I PEER/include -I PEER/ggml/include \
//       -L PEER/build/src -lllama -Wl,-rpath,PEER/build/src:PEER/build/ggml/src -o peer_reference
//   peer_reference MODEL.gguf PROMPTS.txt [steps=32] [n_ctx=512] > MODEL.reference.json
//
// Prints the JSON list that tests/engine read: [{"prompt", "prompt_ids", "first_logits",
// "greedy_ids", "top2_margins"}, ...].

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

void printJsonString(const std::string& s)
{
    std::putchar('"');
    for (unsigned char ch : s) {
        if (ch == '"' || ch == '\\') std::printf("\\%c", ch);
        else if (ch == '\n') std::printf("\\n");
        else if (ch < 0x20) std::printf("\\u%04x", ch);
        else std::putchar(ch);
    }
    std::putchar('"');
}

int argmax(const float* v, int n, float* margin)
{
    int best = 0, second = -1;
    for (int i = 1; i < n; ++i) {
        if (v[i] > v[best]) {
            second = best;
            best = i;
        } else if (second < 0 || v[i] > v[second]) {
            second = i;
        }
    }
    *margin = second >= 0 ? v[best] - v[second] : 0.0f;
    return best;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.txt [steps] [n_ctx]\n", argv[0]);
        return 2;
    }
    const int steps = argc > 3 ? std::atoi(argv[3]) : 32;
    const int nCtx = argc > 4 ? std::atoi(argv[4]) : 512;
    std::vector<std::string> prompts;
    {
        std::ifstream in(argv[2]);
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) prompts.push_back(line);
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_mmap = true;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const int vocab = llama_n_vocab(model);
    std::printf("[\n");
    for (size_t p = 0; p < prompts.size(); ++p) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = uint32_t(nCtx);
        cp.n_batch = uint32_t(nCtx);
        cp.n_ubatch = uint32_t(nCtx);
        cp.n_threads = cp.n_threads_batch = 1;
        // ik_llama.cpp takes only an f16 or bf16 V cache without flash attention (and no f32 one
        // with it): PEER_KV=f16 asks for f16 K and V, and the test then runs its own cache in f16.
        const char* kv = std::getenv("PEER_KV");
        const bool f16 = kv && std::string(kv) == "f16";
        cp.type_k = f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
        cp.type_v = f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
        cp.flash_attn = false;
        llama_context* ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            std::fprintf(stderr, "cannot make a context\n");
            return 1;
        }
        const std::string& text = prompts[p];
        std::vector<llama_token> ids(text.size() + 8);
        const int n = llama_tokenize(model, text.c_str(), int(text.size()), ids.data(), int(ids.size()), true, true);
        if (n < 0) return 1;
        ids.resize(size_t(n));
        std::vector<llama_token> batchIds = ids;
        if (llama_decode(ctx, llama_batch_get_one(batchIds.data(), n, 0, 0)) != 0) {
            std::fprintf(stderr, "prompt decode failed\n");
            return 1;
        }
        const float* logits = llama_get_logits_ith(ctx, -1);
        std::vector<float> first(logits, logits + vocab);
        std::vector<int> greedy;
        std::vector<float> margins;
        float margin = 0.0f;
        llama_token next = argmax(logits, vocab, &margin);
        for (int s = 0; s < steps; ++s) {
            greedy.push_back(next);
            margins.push_back(margin);
            if (s + 1 == steps) break;
            llama_token tok = next;
            if (llama_decode(ctx, llama_batch_get_one(&tok, 1, n + s, 0)) != 0) {
                std::fprintf(stderr, "decode failed at step %d\n", s);
                return 1;
            }
            next = argmax(llama_get_logits_ith(ctx, -1), vocab, &margin);
        }
        std::printf("  {\"prompt\": ");
        printJsonString(text);
        std::printf(",\n   \"prompt_ids\": [");
        for (int i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", ids[size_t(i)]);
        std::printf("],\n   \"first_logits\": [");
        for (int i = 0; i < vocab; ++i) std::printf("%s%.7g", i ? ", " : "", double(first[size_t(i)]));
        std::printf("],\n   \"greedy_ids\": [");
        for (size_t i = 0; i < greedy.size(); ++i) std::printf("%s%d", i ? ", " : "", greedy[i]);
        std::printf("],\n   \"top2_margins\": [");
        for (size_t i = 0; i < margins.size(); ++i) std::printf("%s%.5g", i ? ", " : "", double(margins[i]));
        std::printf("]}%s\n", p + 1 < prompts.size() ? "," : "");
        llama_free(ctx);
    }
    std::printf("]\n");
    llama_free_model(model);
    return 0;
}
