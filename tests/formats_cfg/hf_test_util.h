#pragma once
// Helpers for the config.json tests: write texts into a scratch folder and read them back.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../common/temp_dir.h"
#include "core/formats/gguf.h"
#include "core/formats/hf_config.h"

namespace spillway::hf_test {

inline void writeText(const std::string& path, const std::string& text)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

// A config.json (and generation_config.json, when given) read with metadataFromHfConfig.
struct Loaded {
    testing_support::TempDir dir{"spillway-hfcfg"};
    std::string configPath = dir / "config.json";
    std::string generationPath = dir / "generation_config.json";
    gguf::Metadata meta{configPath};
    Status status;

    Loaded(const std::string& config, const std::string& generation = "")
    {
        writeText(configPath, config);
        if (!generation.empty()) writeText(generationPath, generation);
        status = metadataFromHfConfig(configPath, generationPath, meta);
    }
    int64_t i(const std::string& key) const
    {
        const auto v = meta.getInt(key);
        EXPECT_TRUE(v.has_value()) << "no integer key " << key;
        return v.value_or(-1);
    }
    double f(const std::string& key) const
    {
        const auto v = meta.getFloat(key);
        EXPECT_TRUE(v.has_value()) << "no number key " << key;
        return v.value_or(-1.0);
    }
    std::string s(const std::string& key) const
    {
        const auto v = meta.getString(key);
        EXPECT_TRUE(v.has_value()) << "no string key " << key;
        return v.value_or("");
    }
    bool has(const std::string& key) const { return meta.find(key) != nullptr; }
};

}  // namespace spillway::hf_test
