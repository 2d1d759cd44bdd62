#!/usr/bin/env python3
"""Writes tiny-gpt-oss.gguf: a random-weight gpt-oss (OpenAI's open-weight mixture) small enough
for the test suite, every part of the architecture scaled so that it moves the greedy tokens.

    PYTHONPATH=PEER/gguf-py python3 make_tiny_gpt_oss.py resources/stories260K.gguf OUT.gguf

PEER: ik_llama.cpp (the August 2026 tree, 8337e4c) or llama.cpp; only its gguf-py writer is used
(the architecture string and tensor names are plain strings: its gguf-py has no GPT_OSS enum).
The vocabulary is stories260K's 512-token SentencePiece one, copied from the given GGUF.
"""
import sys

import numpy as np
import gguf

VOCAB_FROM, OUT = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(20261202)

DIM, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 64, 4, 4, 2, 16
EXPERTS, USED, EXPERT_FFN = 8, 2, 32
WINDOW = 8  # sliding window of the even layers: prompts and replies run past it
YARN_FACTOR, YARN_ORIG_CTX = 4.0, 32


def normal(shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


reader = gguf.GGUFReader(VOCAB_FROM)
field = lambda name: reader.fields[name]
tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode("utf-8")
          for i in field("tokenizer.ggml.tokens").data]
scores = [float(field("tokenizer.ggml.scores").parts[i][0]) for i in field("tokenizer.ggml.scores").data]
types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
scalar = lambda name: int(field(name).parts[-1][0])
vocab = len(tokens)

w = gguf.GGUFWriter(OUT, "gpt-oss")
w.add_name("tiny-gpt-oss (random weights)")
w.add_block_count(LAYERS)
w.add_context_length(256)
w.add_embedding_length(DIM)
w.add_feed_forward_length(EXPERT_FFN)
w.add_head_count(HEADS)
w.add_head_count_kv(KV_HEADS)
w.add_key_length(HEAD_DIM)
w.add_value_length(HEAD_DIM)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
w.add_expert_count(EXPERTS)
w.add_expert_used_count(USED)
w.add_expert_feed_forward_length(EXPERT_FFN)
w.add_sliding_window(WINDOW)
w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
w.add_rope_scaling_factor(YARN_FACTOR)
w.add_rope_scaling_orig_ctx_len(YARN_ORIG_CTX)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(scalar("tokenizer.ggml.bos_token_id"))
w.add_eos_token_id(scalar("tokenizer.ggml.eos_token_id"))
w.add_unk_token_id(scalar("tokenizer.ggml.unknown_token_id"))

# numpy shapes are ggml's ne reversed: (rows, cols) for a matrix of rows outputs.
w.add_tensor("token_embd.weight", normal((vocab, DIM), 1.0))
w.add_tensor("output_norm.weight", 1.0 + normal((DIM,), 0.1))
w.add_tensor("output.weight", normal((vocab, DIM), 3.0 / np.sqrt(DIM)))
for l in range(LAYERS):
    b = f"blk.{l}."
    w.add_tensor(b + "attn_norm.weight", 1.0 + normal((DIM,), 0.1))
    w.add_tensor(b + "post_attention_norm.weight", 1.0 + normal((DIM,), 0.1))
    # Q and K large enough that attention is peaked; sinks of the same order as the scores.
    w.add_tensor(b + "attn_q.weight", normal((HEADS * HEAD_DIM, DIM), 2.0 / np.sqrt(DIM)))
    w.add_tensor(b + "attn_q.bias", normal((HEADS * HEAD_DIM,), 0.3))
    w.add_tensor(b + "attn_k.weight", normal((KV_HEADS * HEAD_DIM, DIM), 2.0 / np.sqrt(DIM)))
    w.add_tensor(b + "attn_k.bias", normal((KV_HEADS * HEAD_DIM,), 0.3))
    w.add_tensor(b + "attn_v.weight", normal((KV_HEADS * HEAD_DIM, DIM), 1.0 / np.sqrt(DIM)))
    w.add_tensor(b + "attn_v.bias", normal((KV_HEADS * HEAD_DIM,), 0.3))
    w.add_tensor(b + "attn_output.weight", normal((DIM, HEADS * HEAD_DIM), 1.0 / np.sqrt(HEADS * HEAD_DIM)))
    w.add_tensor(b + "attn_output.bias", normal((DIM,), 0.3))
    w.add_tensor(b + "attn_sinks.weight", normal((HEADS,), 2.0))
    # The router and its bias, of the same order: the bias changes which experts win.
    w.add_tensor(b + "ffn_gate_inp.weight", normal((EXPERTS, DIM), 2.0 / np.sqrt(DIM)))
    w.add_tensor(b + "ffn_gate_inp.bias", normal((EXPERTS,), 1.0))
    # Gate and up pre-activations of standard deviation about 6: a fifth of them past the
    # clamp's limit of 7.
    w.add_tensor(b + "ffn_gate_exps.weight", normal((EXPERTS, EXPERT_FFN, DIM), 6.0 / np.sqrt(DIM)))
    w.add_tensor(b + "ffn_gate_exps.bias", normal((EXPERTS, EXPERT_FFN), 1.0))
    w.add_tensor(b + "ffn_up_exps.weight", normal((EXPERTS, EXPERT_FFN, DIM), 6.0 / np.sqrt(DIM)))
    w.add_tensor(b + "ffn_up_exps.bias", normal((EXPERTS, EXPERT_FFN), 1.0))
    w.add_tensor(b + "ffn_down_exps.weight", normal((EXPERTS, DIM, EXPERT_FFN), 0.05 / np.sqrt(EXPERT_FFN)))
    w.add_tensor(b + "ffn_down_exps.bias", normal((EXPERTS, DIM), 0.3))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {OUT}: gpt-oss, {LAYERS} layers, {vocab} tokens")
