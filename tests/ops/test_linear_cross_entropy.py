"""F.linear_cross_entropy against PyTorch's: class ids and probabilities, class weights,
ignore_index, linear_bias, K-dimensional linear_weight, and the chunked path (options);
values, gradients, float64 finite differences, meta."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import check_op

N, IN, C = 5, 4, 6
rng = np.random.default_rng(0)


def _kw(weight, bias, ignore, chunk, reduction, lib):
    kw = {"reduction": reduction}
    if weight is not None:
        kw["weight"] = weight
    if bias is not None:
        kw["linear_bias"] = bias
    if ignore:
        kw["ignore_index"] = 1
    if chunk:
        kw["options"] = (sf.nn.LinearCrossEntropyOptions if lib is sf else
                         torch.nn.LinearCrossEntropyOptions)(batch_chunk_size=chunk)
    return kw


@pytest.mark.parametrize("reduction,weighted,ignore,chunk", list(itertools.product(
    ["mean", "sum", "none"], [False, True], [False, True], [None, 2, 3])))
def test_class_ids(reduction, weighted, ignore, chunk):
    x, w, b = rng.standard_normal((N, IN)), rng.standard_normal((C, IN)), rng.standard_normal(C)
    t = rng.integers(0, C, N).astype(np.int64)
    t[0] = 2  # one row that is never ignored
    cw = rng.uniform(0.5, 2, C)

    def ours(x, w, b, t):
        return F.linear_cross_entropy(x, w, t, **_kw(
            sf.tensor(cw, device=x.device).to(x.dtype) if weighted else None, b, ignore, chunk,
            reduction, sf))

    def ref(x, w, b, t):
        return TF.linear_cross_entropy(x, w, t, **_kw(
            torch.tensor(cw).to(x.dtype) if weighted else None, b, ignore, chunk, reduction,
            torch))

    check_op(ours, ref, x, w, b, t)


@pytest.mark.parametrize("chunk", [None, 2])
def test_one_sample_and_probabilities(chunk):
    x, w = rng.standard_normal(IN), rng.standard_normal((C, IN))
    t = np.array(3, dtype=np.int64)
    check_op(lambda x, w, t: F.linear_cross_entropy(x, w, t, reduction="none"),
             lambda x, w, t: TF.linear_cross_entropy(x, w, t, reduction="none"), x, w, t)
    p = rng.random((N, C))
    check_op(lambda x, w, p: F.linear_cross_entropy(x, w, p / p.sum(1, keepdim=True)),
             lambda x, w, p: TF.linear_cross_entropy(x, w, p / p.sum(1, keepdim=True)),
             rng.standard_normal((N, IN)), w, p)


def test_k_dimensional_weight():
    x, w, b = rng.standard_normal((N, IN)), rng.standard_normal((C, 3, IN)), \
        rng.standard_normal((C, 3))
    t = rng.integers(0, C, (N, 3)).astype(np.int64)
    check_op(lambda x, w, b, t: F.linear_cross_entropy(x, w, t, linear_bias=b),
             lambda x, w, b, t: TF.linear_cross_entropy(x, w, t, linear_bias=b), x, w, b, t)


def test_errors_and_meta():
    x, w = sf.zeros(N, IN), sf.zeros(C, IN)
    with pytest.raises(sf.errors.ShapeRuntimeError, match="in_features"):
        F.linear_cross_entropy(x, sf.zeros(C, IN + 1), sf.zeros(N, dtype=sf.int64))
    with pytest.raises(sf.errors.ShapeRuntimeError, match="linear_bias"):
        F.linear_cross_entropy(x, w, sf.zeros(N, dtype=sf.int64), linear_bias=sf.zeros(C + 1))
    with pytest.raises(sf.errors.ShapeError, match="ignore_index"):
        F.linear_cross_entropy(x, w, sf.zeros(N, C), ignore_index=0)
    m = {"device": "meta"}
    out = F.linear_cross_entropy(sf.zeros(N, IN, **m), sf.zeros(C, IN, **m),
                                 sf.zeros(N, dtype=sf.int64, **m), reduction="none",
                                 options=sf.nn.LinearCrossEntropyOptions(batch_chunk_size=2))
    assert out.shape == (N,) and out.device == "meta"
