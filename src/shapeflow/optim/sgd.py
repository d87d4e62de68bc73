"""SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's rule)."""

from __future__ import annotations

from ..tensor import Tensor
from .optimizer import Optimizer, check_numbers, check_porting_flags, invalid


class SGD(Optimizer):
    """Stochastic gradient descent, exactly `torch.optim.SGD`:

        g = grad (+ weight_decay * p);  b = momentum * b + (1 - dampening) * g  (b = g at first)
        g = g + momentum * b (nesterov) or b;  p -= lr * g

    State per parameter (`state_per_param`): ['momentum_buffer'] when momentum != 0, else [].
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, master_weights: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        check_numbers("SGD", lr=lr, momentum=momentum, dampening=dampening,
                      weight_decay=weight_decay)
        check_porting_flags("SGD", differentiable=differentiable)
        if lr < 0.0:
            raise invalid(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise invalid(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise invalid(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise invalid("Nesterov momentum requires a momentum and zero dampening")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "master_weights": master_weights, "foreach": foreach,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        return ["momentum_buffer"] if group["momentum"] != 0 else []

    def step(self, closure=None):
        loss = self._closure(closure)
        self._check_devices()
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                param = p._data
                grad = p.grad._data
                xp, axpy_ = p.device.xp, p.device.kernels.axpy
                owned = False  # whether `grad` is a temporary of ours (may be overwritten)
                if maximize:
                    grad = xp.negative(grad)
                    owned = True
                if wd != 0:  # grad.add(param, alpha=weight_decay)
                    if not owned:
                        grad = grad.copy()
                        owned = True
                    axpy_(grad, param, wd)
                if momentum != 0:
                    state = self.state[p]
                    buf_t = state.get("momentum_buffer")
                    if buf_t is None:
                        buf = xp.array(grad, copy=True)
                        state["momentum_buffer"] = Tensor._make(buf, p.grad.shape, p.grad.dtype,
                                                                p.device)
                    else:
                        buf = buf_t._data
                        buf *= momentum
                        if dampening == 0:
                            buf += grad
                        else:
                            axpy_(buf, grad, 1 - dampening)
                    if nesterov:
                        if not owned:
                            grad = grad.copy()
                            owned = True
                        axpy_(grad, buf, momentum)
                    else:
                        grad = buf
                axpy_(param, grad, -lr)
                p._version[0] += 1
        return loss
