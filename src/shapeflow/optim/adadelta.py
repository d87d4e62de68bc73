"""Adadelta (PyTorch's update rule, step by step)."""

from __future__ import annotations

from .optimizer import (
    Optimizer,
    check_numbers,
    check_porting_flags,
    invalid,
    new_step,
    zeros_state,
)


class Adadelta(Optimizer):
    """Adadelta, exactly `torch.optim.Adadelta`:

        g = grad (+ weight_decay * p);  v = rho * v + (1 - rho) * g * g
        d = sqrt(u + eps) / sqrt(v + eps) * g;  u = rho * u + (1 - rho) * d * d;  p -= lr * d

    State per parameter (`state_per_param`): ['square_avg', 'acc_delta'] (v and u), each
    shaped like the parameter, and a 'step' counter (a 0-d float32 tensor, as PyTorch's).
    `foreach` is accepted and changes nothing (one path); `capturable` and
    `differentiable` (CUDA graphs, a differentiable step) are not supported.
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_numbers("Adadelta", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        if not lr >= 0.0:
            raise invalid(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise invalid(f"Invalid rho value: {rho}")
        if not eps >= 0.0:
            raise invalid(f"Invalid epsilon value: {eps}")
        if not weight_decay >= 0.0:
            raise invalid(f"Invalid weight_decay value: {weight_decay}")
        check_porting_flags("Adadelta", capturable, differentiable)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        return ["square_avg", "acc_delta"]

    def step(self, closure=None):
        loss = self._closure(closure)
        self._check_devices()
        for group in self.param_groups:
            lr, rho, eps = group["lr"], group["rho"], group["eps"]
            wd, maximize = group["weight_decay"], group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                param = p._data
                grad = p.grad._data
                xp = p.device.xp
                state = self.state[p]
                if not state:
                    state["step"] = new_step()
                    state["square_avg"] = zeros_state(p)
                    state["acc_delta"] = zeros_state(p)
                step = state["step"]._data
                step += 1
                square_avg, acc_delta = state["square_avg"]._data, state["acc_delta"]._data
                if maximize:
                    grad = xp.negative(grad)
                if wd != 0:
                    grad = grad + param * wd
                # PyTorch's order of operations, so float32 results agree to the last bits
                square_avg *= rho
                square_avg += grad * (1 - rho) * grad
                std = square_avg + eps
                xp.sqrt(std, out=std)
                delta = acc_delta + eps
                xp.sqrt(delta, out=delta)
                delta /= std
                delta *= grad
                acc_delta *= rho
                acc_delta += delta * (1 - rho) * delta
                p.device.kernels.axpy(param, delta, -lr)
                p._version[0] += 1
        return loss
