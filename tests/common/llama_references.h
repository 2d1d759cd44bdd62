#pragma once
// The reference files made with llama.cpp / ik_llama.cpp's C API beside the small random-weight
// models of tests/data (models/moe, models/quants; their READMEs say how): for each prompt, the
// token ids the peer gives it, its greedy ids after it, the logits at the prompt's last position,
// and (where recorded) each greedy step's margin between the peer's top two logits.

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spillway::testing_support {

struct LlamaReference {
    std::string prompt;
    std::vector<int32_t> promptIds, greedyIds;
    std::vector<float> firstLogits;
    std::vector<float> margins;  // "top2_margins"; empty where the file has none
};

inline std::vector<LlamaReference> readLlamaReferences(const std::string& path)
{
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<LlamaReference> out;
    for (const auto& r : j)
        out.push_back({r.at("prompt").get<std::string>(), r.at("prompt_ids").get<std::vector<int32_t>>(),
                       r.at("greedy_ids").get<std::vector<int32_t>>(), r.at("first_logits").get<std::vector<float>>(),
                       r.value("top2_margins", std::vector<float>{})});
    return out;
}

}  // namespace spillway::testing_support
