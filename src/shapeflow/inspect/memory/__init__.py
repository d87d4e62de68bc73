"""Memory: what training keeps that inference does not, counted from the graph (`sf.memory`)."""

from ..units import format_bytes
from .kv import kv_cache_bytes
from .parallel import Plan, plan
from .report import MemoryPlanError, MemoryReport, ModuleRow, report
from .tracker import LiveTracker

__all__ = ["report", "MemoryReport", "ModuleRow", "MemoryPlanError", "kv_cache_bytes",
           "plan", "Plan", "LiveTracker", "format_bytes"]
