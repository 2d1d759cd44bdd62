#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid GGUF
files covering every metadata value type and the tensor types the reader accepts (and split into
parts, for fuzz_gguf_split), and the
config.json texts of tests/formats_cfg/hf_configs.h (real checkpoints), alone and with a
generation_config.json after a NUL byte, and small byte-level and SentencePiece-style
tokenizer.json files. Standard library only; the output is deterministic, so
re-running it changes nothing unless this script changed. Files named regression_* in the corpus
folders are inputs that once made a target fail, kept by hand; this script leaves them alone.

    python3 tests/fuzz/make_seeds.py
"""

import pathlib
import re
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# GGUF metadata value types (gguf.h: ValueType) and ggml tensor types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q4_0, T_Q8_0, T_BF16 = 0, 1, 2, 8, 30
BLOCK = {T_F32: (1, 4), T_F16: (1, 2), T_Q4_0: (32, 18), T_Q8_0: (32, 34), T_BF16: (1, 2)}
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == STR:
        return gguf_string(v)
    if t == ARR:
        element, items = v
        out = struct.pack("<IQ", element, len(items))
        return out + b"".join(gguf_value(element, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf_file(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml type, dims)] filled with a byte pattern."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gguf_string(key) + struct.pack("<I", t) + gguf_value(t, v)
    offset, datas = 0, []
    for name, t, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        per_block, block_bytes = BLOCK[t]
        size = n // per_block * block_bytes
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, offset)
        datas.append(bytes((i * 7 + 3) & 0x3F for i in range(size)))  # small finite values
        offset += (size + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for d in datas:
        out += d + b"\0" * (-len(d) % alignment)
    return out


def llama_kvs(arch="llama"):
    p = arch + "."
    return [
        ("general.architecture", STR, arch),
        ("general.name", STR, "seed"),
        (p + "context_length", U32, 64),
        (p + "embedding_length", U32, 32),
        (p + "block_count", U32, 1),
        (p + "feed_forward_length", U32, 64),
        (p + "attention.head_count", U32, 4),
        (p + "attention.head_count_kv", U32, 2),
        (p + "attention.layer_norm_rms_epsilon", F32, 1e-5),
        (p + "rope.freq_base", F32, 10000.0),
        (p + "rope.dimension_count", U32, 8),
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "<s>", "</s>", "a", "b", "ab"])),
        ("tokenizer.ggml.scores", ARR, (F32, [0.0, 0.0, 0.0, -1.0, -2.0, -3.0])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3, 1, 1, 1])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
    ]


def llama_tensors():
    return [
        ("token_embd.weight", T_F32, [32, 6]),
        ("blk.0.attn_norm.weight", T_F32, [32]),
        ("blk.0.attn_q.weight", T_F16, [32, 32]),
        ("blk.0.attn_k.weight", T_BF16, [32, 16]),
        ("blk.0.attn_v.weight", T_Q8_0, [32, 16]),
        ("blk.0.attn_output.weight", T_Q4_0, [32, 32]),
        ("blk.0.ffn_norm.weight", T_F32, [32]),
        ("blk.0.ffn_gate.weight", T_Q8_0, [32, 64]),
        ("blk.0.ffn_up.weight", T_Q8_0, [32, 64]),
        ("blk.0.ffn_down.weight", T_Q4_0, [64, 32]),
        ("output_norm.weight", T_F32, [32]),
    ]


def every_value_type():
    return [
        ("general.architecture", STR, "llama"),
        ("t.u8", U8, 200), ("t.i8", I8, -100), ("t.u16", U16, 60000), ("t.i16", I16, -30000),
        ("t.u32", U32, 4000000000), ("t.i32", I32, -2000000000), ("t.f32", F32, 1.5),
        ("t.bool", BOOL, True), ("t.str", STR, "h\u00e9llo"), ("t.u64", U64, 2**63 + 5),
        ("t.i64", I64, -(2**62)), ("t.f64", F64, -0.25),
        ("t.empty", ARR, (U8, [])),
        ("t.nested", ARR, (ARR, [(I16, [1, -2]), (STR, ["x", ""])])),
        ("t.bools", ARR, (BOOL, [True, False])),
        ("t.f64s", ARR, (F64, [1e300, -1e-300])),
    ]


def gguf_seeds():
    return {
        "tiny_llama.gguf": gguf_file(llama_kvs(), llama_tensors()),
        "tiny_llama_v2_align64.gguf": gguf_file(
            llama_kvs() + [("general.alignment", U32, 64)], llama_tensors()[:4], version=2,
            alignment=64),
        "tiny_qwen3.gguf": gguf_file(
            llama_kvs("qwen3") + [("qwen3.attention.key_length", U32, 16)],
            [("token_embd.weight", T_F32, [32, 6]), ("blk.0.attn_q_norm.weight", T_F32, [16])]),
        "every_value_type.gguf": gguf_file(every_value_type(), []),
        "header_only.gguf": gguf_file([], []),
    }


SPLIT_SEPARATOR = b"SPLITPRT"  # fuzz_gguf_split cuts its input at it into the parts


def split_keys(no, count, tensors):
    return [("split.no", U16, no), ("split.count", U16, count), ("split.tensors.count", I32, tensors)]


def split_seeds():
    """The tiny llama as a split GGUF the way llama-gguf-split writes one (the metadata in the
    first part, the split keys in each), and a few near misses the reader must refuse."""
    t = llama_tensors()
    n = len(t)
    three = [gguf_file(llama_kvs() + split_keys(0, 3, n), t[:4]),
             gguf_file(split_keys(1, 3, n), t[4:8]),
             gguf_file(split_keys(2, 3, n), t[8:])]
    two_twice = [gguf_file(llama_kvs() + split_keys(0, 2, n), t[:6]),
                 gguf_file(split_keys(1, 2, n), t[5:])]
    no_tensor_first = [gguf_file(llama_kvs() + split_keys(0, 2, n), []),
                       gguf_file(split_keys(1, 2, n), t)]
    return {
        "three_parts.bin": SPLIT_SEPARATOR.join(three),
        "metadata_only_first_part.bin": SPLIT_SEPARATOR.join(no_tensor_first),
        "tensor_in_two_parts.bin": SPLIT_SEPARATOR.join(two_twice),
        "one_part_of_three.bin": three[1],
        "not_split.bin": gguf_file(llama_kvs(), t),
    }


def config_seeds():
    text = (ROOT / "tests/formats_cfg/hf_configs.h").read_text()
    texts = dict(re.findall(r'inline constexpr const char\* (\w+) = R"\((.*?)\)";', text, re.S))
    seeds = {}
    generation = {"kLlama32_1B": "kLlama32_1B_InstructGeneration", "kQwen3_06B": "kQwen3_06B_Generation"}
    for name, body in texts.items():
        if name.endswith("Generation"):
            continue
        seeds[name[1:] + ".json"] = body.encode()
        if name in generation:
            seeds[name[1:] + "+generation.json"] = body.encode() + b"\0" + texts[generation[name]].encode()
    seeds["model_type_only.json"] = (
        b'{"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, '
        b'"num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 5, '
        b'"vocab_size": 512, "rope_scaling": {"type": "linear", "factor": 2}, '
        b'"eos_token_id": [2, 3]}')
    seeds["tensor_name.json"] = b"model.layers.0.self_attn.q_proj.weight\n{}"
    return seeds


def gpt2_byte_chars():
    """GPT-2's byte -> printable character map (bytes_to_unicode)."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def tokenizer_seeds():
    """Small tokenizer.json files: byte-level BPE (SmolLM-style pre-tokenizer, added special
    tokens) and a SentencePiece-style BPE with byte fallback, each alone, with a
    tokenizer_config.json after a NUL and a text to encode after a second NUL."""
    import json
    chars = gpt2_byte_chars()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for b in range(256):
        vocab[chars[b]] = len(vocab)
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a"),
              ("o", "r"), ("\u0120a", "n"), ("\u0120an", "d"), ("e", "r"), ("\u0120", "w")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    byte_level = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]}}
    bl = json.dumps(byte_level, ensure_ascii=False).encode()
    config = json.dumps({"bos_token": None, "eos_token": "<|endoftext|>",
                         "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n"
                                          "{{ m.content }}<|im_end|>\n{% endfor %}"}).encode()
    text = "<|im_start|>user\nthe 2024 wander and \u00e9t\u00e9 \U0001F600<|im_end|>".encode()
    seeds = {"byte_level.json": bl, "byte_level+config+text.json": bl + b"\0" + config + b"\0" + text}

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += ["\u2581", "t", "h", "e", "\u2581t", "he", "\u2581the", "a", "n", "d", "an", "and"]
    sp_vocab = {p: i for i, p in enumerate(pieces)}
    sp_merges = ["\u2581 t", "h e", "\u2581t he", "a n", "an d"]
    sentencepiece = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(pieces[:3])],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {
                               "<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ",
                                                          "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": sp_vocab, "merges": sp_merges}}
    sp = json.dumps(sentencepiece, ensure_ascii=False).encode()
    sp_config = json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                            "add_bos_token": True, "add_eos_token": False}).encode()
    seeds["sentencepiece.json"] = sp
    seeds["sentencepiece+config+text.json"] = (sp + b"\0" + sp_config + b"\0" +
                                               "the and \u00e9t\u00e9 q".encode())
    return seeds


def write(target, files):
    folder = HERE / "corpus" / target
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(files.items()):
        (folder / name).write_bytes(data)
        print(f"{folder.relative_to(ROOT)}/{name}: {len(data)} bytes")


if __name__ == "__main__":
    write("fuzz_gguf", gguf_seeds())
    write("fuzz_gguf_split", split_seeds())
    write("fuzz_hf_config", config_seeds())
    write("fuzz_hf_tokenizer", tokenizer_seeds())
