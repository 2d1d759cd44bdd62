#!/usr/bin/env python3
"""Writes the tiny hybrid (Gated DeltaNet + gated attention) models of the Qwen3.5 / Qwen3-Next
families: random weights, small enough for the test suite, every part of the architecture scaled
so that it moves the greedy tokens.

    PYTHONPATH=PEER/gguf-py python3 make_tiny_qwen35.py resources/stories260K.gguf OUTDIR

writes OUTDIR/tiny-qwen35moe.gguf, OUTDIR/tiny-qwen35.gguf and OUTDIR/tiny-qwen3next.gguf.
PEER: ik_llama.cpp (the August 2026 tree, 8337e4c); only its gguf-py writer is used (the
architecture strings, keys and tensor names are plain strings, as its src/llama-model.cpp and
src/llama-hparams.cpp read them). The vocabulary is stories260K's 512-token SentencePiece one.

- qwen35moe: 4 layers plus one multi-token-prediction layer (nextn_predict_layers 1, not run in
  plain decoding), full attention every 2nd layer (layers 1 and 3), the others Gated DeltaNet
  with separate attn_qkv / attn_gate / ssm_beta / ssm_alpha; interleaved multi-section RoPE over 8
  of 16 dims; 8 experts (2 used, weights renormalized) and a shared expert with its gate.
- qwen35: the dense one (ffn_gate/up/down), the same mixers.
- qwen3next: the fused ssm_in (q, k, v, z per key head) and ssm_ba (b, a per key head), every
  4th layer full attention (so layer 3 of 4), NeoX RoPE over 8 of 16 dims, experts as qwen35moe.

Linear-attention layers: 2 key heads and 4 value heads of 64 (each key head serves two value
heads: qwen35 tiles them, qwen3next repeats each), a causal convolution of 4 taps.
"""
import os
import sys

import numpy as np
import gguf

VOCAB_FROM, OUTDIR = sys.argv[1], sys.argv[2]

DIM, HEADS, KV_HEADS, HEAD_DIM, ROPE_DIMS = 64, 4, 2, 16, 8
EXPERTS, USED, EXPERT_FFN, SHARED_FFN, DENSE_FFN = 8, 2, 32, 32, 96
K_HEADS, V_HEADS, STATE, CONV = 2, 4, 64, 4
KEY_DIM, VALUE_DIM = K_HEADS * STATE, V_HEADS * STATE
CONV_DIM = 2 * KEY_DIM + VALUE_DIM

reader = gguf.GGUFReader(VOCAB_FROM)
field = lambda name: reader.fields[name]
tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode("utf-8")
          for i in field("tokenizer.ggml.tokens").data]
scores = [float(field("tokenizer.ggml.scores").parts[i][0]) for i in field("tokenizer.ggml.scores").data]
types = [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data]
scalar = lambda name: int(field(name).parts[-1][0])
vocab = len(tokens)


def write(arch, main_layers, mtp_layers, interval, moe, fused, seed):
    rng = np.random.default_rng(seed)
    normal = lambda shape, scale: (rng.standard_normal(shape) * scale).astype(np.float32)
    out = os.path.join(OUTDIR, f"tiny-{arch}.gguf")
    w = gguf.GGUFWriter(out, arch)
    layers = main_layers + mtp_layers
    w.add_name(f"tiny-{arch} (random weights)")
    w.add_block_count(layers)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(DENSE_FFN if not moe else EXPERT_FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(ROPE_DIMS)
    if arch != "qwen3next":
        w.add_array(f"{arch}.rope.dimension_sections", [2, 1, 1, 0])
        w.add_uint32(f"{arch}.full_attention_interval", interval)
        w.add_uint32(f"{arch}.nextn_predict_layers", mtp_layers)
    if moe:
        w.add_expert_count(EXPERTS)
        w.add_expert_used_count(USED)
        w.add_expert_feed_forward_length(EXPERT_FFN)
        w.add_expert_shared_feed_forward_length(SHARED_FFN)
    w.add_uint32(f"{arch}.ssm.conv_kernel", CONV)
    w.add_uint32(f"{arch}.ssm.inner_size", VALUE_DIM)
    w.add_uint32(f"{arch}.ssm.state_size", STATE)
    w.add_uint32(f"{arch}.ssm.time_step_rank", V_HEADS)
    w.add_uint32(f"{arch}.ssm.group_count", K_HEADS)
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
    for l in range(layers):
        b = f"blk.{l}."
        mtp = l >= main_layers
        full = mtp or (l + 1) % interval == 0
        w.add_tensor(b + "attn_norm.weight", 1.0 + normal((DIM,), 0.1))
        w.add_tensor(b + "post_attention_norm.weight", 1.0 + normal((DIM,), 0.1))
        if full:
            # q and its output gate, per head [q_h | gate_h]; the gate of standard deviation ~1.5
            # so that sigmoid(gate) spreads over (0, 1).
            q = normal((HEADS, HEAD_DIM, DIM), 2.0 / np.sqrt(DIM))
            g = normal((HEADS, HEAD_DIM, DIM), 1.5 / np.sqrt(DIM))
            w.add_tensor(b + "attn_q.weight", np.concatenate([q, g], axis=1).reshape(2 * HEADS * HEAD_DIM, DIM))
            w.add_tensor(b + "attn_k.weight", normal((KV_HEADS * HEAD_DIM, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "attn_v.weight", normal((KV_HEADS * HEAD_DIM, DIM), 1.0 / np.sqrt(DIM)))
            w.add_tensor(b + "attn_output.weight", normal((DIM, HEADS * HEAD_DIM), 1.0 / np.sqrt(HEADS * HEAD_DIM)))
            w.add_tensor(b + "attn_q_norm.weight", 1.0 + normal((HEAD_DIM,), 0.2))
            w.add_tensor(b + "attn_k_norm.weight", 1.0 + normal((HEAD_DIM,), 0.2))
        else:
            if fused:  # per key head: q (STATE), k (STATE), v and z (V_HEADS / K_HEADS * STATE each)
                w.add_tensor(b + "ssm_in.weight", normal((2 * KEY_DIM + 2 * VALUE_DIM, DIM), 1.0 / np.sqrt(DIM)))
                w.add_tensor(b + "ssm_ba.weight", normal((2 * V_HEADS, DIM), 1.0 / np.sqrt(DIM)))
            else:
                w.add_tensor(b + "attn_qkv.weight", normal((CONV_DIM, DIM), 1.0 / np.sqrt(DIM)))
                w.add_tensor(b + "attn_gate.weight", normal((VALUE_DIM, DIM), 1.0 / np.sqrt(DIM)))
                w.add_tensor(b + "ssm_beta.weight", normal((V_HEADS, DIM), 1.0 / np.sqrt(DIM)))
                w.add_tensor(b + "ssm_alpha.weight", normal((V_HEADS, DIM), 1.0 / np.sqrt(DIM)))
            # The convolution's taps large enough that the last three tokens matter; the decay
            # (softplus(alpha + dt) * a, a = -exp(A_log)) spread from about 0.1 to 0.9 per token.
            w.add_tensor(b + "ssm_conv1d.weight", normal((CONV_DIM, CONV), 0.7))
            w.add_tensor(b + "ssm_dt.bias", normal((V_HEADS,), 1.0))
            w.add_tensor(b + "ssm_a", -np.exp(normal((V_HEADS,), 0.5)))
            w.add_tensor(b + "ssm_norm.weight", 1.0 + normal((STATE,), 0.2))
            w.add_tensor(b + "ssm_out.weight", normal((DIM, VALUE_DIM), 1.5 / np.sqrt(VALUE_DIM)))
        if moe:
            w.add_tensor(b + "ffn_gate_inp.weight", normal((EXPERTS, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_gate_exps.weight", normal((EXPERTS, EXPERT_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_up_exps.weight", normal((EXPERTS, EXPERT_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_down_exps.weight", normal((EXPERTS, DIM, EXPERT_FFN), 0.5 / np.sqrt(EXPERT_FFN)))
            w.add_tensor(b + "ffn_gate_inp_shexp.weight", normal((DIM,), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_gate_shexp.weight", normal((SHARED_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_up_shexp.weight", normal((SHARED_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_down_shexp.weight", normal((DIM, SHARED_FFN), 0.5 / np.sqrt(SHARED_FFN)))
        else:
            w.add_tensor(b + "ffn_gate.weight", normal((DENSE_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_up.weight", normal((DENSE_FFN, DIM), 2.0 / np.sqrt(DIM)))
            w.add_tensor(b + "ffn_down.weight", normal((DIM, DENSE_FFN), 0.5 / np.sqrt(DENSE_FFN)))
        if mtp:
            w.add_tensor(b + "nextn.eh_proj.weight", normal((DIM, 2 * DIM), 1.0 / np.sqrt(2 * DIM)))
            w.add_tensor(b + "nextn.enorm.weight", 1.0 + normal((DIM,), 0.1))
            w.add_tensor(b + "nextn.hnorm.weight", 1.0 + normal((DIM,), 0.1))
            w.add_tensor(b + "nextn.shared_head_norm.weight", 1.0 + normal((DIM,), 0.1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {out}: {arch}, {main_layers} + {mtp_layers} layers, {vocab} tokens")


write("qwen35moe", 4, 1, 2, moe=True, fused=False, seed=20261203)
write("qwen35", 4, 1, 2, moe=False, fused=False, seed=20261204)
write("qwen3next", 4, 0, 4, moe=True, fused=True, seed=20261205)
