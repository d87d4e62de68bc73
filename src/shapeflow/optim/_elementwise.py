"""A base for optimizers whose update is elementwise per parameter (RMSprop, Adagrad, ...)."""

from __future__ import annotations

from .optimizer import Optimizer, check_numbers, check_porting_flags, invalid


class ElementwiseOptimizer(Optimizer):
    """Runs `_init_state(p, group)` once per parameter and `_update(...)` on raw arrays,
    computing with `xp`, the parameter's device's array namespace.

    Subclasses update `param` in place; the step bumps each updated parameter's version once.
    """

    def step(self, closure=None):
        """One update of every parameter that has a grad (closure re-evaluates the loss)."""
        loss = self._closure(closure)
        self._check_devices()
        for group in self.param_groups:
            maximize = group.get("maximize", False)
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    self._init_state(p, group, state)
                grad = p.grad._data
                xp = p.device.xp
                if maximize:
                    grad = xp.negative(grad)
                step = state["step"]._data
                step += 1
                self._update(p._data, grad, state, group, float(step), xp)
                p._version[0] += 1
        return loss

    def _init_state(self, p, group: dict, state: dict) -> None:
        raise NotImplementedError

    def _update(self, param, grad, state: dict, group: dict, step: float, xp) -> None:
        raise NotImplementedError


def check_common(name: str, lr, eps, weight_decay, betas=None, capturable: bool = False,
                 differentiable: bool = False, **numbers) -> None:
    """PyTorch's checks on lr, eps, betas and weight_decay, in shapeflow's error classes."""
    opts = dict(lr=lr, eps=eps, weight_decay=weight_decay, **numbers)
    if betas is not None:
        opts["betas"] = tuple(betas)
    check_numbers(name, **opts)
    if not lr >= 0.0:
        raise invalid(f"Invalid learning rate: {lr}")
    if not eps >= 0.0:
        raise invalid(f"Invalid epsilon value: {eps}")
    if not weight_decay >= 0.0:
        raise invalid(f"Invalid weight_decay value: {weight_decay}")
    if betas is not None:
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise invalid(f"Invalid beta parameter at index {i}: {betas[i]}")
    check_porting_flags(name, capturable, differentiable)
