"""Where a quantized model's error comes from: per module, its own error and the error that
reaches it, against the float model's activations (captured with forward hooks)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .metrics import cosine_similarity, normalized_l2, sqnr

__all__ = ["LayerError", "QuantReport", "Suggestion", "report"]

AMPLIFIED_DB = 3.0  # a module "amplifies" when its output noise is 2x its input's plus its own
OUTPUT = "(output)"


@dataclass
class Error:
    """One comparison with the float activation: SQNR (dB), normalized L2, cosine."""

    sqnr: float
    normalized_l2: float
    cosine: float

    @staticmethod
    def of(ref: np.ndarray, x: np.ndarray) -> Error:
        return Error(sqnr(ref, x), normalized_l2(ref, x), cosine_similarity(ref, x))


@dataclass
class Range:
    """min, max, and the outlier ratio: max / median of the per-channel absmax."""

    min: float
    max: float
    outlier_ratio: float
    outlier_channels: list[int] = field(default_factory=list)

    @staticmethod
    def of(a: np.ndarray, axis: int) -> Range:
        a = np.asarray(a, dtype=np.float64)
        moved = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
        absmax = np.abs(moved).max(axis=1)
        median = float(np.median(absmax))
        ratio = float(absmax.max() / median) if median > 0 else math.inf
        # channels ten times past the median absmax: the ones that set a per-tensor scale
        loud = np.flatnonzero(absmax > 10 * median) if median > 0 else np.arange(0)
        loud = loud[np.argsort(-absmax[loud])][:8]
        return Range(float(a.min()), float(a.max()), ratio, [int(c) for c in loud])


@dataclass
class LayerError:
    """One quantized module (or the model's output): its own and its propagated error."""

    name: str
    kind: str
    own: Error | None  # only this module quantized, the rest float
    propagated: Error  # everything up to and including it quantized
    input: Error | None  # the error in its (float) input, everything before it quantized
    weight: Range | None
    activation: Range | None  # of its (float) input, per channel of the last dim

    @property
    def amplification_db(self) -> float:
        """Output noise over (input noise + own noise), in dB: > 0 when the module makes the
        error it receives larger than it was relative to the signal."""
        if self.own is None or self.input is None:
            return 0.0
        own, inp, out = (_noise(e.sqnr) for e in (self.own, self.input, self.propagated))
        if own + inp == 0:
            return 0.0 if out == 0 else math.inf
        return float(10 * math.log10(out / (own + inp))) if out > 0 else -math.inf


def _noise(db: float) -> float:
    """Relative noise power of an SQNR (0 for a perfect match)."""
    return 0.0 if db == math.inf else 10 ** (-db / 10)


@dataclass
class Suggestion:
    """Modules to keep in float so the output SQNR meets the budget, as verified."""

    keep_float: list[str]
    sqnr: float  # the output SQNR with those modules float, measured by a re-run
    budget_db: float
    tried: list[tuple[str, float]]  # (module kept float, output SQNR after it), in order

    @property
    def met(self) -> bool:
        return self.sqnr >= self.budget_db


@dataclass
class Task:
    """What the output means: classifier agreement and accuracy, language-model loss."""

    top1_agreement: float | None = None
    accuracy_float: float | None = None
    accuracy_quant: float | None = None
    loss_float: float | None = None
    loss_quant: float | None = None
    language_model: bool = False  # the loss is per token: perplexity means something

    @property
    def perplexity_float(self) -> float | None:
        return None if self.loss_float is None else math.exp(self.loss_float)

    @property
    def perplexity_quant(self) -> float | None:
        return None if self.loss_quant is None else math.exp(self.loss_quant)


class _Recorder:
    """Forward hooks that keep each watched module's inputs and output, call by call."""

    def __init__(self, model, names: list[str]) -> None:
        self.calls: dict[str, list[tuple]] = {n: [] for n in names}
        self.order: list[str] = []
        self.handles = [model.get_submodule(n).register_forward_hook(self._hook(n))
                        for n in names]

    def _hook(self, name: str):
        def hook(module, args, output):
            if not self.calls[name]:
                self.order.append(name)
            self.calls[name].append((args, output))
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def output(self, name: str) -> np.ndarray:
        return _flat([out for _, out in self.calls[name]])

    def input_is_float(self, name: str) -> bool:
        x = self.calls[name][0][0][0]
        return bool(getattr(getattr(x, "dtype", None), "is_floating_point", False))

    def input(self, name: str) -> np.ndarray:
        return _flat([args[0] for args, _ in self.calls[name]])


def _numpy(t) -> np.ndarray:
    if isinstance(t, tuple | list):
        t = t[0]
    if hasattr(t, "detach"):
        t = t.detach().numpy()
    return np.asarray(t, dtype=np.float64)


def _flat(parts: list) -> np.ndarray:
    """One call's array, or every call's flattened and joined (a module used twice)."""
    arrays = [_numpy(p) for p in parts]
    return arrays[0] if len(arrays) == 1 else np.concatenate([a.ravel() for a in arrays])


def _run(model, inputs: tuple, names: list[str]):
    """The model's output (and loss, when it returns one) and a recorder of `names`."""
    from ..autograd.grad_mode import no_grad

    rec = _Recorder(model, names)
    try:
        with no_grad():
            out = model(*inputs)
    finally:
        rec.remove()
    loss = None
    if isinstance(out, tuple | list):
        if len(out) > 1 and out[1] is not None and getattr(out[1], "ndim", 1) == 0:
            loss = float(out[1].item())
        out = out[0]
    return _numpy(out), loss, rec


def _replace(model, name: str, module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent), leaf, module)


def _weight_range(module) -> Range | None:
    w = getattr(module, "weight", None)
    if w is None or not hasattr(w, "numpy") or w.ndim < 2:
        return None
    return Range.of(w.detach().numpy(), axis=0)  # per output channel, the axis int8 scales follow


def _log_softmax_loss(logits: np.ndarray, target: np.ndarray) -> float:
    z = logits.reshape(-1, logits.shape[-1])
    t = target.reshape(-1).astype(np.int64)
    keep = t >= 0  # ignore_index -1, as the GPT's loss
    z, t = z[keep], t[keep]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(t)), t].mean())


def _task(ref: np.ndarray, out: np.ndarray, target, loss_f, loss_q) -> Task:
    task = Task(loss_float=loss_f, loss_quant=loss_q,
                language_model=loss_f is not None or ref.ndim > 2)
    if ref.ndim < 2:
        return task
    task.top1_agreement = float((ref.argmax(-1) == out.argmax(-1)).mean())
    if target is not None:
        t = _numpy(target).astype(np.int64)
        if t.shape == ref.shape[:-1]:
            keep = t >= 0
            task.accuracy_float = float((ref.argmax(-1) == t)[keep].mean())
            task.accuracy_quant = float((out.argmax(-1) == t)[keep].mean())
            if loss_f is None:
                task.loss_float = _log_softmax_loss(ref, t)
                task.loss_quant = _log_softmax_loss(out, t)
    return task


class QuantReport:
    """`sf.quant.report`'s result: rows in forward order, the output's error, what they say."""

    def __init__(self, model, inputs: tuple, scheme: str, calibration, rows: list[LayerError],
                 output: LayerError, task: Task, reference: np.ndarray) -> None:
        self._model, self._inputs, self._calibration = model, inputs, calibration
        self._reference = reference
        self.scheme, self.rows, self.output, self.task = scheme, rows, output, task
        self.left_float: dict[str, str] = {}  # eligible modules the scheme cannot take, why

    @property
    def sqnr(self) -> float:
        """The model output's SQNR in dB, everything the scheme covers quantized."""
        return self.output.propagated.sqnr

    def introduced(self, k: int = 3) -> list[str]:
        """The k modules with the largest error of their own (lowest own SQNR)."""
        ranked = sorted(self.rows, key=lambda r: r.own.sqnr)
        return [r.name for r in ranked[:k]]

    def amplified(self, threshold_db: float = AMPLIFIED_DB) -> list[str]:
        """Modules whose output error exceeds their input's plus their own by threshold_db,
        most amplifying first."""
        loud = [r for r in self.rows if r.amplification_db > threshold_db]
        return [r.name for r in sorted(loud, key=lambda r: -r.amplification_db)]

    def suggest(self, budget_db: float = 30.0) -> Suggestion:
        """Modules to keep float so the output SQNR is at least budget_db: greedily the one
        that costs the output most when quantized alone, each step verified by a re-run."""
        from . import quantize

        names = [r.name for r in self.rows]
        keep: list[str] = []
        tried: list[tuple[str, float]] = []
        achieved = self.sqnr
        if achieved >= budget_db:
            return Suggestion([], achieved, budget_db, [])
        cost = self._output_noise_alone(names)
        for name in sorted(names, key=lambda n: -cost[n]):
            keep.append(name)
            rest = [n for n in names if n not in keep]
            achieved = math.inf
            if rest:
                q = quantize(self._model, self.scheme, calibration=self._calibration,
                             modules=rest)
                out, _, _ = _run(q, self._inputs, [])
                achieved = sqnr(self._reference, out)
            tried.append((name, achieved))
            if achieved >= budget_db:
                break
        return Suggestion(keep, achieved, budget_db, tried)

    def _output_noise_alone(self, names: list[str]) -> dict[str, float]:
        """Each module's relative output noise power with it alone quantized (swapped into a
        float copy from the fully quantized one)."""
        import copy

        from . import quantize

        qall = quantize(self._model, self.scheme, calibration=self._calibration,
                        modules=names)
        work = copy.deepcopy(self._model)
        cost = {}
        for name in names:
            original = work.get_submodule(name)
            _replace(work, name, qall.get_submodule(name))
            try:
                out, _, _ = _run(work, self._inputs, [])
            finally:
                _replace(work, name, original)
            cost[name] = _noise(sqnr(self._reference, out))
        return cost

    def to_dict(self) -> dict:
        """Plain data (JSON-ready apart from inf/nan floats)."""
        def row(r: LayerError) -> dict:
            d = asdict(r)
            d["amplification_db"] = r.amplification_db
            return d

        task = asdict(self.task)
        task["perplexity_float"] = self.task.perplexity_float
        task["perplexity_quant"] = self.task.perplexity_quant
        return {"scheme": self.scheme, "output_sqnr": self.sqnr,
                "layers": [row(r) for r in self.rows], "output": row(self.output),
                "introduced": self.introduced(), "amplified": self.amplified(), "task": task,
                "left_float": dict(self.left_float)}

    def __rich__(self):
        from rich.console import Group

        from .report_view import renderables

        return Group(*renderables(self))

    def __str__(self) -> str:
        from .report_view import to_text

        return to_text(self)

    def __repr__(self) -> str:
        return (f"QuantReport(scheme={self.scheme!r}, layers={len(self.rows)}, "
                f"output_sqnr={self.sqnr:.1f} dB)")

    def plot(self, path=None):
        """SQNR through depth, own vs propagated; the matplotlib Figure (saved to path)."""
        from .report_view import plot

        return plot(self, path)


def report(model, *inputs, scheme: str = "int8", calibration=None, target=None) -> QuantReport:
    """Quantize a copy of `model` with `scheme` and compare it with the float model, module by
    module, on `inputs`: see QuantReport."""
    from ..errors import ShapeflowError
    from . import eligible, quantize

    if not inputs:
        raise ShapeflowError("quant.report: give the model's inputs, e.g. "
                             "report(model, x, scheme='int8')")
    was_training = model.training
    model.eval()
    try:
        names, skipped = _fitting(model, scheme, eligible(model, scheme))
        qmodel = quantize(model, scheme, calibration=calibration, modules=names)
        qmodel.eval()
        if not names:
            raise ShapeflowError(f"quant.report: the scheme {scheme!r} quantizes no module of "
                                 f"{type(model).__name__}",
                                 hint="the schemes cover Linear layers first")
        ref, loss_f, frec = _run(model, inputs, names)
        out, loss_q, qrec = _run(qmodel, inputs, names)
        rows = []
        for name in frec.order:  # forward order
            fmod, qmod = model.get_submodule(name), qmodel.get_submodule(name)
            f_out = frec.output(name)
            own_out = _own_output(qmod, frec.calls[name])
            f_in, q_in = frec.input(name), qrec.input(name)
            floating = frec.input_is_float(name)
            rows.append(LayerError(
                name, type(qmod).__name__, Error.of(f_out, own_out),
                Error.of(f_out, qrec.output(name)), Error.of(f_in, q_in) if floating else None,
                _weight_range(fmod), Range.of(f_in, axis=-1) if floating and f_in.ndim else None))
        output = LayerError(OUTPUT, type(model).__name__, None, Error.of(ref, out), None, None,
                            None)
        task = _task(ref, out, target, loss_f, loss_q)
    finally:
        model.train(was_training)
    rep = QuantReport(model, inputs, scheme, calibration, rows, output, task, ref)
    rep.left_float = skipped
    return rep


def _fitting(model, scheme: str, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The eligible modules the scheme's group size fits, and why each other one is left
    float (a Linear of 4 inputs has no group of 32)."""
    from . import get_scheme

    group = get_scheme(scheme).group_size
    fits, skipped = [], {}
    for name in names:
        m = model.get_submodule(name)
        cols = getattr(m, "in_features", None) or getattr(m, "embedding_dim", None)
        if group is not None and cols is not None and cols % group:
            skipped[name] = f"{cols} inputs, not a multiple of the group size {group}"
        else:
            fits.append(name)
    return fits, skipped


def _own_output(qmod, calls: list[tuple]) -> np.ndarray:
    """The quantized module run on the float model's inputs to it: its error alone."""
    from ..autograd.grad_mode import no_grad

    with no_grad():
        return _flat([qmod(*args) for args, _ in calls])
