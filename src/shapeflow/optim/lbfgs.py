"""L-BFGS with a closure (PyTorch's algorithm, optionally with its strong-Wolfe line search)."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor, from_numpy
from .optimizer import Optimizer, _as_array, check_numbers, invalid


class LBFGS(Optimizer):
    """L-BFGS, exactly `torch.optim.LBFGS`: `step(closure)` runs up to max_iter iterations,
    re-evaluating the loss through `closure` (which zeroes grads, computes and back-propagates).

    All parameters form one flat vector. State (kept on the first parameter, as PyTorch's):
    'd', 'prev_flat_grad' and up to history_size pairs in 'old_dirs' / 'old_stps', each as
    long as all parameters together, plus scalars. `state_per_param` declares that bound:
    2 + 2 * history_size buffers per parameter, reached once the history is full.
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None) -> None:
        check_numbers("LBFGS", lr=lr, tolerance_grad=tolerance_grad,
                      tolerance_change=tolerance_change)
        if not lr >= 0.0:
            raise invalid(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise invalid(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, got "
                          f"{line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise invalid("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def state_per_param(self, group: dict) -> list[str]:
        h = group["history_size"]
        return (["d", "prev_flat_grad"] + [f"old_dirs.{i}" for i in range(h)]
                + [f"old_stps.{i}" for i in range(h)])

    # ---- flat views of the parameters ----------------------------------------------------------
    # The search runs on the host (NumPy on flat vectors): the gradients come over with
    # to_numpy and the updates go back with from_numpy, both free on cpu.
    def _gather_flat_grad(self) -> np.ndarray:
        return np.concatenate([np.zeros(p.numel(), p.dtype.np) if p.grad is None
                               else p.device.to_numpy(p.grad._data).reshape(-1)
                               for p in self._params])

    def _add_grad(self, step_size: float, update: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p._data += p.device.from_numpy(
                (update[offset:offset + n] * step_size).reshape(p._data.shape))
            p._version[0] += 1
            offset += n

    def _set_param(self, saved: list) -> None:
        for p, s in zip(self._params, saved):
            p._data[...] = p.device.from_numpy(s)
            p._version[0] += 1

    def _directional_evaluate(self, closure, x: list, t: float, d: np.ndarray):
        self._add_grad(t, d)
        loss = float(self._closure(closure))
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Run up to max_iter L-BFGS iterations; returns the loss of the first evaluation."""
        if closure is None:
            raise invalid("LBFGS.step needs a closure that re-evaluates the model and returns "
                          "the loss", op="LBFGS.step")
        self._check_devices()
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = self._closure(closure)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss
        d = _arr(state.get("d"))
        t = state.get("t")
        old_dirs = [_arr(v) for v in state.get("old_dirs", [])]
        old_stps = [_arr(v) for v in state.get("old_stps", [])]
        ro = [float(_arr(v)) for v in state.get("ro", [])]
        H_diag = float(_arr(state["H_diag"])) if "H_diag" in state else None
        prev_flat_grad = _arr(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")
        t = None if t is None else float(_arr(t))
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:  # drop the oldest pair
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y @ y)
                # the two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q += old_dirs[i] * -al[i]
                d = r = q * H_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:  # not a descent direction
                break
            ls_func_evals = 0
            if group["line_search_fn"] is not None:
                x_init = [p.device.to_numpy(p._data).copy() for p in self._params]

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd,
                    tolerance_change=tol_change, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(self._closure(closure))
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change):
                break
        state["d"] = from_numpy(d)
        state["t"] = t
        state["old_dirs"] = [from_numpy(v) for v in old_dirs]
        state["old_stps"] = [from_numpy(v) for v in old_stps]
        state["ro"] = list(ro)
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = from_numpy(prev_flat_grad)
        state["prev_loss"] = prev_loss
        return orig_loss

    def load_state_dict(self, state_dict: dict) -> None:
        """Load this or PyTorch's format (its tensors, also in lists, become shapeflow's)."""
        saved = state_dict["param_groups"]
        super().load_state_dict({"param_groups": saved, "state": {}})
        index = dict(zip((i for g in saved for i in g["params"]), self._params))
        for key, values in state_dict["state"].items():
            self.state[index.get(key, key)] = {n: _convert(v) for n, v in values.items()}


def _arr(v):
    """A state entry as a NumPy array / float (shapeflow or torch tensor, or a number)."""
    if v is None or isinstance(v, (int, float)):
        return v
    a = _as_array(v)
    return a if a is not None else v


def _convert(v):
    if isinstance(v, list):
        return [_convert(x) for x in v]
    if isinstance(v, Tensor) or v is None or isinstance(v, (int, float)):
        return v
    a = _as_array(v)
    if a is None:
        return v
    return float(a) if a.ndim == 0 else from_numpy(a.copy())


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimiser of the cubic through two points with slopes, clipped to bounds."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square**0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """PyTorch's strong-Wolfe line search (bracketing, then cubic zoom); (f, g, t, evals)."""
    d_norm = float(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    t = bracket[low_pos]
    return bracket_f[low_pos], bracket_g[low_pos], t, ls_func_evals
