"""More schedulers with PyTorch's formulas: OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts,
PolynomialLR and ReduceLROnPlateau (re-exported by `shapeflow.optim.lr_scheduler`)."""

from __future__ import annotations

import math
import types
import warnings
from functools import partial

from ..errors import DTypeError
from .lr_scheduler import LRScheduler
from .optimizer import Optimizer, invalid


def _format_param(name: str, optimizer: Optimizer, param) -> list:
    """One value per parameter group (a list of that length, or one value repeated)."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise invalid(f"{name} must have the same length as optimizer.param_groups. {name} "
                          f"has {len(param)} values, param_groups has "
                          f"{len(optimizer.param_groups)}.")
        return list(param)
    return [param] * len(optimizer.param_groups)


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise DTypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _init_momentum(sched, optimizer: Optimizer, max_momentum, base_momentum,
                   last_epoch: int) -> None:
    """Set up cycling of momentum (or beta1) between base_momentum and max_momentum."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise invalid("optimizer must support momentum or beta1 with `cycle_momentum` option "
                      "enabled")
    sched.use_beta1 = "betas" in optimizer.defaults
    maxs = _format_param("max_momentum", optimizer, max_momentum)
    bases = _format_param("base_momentum", optimizer, base_momentum)
    if last_epoch == -1:
        for m, b, group in zip(maxs, bases, optimizer.param_groups):
            _set_momentum(sched, group, m)
            group["max_momentum"] = m
            group["base_momentum"] = b
    return maxs, bases


def _set_momentum(sched, group: dict, value: float) -> None:
    if sched.use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr/div_factor to max_lr, then anneals (cos or
    linear) to a minimum, momentum moving inversely (PyTorch's phases, step per batch)."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise invalid(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise invalid(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise invalid("Expected positive integer steps_per_epoch, but got "
                              f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise invalid("You must define either total_steps OR (epochs AND steps_per_epoch)")
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                       "base_momentum", "max_momentum"),
                _phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                       "max_momentum")]
        else:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                       "max_momentum")]
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise invalid(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise invalid("anneal_strategy must be one of 'cos' or 'linear', instead got "
                          f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _init_momentum(self, optimizer, max_momentum, base_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list:
        """The lr of each group at this step (and, with cycle_momentum, sets its momentum)."""
        self._warn_outside_step()
        step = self.last_epoch
        if step > self.total_steps:
            raise invalid(f"Tried to step {step} times. The specified number of total steps "
                          f"is {self.total_steps}", op="OneCycleLR")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]],
                                           group[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(self, group, mom)
        return lrs


def _phase(end_step, start_lr, end_lr, start_momentum, end_momentum) -> dict:
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


class CyclicLR(LRScheduler):
    """Cycle the lr between base_lr and max_lr (triangular, triangular2, exp_range or a
    scale_fn), momentum moving inversely; stepped per batch, as PyTorch's."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise invalid("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.max_momentums, self.base_momentums = _init_momentum(
                self, optimizer, max_momentum, base_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _triangular
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2
            self.scale_mode = "cycle"
        else:
            self._scale_fn_ref = partial(_exp_range, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        """The amplitude scale at cycle (or iteration) x."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list:
        """The lr of each group at this step (and, with cycle_momentum, sets its momentum)."""
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (top - base) * scale_factor * self.scale_fn(at)
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, base, top in zip(self.optimizer.param_groups, self.base_momentums,
                                        self.max_momentums):
                _set_momentum(self, group, top - (top - base) * scale_factor * self.scale_fn(at))
        return lrs

    def state_dict(self) -> dict:
        """As PyTorch's: without the scale function (a callable object's __dict__ is kept)."""
        sd = {k: v for k, v in self.__dict__.items()
              if k not in ("optimizer", "_scale_fn_ref", "_scale_fn_custom")}
        fn = self._scale_fn_custom
        sd["_scale_fn_custom"] = (fn.__dict__.copy() if fn is not None
                                  and not isinstance(fn, types.FunctionType) else None)
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom")
        self.__dict__.update(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _triangular(x: float) -> float:
    return 1.0


def _triangular2(x: float) -> float:
    return 1 / (2.0 ** (x - 1))


def _exp_range(gamma: float, x: float) -> float:
    return gamma**x


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from base_lr to eta_min, restarting after T_0, T_0*T_mult, ... epochs
    (SGDR); step(epoch) may take a fractional epoch, as PyTorch's."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise invalid(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise invalid(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise invalid(f"Expected float or int eta_min, but got {eta_min} of type "
                          f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        """eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2 per group."""
        self._warn_outside_step()
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or jump to `epoch` (a float is allowed: a fraction of an epoch)."""
        self._step_count = getattr(self, "_step_count", 0) + 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise invalid(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._lrs()


class PolynomialLR(LRScheduler):
    """Decay the lr by (1 - t / total_iters) ** power until total_iters, then hold it."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        """PyTorch's recursive form: the previous lr times this step's decay factor."""
        self._warn_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        factor = ((1.0 - self.last_epoch / self.total_iters)
                  / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by factor once a metric has stopped improving for `patience` epochs
    (then wait `cooldown` epochs); `step(metric)` each epoch."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise invalid("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise invalid(f"expected {len(optimizer.param_groups)} min_lrs, got "
                              f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None) -> None:
        """Record this epoch's metric and reduce the lr if it has plateaued."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated; call "
                          "`scheduler.step()` without it.", UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._lrs()

    def _reduce_lr(self) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise invalid(f"The number of param groups in the `optimizer` "
                              f"({len(self.optimizer.param_groups)}) differs from when "
                              f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}); "
                              "set `min_lrs` to match", op="ReduceLROnPlateau")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out its cooldown."""
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise invalid("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise invalid("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def get_lr(self) -> list:
        """The current lrs (this scheduler changes them only in step)."""
        return self._lrs()

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
