"""Adam and AdamW (PyTorch's update rule, step by step)."""

from __future__ import annotations

from .optimizer import (
    Optimizer,
    check_numbers,
    check_porting_flags,
    invalid,
    new_step,
    zeros_state,
)


class Adam(Optimizer):
    """Adam, exactly `torch.optim.Adam` (AdamW: decoupled weight decay):

        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    With amsgrad, v is replaced by its running maximum. State per parameter
    (`state_per_param`): ['exp_avg', 'exp_avg_sq'] (+ 'max_exp_avg_sq' with amsgrad), each
    shaped like the parameter, and a 'step' counter (a 0-d float32 tensor, as PyTorch's).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, maximize: bool = False,
                 decoupled_weight_decay: bool = False, master_weights: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_numbers(type(self).__name__, lr=lr, betas=tuple(betas), eps=eps,
                      weight_decay=weight_decay)
        check_porting_flags(type(self).__name__, capturable, differentiable)
        if lr < 0.0:
            raise invalid(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise invalid(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise invalid(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise invalid(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise invalid(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "master_weights": master_weights, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        names = ["exp_avg", "exp_avg_sq"]
        return names + ["max_exp_avg_sq"] if group["amsgrad"] else names

    def step(self, closure=None):
        loss = self._closure(closure)
        self._check_devices()
        for group in self.param_groups:
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            amsgrad, maximize = group["amsgrad"], group["maximize"]
            decoupled = group.get("decoupled_weight_decay", False)
            for p in group["params"]:
                if p.grad is None:
                    continue
                param = p._data
                grad = p.grad._data
                xp = p.device.xp
                state = self.state[p]
                if not state:
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_state(p)
                    state["exp_avg_sq"] = zeros_state(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_state(p)
                m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
                vmax = state["max_exp_avg_sq"]._data if amsgrad else None
                step_arr = state["step"]._data
                step_arr += 1
                step = float(step_arr)
                if maximize:
                    grad = xp.negative(grad)
                if wd != 0:
                    if decoupled:
                        param *= 1 - lr * wd
                    else:
                        grad = grad + param * wd
                bias_correction1 = 1 - beta1**step
                bias_correction2 = 1 - beta2**step
                scalars = (1 - beta1, beta2, 1 - beta2, bias_correction2**0.5, eps,
                           -(lr / bias_correction1))
                # the device's update: on cpu one compiled pass where it is built, else NumPy
                p.device.kernels.adam(param, grad, m, v, vmax, scalars)
                p._version[0] += 1
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay), as `torch.optim.AdamW`.

    State per parameter: as Adam.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, master_weights: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True, master_weights=master_weights,
                         foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused)

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        for g in self.param_groups:
            g["decoupled_weight_decay"] = True
