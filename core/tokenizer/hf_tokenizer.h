#pragma once
// Hugging Face tokenizer.json (+ tokenizer_config.json) <-> the tokenizer keys of GGUF metadata,
// so that a Hugging Face model folder's tokenizer becomes the same Vocabulary a GGUF file gives
// (vocabularyFromMetadata), and a GGUF's tokenizer can be written into a Hugging Face folder.
//
// Supported tokenizer.json models (anything else is UnsupportedModel, with the reason):
//  - byte-level BPE (GPT-2, Llama 3, Qwen 2, SmolLM ...): model BPE with a ByteLevel
//    pre-tokenizer -> tokenizer.ggml.model "gpt2". The pre-tokenizer (ByteLevel, Digits,
//    Split(Regex|String, Isolated), in a Sequence) becomes regexes; where a tokenizer.ggml.pre
//    name stands for exactly those, the name is written; otherwise "default" plus the regexes
//    under spillway.tokenizer.pre_regexes (and spillway.tokenizer.ignore_merges), which
//    vocabularyFromMetadata prefers over the name. An NFC normalizer is accepted and not applied
//    (as llama.cpp does): text is taken to be NFC already.
//  - SentencePiece-style BPE (Llama 2, Mistral ...): model BPE with byte_fallback, spaces as
//    U+2581 through a Replace normalizer or a Metaspace pre-tokenizer -> "llama". Our
//    SentencePiece tokenizer merges the adjacent pair whose joined piece has the highest score,
//    so each piece gets the score -(rank of the first merge that makes it): merges then apply in
//    rank order, which reproduces Hugging Face's BPE wherever the merges list every pair that
//    joins into a piece (true of files converted from SentencePiece). Pieces no merge makes get
//    a score below every merge. A Metaspace with split = true is read as split = false.
//
// The reverse writes a tokenizer.json that Hugging Face's tokenizers library loads, and a
// tokenizer_config.json with a "spillway" member holding what tokenizer.json cannot say: token
// types, SentencePiece scores, token texts that occur twice, and a fingerprint of the token
// texts. (It cannot go into tokenizer.json: that library's readers fail on members they do not
// know.) Our reader uses the member when the fingerprint matches the tokenizer.json beside it,
// so GGUF -> tokenizer.json -> GGUF gives back the same Vocabulary exactly; without it (no
// config, or files changed by other tools) the rules above apply, which for SentencePiece
// vocabularies whose multi-character pieces have distinct scores (stories260K, Llama 2) give
// the same encodings. For "llama" vocabularies the merges are every pair of pieces that joins
// into a piece, ordered by that piece's score (then by id), as transformers' SentencePiece
// converter makes them, and the normalizer, decoder and post-processor are Llama 2's.

#include <string>

#include "base/result.h"

namespace spillway {

namespace gguf { class Metadata; }

// Adds the tokenizer keys a GGUF file would hold to `out`: tokenizer.ggml.model, .pre, .tokens,
// .token_type, .scores ("llama") or .merges ("gpt2"), .bos/.eos/.unknown/.padding_token_id,
// .add_bos_token, .add_eos_token, .add_space_prefix, and tokenizer.chat_template (from
// tokenizer_config.json; named templates as tokenizer.chat_template.<name>). Special added
// tokens become Control, other added tokens UserDefined, unk Unknown, "<0xAB>" pieces of a
// byte-fallback vocabulary Byte, id gaps "[PAD<id>]" Unused.
// tokenizerConfigPath may be empty or name a file that does not exist: BOS/EOS then come from
// the post-processor and the usual names ("<s>", "</s>", "<|endoftext|>").
// ModelFileInvalid (naming the file) for malformed JSON, Io when a file cannot be read,
// InvalidArgument when `out` holds one of the keys already.
Status tokenizerMetadataFromHf(const std::string& tokenizerJsonPath,
                               const std::string& tokenizerConfigPath, gguf::Metadata& out);
// The same from the files' text; `configText` may be empty. `what` names tokenizer.json in
// messages.
Status tokenizerMetadataFromHfText(const std::string& tokenizerJsonText,
                                   const std::string& configText, const std::string& what,
                                   gguf::Metadata& out);

// tokenizer.json text for the tokenizer keys of `metadata` ("gpt2" or "llama" vocabularies).
Result<std::string> hfTokenizerJsonFromMetadata(const gguf::Metadata& metadata);
// tokenizer_config.json text: bos/eos/unk/pad tokens, add_bos_token, add_eos_token,
// tokenizer_class, chat_template (from tokenizer.chat_template) and our "spillway" member.
Result<std::string> hfTokenizerConfigFromMetadata(const gguf::Metadata& metadata);

}  // namespace spillway
