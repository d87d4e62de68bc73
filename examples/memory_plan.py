"""Memory: why a training step needs more than inference, planned on the meta device.

Run it: python examples/memory_plan.py
"""

import shapeflow as sf

fmt = sf.memory.format_bytes

# A small ViT: the report counts what every op keeps for backward, per image (B).
vit = sf.models.ViT(image_size=32, patch_size=4, in_channels=3, num_classes=10, dim=64,
                    depth=2, heads=4)
rep = sf.memory.report(vit, sf.empty("B", 3, 32, 32, device="meta"), optimizer="adamw")
print(rep)
at = rep.subs(B=256)
print(f"at a batch of 256: {fmt(at.peak)} to train, {fmt(at.inference_peak)} to infer")

# GPT-2 small at 8 x 1024 tokens, never allocated: what recomputation buys.
gpt = sf.models.GPT(50304, 1024, 12, 12, 768, device="meta")
idx = sf.empty(8, 1024, dtype=sf.int64, device="meta")
for recompute in ("none", "selective", "full"):
    r = sf.memory.report(gpt, idx, idx, precision="bf16-true", optimizer="adamw",
                         recompute=recompute)
    print(f"recompute={recompute:<9} activations {fmt(r.activations):>10}, peak {fmt(r.peak)}")

# The same step on 8 devices: ZeRO stage 3 splits the model states, tensor parallelism the
# layers, sequence parallelism the rest of the activations.
r = sf.memory.report(gpt, idx, idx, precision="bf16-true", optimizer="adamw")
print(r.plan(devices=8, zero=3, tensor_parallel=2, sequence_parallel=True))
print("KV cache for 8 x 1024 tokens in bf16:",
      fmt(sf.memory.kv_cache_bytes(gpt, batch=8, seq_len=1024, dtype="bf16")))
