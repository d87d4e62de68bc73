"""Arguments and results as leaves and a tree: tensors and Python values inside tuples,
lists and dicts."""

from __future__ import annotations

from ..tensor import Tensor

LEAF = None  # the tree of a lone leaf (the replay returns it without unflattening)


def flatten(obj) -> tuple[list, object]:
    """(leaves, tree): tuples, lists and dicts are walked; anything else is one leaf."""
    leaves: list = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj, leaves: list):
    t = type(obj)
    if t is tuple or t is list:
        return (t, [_flatten(x, leaves) for x in obj])
    if t is dict:
        return (dict, list(obj), [_flatten(x, leaves) for x in obj.values()])
    leaves.append(obj)
    return LEAF


def unflatten(tree, leaves: list):
    """The object flatten took apart, with `leaves` in its leaves' places."""
    it = iter(leaves)
    return _unflatten(tree, it)


def _unflatten(tree, it):
    if tree is LEAF:
        return next(it)
    if tree[0] is dict:
        return {k: _unflatten(sub, it) for k, sub in zip(tree[1], tree[2])}
    items = [_unflatten(sub, it) for sub in tree[1]]
    return items if tree[0] is list else tuple(items)


def is_tensor(x) -> bool:
    return type(x) is Tensor or isinstance(x, Tensor)
