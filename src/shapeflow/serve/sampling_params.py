"""How one request is sampled: vLLM's `SamplingParams`, checked when it is made."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ArgumentError


@dataclass
class SamplingParams:
    """Sampling settings of one request (as vLLM's); greedy when temperature is 0.

    `top_k` <= 0 and `top_p` == 1 switch those filters off; `seed` makes the request's draws
    reproducible whatever else the batch holds; `max_tokens` None: up to the context length.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_tokens: int | None = 16
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = [int(t) for t in (self.stop_token_ids or [])]
        _check(isinstance(self.n, int) and not isinstance(self.n, bool) and self.n >= 1,
               f"n must be an int >= 1, got {self.n!r}")
        _check(isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2,
               f"temperature must lie in [0, 2], got {self.temperature!r}")
        _check(isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1,
               f"top_p must lie in (0, 1], got {self.top_p!r}")
        _check(isinstance(self.top_k, int) and not isinstance(self.top_k, bool),
               f"top_k must be an int (0 or -1: off), got {self.top_k!r}")
        _check(self.max_tokens is None or (isinstance(self.max_tokens, int)
                                           and not isinstance(self.max_tokens, bool)
                                           and self.max_tokens >= 1),
               f"max_tokens must be an int >= 1 or None, got {self.max_tokens!r}")
        _check(self.seed is None or (isinstance(self.seed, int)
                                     and not isinstance(self.seed, bool)),
               f"seed must be an int or None, got {self.seed!r}")
        _check(all(isinstance(s, str) and s for s in self.stop),
               "stop must be a non-empty string or a list of them")

    @property
    def greedy(self) -> bool:
        """True when each token is the argmax (temperature 0)."""
        return self.temperature == 0


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ArgumentError(f"SamplingParams: {message}", op="serve")
