"""Prometheus text exposition (format 0.0.4), written by hand: counters, gauges, histograms,
and the server's set of them (`ServerMetrics`), named as vLLM names its own."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# seconds; a small CPU model's tokens come in about a millisecond, a large one's in tenths
TTFT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
               0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
E2E_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


def _num(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    def esc(s: str) -> str:
        return s.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
    text = ",".join(f'{k}="{esc(str(v))}"' for k, v in pairs)
    return "{" + text + "}" if text else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name, self.help, self.labelnames = name, help, tuple(labelnames)
        self._lock = threading.Lock()
        self._values: dict[tuple, float] = {} if labelnames else {(): 0.0}

    def _key(self, labels: dict) -> tuple:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name} takes the labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(labels[k]) for k in self.labelnames)

    def get(self, **labels) -> float:
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{_labels(zip(self.labelnames, k))} {_num(v)}" for k, v in items]

    def render(self) -> str:
        head = f"# HELP {self.name} {self.help}\n# TYPE {self.name} {self.kind}\n"
        return head + "".join(line + "\n" for line in self.samples())


class Counter(_Metric):
    """A total that only grows (its name ends in _total)."""

    kind = "counter"

    def inc(self, amount: float = 1.0, **labels) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot go down ({amount})")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def set_total(self, value: float, **labels) -> None:
        """Follow a total kept elsewhere (the engine's), never going down."""
        key = self._key(labels)
        with self._lock:
            self._values[key] = max(self._values.get(key, 0.0), float(value))


class Gauge(_Metric):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, value: float, **labels) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)


class Histogram(_Metric):
    """Observations counted into cumulative `le` buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help: str, buckets: tuple[float, ...]) -> None:
        super().__init__(name, help)
        self.buckets = tuple(sorted(buckets)) + (math.inf,)
        self._counts = [0] * len(self.buckets)
        self._sum, self._count = 0.0, 0

    def observe(self, value: float) -> None:
        with self._lock:
            for i, le in enumerate(self.buckets):
                if value <= le:
                    self._counts[i] += 1
                    break
            self._sum += value
            self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def samples(self) -> list[str]:
        with self._lock:
            counts, total, n = list(self._counts), self._sum, self._count
        out, running = [], 0
        for le, c in zip(self.buckets, counts):
            running += c
            out.append(f'{self.name}_bucket{{le="{_num(le)}"}} {running}')
        return out + [f"{self.name}_sum {_num(total)}", f"{self.name}_count {n}"]


# engine.stats() key -> (metric name, kind, help)
_ENGINE = {
    "num_running": ("shapeflow_num_requests_running", "gauge",
                    "Requests in the running batch"),
    "num_waiting": ("shapeflow_num_requests_waiting", "gauge",
                    "Requests waiting to be scheduled"),
    "kv_blocks_total": ("shapeflow_kv_cache_blocks_total", "gauge", "KV-cache blocks in the pool"),
    "kv_blocks_used": ("shapeflow_kv_cache_blocks_used", "gauge",
                       "KV-cache blocks held by requests"),
    "kv_blocks_free": ("shapeflow_kv_cache_blocks_free", "gauge",
                       "KV-cache blocks free (cached prefixes not in use count as free)"),
    "prefix_cache_queries": ("shapeflow_prefix_cache_queries_total", "counter",
                             "Prompt tokens looked up in the prefix cache"),
    "prefix_cache_hits": ("shapeflow_prefix_cache_hits_total", "counter",
                          "Prompt tokens found in the prefix cache"),
    "num_preemptions": ("shapeflow_num_preemptions_total", "counter",
                        "Requests preempted (recomputed) when the KV pool ran out"),
    "step_count": ("shapeflow_engine_steps_total", "counter", "Engine steps run"),
    "time_model_s": ("shapeflow_engine_model_seconds_total", "counter",
                     "Seconds the engine spent running the model"),
    "time_schedule_s": ("shapeflow_engine_schedule_seconds_total", "counter",
                        "Seconds the engine spent scheduling"),
}


class ServerMetrics:
    """Everything /metrics shows: request latencies observed by the server, engine state."""

    def __init__(self) -> None:
        self.ttft = Histogram("shapeflow_time_to_first_token_seconds",
                              "Time from a request's arrival to its first token", TTFT_BUCKETS)
        self.itl = Histogram("shapeflow_inter_token_latency_seconds",
                             "Time between a request's successive token steps", ITL_BUCKETS)
        self.e2e = Histogram("shapeflow_e2e_request_latency_seconds",
                             "Time from a request's arrival to its last token", E2E_BUCKETS)
        self.received = Counter("shapeflow_requests_received_total",
                                "Generation requests accepted into the engine")
        self.success = Counter("shapeflow_request_success_total",
                               "Generation requests finished, by finish reason",
                               ("finished_reason",))
        self.errors = Counter("shapeflow_request_errors_total",
                              "Requests answered with an error, by HTTP status", ("status",))
        self.prompt_tokens = Counter("shapeflow_prompt_tokens_total", "Prompt tokens received")
        self.generation_tokens = Counter("shapeflow_generation_tokens_total",
                                         "Tokens generated")
        self.hit_rate = Gauge("shapeflow_prefix_cache_hit_rate",
                              "Prefix-cache hits over queries, in tokens, since the start")
        self.usage = Gauge("shapeflow_kv_cache_usage_perc",
                           "Fraction of the KV-cache blocks in use (0 to 1)")
        self.engine = {key: (Counter if kind == "counter" else Gauge)(name, help)
                       for key, (name, kind, help) in _ENGINE.items()}

    def update_engine(self, stats: dict) -> None:
        """Take the engine's stats() snapshot."""
        for key, metric in self.engine.items():
            if key in stats:
                (metric.set_total if isinstance(metric, Counter) else metric.set)(stats[key])
        queries = stats.get("prefix_cache_queries", 0)
        self.hit_rate.set(stats.get("prefix_cache_hits", 0) / queries if queries else 0.0)
        total = stats.get("kv_blocks_total", 0)
        self.usage.set(stats.get("kv_blocks_used", 0) / total if total else 0.0)

    def render(self) -> str:
        metrics = [self.ttft, self.itl, self.e2e, self.received, self.success, self.errors,
                   self.prompt_tokens, self.generation_tokens, *self.engine.values(),
                   self.hit_rate, self.usage]
        return "".join(m.render() for m in metrics)
