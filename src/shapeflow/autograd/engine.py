"""The backward engine: reverse topological order over the recorded graph, chain rule per node.

`run_backward` is the walk: each node in topological order takes the sum of the gradients
delivered to it, runs its backward and delivers one gradient per input edge (`deliver`, the
one place gradients meet; every sum, .grad's included, is `_add`). Leaves are finished at
the end, or as soon as their last gradient arrives when a post-accumulate hook watches them
(DistributedDataParallel starts its all-reduce there: `_LeafReady`). Under detect_anomaly()
inspect.anomaly checks a node's backward (`inspect_hooks`). `reference_backward` is the same
walk written plainly, with no in-place sums and no fast path for views: the tests run both
and compare.
"""

from __future__ import annotations

from ..errors import DTypeError, GraphError, ShapeError
from ..factories import ones_like
from ..shape import dims_equal, format_shape, shapes_equal
from ..tensor import PostAccumulateHook, Tensor, describe, tensor
from . import breaks, grad_mode, inspect_hooks


def _roots_and_grads(outputs, grad_outputs, op_name: str):
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
            g = tensor(g, dtype=out.dtype, device=out.device)
        if g.dtype is not out.dtype:
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


def _add(old: Tensor, g: Tensor, in_place: bool) -> Tensor:
    """old + g: into old's memory when `in_place` (old is a sum this pass made, or a .grad).

    Every gradient sum of the engine is this one (on meta the null kernels add nothing)."""
    if in_place:
        g.device.kernels.iadd(old._data, g._data)
        return old
    return old + g


class _LeafReady:
    """The observer of leaves a post-accumulate hook watches: counts the edges that bring
    each a gradient, so the last one to arrive finishes the leaf at once (DDP's hooks)."""

    def __init__(self, order, root_edges) -> None:
        self.pending: dict[int, int] = {}
        for edges in (root_edges, *(node.next for node in order)):
            for nxt in edges[0::3]:
                if isinstance(nxt, Tensor) and nxt._hooks and any(
                        type(h) is PostAccumulateHook for h in nxt._hooks):
                    self.pending[id(nxt)] = self.pending.get(id(nxt), 0) + 1

    def arrived(self, key: int) -> bool:
        """One edge to a watched leaf delivered; True when it was the last."""
        left = self.pending[key] - 1
        if left:
            self.pending[key] = left
            return False
        del self.pending[key]
        return True


def _run_hooks(hooks, g: Tensor) -> Tensor:
    """g through each hook in turn; a hook returning None leaves it as it was."""
    for hook in hooks:
        new = hook(g)
        if new is not None:
            g = new
    return g


def run_backward(roots, retain_graph: bool, create_graph: bool, capture=(),
                 accumulate: bool = True):
    """Propagate gradients from (tensor, grad) roots; return the grads of `capture` tensors.

    Leaves not in `capture` get their grads accumulated into `.grad` when `accumulate`.
    Backward's own ops run under grad mode `create_graph` and note no graph breaks.
    """
    root_nodes, root_edges, root_grads = [], [], []  # the roots: edges of a node before all
    for t, g in roots:
        if t.grad_fn is not None:
            root_nodes.append(t.grad_fn)
        root_edges += (t.grad_fn or t, t.shape, t.dtype)
        root_grads.append(g)
    order = _topo_order(root_nodes)
    watch = _LeafReady(order, root_edges) if PostAccumulateHook.registered else None
    grads: dict[int, Tensor] = {}  # id(node) or id(leaf) -> the sum of what it was given
    leaves: dict[int, Tensor] = {}  # the leaves given a gradient, in order of first arrival
    owned: set[int] = set()  # sums this pass made (safe to add into in place)
    where = {}  # id(node), or id(leaf) for a leaf, -> index in `captured`
    if capture:
        for i, t in enumerate(capture):
            where[id(t.grad_fn) if t.grad_fn is not None else id(t)] = i
    captured = [None] * len(capture)
    add = _add

    def deliver(edges, in_grads, node) -> None:
        """Give in_grads[i] to edge i ((to, shape, dtype) flattened), summed to its shape:
        the one place gradients meet."""
        for i, ig in enumerate(in_grads):  # (indexing: no slices, no zip to allocate)
            to = edges[3 * i]
            key = id(to)
            if to is not None and ig is not None:
                shape, dtype = edges[3 * i + 1], edges[3 * i + 2]
                if not shapes_equal(ig.shape, shape):
                    ig = _sum_to(ig, shape, node)
                if ig.dtype is not dtype:
                    ig = ig.to(dtype)
                old = grads.get(key)
                if old is None:
                    grads[key] = ig
                    if isinstance(to, Tensor):
                        leaves[key] = to
                else:  # a second arrival makes a new sum; later ones add into it in place
                    grads[key] = new = add(old, ig, not create_graph and id(old) in owned)
                    if not create_graph:
                        owned.add(id(new))
            if watch is not None and key in watch.pending and watch.arrived(key) and \
                    key in leaves:  # finished now, not with the others after the walk
                del leaves[key]
                finish_leaf(to, grads.pop(key))

    def finish_leaf(leaf: Tensor, g: Tensor) -> None:
        """The leaf's hooks on its summed grad, then capture it or accumulate it into .grad."""
        post = None
        if leaf._hooks:
            post = [h for h in leaf._hooks if type(h) is PostAccumulateHook]
            g = _run_hooks([h for h in leaf._hooks if type(h) is not PostAccumulateHook], g)
        if where and id(leaf) in where:
            captured[where[id(leaf)]] = g
        elif tracer is not None and accumulate:
            tracer.accumulate(leaf, g)
        elif accumulate:
            _accumulate_leaf(leaf, g, create_graph)
            if post:
                for hook in post:
                    hook.fn(leaf)

    # sf.compile's tracer records each node's backward, sum and .grad (compiler/training.py)
    tracer = None if grad_mode.hot.quiet else grad_mode.state.tracer
    if tracer is not None:
        if create_graph:
            tracer.unsupported("backward(create_graph=True) in the region: its gradients "
                               "have graphs of their own, which the replay does not build")
        add = tracer.add_grads
    prev_mode, log = grad_mode.state.enabled, breaks.mute()  # backward's ops are no breaks
    grad_mode.set_enabled(create_graph)
    try:
        deliver(root_edges, root_grads, None)
        fast_views = not create_graph and tracer is None
        for node in order:
            g = grads.pop(id(node), None)
            if g is None:  # no path from the roots reaches it
                continue
            owned.discard(id(g))  # ids are only meaningful while the tensor is alive
            if node.hooks:
                g = _run_hooks(node.hooks, g)
            if where and id(node) in where:
                captured[where[id(node)]] = g
            if tracer is not None:
                in_grads = tracer.backward(node, g)
            elif node.created_at is None:
                if node.slice_backward and fast_views and _view_into(grads, owned, node, g):
                    if not retain_graph:
                        node.release()
                    continue
                in_grads = node.backward(g)
            else:  # recorded under detect_anomaly(): inspect.anomaly checks what it made
                in_grads = inspect_hooks.anomaly.checked_backward(node, g)
            if not retain_graph:
                node.release()
            if 3 * len(in_grads) != len(node.next):
                raise GraphError(f"backward of {node.name} returned {len(in_grads)} gradients "
                                 f"for {len(node.next) // 3} inputs", op=node.name)
            deliver(node.next, in_grads, node)
        for key, leaf in leaves.items():
            finish_leaf(leaf, grads[key])
    finally:
        grad_mode.set_enabled(prev_mode)
        breaks.unmute(log)
    return captured


def _view_into(grads: dict, owned: set, node, g: Tensor) -> bool:
    """A basic-index view (split, narrow, select): g added into its input's gradient at the
    view's key, in place, instead of a zeros tensor per view and a sum of them."""
    to = node.next[0]
    if to is None or isinstance(to, Tensor):
        return False
    old = grads.get(id(to))
    if old is not None and id(old) in owned:
        buf = old
    else:
        shape, dtype = node.next[1], node.next[2]
        data = None if g._data is None else (
            g.device.zeros(shape, dtype.np) if old is None else old._data.astype(dtype.np))
        buf = Tensor._make(data, shape, dtype, g.device)
        owned.add(id(buf))
        grads[id(to)] = buf
    data = buf._data
    if data is not None:
        at = node.key + (Ellipsis,)
        region = data[at]
        if g.device.xp.may_share_memory(region, data):  # a view: add into it in place
            g.device.kernels.iadd(region, g._data)
        else:  # a fancy key's copy: get, add, set
            data[at] = region + g._data
    return True


def _accumulate_leaf(leaf: Tensor, g: Tensor, create_graph: bool) -> None:
    """leaf.grad += g: in place into a .grad of g's device unless building a graph."""
    if not create_graph and g.grad_fn is not None:
        g = g.detach()
    old = leaf._grad  # (read from its slot: .grad's setter checks, its getter adds a call)
    if old is None:
        # A grad that views another array, or that another leaf may also get, is copied so
        # that in-place changes to one .grad never show up in another.
        if not create_graph and g._data is not None and g._data.base is not None:
            g = g.clone()
        leaf.grad = g if create_graph else _own(g)
    elif not create_graph and old.device is g.device:
        _add(old, g, True)  # in place, so a meta step allocates what cpu does
        old._version[0] += 1
    else:
        leaf.grad = _add(old, g, False)


def _own(g: Tensor) -> Tensor:
    """Mark a gradient as handed out, so a second leaf receiving the same tensor copies it."""
    if g._origin == "leaf-grad":
        return g.clone()
    g._origin = "leaf-grad"
    return g


def reference_backward(roots, retain_graph: bool, create_graph: bool, capture=(),
                       accumulate: bool = True):
    """run_backward written plainly (micrograd's walk): every sum a new tensor, every view's
    gradient through its op's backward. Slower; the tests hold run_backward to its results."""
    order = _topo_order([t.grad_fn for t, _ in roots if t.grad_fn is not None])
    where = {id(t.grad_fn) if t.grad_fn is not None else id(t): i for i, t in enumerate(capture)}
    captured = [None] * len(capture)
    grads, leaves = {}, {}

    def deliver(to, g) -> None:
        grads[id(to)] = grads[id(to)] + g if id(to) in grads else g
        if isinstance(to, Tensor):
            leaves.setdefault(id(to), to)

    log = breaks.mute()
    try:
        with grad_mode.set_grad_enabled(create_graph):
            for t, g in roots:
                deliver(t.grad_fn or t, g)
            for node in order:
                g = grads.pop(id(node), None)
                if g is None:
                    continue
                g = _run_hooks(node.hooks or (), g)
                if id(node) in where:
                    captured[where[id(node)]] = g
                in_grads = node.backward(g)
                if not retain_graph:
                    node.release()
                for i, ig in enumerate(in_grads):
                    to, shape, dtype = node.next[3 * i:3 * i + 3]
                    if to is not None and ig is not None:
                        deliver(to, _sum_to(ig, shape, node).to(dtype))
            for key, leaf in leaves.items():
                hooks = leaf._hooks or ()
                g = _run_hooks([h for h in hooks if type(h) is not PostAccumulateHook],
                               grads[key])
                if key in where:
                    captured[where[key]] = g
                elif accumulate:
                    g = g if create_graph else g.detach().clone()  # never aliased
                    leaf.grad = g if leaf.grad is None else leaf.grad + g
                    for hook in hooks:
                        if type(hook) is PostAccumulateHook:
                            hook.fn(leaf)
    finally:
        breaks.unmute(log)
    return captured


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
