"""sf.compile: trace a region once on meta with symbolic dims, plan memory per shape bucket,
replay its kernels with none of eager's per-op Python in between.

`sf.compile(model_or_fn, dynamic=None, buckets=None, fullgraph=False, mode=None,
backend="inductor")` is what a ported `torch.compile(model)` line calls.
"""

from __future__ import annotations

from .api import compile, disable, explain, reset
from .buckets import Buckets, from_histogram, power_of_two
from .compiled import CompiledFunction, CompileReport, mark_dynamic
from .errors import ReplayError
from .module import CompiledModule

__all__ = ["compile", "mark_dynamic", "explain", "reset", "disable", "ReplayError",
           "CompiledFunction", "CompiledModule", "CompileReport", "Buckets", "from_histogram",
           "power_of_two"]
