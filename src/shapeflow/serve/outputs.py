"""What the engine hands back per request and step: vLLM's `RequestOutput` shape."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    """One of a request's n completions: all its text and tokens so far, and what is new.

    `delta_text` / `delta_token_ids` are what this step added (a stream sends exactly these);
    text that could still become a stop string is held back until it cannot.
    `finish_reason`: None while running, then "stop" (EOS, a stop string or token), "length"
    (max_tokens or the context) or "abort".
    """

    index: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    delta_text: str = ""
    delta_token_ids: list[int] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Wall-clock times (time.perf_counter) of a request's life, and its prefix-cache reuse."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    num_cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache


@dataclass
class RequestOutput:
    """A request's state after a step: its prompt, its n completions, finished or not."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = False
    metrics: RequestMetrics | None = None
