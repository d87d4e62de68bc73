"""Adamax (PyTorch's update rule, step by step)."""

from __future__ import annotations

from ._elementwise import ElementwiseOptimizer, check_common
from .optimizer import new_step, zeros_state


class Adamax(ElementwiseOptimizer):
    """Adamax (Adam with the infinity norm), exactly `torch.optim.Adamax`:

        m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps);  p -= lr / (1 - beta1^t) * m / u

    State per parameter: ['exp_avg', 'exp_inf'] and a 'step' counter (0-d float32).
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        check_common("Adamax", lr, eps, weight_decay, betas, capturable, differentiable)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        return ["exp_avg", "exp_inf"]

    def _init_state(self, p, group: dict, state: dict) -> None:
        state["step"] = new_step()
        state["exp_avg"] = zeros_state(p)
        state["exp_inf"] = zeros_state(p)

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        beta1, beta2 = group["betas"]
        if group["weight_decay"] != 0:
            grad = grad + param * group["weight_decay"]
        exp_avg, exp_inf = state["exp_avg"]._data, state["exp_inf"]._data
        exp_avg += (grad - exp_avg) * (1 - beta1)
        exp_inf *= beta2
        xp.maximum(exp_inf, xp.abs(grad) + group["eps"], out=exp_inf)
        clr = group["lr"] / (1 - beta1**step)
        param += exp_avg / exp_inf * -clr
