"""The GPT training step written straight in NumPy: the floor a framework adds overhead to.

nanoGPT's layout (pre-LN blocks, causal self-attention, exact-erf GELU, lm_head tied to wte),
mean cross-entropy, AdamW as torch.optim.AdamW(foreach=False) on every parameter: the
benchmark's `gpt_*` steps, forward, backward by hand and update, float32 throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

F32 = np.float32
LN_EPS = 1e-5
# Phi(-|x|) = t * exp(-x^2 / 2 + P(t)), t = 1 / (1 + |x| / (2 sqrt 2)): Numerical Recipes'
# erfc fit (relative error < 1.2e-7 everywhere, so the negative tail stays accurate), its
# constant term shifted by log(1/2) to fold in Phi = erfc / 2. Highest power first.
_ERFC = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
         0.09678418, 0.37409196, 1.00002368, -1.26551223 - math.log(2.0))
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_LOG_INV_SQRT_2PI = -0.5 * math.log(2.0 * math.pi)
# elements per GELU block: a block's input, outputs and scratch stay in L2 over ~35 passes
_GELU_BLOCK = 32768


class GPTParams:
    """A GPT's parameters and their gradients, each one flat float32 buffer of named views."""

    def __init__(self, twin) -> None:
        named = list(twin.named_parameters())  # lm_head.weight is wte's: listed once
        self.n_head = int(twin.n_head)
        self.n_layer = len(twin.transformer.h)
        sizes = [p.numel() for _, p in named]
        self.flat = np.empty(sum(sizes), F32)
        self.grad_flat = np.zeros_like(self.flat)
        self.tensors: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        at = 0
        for (name, p), n in zip(named, sizes):
            shape = tuple(p.shape)
            self.tensors[name] = self.flat[at:at + n].reshape(shape)
            self.grads[name] = self.grad_flat[at:at + n].reshape(shape)
            self.tensors[name][...] = p.detach().cpu().numpy()
            at += n
        self.layers = [self._layer(i) for i in range(self.n_layer)]
        self.scratch = _Scratch()

    def _layer(self, i: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Block i's parameters and gradients, by their names inside the block."""
        pre = f"transformer.h.{i}."
        return ({k[len(pre):]: v for k, v in self.tensors.items() if k.startswith(pre)},
                {k[len(pre):]: v for k, v in self.grads.items() if k.startswith(pre)})


class _Scratch:
    """Arrays kept across calls by name: fresh multi-MB temporaries would fault in pages."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, name: str, *shape: int) -> np.ndarray:
        a = self.arrays.get(name)
        if a is None or a.shape != shape:
            a = self.arrays[name] = np.empty(shape, F32)
        return a


@lru_cache(maxsize=8)
def _causal_mask(t: int) -> np.ndarray:
    """[t, t] additive mask: 0 on and below the diagonal, -inf above."""
    m = np.triu(np.full((t, t), -np.inf, F32), 1)
    m.flags.writeable = False
    return m


def _causal_softmax(att: np.ndarray) -> None:
    """Softmax over the last dim of [..., T, T] scores, in place, masked above the diagonal."""
    att += _causal_mask(att.shape[-1])
    # the row maxima (slow over rows of T) are only needed against overflow, or against
    # a row whose every exp underflows: its diagonal bounds its maximum from below
    if not (att.max() < 80.0 and np.diagonal(att, 0, -2, -1).min() > -80.0):
        att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att *= np.divide(F32(1.0), att.sum(axis=-1, keepdims=True))


def _layernorm(x, w, b, y, xhat) -> np.ndarray:
    """LayerNorm of x over the last dim into y, xhat (kept for the backward); returns rstd."""
    np.subtract(x, x.mean(axis=-1, keepdims=True), out=xhat)
    var = np.einsum("ij,ij->i", xhat, xhat)[:, None]
    var *= F32(1.0 / x.shape[-1])
    var += F32(LN_EPS)
    rstd = np.sqrt(var, out=var)
    np.divide(F32(1.0), rstd, out=rstd)
    xhat *= rstd
    np.multiply(xhat, w, out=y)
    y += b
    return rstd


def _layernorm_back(dy, xhat, rstd, w, gw, gb, out) -> np.ndarray:
    """dx of LayerNorm into out; the weight and bias gradients into gw, gb; dy is clobbered."""
    np.einsum("ij,ij->j", dy, xhat, out=gw)
    np.sum(dy, axis=0, out=gb)
    dxhat = np.multiply(dy, w, out=out)
    inv_c = F32(1.0 / xhat.shape[-1])
    a = dxhat.sum(axis=-1, keepdims=True)
    a *= inv_c
    c = np.einsum("ij,ij->i", dxhat, xhat)[:, None]
    c *= inv_c
    dxhat -= a
    dxhat -= np.multiply(xhat, c, out=dy)
    dxhat *= rstd
    return dxhat


def _gelu(f: np.ndarray, out: np.ndarray, deriv: np.ndarray, scratch: _Scratch) -> None:
    """gelu(f) into out and gelu'(f) into deriv (exact erf), block by block to stay in cache."""
    flat, out, deriv = f.reshape(-1), out.reshape(-1), deriv.reshape(-1)
    n = flat.size
    size = min(n, _GELU_BLOCK)
    z, t, p, e = (scratch(f"gelu_{c}", size) for c in "ztpe")
    for s in range(0, n, size):
        x = flat[s:s + size]
        k = x.size
        zk, tk, pk, ek = z[:k], t[:k], p[:k], e[:k]
        np.abs(x, out=zk)
        zk *= F32(_INV_SQRT2)  # z = |x| / sqrt 2
        np.multiply(zk, F32(0.5), out=tk)
        tk += F32(1.0)
        np.divide(F32(1.0), tk, out=tk)
        np.multiply(tk, F32(_ERFC[0]), out=pk)
        pk += F32(_ERFC[1])
        for c in _ERFC[2:]:
            pk *= tk
            pk += F32(c)
        np.multiply(zk, zk, out=ek)  # x^2 / 2
        pk -= ek
        np.exp(pk, out=pk)
        pk *= tk  # Phi(-|x|)
        np.subtract(F32(0.5), pk, out=pk)
        np.copysign(pk, x, out=pk)
        pk += F32(0.5)  # Phi(x)
        np.multiply(x, pk, out=out[s:s + k])
        np.subtract(F32(_LOG_INV_SQRT_2PI), ek, out=ek)
        np.exp(ek, out=ek)  # the normal density phi(x)
        ek *= x
        np.add(ek, pk, out=deriv[s:s + k])  # Phi(x) + x phi(x)


def gelu(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gelu(f), gelu'(f)) as new arrays, exact-erf GELU in float32."""
    f = np.ascontiguousarray(f, F32)
    out, deriv = np.empty_like(f), np.empty_like(f)
    _gelu(f, out, deriv, _Scratch())
    return out, deriv


def loss_and_grads(params: GPTParams, idx: np.ndarray,
                   targets: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy and every gradient (views into params.grad_flat, reused per call)."""
    P, G, buf = params.tensors, params.grads, params.scratch
    B, T = idx.shape
    N = B * T
    wte, wpe = P["transformer.wte.weight"], P["transformer.wpe.weight"]
    V, C = wte.shape
    nh = params.n_head
    hs = C // nh
    scale = F32(1.0 / math.sqrt(hs))
    idx_flat = idx.reshape(-1)

    x = buf("x", N, C)
    np.take(wte, idx_flat, axis=0, out=x)
    x.reshape(B, T, C)[...] += wpe[:T]
    saved = []
    for i, (L, _) in enumerate(params.layers):
        h, xhat1 = buf(f"h{i}", N, C), buf(f"xhat1_{i}", N, C)
        rstd1 = _layernorm(x, L["ln_1.weight"], L["ln_1.bias"], h, xhat1)
        qkv = np.matmul(h, L["attn.c_attn.weight"].T, out=buf("qkv", N, 3 * C))
        qkv += L["attn.c_attn.bias"]
        qkvh = buf(f"qkvh{i}", 3, B, nh, T, hs)
        np.copyto(qkvh, qkv.reshape(B, T, 3, nh, hs).transpose(2, 0, 3, 1, 4))
        q, k, v = qkvh
        q *= scale
        att = np.matmul(q, k.swapaxes(-1, -2), out=buf(f"att{i}", B, nh, T, T))
        _causal_softmax(att)
        yh = np.matmul(att, v, out=buf("yh", B, nh, T, hs))
        y = buf(f"y{i}", N, C)
        np.copyto(y.reshape(B, T, nh, hs), yh.transpose(0, 2, 1, 3))
        out = np.matmul(y, L["attn.c_proj.weight"].T, out=buf("proj", N, C))
        out += L["attn.c_proj.bias"]
        x += out
        h2, xhat2 = buf(f"h2_{i}", N, C), buf(f"xhat2_{i}", N, C)
        rstd2 = _layernorm(x, L["ln_2.weight"], L["ln_2.bias"], h2, xhat2)
        f = np.matmul(h2, L["mlp.c_fc.weight"].T, out=buf("f", N, 4 * C))
        f += L["mlp.c_fc.bias"]
        g, dgelu = buf(f"g{i}", N, 4 * C), buf(f"dgelu{i}", N, 4 * C)
        _gelu(f, g, dgelu, buf)
        out = np.matmul(g, L["mlp.c_proj.weight"].T, out=buf("proj", N, C))
        out += L["mlp.c_proj.bias"]
        x += out
        saved.append((h, xhat1, rstd1, q, k, v, att, y, h2, xhat2, rstd2, g, dgelu))

    hf, xhatf = buf("hf", N, C), buf("xhatf", N, C)
    rstdf = _layernorm(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], hf, xhatf)
    logits = np.matmul(hf, wte.T, out=buf("logits", N, V))
    rows, tgt = np.arange(N), targets.reshape(-1)
    logits -= logits.max(axis=1, keepdims=True)
    picked = logits[rows, tgt]
    # e^-70 and below count as e^-70: probabilities off by < 1e-30, and no denormals, which
    # would make the lm_head matmuls below 10-50x slower (wte ~ N(0, 1) makes them common)
    np.maximum(logits, F32(-70.0), out=logits)
    np.exp(logits, out=logits)
    sums = logits.sum(axis=1)
    loss = float(np.mean(np.log(sums) - picked, dtype=F32))
    dlogits = logits  # d loss / d logits = (softmax - onehot) / N
    dlogits *= np.divide(F32(1.0 / N), sums)[:, None]
    dlogits[rows, tgt] -= F32(1.0 / N)

    gwte = G["transformer.wte.weight"]
    np.matmul(dlogits.T, hf, out=gwte)
    dh, dln = buf("dh", N, C), buf("dln", N, C)
    np.matmul(dlogits, wte, out=dh)
    dx = _layernorm_back(dh, xhatf, rstdf, P["transformer.ln_f.weight"],
                         G["transformer.ln_f.weight"], G["transformer.ln_f.bias"],
                         buf("dx", N, C))
    for (L, D), (h, xhat1, rstd1, q, k, v, att, y, h2, xhat2, rstd2, g, dgelu) in zip(
            reversed(params.layers), reversed(saved)):
        # mlp
        np.sum(dx, axis=0, out=D["mlp.c_proj.bias"])
        np.matmul(dx.T, g, out=D["mlp.c_proj.weight"])
        df = np.matmul(dx, L["mlp.c_proj.weight"], out=buf("f", N, 4 * C))
        df *= dgelu
        np.sum(df, axis=0, out=D["mlp.c_fc.bias"])
        np.matmul(df.T, h2, out=D["mlp.c_fc.weight"])
        np.matmul(df, L["mlp.c_fc.weight"], out=dh)
        dx += _layernorm_back(dh, xhat2, rstd2, L["ln_2.weight"], D["ln_2.weight"],
                              D["ln_2.bias"], dln)
        # attention
        np.sum(dx, axis=0, out=D["attn.c_proj.bias"])
        np.matmul(dx.T, y, out=D["attn.c_proj.weight"])
        np.matmul(dx, L["attn.c_proj.weight"], out=dh)
        dy = dh.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)
        datt = np.matmul(dy, v.swapaxes(-1, -2), out=buf("datt", B, nh, T, T))
        dqkvh = buf("dqkvh", 3, B, nh, T, hs)
        np.matmul(att.swapaxes(-1, -2), dy, out=dqkvh[2])
        datt -= np.einsum("bhij,bhij->bhi", datt, att)[..., None]  # softmax's backward
        datt *= att  # zero where masked
        np.matmul(datt, k, out=dqkvh[0])
        dqkvh[0] *= scale
        np.matmul(datt.swapaxes(-1, -2), q, out=dqkvh[1])  # q holds q * scale already
        dqkv = buf("qkv", N, 3 * C)
        np.copyto(dqkv.reshape(B, T, 3, nh, hs), dqkvh.transpose(1, 3, 0, 2, 4))
        np.sum(dqkv, axis=0, out=D["attn.c_attn.bias"])
        np.matmul(dqkv.T, h, out=D["attn.c_attn.weight"])
        np.matmul(dqkv, L["attn.c_attn.weight"], out=dh)
        dx += _layernorm_back(dh, xhat1, rstd1, L["ln_1.weight"], D["ln_1.weight"],
                              D["ln_1.bias"], dln)

    gwpe = G["transformer.wpe.weight"]
    np.sum(dx.reshape(B, T, C), axis=0, out=gwpe[:T])
    gwpe[T:] = 0.0
    # the embedding's share of the tied weight: one-hot rows times dx (np.add.at is ~5x slower)
    onehot = buf("onehot", N, V)
    onehot.fill(0.0)
    onehot[rows, idx_flat] = 1.0
    gwte += np.matmul(onehot.T, dx, out=buf("gemb", V, C))
    return loss, G


class AdamW:
    """torch.optim.AdamW (foreach=False) over one flat buffer: every parameter at once."""

    BLOCK = 65536  # elements per pass: the five arrays' blocks stay in L2

    def __init__(self, params: GPTParams, lr: float = 1e-3, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
        self.p, self.g = params.flat, params.grad_flat
        self.lr, (self.b1, self.b2), self.eps, self.wd = lr, betas, eps, weight_decay
        self.m, self.v = np.zeros_like(self.p), np.zeros_like(self.p)
        self.tmp = np.empty(min(self.p.size, self.BLOCK), F32)
        self.t = 0

    def step(self) -> None:
        """One update from the gradients in params.grad_flat."""
        self.t += 1
        decay, b1, b2 = F32(1.0 - self.lr * self.wd), F32(self.b1), F32(self.b2)
        c1, c2 = F32(1.0 - self.b1), F32(1.0 - self.b2)
        step_size = F32(self.lr / (1.0 - self.b1 ** self.t))
        inv_bc2_sqrt, eps = F32(1.0 / math.sqrt(1.0 - self.b2 ** self.t)), F32(self.eps)
        for s in range(0, self.p.size, self.BLOCK):
            blk = np.s_[s:s + self.BLOCK]
            p, g, m, v = self.p[blk], self.g[blk], self.m[blk], self.v[blk]
            tmp = self.tmp[:p.size]
            p *= decay
            m *= b1
            np.multiply(g, c1, out=tmp)
            m += tmp
            v *= b2
            np.square(g, out=tmp)
            tmp *= c2
            v += tmp
            np.sqrt(v, out=tmp)  # denom = sqrt(v) / sqrt(1 - b2^t) + eps, as PyTorch
            tmp *= inv_bc2_sqrt
            tmp += eps
            np.divide(m, tmp, out=tmp)
            tmp *= step_size
            p -= tmp


def make_step(twin, idx, targets, lr: float = 1e-3) -> Callable[[], float]:
    """One AdamW training step per call on a copy of the twin's weights; returns the loss."""
    params = GPTParams(twin)
    opt = AdamW(params, lr=lr)
    idx = np.ascontiguousarray(np.asarray(idx), dtype=np.intp)
    targets = np.ascontiguousarray(np.asarray(targets), dtype=np.intp)

    def step() -> float:
        loss, _ = loss_and_grads(params, idx, targets)
        opt.step()
        return loss

    step.params = params  # for tests: the weights it trains
    return step
