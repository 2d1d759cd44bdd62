#pragma once
// What a model-file importer hands the engine: GGUF-keyed metadata and a table of tensors under
// GGUF names, viewing memory-mapped files (or, where the source's layout must be rearranged,
// buffers the importer owns). GGUF files, model packages, Hugging Face folders and llama2.c
// checkpoints all end as this, so LlamaModel binds weights one way.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/formats/gguf.h"
#include "gpu/dtype.h"

namespace spillway {

// A tensor whose bytes exist only in memory (converted at load): it cannot be read from a file
// with direct I/O, so the planner keeps it in RAM or on the device.
inline constexpr uint32_t kInMemoryTensor = 0xffffffffu;

struct ModelTensor {
    std::string name;
    gpu::DType type = gpu::DType::F32;
    std::vector<int64_t> dims;      // GGUF order: dims[0] is the columns
    const uint8_t* data = nullptr;  // in the memory mapping (or an importer's buffer)
    uint64_t bytes = 0;
    uint32_t file = 0;              // index into dataFiles, or kInMemoryTensor
    uint64_t fileOffset = 0;        // where the bytes start in that file
};

struct ImportedModel {
    std::string path;                    // what was opened (a file or a folder)
    gguf::Metadata metadata;             // general.architecture, {arch}.*, tokenizer.ggml.*
    std::vector<std::string> dataFiles;  // files the tensors' `file` indices name
    std::vector<ModelTensor> tensors;    // GGUF names ("blk.0.attn_q.weight"); no duplicates
    // Mappings and converted buffers the tensors point into; kept alive with the model.
    std::vector<std::shared_ptr<const void>> keepAlive;
};

}  // namespace spillway
