#pragma once
// llama2.c checkpoints (github.com/karpathy/llama2.c) and their tokenizer.bin, imported as GGUF-
// keyed metadata and tensors (core/formats/imported_model.h):
//   v0  legacy export: 7 x int32 header (a negative vocab size means a separate classifier),
//       then fp32 tensors layer-major by kind; the RoPE tables are skipped.
//   v1  256-byte header (magic "ak42", version 1), fp32.
//   v2  256-byte header with the quantization group size; norms fp32, every matrix int8 in
//       groups (64 here) with one fp32 scale per group (the thesis' ReLU models use it).
// fp32 tensors are used in place from the mapping; v2 matrices are regrouped into Q8_G64 blocks
// (scale beside its values) in memory, since the file keeps all values before all scales.
// The format does not record the activation function: `architecture` says it ("llama", the
// default, or "relu-llama" for the thesis' shifted-ReLU models). A relu-llama v2 checkpoint is
// computed as the thesis' runtime computes it (the one its reference text comes from): every
// matrix but the embedding rows with its int8 weights rounded to 4 bits, (q >> 4) +
// ((q >> 3) & 1) times 16 (the shared classifier becomes a rounded copy, output.weight).

#include <memory>
#include <string>

#include "base/result.h"
#include "core/formats/imported_model.h"

namespace spillway::llama2c {

struct ImportOptions {
    std::string architecture = "llama";  // "llama" or "relu-llama"
    // tokenizer.bin layout (int32 max length; per token float score, int32 length, bytes), or a
    // decode table (*.tok, decodeTableMetadata). Empty: "tokenizer.bin", "tok<vocab>.bin", then
    // "decode<vocab>.tok" beside the checkpoint.
    std::string tokenizerPath;
};

// Whether `path` looks like a llama2.c checkpoint: the "ak42" magic (v1, v2), or a legacy header
// whose sizes add up to exactly the file's size. Reads the first bytes only.
bool looksLikeCheckpoint(const std::string& path);

Result<std::unique_ptr<ImportedModel>> importCheckpoint(const std::string& path, const ImportOptions& options = {});

// A tokenizer.bin as tokenizer.ggml.* metadata (SentencePiece-style: spaces become U+2581,
// "<0xAB>" pieces are byte tokens, <unk>/<s>/</s> are ids 0/1/2 as llama2.c has them).
Status tokenizerMetadata(const std::string& path, int vocabSize, gguf::Metadata& out);

// A decode-only table (the thesis' decode<vocab>.tok: uint16 entry size, uint16 token count,
// then one NUL-padded entry per token holding its decoded text) as the same metadata. llama2.c's
// tokenizers are BPE SentencePiece models whose merge pieces (ids from 259) have score
// -(id - 259), and whose ids 3..258 are the byte pieces "<0x00>".."<0xFF>" (true of tok512.bin
// and tok1024.bin): the table's order gives back the scores, so it encodes as tokenizer.bin
// would (pieces longer than an entry cannot be told apart and come back cut).
Status decodeTableMetadata(const std::string& path, int vocabSize, gguf::Metadata& out);

// The tokenizer importCheckpoint finds beside a checkpoint when none is named (tokenizer.bin,
// tok<vocab>.bin, decode<vocab>.tok), or "" (also for a file that is not a checkpoint).
std::string tokenizerBeside(const std::string& checkpoint);

// A checkpoint as a library entry: the file, the architecture it cannot say itself and its
// tokenizer, in a small JSON file (`<name>.llama2c.json`, written by the app when a checkpoint is
// added) that LlamaModel::load opens like a model. Absolute paths; "" tokenizer: the one beside.
inline constexpr const char* kDescriptorSuffix = ".llama2c.json";
struct Descriptor {
    std::string checkpoint, architecture = "llama", tokenizer;
};
bool isDescriptor(const std::string& path);  // by its name
Result<Descriptor> readDescriptor(const std::string& path);
Status writeDescriptor(const std::string& path, const Descriptor& descriptor);

// The architectures importCheckpoint takes.
const char* architectures();  // "llama, relu-llama"

}  // namespace spillway::llama2c
