#pragma once
// An architecture family: what one GGUF `general.architecture` means beyond the keys every
// family shares. model_config.cpp reads the shared keys (widths, heads, context, norms' epsilon,
// RoPE and its scaling, expert counts); the family then says how its layers are made (RoPE
// style, the router's weighting, norms, its own keys and layer kinds). One file per family in
// this folder, one row per architecture in registry.cpp: a new family is a reader here and a
// row there (docs/ARCHITECTURE.md, "Adding a model family").

#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/model/model_config.h"

namespace spillway {

namespace gguf { class Metadata; }

struct Family {
    const char* architecture;  // general.architecture
    // Completes `c` (read with the shared keys; `prefix` is "<architecture>.") from the family's
    // own rules and keys. An error names the file and the key.
    Status (*read)(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
    // A mixture-of-experts architecture: a file without expert_count is refused.
    bool requiresExperts = false;
    // Said after the name in supportedArchitectures() ("Mixtral's experts included"), or null.
    const char* note = nullptr;
};

// Every family this engine runs, in the order `supportedArchitectures()` lists them.
std::span<const Family> families();
const Family* familyOf(std::string_view architecture);

// The families' readers (one file each).
Status readLlamaFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readQwenFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readQwen3MoeFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readOlmoeFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readOptFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readReluLlamaFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readGptOssFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readQwen35Family(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);
Status readQwen3NextFamily(const gguf::Metadata& f, const std::string& prefix, LlamaConfig& c);

// "<file>: <what>", ErrorCode::ModelFileInvalid: a family's message about a key.
Error familyKeyError(const gguf::Metadata& f, const std::string& what);
// A required positive integer key within [1, maxValue] (the shared reader's and the families').
Result<int> positiveKey(const gguf::Metadata& f, const std::string& key, int64_t maxValue);

}  // namespace spillway
