#pragma once
// Hugging Face model folders <-> GGUF vocabulary: config.json (+ generation_config.json) as
// GGUF-keyed metadata that llamaConfigFromMetadata reads, the same backwards for GGUF -> HF
// conversion (hf_config.cpp), the two tensor naming schemes, and the RoPE row order that tells
// them apart (hf_tensor_names.cpp).
//
// Keys follow llama.cpp's convert_hf_to_gguf where it has one ("llama.embedding_length",
// "llama.attention.layer_norm_rms_epsilon", "llama.rope.scaling.type", ...; counts as uint32,
// floats as float32). Keys llama.cpp has no name for:
//   {arch}.rope.scaling.low_freq_factor / high_freq_factor  (float32) Llama 3 RoPE scaling;
//       llama.cpp bakes those into a "rope_freqs.weight" tensor instead. With them the metadata
//       says rope.scaling.type = "llama3", rope.scaling.factor and
//       rope.scaling.original_context_length.
//   spillway.tied_embeddings  (bool) tie_word_embeddings, with the HF default of each
//       architecture applied. GGUF itself says "tied" by leaving output.weight out (as llama.cpp
//       does); the key lets an importer check lm_head.weight against it, and is informational for
//       every other reader.
//   spillway.hf_architecture  (string) architectures[0] ("MistralForCausalLM"), so that GGUF -> HF
//       writes back the same class: Mistral is stored as general.architecture "llama", as
//       llama.cpp stores it.
//   spillway.torch_dtype      (string) "bfloat16", ... : the checkpoint's stored type, if given.
//   spillway.eos_token_ids    (uint32 array) every end-of-sequence id; tokenizer.ggml.eos_token_id
//       holds the first.
// Mistral's sliding_window goes to {arch}.attention.sliding_window (llama.cpp's key); the engine
// does not apply it yet (neither does llama.cpp for "llama").
//
// OPT has no llama.cpp architecture; it is written GPT-2 style: opt.context_length,
// opt.embedding_length, opt.feed_forward_length (ffn_dim), opt.block_count,
// opt.attention.head_count, opt.attention.layer_norm_epsilon (1e-5, OPT's LayerNorm default).
// OPT with biases, affine LayerNorms and ReLU is accepted; opt-350m's differences become
//   spillway.post_norm (bool) true: do_layer_norm_before = false (post-LayerNorm blocks, no
//       final norm);
//   spillway.word_embed_proj_dim (uint32) where it differs from hidden_size: the embeddings'
//       width, with project_in / project_out as proj_in.weight / proj_out.weight.
// Note that its position_embd.weight has context_length + 2 rows (OPT offsets positions by 2).
//
// Mixtures of experts, with llama.cpp's keys: MixtralForCausalLM is general.architecture "llama"
// with llama.expert_count (num_local_experts) and .expert_used_count (num_experts_per_tok), its
// experts intermediate_size wide; Qwen2MoeForCausalLM "qwen2moe" and Qwen3MoeForCausalLM
// "qwen3moe" add .expert_feed_forward_length (moe_intermediate_size; feed_forward_length keeps
// intermediate_size) and Qwen2-MoE .expert_shared_feed_forward_length
// (shared_expert_intermediate_size); OlmoeForCausalLM "olmoe". norm_topk_prob is
// {arch}.expert_weights_norm (Mixtral always renormalizes). Dense layers among the sparse ones
// (decoder_sparse_step > 1, mlp_only_layers) and OLMoE's clip_qkv are refused.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "core/formats/gguf.h"

namespace spillway {

// "llama, mistral, qwen2, qwen3, opt (LlamaForCausalLM, ...)": for messages.
const char* supportedHfArchitectures();

// Adds the GGUF-keyed hyper-parameters of config.json (and the token ids of
// generation_config.json, which win over config.json's; an empty path or a missing file is
// skipped) to `out`. ModelFileInvalid naming the file and the key for unreadable JSON and for
// missing, ill-typed or out-of-range fields; UnsupportedModel for architectures and options the
// engine cannot run. On error `out` is left as it was; a key `out` holds already is an error.
Status metadataFromHfConfig(const std::string& configJsonPath,
                            const std::string& generationConfigPath, gguf::Metadata& out);
// The same from texts; `configWhat` / `generationWhat` name them in messages. An empty
// generation text means none.
Status metadataFromHfConfigText(const std::string& configJson, const std::string& configWhat,
                                const std::string& generationJson,
                                const std::string& generationWhat, gguf::Metadata& out);

// GGUF -> HF: a config.json text that metadataFromHfConfig reads back to the same values (all
// the keys above; vocab_size from {arch}.vocab_size or the tokenizer.ggml.tokens count).
// `tiedEmbeddings`: the GGUF has no output.weight. ModelFileInvalid naming metadata.source() for
// missing keys; UnsupportedModel for an architecture or RoPE scaling HF cannot express here.
Result<std::string> hfConfigFromMetadata(const gguf::Metadata& metadata, bool tiedEmbeddings);
// generation_config.json: bos/eos/pad token ids ("{}"-like object if there are none).
Result<std::string> hfGenerationConfigFromMetadata(const gguf::Metadata& metadata);

// Tensor names for arch "llama", "mistral", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "olmoe" or
// "opt" (general.architecture):
// "model.layers.3.self_attn.q_proj.weight" <-> "blk.3.attn_q.weight". nullopt for names the
// architecture does not have (and for skipped ones, see below). OPT also accepts names without
// the "model." prefix (older checkpoints: "decoder.layers.0.fc1.weight"); the reverse always
// gives "model.decoder....". Layer numbers are plain decimal, without leading zeros.
std::optional<std::string> ggufTensorName(std::string_view arch, std::string_view hfName);
std::optional<std::string> hfTensorName(std::string_view arch, std::string_view ggufName);
// HF tensors an importer drops without complaint: "model.layers.N.self_attn.rotary_emb.inv_freq"
// (recomputed from rope_theta). lm_head.weight of a tied model is the caller's call.
bool hfTensorIsSkipped(std::string_view arch, std::string_view hfName);
// Mixtures of experts (llama as Mixtral, qwen2moe, qwen3moe, olmoe): HF keeps each expert's
// matrices as tensors of their own ("model.layers.3.mlp.experts.5.gate_proj.weight",
// "model.layers.3.block_sparse_moe.experts.5.w1.weight"); GGUF stacks a layer's experts into one
// 3-D tensor ("blk.3.ffn_gate_exps.weight", expert 5 the sixth matrix). ggufTensorName gives
// nullopt for those; these give the stack and the expert, and back.
struct ExpertTensorName {
    std::string gguf;
    int64_t expert = 0;
};
std::optional<ExpertTensorName> ggufExpertTensorName(std::string_view arch, std::string_view hfName);
std::optional<std::string> hfExpertTensorName(std::string_view arch, std::string_view ggufStack, int64_t expert);

// True for tensors stored in different row orders by HF and GGUF: attn_q / attn_k weights and
// biases of "llama" and "mistral" (GGUF pairs the rotated halves as adjacent rows, (x0,x1),
// (x2,x3)..., for ggml's normal RoPE; HF rotates halves, (x0, x_{d/2}), ...). False for qwen2 and
// qwen3 (GGUF uses NEOX RoPE for them, the HF order) and for OPT (no RoPE).
bool hfNeedsRopePermutation(std::string_view arch, std::string_view ggufName);

// Reorders whole rows (of any type: rowBytes each) of a Q or K projection between the two
// orders, as llama.cpp's convert_hf_to_gguf `permute`: w.reshape(nHeads, 2, rows/nHeads/2, ...)
// .swapaxes(1, 2). With r = rows / nHeads per head, h a head, s in {0, 1}, i < r / 2:
//   toGguf:  dst[h*r + 2*i + s] = src[h*r + s*r/2 + i];   !toGguf: the inverse.
// nHeads: head_count for attn_q, head_count_kv for attn_k. src and dst must not overlap. False
// (dst untouched) when rows is not a positive multiple of 2 * nHeads.
bool permuteRopeRows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t rowBytes, int nHeads,
                     bool toGguf);

}  // namespace spillway
