#pragma once
// spillway-cli convert: a loaded model (GGUF, Hugging Face folder, llama2.c, package) written as
// a GGUF file or a Hugging Face folder. The Q/K rows of Llama-family models are permuted
// between GGUF's adjacent-pair RoPE order and Hugging Face's rotate-half order (as llama.cpp's
// convert_hf_to_gguf.py does), so each output runs in the tools of its own ecosystem.
// Quantized tensors go to a Hugging Face folder dequantized to F32 (safetensors has no
// quantized blocks); to GGUF they are copied as they are.
//
// Nothing is left behind on failure: the GGUF goes through a temporary file,
// the folder is built beside its target and renamed into place.

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace spillway {

class LlamaModel;

enum class ConvertTarget { Gguf, HuggingFace };

struct ConvertOptions {
    ConvertTarget target = ConvertTarget::Gguf;
    bool overwrite = false;  // replace an existing output
    // Hugging Face folders: tensors go into shards of at most this many data bytes
    // (model-00001-of-0000N.safetensors + model.safetensors.index.json, as transformers'
    // save_pretrained writes them; its default is 5 GB); a single model.safetensors when all fit.
    // A tensor bigger than the limit gets a shard of its own.
    uint64_t shardBytes = 5'000'000'000ull;
    // GGUF: a split GGUF, as llama.cpp's llama-gguf-split writes it (OUT-00001-of-0000N.gguf ...,
    // OUT being outPath without ".gguf"), when either is set: at most this many bytes of tensor
    // data per part (--split-max-size), at most this many tensors per part (--split-max-tensors).
    // A split model converted without them is joined into one file.
    uint64_t splitMaxBytes = 0;
    int splitMaxTensors = 0;
    // GGUF: the chat template written as tokenizer.chat_template, in place of the model's (a
    // template fixed or replaced by the user, as llama.cpp's gguf_new_metadata --chat-template);
    // unset: the model's own.
    std::optional<std::string> chatTemplate;
};

// The prefix of the parts a split GGUF output `outPath` is written as: "dir/model.gguf" and
// "dir/model" -> "dir/model"; a part's own name ("dir/model-00001-of-00003.gguf") -> "dir/model".
std::string splitOutputPrefix(const std::string& outPath);

Status convertModel(const LlamaModel& model, const std::string& outPath, const ConvertOptions& options);

}  // namespace spillway
