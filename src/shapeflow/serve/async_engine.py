"""The Engine behind an asyncio server: one background thread owns it and loops `step()`.

Requests and aborts reach that thread through a thread-safe queue; each HTTP request's
outputs go back to an asyncio queue on the server's loop (`loop.call_soon_threadsafe`). The
Engine is not thread-safe, so nothing else touches it: its stats are a snapshot the thread
takes after each step. An exception inside the engine fails the requests in it with a 500
and the thread goes on serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ShapeflowError
from .metrics import ServerMetrics
from .outputs import RequestOutput
from .protocol import APIError
from .sampling_params import SamplingParams

log = logging.getLogger("shapeflow.serve")

# The engine thread ran step after step while the event loop waited for the GIL (CPython
# hands it over every 5 ms): tokens left in bursts, clients seeing gaps of ~0.02 ms then
# ~5 ms. Now a step's outputs are posted once the loop has taken the previous step's, or
# SEND_WAIT_S after those were posted: the loop sends step k while the engine computes step
# k+1 (a step longer than SEND_WAIT_S never waits), and the engine, blocked on the loop,
# hands it the GIL. A shorter switch interval (0.2 ms) on top cost 20-30% of the char GPT's
# tokens/s at concurrency 1 and 8 and is not set.
SEND_WAIT_S = 0.001


@dataclass
class _Live:
    """An engine request the thread is serving: where its outputs go, its timings."""

    sub: Submission
    index: int  # which of the submission's prompts
    arrival: float
    first: float | None = None
    last: float = 0.0


class Submission:
    """One HTTP request's engine requests (one per prompt); iterate for (prompt index,
    RequestOutput) until all have finished; `close()` aborts the unfinished and frees the
    request's place."""

    def __init__(self, owner: AsyncEngine, request_ids: list[str],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.owner, self.request_ids, self.loop = owner, request_ids, loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self._unfinished = set(range(len(request_ids)))
        self._unadded = len(request_ids)  # adds the engine has not acknowledged yet
        self._closed = False

    def post(self, item: Any) -> None:
        """From the engine thread: hand the server's loop an output or an APIError."""
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)

    async def ready(self) -> None:
        """Wait until the engine took every prompt (an APIError if it refused one), so a
        stream can still answer with an error status before its first byte."""
        while self._unadded:
            self._note(await self.queue.get())

    def _note(self, item: Any) -> tuple | None:
        if isinstance(item, BaseException):
            raise item
        if item == "added":
            self._unadded -= 1
            return None
        return item

    def __aiter__(self):
        return self._outputs()

    async def _outputs(self):
        while self._unfinished:
            item = self._note(await self.queue.get())
            if item is None:
                continue
            i, out = item
            if out.finished:
                self._unfinished.discard(i)
            yield i, out

    def close(self) -> None:
        """Abort what has not finished (a client that left) and give the place back."""
        if self._closed:
            return
        self._closed = True
        for i in sorted(self._unfinished):
            self.owner.abort(self.request_ids[i])
        self.owner._release(len(self.request_ids))


class AsyncEngine:
    """Runs `engine` on a thread of its own; at most `max_requests` engine requests in
    flight (one per prompt), more are refused with a 429."""

    def __init__(self, engine: Any, *, max_requests: int = 256,
                 metrics: ServerMetrics | None = None) -> None:
        self.engine = engine
        self.max_requests = max_requests
        self.metrics = metrics or ServerMetrics()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._live: dict[str, _Live] = {}  # the engine thread's alone
        self._lock = threading.Lock()
        self._in_flight = 0
        self._thread: threading.Thread | None = None
        self._stats: dict = {}
        self._stopping = False
        # set once the event loop has taken the last step's outputs: the next step's wait
        # for it (see SEND_WAIT_S)
        self._sent: tuple[threading.Event, float] | None = None  # (taken, posted at)

    # ---- the server's side (its event loop) ----

    def start(self) -> None:
        """Start the engine thread (idempotent)."""
        if self._thread is None:
            self._publish()
            self._thread = threading.Thread(target=self._run, name="shapeflow-engine",
                                            daemon=True)
            self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def stats(self) -> dict:
        """The engine's stats() as of its last step."""
        return dict(self._stats)

    def submit(self, prompt_ids: list[list[int]], params: list[SamplingParams],
               request_id: str) -> Submission:
        """Queue one engine request per prompt; a 429 when the server is full, 503 when it
        is shutting down. Call from the server's event loop."""
        if not self.alive:
            raise APIError(503, "The server is shutting down or its engine has stopped",
                           type="server_error", code="service_unavailable")
        k = len(prompt_ids)
        with self._lock:
            if self._in_flight + k > self.max_requests:
                raise APIError(429, f"Too many concurrent requests: this server takes at most "
                               f"{self.max_requests} at a time ({self._in_flight} in flight); "
                               "retry shortly", type="rate_limit_error",
                               code="rate_limit_exceeded")
            self._in_flight += k
        ids = [request_id if k == 1 else f"{request_id}-{i}" for i in range(k)]
        sub = Submission(self, ids, asyncio.get_running_loop())
        now = time.perf_counter()
        for i, (rid, p, sp) in enumerate(zip(ids, prompt_ids, params)):
            self._inbox.put(("add", _Live(sub, i, now), rid, p, sp))
        self.metrics.received.inc(k)
        self.metrics.prompt_tokens.inc(sum(len(p) for p in prompt_ids))
        return sub

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks (unknown or finished: nothing happens)."""
        self._inbox.put(("abort", request_id))

    def _release(self, k: int) -> None:
        with self._lock:
            self._in_flight -= k

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the thread; requests still in flight fail with a 503."""
        self._stopping = True
        if self._thread is not None:
            self._inbox.put(("stop",))
            self._thread.join(timeout)

    # ---- the engine thread ----

    def _run(self) -> None:
        try:
            while self._take(wait=not self.engine.has_unfinished()):
                if self.engine.has_unfinished():
                    self._step()
                self._publish()
        except BaseException:  # a bug here: say so, and fail what is waiting
            log.exception("shapeflow engine thread stopped")
            raise
        finally:
            self._stopping = True
            self._fail(list(self._live), APIError(503, "The server is shutting down",
                                                  type="server_error"))
            self._drain_adds()

    def _take(self, wait: bool) -> bool:
        """Apply the queued adds and aborts (waiting for one when idle); False on stop."""
        try:
            msg = self._inbox.get() if wait else self._inbox.get_nowait()
        except queue.Empty:
            return True
        while True:
            if msg[0] == "stop":
                return False
            if msg[0] == "add":
                self._add(*msg[1:])
            else:
                self._abort(msg[1])
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _add(self, live: _Live, rid: str, prompt_ids: list[int], params: SamplingParams) -> None:
        if live.sub._closed:  # the client left before its request got here
            return
        try:
            self.engine.add_request(prompt_ids, params, request_id=rid)
        except ShapeflowError as err:
            live.sub.post(APIError(400, err.message, code="invalid_request"))
            return
        except Exception as err:
            log.exception("engine.add_request failed")
            live.sub.post(APIError(500, f"The engine failed on this request: "
                                        f"{type(err).__name__}: {err}", type="server_error"))
            return
        self._live[rid] = live
        live.sub.post("added")

    def _abort(self, rid: str) -> None:
        if self._live.pop(rid, None) is not None:
            try:
                self.engine.abort(rid)
            except Exception:
                log.exception("engine.abort(%r) failed", rid)

    def _step(self) -> None:
        try:
            outs = self.engine.step()
        except Exception as err:
            # which request broke the step is unknown, and the state of the ones in it with
            # it: fail them all, free their blocks, keep serving the next
            log.exception("engine.step failed")
            self._fail(list(self._live), APIError(
                500, f"The engine failed while running this request: {type(err).__name__}: "
                     f"{err}", type="server_error"))
            return
        if outs and self._sent is not None:  # the loop has the last step's outputs first
            sent, posted = self._sent
            self._sent = None
            wait = SEND_WAIT_S - (time.perf_counter() - posted)
            if wait > 0:
                sent.wait(wait)
        now = time.perf_counter()
        m = self.metrics
        loop = None
        for out in outs:
            live = self._live.get(out.request_id)
            if live is None:
                continue  # aborted meanwhile
            new = sum(len(c.delta_token_ids) for c in out.outputs)
            if new:
                if live.first is None:
                    live.first = now
                    m.ttft.observe(now - live.arrival)
                else:
                    m.itl.observe(now - live.last)
                live.last = now
                m.generation_tokens.inc(new)
            if out.finished:
                del self._live[out.request_id]
                m.e2e.observe(now - live.arrival)
                for c in out.outputs:
                    m.success.inc(finished_reason=c.finish_reason or "abort")
            live.sub.post((live.index, _snapshot(out)))
            loop = live.sub.loop
        if loop is not None:
            sent = threading.Event()
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody to wait for
                loop.call_soon_threadsafe(sent.set)  # runs after the posts: they are queued
                self._sent = sent, time.perf_counter()

    def _fail(self, rids: list[str], err: APIError) -> None:
        for rid in rids:
            live = self._live.get(rid)
            self._abort(rid)
            if live is not None:
                live.sub.post(err)

    def _drain_adds(self) -> None:
        """After a stop: requests that never reached the engine fail too."""
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return
            if msg[0] == "add":
                msg[1].sub.post(APIError(503, "The server is shutting down",
                                         type="server_error"))

    def _publish(self) -> None:
        try:
            stats = self.engine.stats()
        except Exception:
            log.exception("engine.stats failed")
            return
        self._stats = stats
        self.metrics.update_engine(stats)


def _snapshot(out: RequestOutput) -> RequestOutput:
    """A copy the server's loop can read while the engine goes on (it may reuse objects)."""
    outputs = [replace(c, token_ids=list(c.token_ids), delta_token_ids=list(c.delta_token_ids))
               for c in out.outputs]
    return replace(out, outputs=outputs, prompt_token_ids=out.prompt_token_ids)
