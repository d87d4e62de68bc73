"""Adagrad (PyTorch's update rule, step by step)."""

from __future__ import annotations

from ..tensor import Tensor
from ._elementwise import ElementwiseOptimizer, check_common
from .optimizer import invalid, new_step


class Adagrad(ElementwiseOptimizer):
    """Adagrad, exactly `torch.optim.Adagrad`:

        s += g * g;  p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    State per parameter: ['sum'] (starting at initial_accumulator_value) and a 'step'
    counter; as in PyTorch, both are made when the optimizer is built, not at the first step.
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_common("Adagrad", lr, eps, weight_decay, differentiable=differentiable,
                     lr_decay=lr_decay, initial_accumulator_value=initial_accumulator_value)
        if not lr_decay >= 0.0:
            raise invalid(f"Invalid lr_decay value: {lr_decay}")
        if not initial_accumulator_value >= 0.0:
            raise invalid(f"Invalid initial_accumulator_value value: "
                          f"{initial_accumulator_value}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p._data is not None:  # meta parameters get their state at the first step
                    self._init_state(p, group, self.state[p])

    def state_per_param(self, group: dict) -> list[str]:
        return ["sum"]

    def _init_state(self, p, group: dict, state: dict) -> None:
        state["step"] = new_step()
        state["sum"] = Tensor._make(p.device.xp.full_like(
            p._data, group["initial_accumulator_value"]), p.shape, p.dtype, p.device)

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        if group["weight_decay"] != 0:
            grad = grad + param * group["weight_decay"]
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state_sum = state["sum"]._data
        state_sum += grad * grad
        std = xp.sqrt(state_sum)
        std += group["eps"]
        param += grad / std * -clr
