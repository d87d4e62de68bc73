"""NAdam and RAdam (PyTorch's update rules, step by step)."""

from __future__ import annotations

import numpy as np

from ..tensor import from_numpy
from ._elementwise import ElementwiseOptimizer, check_common
from .optimizer import invalid, new_step, zeros_state


def _moments(param, grad, state: dict, group: dict):
    """Weight decay (L2 or decoupled), then Adam's two moments in place; returns the grad."""
    beta1, beta2 = group["betas"]
    wd = group["weight_decay"]
    if wd != 0:
        if group["decoupled_weight_decay"]:
            param *= 1 - group["lr"] * wd
        else:
            grad = grad + param * wd
    exp_avg, exp_avg_sq = state["exp_avg"]._data, state["exp_avg_sq"]._data
    exp_avg += (grad - exp_avg) * (1 - beta1)
    exp_avg_sq *= beta2
    exp_avg_sq += grad * (1 - beta2) * grad
    return grad, exp_avg, exp_avg_sq


class NAdam(ElementwiseOptimizer):
    """NAdam (Adam with Nesterov momentum), exactly `torch.optim.NAdam`.

    mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)); the step mixes g and m with weights
    from mu_t, mu_{t+1} and their running product. State per parameter: ['exp_avg',
    'exp_avg_sq'], a 'step' counter and 'mu_product' (0-d float32 tensors, as PyTorch's).
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_common("NAdam", lr, eps, weight_decay, betas, capturable, differentiable,
                     momentum_decay=momentum_decay)
        if not momentum_decay >= 0.0:
            raise invalid(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        return ["exp_avg", "exp_avg_sq"]

    def _init_state(self, p, group: dict, state: dict) -> None:
        state["step"] = new_step()
        state["mu_product"] = from_numpy(np.ones((), dtype=np.float32))
        state["exp_avg"] = zeros_state(p)
        state["exp_avg_sq"] = zeros_state(p)

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        lr, (beta1, beta2), md = group["lr"], group["betas"], group["momentum_decay"]
        bias_correction2 = 1 - beta2**step
        grad, exp_avg, exp_avg_sq = _moments(param, grad, state, group)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * md)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * md)))
        mu_product = state["mu_product"]._data
        mu_product *= mu  # kept in float32, as PyTorch's scalar tensor
        mu_prod = float(mu_product)
        denom = xp.sqrt(exp_avg_sq / bias_correction2)
        denom += group["eps"]
        param += grad / denom * (-lr * (1.0 - mu) / (1.0 - mu_prod))
        param += exp_avg / denom * (-lr * mu_next / (1.0 - mu_prod * mu_next))


class RAdam(ElementwiseOptimizer):
    """RAdam (rectified Adam), exactly `torch.optim.RAdam`: Adam's step scaled by the
    variance rectification r_t once rho_t > 5, else plain momentum SGD with bias correction.

    State per parameter: ['exp_avg', 'exp_avg_sq'] and a 'step' counter (0-d float32).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_common("RAdam", lr, eps, weight_decay, betas, capturable, differentiable)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        return ["exp_avg", "exp_avg_sq"]

    def _init_state(self, p, group: dict, state: dict) -> None:
        state["step"] = new_step()
        state["exp_avg"] = zeros_state(p)
        state["exp_avg_sq"] = zeros_state(p)

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        grad, exp_avg, exp_avg_sq = _moments(param, grad, state, group)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = xp.sqrt(exp_avg_sq)
            adaptive += group["eps"]
            adaptive = bias_correction2**0.5 / adaptive
            param -= corrected * lr * adaptive * rect
        else:
            param -= corrected * lr
