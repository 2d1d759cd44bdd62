#!/usr/bin/env python3
# Hugging Face Accelerate offloading baseline: a Llama-2-13B-shaped model (random weights, fp16)
# with 8 GiB of GPU memory (device_map + max_memory), greedy decode; prints tokens/s.
import sys, time, torch
from transformers import LlamaConfig, LlamaForCausalLM
from accelerate import infer_auto_device_map, dispatch_model

cfg = LlamaConfig(hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
                  num_attention_heads=40, num_key_value_heads=40, vocab_size=32000,
                  max_position_embeddings=4096, torch_dtype=torch.float16)
t0 = time.time()
torch.set_default_dtype(torch.float16)
with torch.device("meta"):
    model = LlamaForCausalLM(cfg)
model = model.to_empty(device="cpu")
torch.set_default_dtype(torch.float32)
torch.manual_seed(0)
with torch.no_grad():
    for p in list(model.parameters()) + list(model.buffers()):
        if not p.is_floating_point() or p.dim() == 0:
            continue  # random values drawn on the GPU (fast), then moved to the CPU
        p.copy_((torch.randn(p.shape, device="cuda", dtype=torch.float16) * 0.02).cpu())
print(f"init {time.time()-t0:.1f}s", flush=True)
dm = infer_auto_device_map(model, max_memory={0: "8GiB", "cpu": "100GiB"},
                           no_split_module_classes=["LlamaDecoderLayer"], dtype=torch.float16)
model = dispatch_model(model, device_map=dm)
on_gpu = sum(1 for v in dm.values() if v == 0)
print(f"device map: {on_gpu} modules on GPU, {len(dm)-on_gpu} on CPU", flush=True)
ids = torch.tensor([[1, 450, 4996, 17354, 1701, 29916]], device="cuda:0")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
with torch.no_grad():
    model.generate(ids, max_new_tokens=2, do_sample=False)  # warm-up
    torch.cuda.synchronize(); t = time.time()
    model.generate(ids, max_new_tokens=1, do_sample=False)
    torch.cuda.synchronize(); first = time.time() - t
    t = time.time()
    model.generate(ids, max_new_tokens=1 + n, do_sample=False)
    torch.cuda.synchronize(); total = time.time() - t
tps = n / max(total - first, 1e-9)
print(f"accelerate decode: {tps:.3f} tokens/s ({n} tokens; prompt+first {first:.2f}s)", flush=True)
