"""RMSprop (PyTorch's update rule, step by step)."""

from __future__ import annotations

from ._elementwise import ElementwiseOptimizer, check_common
from .optimizer import invalid, new_step, zeros_state


class RMSprop(ElementwiseOptimizer):
    """RMSprop, exactly `torch.optim.RMSprop`:

        v = alpha * v + (1 - alpha) * g * g;  (centered: a = lerp(a, g, 1 - alpha), v - a * a)
        b = momentum * b + g / (sqrt(v) + eps);  p -= lr * b   (or p -= lr * g / (...))

    State per parameter: ['square_avg'] (+ 'momentum_buffer' if momentum > 0, + 'grad_avg'
    if centered) and a 'step' counter (0-d float32, as PyTorch's).
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        check_common("RMSprop", lr, eps, weight_decay, capturable=capturable,
                     differentiable=differentiable, alpha=alpha, momentum=momentum)
        if not momentum >= 0.0:
            raise invalid(f"Invalid momentum value: {momentum}")
        if not alpha >= 0.0:
            raise invalid(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def state_per_param(self, group: dict) -> list[str]:
        names = ["square_avg"]
        if group["momentum"] > 0:
            names.append("momentum_buffer")
        if group["centered"]:
            names.append("grad_avg")
        return names

    def _init_state(self, p, group: dict, state: dict) -> None:
        state["step"] = new_step()
        for name in self.state_per_param(group):
            state[name] = zeros_state(p)

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        if group["weight_decay"] != 0:
            grad = grad + param * group["weight_decay"]
        square_avg = state["square_avg"]._data
        square_avg *= alpha
        square_avg += grad * (1 - alpha) * grad
        if group["centered"]:
            grad_avg = state["grad_avg"]._data
            grad_avg += (grad - grad_avg) * (1 - alpha)
            avg = xp.sqrt(square_avg - grad_avg * grad_avg)
        else:
            avg = xp.sqrt(square_avg)
        avg += eps
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]._data
            buf *= group["momentum"]
            buf += grad / avg
            param -= buf * lr
        else:
            param += grad / avg * -lr
