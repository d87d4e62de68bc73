"""One check for every op: values and grads vs PyTorch, gradcheck, saved bytes, meta shapes."""

from __future__ import annotations

import numpy as np
import torch

import shapeflow as sf
from shapeflow.ops.base import NEW, saved_arrays

TORCH_DTYPES = {
    sf.float64: torch.float64, sf.float32: torch.float32, sf.float16: torch.float16,
    sf.bfloat16: torch.bfloat16, sf.int64: torch.int64, sf.int32: torch.int32,
    sf.int16: torch.int16, sf.int8: torch.int8, sf.uint8: torch.uint8, sf.bool: torch.bool,
    sf.uint16: torch.uint16, sf.uint32: torch.uint32, sf.uint64: torch.uint64,
}


def to_torch(x, requires_grad=False):
    if isinstance(x, sf.Tensor):
        t = torch.from_numpy(np.array(x.detach().numpy()))
        return t.requires_grad_(requires_grad)
    return x


def graph_nodes(out: sf.Tensor):
    """Every node reachable from out (iterative)."""
    seen, stack, nodes = set(), [out.grad_fn] if out.grad_fn is not None else [], []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        nodes.append(n)
        stack.extend(nxt for nxt in n.next[0::3] if nxt is not None and
                     not isinstance(nxt, sf.Tensor))
    return nodes


def assert_saved_matches_declared(out: sf.Tensor) -> None:
    """Invariant: every intermediate forward kept has exactly the declared shape and dtype."""
    for node in graph_nodes(out):
        arrays = saved_arrays(node)
        assert len(arrays) == len(node._entries), node
        for arr, entry in zip(arrays, node._entries):
            if entry.source == NEW:
                assert tuple(arr.shape) == tuple(entry.shape), (node, entry, arr.shape)
                assert arr.dtype == entry.dtype.np, (node, entry, arr.dtype)


def assert_data_matches(t: sf.Tensor, what: str = "output") -> None:
    """Invariant: a tensor's data has exactly its declared shape and dtype."""
    arr = t.detach().numpy()
    assert tuple(arr.shape) == tuple(t.shape), (what, "data shape", arr.shape, t.shape)
    assert arr.dtype == t.dtype.np, (what, "data dtype", arr.dtype, t.dtype)


def check_op(sf_fn, torch_fn, *inputs, grad=True, rtol=1e-5, atol=1e-6, gradcheck=True,
             meta=True, seed=0):
    """Run sf_fn and torch_fn on the same inputs (numpy arrays or non-array args) and compare.

    Float arrays become float32 tensors requiring grad; other arrays stay as they are.
    """
    rng = np.random.default_rng(seed)
    sf_in, t_in, wrt = [], [], []
    for x in inputs:
        if isinstance(x, np.ndarray):
            is_float = x.dtype.kind == "f"
            arr = x.astype(np.float32) if is_float else x
            st = sf.from_numpy(arr.copy())
            tt = torch.from_numpy(arr.copy())
            if is_float and grad:
                st.requires_grad_(True)
                tt.requires_grad_(True)
                wrt.append(len(sf_in))
            sf_in.append(st)
            t_in.append(tt)
        else:
            sf_in.append(x)
            t_in.append(x)
    out = sf_fn(*sf_in)
    ref = torch_fn(*t_in)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert_data_matches(o)
        assert tuple(o.shape) == tuple(r.shape), (o.shape, r.shape)
        assert TORCH_DTYPES[o.dtype] == r.dtype, (o.dtype, r.dtype)
        np.testing.assert_allclose(o.detach().numpy().astype(np.float64),
                                   r.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)
    if grad and wrt:
        diffable = [(o, r) for o, r in zip(outs, refs) if o.requires_grad]
        if diffable:
            total_sf, total_t = 0, 0
            for o, r in diffable:
                g = rng.standard_normal(tuple(o.shape)).astype(np.float32)
                total_sf = total_sf + (o * sf.from_numpy(g)).sum()
                total_t = total_t + (r * torch.from_numpy(g)).sum()
            assert_saved_matches_declared(diffable[0][0])
            total_sf.backward()
            total_t.backward()
            for i in wrt:
                gs, gt = sf_in[i].grad, t_in[i].grad
                if gt is None:
                    if gs is not None:
                        assert_data_matches(gs, f"grad of input {i}")
                    assert gs is None or np.all(gs.numpy() == 0)
                    continue
                assert gs is not None, f"no grad for input {i}"
                assert_data_matches(gs, f"grad of input {i}")
                np.testing.assert_allclose(gs.numpy(), gt.numpy(), rtol=max(rtol, 1e-4),
                                           atol=max(atol, 1e-5))
            if gradcheck:
                check_gradcheck(sf_fn, inputs, wrt)
    if meta:
        check_meta(sf_fn, inputs, outs)
    return out


def check_gradcheck(sf_fn, inputs, wrt):
    args = []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            if i in wrt:
                args.append(sf.from_numpy(x.astype(np.float64).copy()).requires_grad_(True))
            else:
                args.append(sf.from_numpy(x.copy()))
        else:
            args.append(x)
    assert sf.autograd.gradcheck(sf_fn, args)


def check_meta(sf_fn, inputs, outs):
    """On the meta device the op gives the cpu result's shapes and dtypes, with no data."""
    args = []
    for x in inputs:
        if isinstance(x, np.ndarray):
            arr = x.astype(np.float32) if x.dtype.kind == "f" else x
            t = sf.from_numpy(arr.copy()).to("meta")
            if x.dtype.kind == "f":
                t.requires_grad_(True)
            args.append(t)
        else:
            args.append(x)
    mo = sf_fn(*args)
    mos = mo if isinstance(mo, (tuple, list)) else (mo,)
    for m, o in zip(mos, outs):
        assert m.device == "meta" and m._data is None
        assert tuple(m.shape) == tuple(o.shape) and m.dtype is o.dtype
    if mos[0].requires_grad:
        total = 0
        for m in mos:
            if m.requires_grad:
                total = total + m.sum()
        total.backward()
        for a in args:
            if isinstance(a, sf.Tensor) and a.grad is not None:
                assert a.grad.device == "meta" and tuple(a.grad.shape) == tuple(a.shape)
