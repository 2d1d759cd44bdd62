#pragma once
// Hugging Face model folders imported as GGUF-keyed metadata and tensors (imported_model.h):
// config.json (+ generation_config.json), tokenizer.json (+ tokenizer_config.json) or
// tokenizer.model, and the weights in model.safetensors or shards listed by
// model.safetensors.index.json. Tensors are used in place from the mapped safetensors files
// (F32, F16, BF16), so a folder loads with no copy and streams with direct I/O like a GGUF.
//
// The Q and K projections of Llama and Mistral keep their Hugging Face row order: the metadata
// says spillway.rope.neox = true, and the engine rotates halves (x_i, x_{i+d/2}) as Hugging Face
// does, instead of permuting rows into GGUF's adjacent-pair order (spillway-cli convert does
// that when it writes a GGUF).
//
// PyTorch pickles (pytorch_model.bin) are refused: loading a pickle can run code.

#include <memory>
#include <string>

#include "base/result.h"
#include "core/formats/imported_model.h"

namespace spillway::hf {

// `path` is a folder holding config.json (and no Spillway manifest.json), or a .safetensors
// file with a config.json beside it.
bool looksLikeModelFolder(const std::string& path);

Result<std::unique_ptr<ImportedModel>> importModelFolder(const std::string& path);

}  // namespace spillway::hf
