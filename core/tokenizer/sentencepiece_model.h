#pragma once
// A SentencePiece tokenizer.model (the protobuf Llama 1/2, Mistral and Gemma folders ship) as
// the tokenizer keys of GGUF metadata, as llama.cpp's converter writes them from the same file.
// The model is loaded with libsentencepiece itself, so a file it refuses is refused here too.

#include <string>

#include "base/result.h"

namespace spillway {

namespace gguf { class Metadata; }

// Adds to `out`: tokenizer.ggml.model "llama", .tokens (the pieces, U+2581 for spaces),
// .scores, .token_type (normal 1, unknown 2, control 3, user-defined 4, unused 5, byte 6, as
// the model file numbers them), .bos/.eos/.unknown/.padding_token_id (UINT32_MAX where the
// model has none), .add_bos_token true, .add_eos_token false and .add_space_prefix (the
// normalizer's add_dummy_prefix).
// Only BPE models are accepted: Spillway's SentencePiece tokenizer merges by score, which is
// what SentencePiece's BPE does; a Unigram (or word/char) model gives UnsupportedModel.
// The normalizer's rules (NFKC, removing extra whitespace) are not carried: models meant for
// llama.cpp-style runtimes (Llama, Mistral) use the identity normalizer and keep whitespace.
// ModelFileInvalid when the file is no SentencePiece model, Io when it cannot be read,
// InvalidArgument when `out` holds one of the keys already.
Status tokenizerMetadataFromSentencePiece(const std::string& tokenizerModelPath,
                                          gguf::Metadata& out);

}  // namespace spillway
