#pragma once
// Hyper-parameters of a Llama-family model, read from GGUF metadata and checked for sense.

#include <cstdint>
#include <string>

#include "base/result.h"

namespace spillway {

namespace gguf { class File; class Metadata; }

struct LlamaConfig {
    std::string architecture;  // general.architecture ("llama", ...)
    std::string name;          // general.name, if any
    int dim = 0;               // embedding length
    int nLayers = 0;
    int nHeads = 0;
    int nKvHeads = 0;          // grouped-query attention: nHeads % nKvHeads == 0
    int headDim = 0;           // dim / nHeads unless the file says otherwise
    int ffnDim = 0;            // feed-forward (SwiGLU) hidden size
    int vocabSize = 0;
    int trainedContext = 0;    // {arch}.context_length
    float normEps = 1e-5f;     // RMSNorm epsilon
    float ropeBase = 10000.0f;
    float ropeFreqScale = 1.0f;  // linear RoPE scaling: positions are multiplied by this
    int ropeDims = 0;          // rotated dims per head
    bool synthetic = false;    // made by make-synthetic: real shapes, random weights

    int qDim() const { return nHeads * headDim; }
    int kvDim() const { return nKvHeads * headDim; }
};

// Architectures this engine runs today.
const char* supportedArchitectures();  // "llama, mistral"

Result<LlamaConfig> llamaConfigFromGguf(const gguf::File& file);
// The same from metadata keyed like GGUF's (a model package's hyper-parameters JSON).
Result<LlamaConfig> llamaConfigFromMetadata(const gguf::Metadata& metadata);

}  // namespace spillway
