"""The backward engine: reverse topological order over the recorded graph, chain rule per node."""

from __future__ import annotations

import numpy as np

from ..backend.cpu import kernels
from ..errors import GraphError, ShapeError
from ..shape import dims_equal, format_shape, shapes_equal
from ..tensor import PostAccumulateHook, Tensor, describe
from . import grad_mode, inspect_hooks


def _roots_and_grads(outputs, grad_outputs, op_name: str):
    from ..factories import ones_like

    pairs = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise GraphError(f"{op_name}: expected tensors, got {type(out).__name__}")
        if not out.requires_grad:
            err = GraphError(
                f"{op_name}: the tensor {describe(out)} does not require grad and has no "
                f"grad_fn: {_why_no_grad(out)}",
                op=op_name,
                hint="check that a parameter (requires_grad=True) feeds it, outside no_grad(), "
                "without detach() or a round trip through .numpy()/.item()",
            )
            err.message += inspect_hooks.no_grad_report(out)  # inspect.explain's report, if any
            raise err
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            if out.numel() != 1:
                raise GraphError(
                    f"{op_name}: grad can be implicitly created only for a scalar output, got "
                    f"{describe(out)}",
                    op=op_name,
                    hint="reduce it first (loss.sum() or loss.mean()), or pass gradient= with "
                    "the output's shape",
                )
            g = ones_like(out)
        elif not isinstance(g, Tensor):
            from ..tensor import tensor

            g = tensor(g, dtype=out.dtype, device=out.device)
        if g.dtype is not out.dtype:
            from ..errors import DTypeError

            raise DTypeError(
                f"{op_name}: gradient dtype {g.dtype} does not match the output's {out.dtype}",
                op=op_name, hint=f"pass gradient.to({out.dtype})")
        if tuple(g.shape) != tuple(out.shape):
            raise ShapeError(
                f"{op_name}: gradient of shape {format_shape(g.shape)} does not match the "
                f"output's {format_shape(out.shape)}",
                op=op_name,
            )
        pairs.append((out, g))
    return pairs


def _why_no_grad(t: Tensor) -> str:
    if t._origin == "no_grad":
        return "it was computed under no_grad() (or inference_mode())"
    if t._origin == "detach":
        return "it was detached from the graph (detach())"
    if t._origin == "data":
        return "it was taken through .data, which is outside the graph (as detach())"
    if t._origin == "int":
        return "it was computed by an op with no gradient (an integer result or comparison)"
    return "none of the tensors it was computed from required grad"


def _topo_order(root_nodes):
    """Nodes reachable from the roots, each before the nodes it feeds (iterative DFS)."""
    order, seen = [], set()
    for root in root_nodes:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.next[0::3]))]
        while stack:
            node, children = stack[-1]
            for nxt in children:
                if nxt is not None and not isinstance(nxt, Tensor) and id(nxt) not in seen:
                    seen.add(id(nxt))
                    stack.append((nxt, iter(nxt.next[0::3])))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


def _sum_to(grad: Tensor, shape, node) -> Tensor:
    """Sum a gradient back to an input's shape where the input was broadcast."""
    if shapes_equal(grad.shape, shape):
        return grad
    lead = grad.ndim - len(shape)
    if lead < 0:
        raise _bad_grad(node, grad, shape)
    dims = list(range(lead))
    for i, s in enumerate(shape):
        g = grad.shape[lead + i]
        if type(s) is int and s == 1:
            if not (type(g) is int and g == 1):
                dims.append(lead + i)
        elif dims_equal(s, g) is not True:
            raise _bad_grad(node, grad, shape)
    out = grad.sum(dim=tuple(dims), keepdim=True) if dims else grad
    return out.reshape(tuple(shape))


def _bad_grad(node, grad, shape) -> GraphError:
    return GraphError(
        f"backward of {node.name} returned a gradient of shape {format_shape(grad.shape)} for "
        f"an input of shape {format_shape(shape)}",
        op=node.name,
        hint="this is a bug in the op's backward",
    )


def _pending_leaves(order) -> dict[int, int]:
    """For leaves with post-accumulate hooks: how many edges of `order` bring them a grad."""
    pending: dict[int, int] = {}
    for node in order:
        for nxt in node.next[0::3]:
            if isinstance(nxt, Tensor) and nxt._hooks and any(
                    type(h) is PostAccumulateHook for h in nxt._hooks):
                pending[id(nxt)] = pending.get(id(nxt), 0) + 1
    return pending


def run_backward(roots, retain_graph: bool, create_graph: bool, capture=(),
                 accumulate: bool = True):
    """Propagate gradients from (tensor, grad) roots; return the grads of `capture` tensors.

    Leaves not in `capture` get their grads accumulated into `.grad` when `accumulate`.
    """
    root_nodes = [t.grad_fn for t, _ in roots if t.grad_fn is not None]
    order = _topo_order(root_nodes)
    grads: dict[int, Tensor] = {}       # node id -> summed grad of its output
    owned: set[int] = set()              # grads this pass created (safe to add into in place)
    leaf_grads: dict[int, list] = {}     # leaf id -> [tensor, summed grad]
    capture_ids = {}
    for i, t in enumerate(capture):
        capture_ids[id(t.grad_fn) if t.grad_fn is not None else id(t)] = i
    captured = [None] * len(capture)
    # A leaf whose every contribution has arrived is finished at once, not after the whole
    # pass, when something waits on it (DistributedDataParallel starts its all-reduce there)
    pending = _pending_leaves(order) if PostAccumulateHook.registered else None

    def finish_leaf(leaf_id: int, leaf: Tensor, g: Tensor) -> None:
        post = None
        if leaf._hooks:
            for hook in leaf._hooks:
                if type(hook) is PostAccumulateHook:
                    post = (post or []) + [hook]
                    continue
                new = hook(g)
                if new is not None:
                    g = new
        if leaf_id in capture_ids:
            captured[capture_ids[leaf_id]] = g
        elif accumulate:
            _accumulate_leaf(leaf, g, create_graph)
            for hook in post or ():
                hook.fn(leaf)

    def add_grad(store: dict, key: int, g: Tensor) -> None:  # (not `accumulate`: the flag)
        old = store.get(key)
        if old is None:
            store[key] = g
        elif not create_graph and id(old) in owned:
            if old._data is not None:  # our own sum: add in place (on meta: nothing to add)
                old._data += g._data
        else:
            new = old + g
            if not create_graph:
                owned.add(id(new))
            store[key] = new

    for t, g in roots:
        if t.grad_fn is None:
            entry = leaf_grads.setdefault(id(t), [t, None])
            entry[1] = g if entry[1] is None else entry[1] + g
        else:
            add_grad(grads, id(t.grad_fn), g)

    with grad_mode.set_grad_enabled(create_graph):
        for node in order:
            g = grads.pop(id(node), None)
            if g is None:
                continue
            owned.discard(id(g))  # ids are only meaningful while the tensor is alive
            if node.hooks:
                for hook in node.hooks:
                    new = hook(g)
                    if new is not None:
                        g = new
            if id(node) in capture_ids:
                captured[capture_ids[id(node)]] = g
            if node.slice_backward and not create_graph and node.created_at is None:
                # a basic-index view (split, narrow, select): add g into its input's
                # gradient in place instead of a zeros tensor per view and a sum of them
                nxt = node.next[0]
                if nxt is not None and not isinstance(nxt, Tensor):
                    _add_slice(grads, owned, id(nxt), node, g)
                    if not retain_graph:
                        node.release()
                    continue
            if node.created_at is None:
                in_grads = node.backward(g)
            else:  # recorded under detect_anomaly(): inspect.anomaly checks what it made
                in_grads = inspect_hooks.anomaly.checked_backward(node, g)
            if not retain_graph:
                node.release()
            edges = node.next  # (to, shape, dtype) per input, flattened
            if 3 * len(in_grads) != len(edges):
                raise GraphError(f"backward of {node.name} returned {len(in_grads)} gradients "
                                 f"for {len(edges) // 3} inputs", op=node.name)
            for i, ig in enumerate(in_grads):
                nxt = edges[3 * i]
                if pending is not None and id(nxt) in pending:
                    _arrive(pending, leaf_grads, finish_leaf, nxt, ig, node, edges, i)
                    continue
                if nxt is None or ig is None:
                    continue
                shape, dtype = edges[3 * i + 1], edges[3 * i + 2]
                if not shapes_equal(ig.shape, shape):
                    ig = _sum_to(ig, shape, node)
                if ig.dtype is not dtype:
                    ig = ig.to(dtype)
                if isinstance(nxt, Tensor):
                    entry = leaf_grads.get(id(nxt))
                    if entry is None:
                        leaf_grads[id(nxt)] = [nxt, ig]
                    elif not create_graph and id(entry[1]) in owned and \
                            entry[1]._data is not None:
                        # our own sum (a cell's weights over its time steps): in place
                        kernels.iadd(entry[1]._data, ig._data)
                    else:
                        entry[1] = entry[1] + ig
                        if not create_graph:
                            owned.add(id(entry[1]))
                else:
                    add_grad(grads, id(nxt), ig)
        for leaf_id, (leaf, g) in leaf_grads.items():
            finish_leaf(leaf_id, leaf, g)
    return captured


def _arrive(pending, leaf_grads, finish_leaf, leaf, ig, node, edges, i) -> None:
    """One contribution to a watched leaf; the last one finishes the leaf."""
    if ig is not None:
        shape, dtype = edges[3 * i + 1], edges[3 * i + 2]
        if not shapes_equal(ig.shape, shape):
            ig = _sum_to(ig, shape, node)
        if ig.dtype is not dtype:
            ig = ig.to(dtype)
        entry = leaf_grads.get(id(leaf))
        if entry is None:
            leaf_grads[id(leaf)] = [leaf, ig]
        else:
            entry[1] = entry[1] + ig
    pending[id(leaf)] -= 1
    if pending[id(leaf)] == 0:
        del pending[id(leaf)]
        entry = leaf_grads.pop(id(leaf), None)
        if entry is not None:
            finish_leaf(id(leaf), entry[0], entry[1])


def _add_slice(grads: dict, owned: set, key: int, node, g: Tensor) -> None:
    """grads[key] += g at node.key (zeros elsewhere), in place where the sum is ours."""
    old = grads.get(key)
    shape, dtype = node.next[1], node.next[2]
    if old is not None and id(old) in owned:
        buf = old
    else:
        data = None
        if g._data is not None:
            data = g.device.zeros(shape, dtype.np) if old is None else old._data.astype(
                dtype.np, copy=True)
        buf = Tensor._make(data, shape, dtype, g.device)
        owned.add(id(buf))
        grads[key] = buf
    data = buf._data
    if data is not None:
        at = node.key + (Ellipsis,)
        region = data[at] if data.dtype == kernels.BF16 else None
        if region is not None and np.may_share_memory(region, data):  # a view: in place
            kernels.iadd(region, g._data)
        else:  # float32, or a fancy key's copy: NumPy's get-add-set
            data[at] += g._data


def _accumulate_leaf(leaf: Tensor, g: Tensor, create_graph: bool) -> None:
    if not create_graph:
        g = g.detach() if g.grad_fn is not None else g
    if leaf.grad is None:
        # A grad that views another array, or that another leaf may also get, is copied so
        # that in-place changes to one .grad never show up in another.
        if not create_graph and g._data is not None and g._data.base is not None:
            g = g.clone()
        leaf.grad = g if create_graph else _own(g)
    elif create_graph:
        leaf.grad = leaf.grad + g
    elif leaf.grad._data is not None or (leaf.grad.device is g.device
                                        and not g.device.computes):
        if leaf.grad._data is not None:  # in place, so a meta step allocates what cpu does
            kernels.iadd(leaf.grad._data, g._data)
        leaf.grad._version[0] += 1
    else:
        leaf.grad = leaf.grad + g


def _own(g: Tensor) -> Tensor:
    """Mark a gradient as handed out, so a second leaf receiving the same tensor copies it."""
    if g._origin == "leaf-grad":
        return g.clone()
    g._origin = "leaf-grad"
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """`torch.autograd.backward`: accumulate grads of `tensors` into the leaves' .grad."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if retain_graph is None:
        retain_graph = create_graph
    roots = _roots_and_grads(tensors, grad_tensors, "backward")
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        grads = run_backward(roots, retain_graph, create_graph, capture=inputs,
                             accumulate=False)
        for t, g in zip(inputs, grads):
            if g is not None:
                _accumulate_leaf(t, g, create_graph)
        return
    run_backward(roots, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """`torch.autograd.grad`: the gradients of outputs w.r.t. inputs, returned, not stored."""
    single = isinstance(inputs, Tensor)
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if single else list(inputs)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    if retain_graph is None:
        retain_graph = create_graph
    for t in inputs:
        if not t.requires_grad:
            raise GraphError(f"grad: an input {describe(t)} does not require grad", op="grad")
    roots = _roots_and_grads(outputs, grad_outputs, "grad")
    grads = run_backward(roots, retain_graph, create_graph, capture=inputs, accumulate=False)
    for i, g in enumerate(grads):
        if g is None and not allow_unused:
            raise GraphError(
                f"grad: input {i} {describe(inputs[i])} was not used to compute the outputs",
                op="grad",
                hint="pass allow_unused=True to get None for it",
            )
        if g is not None and not create_graph and g.grad_fn is not None:
            grads[i] = g.detach()
    return tuple(grads)
