"""sf.compile's rows of `make bench`: eager / compiled shapeflow against eager / torch.compile
PyTorch (default mode), one thread, alternating, on the same weights and inputs.

Run alone: `python benchmarks/compile_rows.py [--quick] [--no-torch-compile]` (torch.compile
takes ~20 s a model to compile on this CPU; its first call is left out of the timings).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import shapeflow as sf  # noqa: E402
from shapeflow.models import GPT, MLP, CharLSTM, ResNet, ViT  # noqa: E402
from shapeflow.models.gpt import KVCache  # noqa: E402
from tests.models.twin_resnet import TorchResNet  # noqa: E402
from tests.models.twins import TorchCharLSTM, TorchGPT, TorchViT, copy_weights  # noqa: E402

torch.set_num_threads(1)

# targets from the compile issue: compiled shapeflow at least this many times faster
TARGETS = {"gpt_decode_kv64": {"eager": 2.0, "torch_compile": 1.5},
           "mlp_b1_forward": {"eager": 2.0}, "gpt_train_b16": {"eager": 1.3}}


def _median(fn, repeat: int, number: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t) / number)
    return statistics.median(samples)


def compare(fns: dict, rounds: int, repeat: int, number: int) -> dict:
    """Median seconds per side, sides alternating round by round (first calls left out)."""
    for fn in fns.values():
        fn()
        fn()
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            samples[k].append(_median(fn, repeat, number))
    return {k: statistics.median(v) for k, v in samples.items()}


def _sides(model, twin, sf_call, torch_call, use_torch_compile: bool) -> dict:
    """Four callables: shapeflow eager and compiled, PyTorch eager and torch.compile."""
    model.eval()
    twin.eval()
    compiled = sf.compile(model)
    fns = {"eager": lambda: sf_call(model), "compiled": lambda: sf_call(compiled),
           "torch": lambda: torch_call(twin)}
    if use_torch_compile:
        tc = torch.compile(twin)
        fns["torch_compile"] = lambda: torch_call(tc)
    return fns


def mlp_b1(use_tc: bool) -> dict:
    sf.manual_seed(0)
    model = MLP(784, [256, 256], 10)
    twin = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))
    with torch.no_grad():
        for tp, p in zip(twin.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    xa = np.random.default_rng(0).random((1, 784), np.float32)
    x, tx = sf.tensor(xa), torch.tensor(xa)
    return _sides(model, twin, lambda m: m(x), lambda m: m(tx), use_tc)


GPT_TINY = dict(vocab_size=65, block_size=128, n_layer=2, n_head=4, n_embd=128)


def _torch_decode(twin, tok, kv):
    """One token through nanoGPT's twin with a KV cache (cat, as shapeflow's KVCache)."""
    x = twin.transformer.wte(tok) + twin.transformer.wpe.weight[kv[0].shape[2]]
    out = []
    for i, b in enumerate(twin.transformer.h):
        h = b.ln_1(x)
        B, T, C = h.shape
        q, k, v = b.attn.c_attn(h).split(C, dim=2)
        q, k, v = (t.view(B, T, twin.n_head, C // twin.n_head).transpose(1, 2)
                   for t in (q, k, v))
        k, v = torch.cat([kv[2 * i], k], 2), torch.cat([kv[2 * i + 1], v], 2)
        out += [k, v]
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + b.attn.c_proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + b.mlp.c_proj(torch.nn.functional.gelu(b.mlp.c_fc(b.ln_2(x))))
    return twin.lm_head(twin.transformer.ln_f(x)), out


def gpt_decode(use_tc: bool, kv_len: int = 64) -> dict:
    """A decode step: one new token, batch 1, a KV cache of kv_len tokens per layer."""
    sf.manual_seed(0)
    model = GPT(**GPT_TINY).eval()
    twin = copy_weights(model, TorchGPT(**{k: v for k, v in GPT_TINY.items()})).eval()
    hs = GPT_TINY["n_embd"] // GPT_TINY["n_head"]
    rng = np.random.default_rng(0)
    kva = [rng.standard_normal((1, GPT_TINY["n_head"], kv_len, hs)).astype(np.float32)
           for _ in range(2 * GPT_TINY["n_layer"])]
    kv, tkv = [sf.tensor(a) for a in kva], [torch.tensor(a) for a in kva]
    tok, ttok = sf.tensor([[7]]), torch.tensor([[7]])

    def decode(idx, cache_tensors):
        cache = KVCache(len(cache_tensors) // 2)
        cache.layers = [tuple(cache_tensors[2 * i:2 * i + 2]) for i in range(len(cache.layers))]
        logits, _ = model(idx, cache=cache)
        return logits, [t for pair in cache.layers for t in pair]

    compiled = sf.compile(decode)
    fns = {"eager": lambda: decode(tok, kv), "compiled": lambda: compiled(tok, kv),
           "torch": lambda: _torch_decode(twin, ttok, tkv)}
    if use_tc:
        tc = torch.compile(_torch_decode)
        fns["torch_compile"] = lambda: tc(twin, ttok, tkv)
    return fns


def gpt_train_step(use_tc: bool, batch: int = 16, T: int = 64) -> dict:
    """A GPT 2L d128 AdamW training step (forward, backward, optimizer step): shapeflow eager
    and the whole step compiled; PyTorch eager and with torch.compile(model)."""
    cfg = dict(vocab_size=65, block_size=T, n_layer=2, n_head=4, n_embd=128)
    rng = np.random.default_rng(0)
    ia, ta = rng.integers(0, 65, (batch, T)), rng.integers(0, 65, (batch, T))
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)

    def sf_step():
        sf.manual_seed(0)
        model = GPT(**cfg)
        opt = sf.optim.AdamW(model.parameters(), lr=1e-3)

        def step(x, y):
            opt.zero_grad()
            loss = model(x, y)[1]
            loss.backward()
            opt.step()
            return loss
        return model, step

    model, eager = sf_step()
    _, compiled_fn = sf_step()
    compiled = sf.compile(compiled_fn)

    def torch_step(m):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=False)

        def step():
            opt.zero_grad()
            loss = m(tidx, ttgt)[1]
            loss.backward()
            opt.step()
        return step

    fns = {"eager": lambda: eager(idx, tgt), "compiled": lambda: compiled(idx, tgt),
           "torch": torch_step(copy_weights(model, TorchGPT(**cfg)))}
    if use_tc:
        fns["torch_compile"] = torch_step(torch.compile(copy_weights(model, TorchGPT(**cfg))))
    return fns


def chain_1000() -> dict:
    """1,000 recorded 4x4 adds: per replayed op, against eager per op."""
    a, b = sf.randn(4, 4), sf.randn(4, 4)

    def chain(x, y):
        for _ in range(1000):
            x = x + y
        return x

    compiled = sf.compile(chain)
    return {"eager": lambda: chain(a, b), "compiled": lambda: compiled(a, b)}


def identity_call() -> dict:
    """The fixed cost of a compiled call: a region that returns its input."""
    x = sf.randn(4, 4)
    compiled = sf.compile(lambda t: t)
    return {"eager": lambda: x, "compiled": lambda: compiled(x)}


def model_forwards(use_tc: bool) -> dict:
    """Each reference model's inference forward (the shapes of `make bench`'s model rows)."""
    rng = np.random.default_rng(0)
    rows = {}
    sf.manual_seed(0)
    vit_cfg = dict(image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=64, depth=2,
                   heads=4, mlp_ratio=2)
    vit = ViT(**vit_cfg)
    xa = rng.random((64, 1, 8, 8), np.float32)
    x, tx = sf.tensor(xa), torch.tensor(xa)
    rows["vit_forward"] = _sides(vit, copy_weights(vit, TorchViT(**vit_cfg)),
                                 lambda m: m(x), lambda m: m(tx), use_tc)
    res_cfg = dict(layers=(1, 1, 1, 1), num_classes=10, in_channels=1, width=16,
                   small_input=True)
    res = ResNet(**res_cfg)
    rtwin = TorchResNet(**res_cfg)
    rtwin.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                           for k, v in res.state_dict().items()})
    ra = rng.random((32, 1, 8, 8), np.float32)
    r, tr = sf.tensor(ra), torch.tensor(ra)
    rows["resnet_forward"] = _sides(res, rtwin, lambda m: m(r), lambda m: m(tr), use_tc)
    gcfg = dict(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128)
    gpt = GPT(**gcfg)
    ia = rng.integers(0, 65, (16, 64))
    i, ti = sf.tensor(ia), torch.tensor(ia)
    rows["gpt_forward"] = _sides(gpt, copy_weights(gpt, TorchGPT(**gcfg)),
                                 lambda m: m(i), lambda m: m(ti), use_tc)
    lcfg = dict(vocab_size=65, embed_dim=64, hidden_size=256, num_layers=1)
    lstm = CharLSTM(**lcfg)
    la, ta = rng.integers(0, 65, (32, 64)), rng.integers(0, 65, (32, 64))
    li, lt, tli, tlt = sf.tensor(la), sf.tensor(ta), torch.tensor(la), torch.tensor(ta)
    rows["lstm_forward"] = _sides(lstm, copy_weights(lstm, TorchCharLSTM(*lcfg.values())),
                                  lambda m: m(li, lt), lambda m: m(tli, tlt), use_tc)
    return rows


def rows(quick: bool, use_tc: bool = True) -> dict:
    """{row: {side: median seconds}} for every compile row."""
    rounds, repeat = (3, 3) if quick else (5, 5)
    out = {}
    with sf.no_grad(), torch.no_grad():
        out["mlp_b1_forward"] = compare(mlp_b1(use_tc), rounds, repeat, 200)
        out["gpt_decode_kv64"] = compare(gpt_decode(use_tc), rounds, repeat, 20)
        for name, fns in model_forwards(use_tc).items():
            out[name] = compare(fns, rounds, repeat, 2)
        out["chain_1000_adds"] = compare(chain_1000(), rounds, repeat, 3)
        out["compiled_call"] = compare(identity_call(), rounds, repeat, 2000)
    out["gpt_train_b16"] = compare(gpt_train_step(use_tc), rounds, repeat, 2)
    out["gpt_train_b1"] = compare(gpt_train_step(use_tc, batch=1), rounds, repeat, 5)
    return out


def report(results: dict) -> list[str]:
    """The table, and which targets were missed."""
    lines = [f"{'compile row':18} {'sf eager':>10} {'sf compiled':>12} {'torch':>10} "
             f"{'torch.compile':>14} {'x eager':>8} {'x t.compile':>11}"]
    missed = []
    for name, r in results.items():
        def fmt(k, r=r):
            if k not in r:
                return "-"
            return f"{r[k] * 1e3:.2f} ms" if r[k] >= 1e-3 else f"{r[k] * 1e6:.1f} us"

        vs_eager = r["eager"] / r["compiled"]
        vs_tc = r["torch_compile"] / r["compiled"] if "torch_compile" in r else None
        lines.append(f"{name:18} {fmt('eager'):>10} {fmt('compiled'):>12} {fmt('torch'):>10} "
                     f"{fmt('torch_compile'):>14} {vs_eager:8.2f} "
                     f"{'' if vs_tc is None else f'{vs_tc:.2f}':>11}")
        for side, want in TARGETS.get(name, {}).items():
            got = vs_eager if side == "eager" else vs_tc
            if got is not None and got < want:
                missed.append(f"{name} vs {side} {got:.2f} < {want}")
        if name.endswith(("_forward", "_train_b16", "_train_b1")) and vs_eager < 1.0:
            missed.append(f"{name} compiled slower than eager ({vs_eager:.2f})")
    chain = results.get("chain_1000_adds")
    if chain:
        lines.append(f"per replayed op: {chain['compiled'] / 1000 * 1e6:.3f} us "
                     f"(eager {chain['eager'] / 1000 * 1e6:.3f} us); fixed cost per call: "
                     f"{results['compiled_call']['compiled'] * 1e6:.2f} us")
    return lines + ([f"compile targets missed: {'; '.join(missed)}"] if missed else
                    ["every compile target met"])


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    res = rows(quick, use_tc="--no-torch-compile" not in sys.argv)
    print("\n".join(report(res)))
