#include "core/model/families/family.h"

#include <iterator>

#include "core/formats/gguf.h"

namespace spillway {

namespace {

const Family kFamilies[] = {
    {"llama", readLlamaFamily, false, "Mixtral's experts included"},
    {"mistral", readLlamaFamily},
    {"qwen2", readQwenFamily},
    {"qwen3", readQwenFamily},
    {"qwen2moe", readQwenFamily, true},
    {"qwen3moe", readQwen3MoeFamily, true},
    {"olmoe", readOlmoeFamily, true},
    {"opt", readOptFamily},
    {"relu-llama", readReluLlamaFamily},
    {"gpt-oss", readGptOssFamily, true},
    {"qwen35", readQwen35Family, false, "Qwen3.5's dense models"},
    {"qwen35moe", readQwen35Family, true},
    {"qwen3next", readQwen3NextFamily, true},
};

}  // namespace

std::span<const Family> families() { return kFamilies; }

const Family* familyOf(std::string_view architecture)
{
    for (const Family& f : kFamilies)
        if (architecture == f.architecture) return &f;
    return nullptr;
}

Error familyKeyError(const gguf::Metadata& f, const std::string& what)
{
    return makeError(ErrorCode::ModelFileInvalid, f.source() + ": " + what);
}

Result<int> positiveKey(const gguf::Metadata& f, const std::string& key, int64_t maxValue)
{
    const auto v = f.getInt(key);
    if (!v) return familyKeyError(f, "missing or non-integer metadata key '" + key + "'");
    if (*v < 1 || *v > maxValue)
        return familyKeyError(f, "metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
    return static_cast<int>(*v);
}

}  // namespace spillway
