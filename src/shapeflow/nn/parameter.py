"""Parameter: a leaf tensor a Module registers as something to train."""

from __future__ import annotations

from ..tensor import Tensor, as_tensor


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter (as `torch.nn.Parameter`).

    Made from a tensor, it shares that tensor's data (and version counter); it is always a
    leaf, and requires grad unless told otherwise.
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            from ..factories import empty

            data = empty(0)
        elif not isinstance(data, Tensor):
            data = as_tensor(data)
        p = cls._make(data._data, data.shape, data.dtype, data.device)
        p._version = data._version
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ takes other arguments)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        data = None if self._data is None else self._data.copy()
        src = Tensor._make(data, self.shape, self.dtype, self.device)
        out = type(self)(src, requires_grad=self.requires_grad)
        if self.grad is not None:
            g = self.grad
            out.grad = Tensor._make(None if g._data is None else g._data.copy(), g.shape, g.dtype,
                                    g.device)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        data = self._data
        return (_rebuild_parameter, (data, tuple(self.shape), self.dtype, str(self.device),
                                     self.requires_grad))


def _rebuild_parameter(data, shape, dtype, device, requires_grad):
    from ..device import get_device  # the one Device object per name (ops compare with `is`)

    return Parameter(Tensor._make(data, shape, dtype, get_device(device)),
                     requires_grad=requires_grad)
