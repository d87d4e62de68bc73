"""What torchvision's builders share: channel rounding, checked keyword overrides, and the
pre-0.13 `pretrained=` keyword (and positional arguments), accepted with a warning."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

from ._api import WeightsEnum


def _make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """`v` rounded to a multiple of `divisor`, never more than 10% below it (TF's rule)."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _ovewrite_named_param(kwargs: dict[str, Any], param: str, new_value: Any) -> None:
    """Set kwargs[param], refusing a different value the caller gave (torchvision's spelling)."""
    if param in kwargs:
        if kwargs[param] != new_value:
            raise ValueError(f"The parameter '{param}' expected value {new_value} but got "
                             f"{kwargs[param]} instead.")
    else:
        kwargs[param] = new_value


def handle_legacy_interface(pretrained_weights: Callable[[], WeightsEnum]) -> Callable:
    """Decorator: `builder(pretrained=True)` -> the legacy weights, `False` -> None, and
    positional arguments for the keyword-only ones, each with torchvision's warning."""
    def outer(builder: Callable) -> Callable:
        names = [p.name for p in inspect.signature(builder).parameters.values()
                 if p.kind == p.KEYWORD_ONLY]

        @functools.wraps(builder)
        def inner(*args: Any, **kwargs: Any):
            if args:
                if len(args) > len(names):
                    raise TypeError(f"{builder.__name__}() takes at most {len(names)} "
                                    f"positional arguments ({len(args)} given)")
                warnings.warn(f"Using {', '.join(names[:len(args)])} as positional parameter(s) "
                              "is deprecated since 0.13 and may be removed in the future. "
                              "Please use keyword parameter(s) instead.", stacklevel=2)
                given = dict(zip(names, args))
                if isinstance(given.get("weights"), bool):  # builder(True): the old pretrained
                    kwargs["pretrained"] = given.pop("weights")
                kwargs.update(given)
            if "pretrained" in kwargs:
                pretrained = kwargs.pop("pretrained")
                if kwargs.get("weights") is not None:
                    raise ValueError(f"{builder.__name__}: pass weights= or the deprecated "
                                     "pretrained=, not both")
                weights = pretrained_weights() if pretrained else None
                warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be "
                              "removed in the future, please use 'weights' instead.",
                              stacklevel=2)
                msg = ("Arguments other than a weight enum or `None` for 'weights' are "
                       "deprecated since 0.13 and may be removed in the future. The current "
                       f"behavior is equivalent to passing `weights={weights}`.")
                if pretrained:
                    msg += (f" You can also use `weights={type(weights).__name__}.DEFAULT` to "
                            "get the most up-to-date weights.")
                warnings.warn(msg, stacklevel=2)
                kwargs["weights"] = weights
            return builder(**kwargs)

        return inner

    return outer
