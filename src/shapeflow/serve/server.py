"""The OpenAI-compatible HTTP server: a starlette ASGI app over an AsyncEngine, run by uvicorn.

Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models (and /v1/models/ID),
GET /health, GET /metrics. With an api_key, the /v1 routes want `Authorization: Bearer KEY`.
A client that disconnects (mid-stream or while waiting) aborts its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import protocol as P
from .async_engine import AsyncEngine, Submission
from .metrics import CONTENT_TYPE, ServerMetrics

log = logging.getLogger("shapeflow.serve")

MAX_BODY_BYTES = 4 << 20  # a 2,048-token prompt as JSON ids is ~12 KB; this leaves room
DEFAULT_MAX_REQUESTS = 256


class _EventStream(StreamingResponse):
    """Server-Sent Events that always watch for the client leaving (whatever ASGI version
    the server speaks), and run `on_close` however the stream ends."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(content, headers={"Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
        self.on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            async with anyio.create_task_group() as tg:
                async def run_then_stop(func) -> None:
                    await func()
                    tg.cancel_scope.cancel()

                tg.start_soon(run_then_stop, partial(self.stream_response, send))
                await run_then_stop(partial(self.listen_for_disconnect, receive))
        finally:
            self.on_close()


async def _disconnected(receive) -> None:
    """Returns when the client has gone (call after the body is read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class OpenAIServer:
    """The routes and what they share: the engine, the model's description, the limits."""

    def __init__(self, engine: AsyncEngine, info: P.ModelInfo, *, api_key: str | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.engine, self.info = engine, info
        self.api_key, self.max_body_bytes = api_key, max_body_bytes
        self.metrics: ServerMetrics = engine.metrics
        self.created = int(time.time())

    # ---- what every /v1 route does first ----

    def _authorize(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise P.APIError(401, "You didn't provide an API key. You need to provide your API "
                             "key in an Authorization header using Bearer auth (i.e. "
                             "Authorization: Bearer YOUR_KEY).", code="missing_api_key")
        if not hmac.compare_digest(token.strip().encode(), self.api_key.encode()):
            raise P.APIError(401, "Incorrect API key provided.", code="invalid_api_key")

    async def _json(self, request: Request) -> dict:
        limit = self.max_body_bytes
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise _too_large(int(length), limit)
        body, size = [], 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise _too_large(size, limit)
            body.append(part)
        return P.parse_json(b"".join(body))

    # ---- routes ----

    async def completions(self, request: Request) -> Response:
        self._authorize(request)
        return await self._generate(request, P.parse_completion(await self._json(request),
                                                                self.info))

    async def chat(self, request: Request) -> Response:
        self._authorize(request)
        return await self._generate(request, P.parse_chat(await self._json(request), self.info))

    async def models(self, request: Request) -> Response:
        self._authorize(request)
        return JSONResponse(P.models_response(self.info, self.created))

    async def model(self, request: Request) -> Response:
        self._authorize(request)
        name = request.path_params["model"]
        if name != self.info.name:
            raise P.APIError(404, f"The model `{name}` does not exist", param="model",
                             code="model_not_found")
        return JSONResponse(P.model_card(self.info, self.created))

    async def health(self, request: Request) -> Response:
        if not self.engine.alive:
            raise P.APIError(503, "The engine is not running", type="server_error")
        return JSONResponse({"status": "ok"})

    async def prometheus(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    # ---- generation ----

    async def _generate(self, request: Request, req: P.GenerationRequest) -> Response:
        sub = self.engine.submit(req.prompt_ids, req.params, req.request_id)
        if req.stream:
            try:
                await sub.ready()  # the engine's refusal is still an error status
            except BaseException:
                sub.close()
                raise
            return _EventStream(self._events(req, sub), on_close=sub.close)
        try:
            work = asyncio.ensure_future(self._collect(req, sub))
            gone = asyncio.ensure_future(_disconnected(request.receive))
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the client left: abort (sub.close below), answer nobody
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
                return Response(status_code=499)
            gone.cancel()
            return JSONResponse(work.result())
        finally:
            sub.close()

    async def _collect(self, req: P.GenerationRequest, sub: Submission) -> dict:
        make = P.chat_choice if req.chat else P.completion_choice
        choices, generated = {}, 0
        async for i, out in sub:
            if out.finished:  # each prompt's last output holds all its completions
                prefix = req.prompts[i] if req.echo else ""
                for c in out.outputs:
                    k = i * req.n + c.index
                    choices[k] = make(k, prefix + c.text, c.finish_reason)
                    generated += len(c.token_ids)
        return P.completion_response(req, [choices[k] for k in sorted(choices)],
                                     self._usage(req, generated))

    def _usage(self, req: P.GenerationRequest, generated: int) -> dict:
        return P.usage(sum(len(p) for p in req.prompt_ids), generated)

    async def _events(self, req: P.GenerationRequest, sub: Submission) -> AsyncIterator[bytes]:
        n, chat = req.n, req.chat
        for i, text in enumerate(req.prompts):
            for j in range(n):
                if chat:  # OpenAI's first chunk: the role, no content yet
                    yield P.sse(P.chunk(req, [P.chat_delta(i * n + j, {"role": "assistant",
                                                                       "content": ""})]))
                elif req.echo:
                    yield P.sse(P.chunk(req, [P.completion_delta(i * n + j, text)]))
        generated, ended = 0, set()
        try:
            async for i, out in sub:
                for c in out.outputs:
                    # an output lists all n completions, the finished ones again each step
                    k = i * n + c.index
                    reason = c.finish_reason if c.finished and k not in ended else None
                    if reason:
                        ended.add(k)
                        generated += len(c.token_ids)
                    if chat:
                        if c.delta_text:
                            yield P.sse(P.chunk(req, [P.chat_delta(k, {"content": c.delta_text})]))
                        if reason:
                            yield P.sse(P.chunk(req, [P.chat_delta(k, {}, reason)]))
                    elif c.delta_text or reason:
                        yield P.sse(P.chunk(req, [P.completion_delta(k, c.delta_text, reason)]))
        except P.APIError as err:  # headers are sent: the error travels as an event
            self.metrics.errors.inc(status=str(err.status))
            yield P.sse(err.body())
            yield P.SSE_DONE
            return
        if req.include_usage:
            yield P.sse(P.chunk(req, [], self._usage(req, generated)))
        yield P.SSE_DONE


def _too_large(size: int, limit: int) -> P.APIError:
    return P.APIError(413, f"The request body is {size} bytes; this server takes at most "
                      f"{limit}", code="request_too_large")


def build_app(engine: AsyncEngine, info: P.ModelInfo, *, api_key: str | None = None,
              max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The ASGI app; its lifespan starts the engine thread and stops it on shutdown."""
    server = OpenAIServer(engine, info, api_key=api_key, max_body_bytes=max_body_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        engine.start()
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)

    async def api_error(request: Request, err: P.APIError) -> Response:
        server.metrics.errors.inc(status=str(err.status))
        headers = {"Retry-After": "1"} if err.status == 429 else None
        if err.status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return JSONResponse(err.body(), status_code=err.status, headers=headers)

    async def http_error(request: Request, err: HTTPException) -> Response:
        server.metrics.errors.inc(status=str(err.status_code))
        kind = "not_found_error" if err.status_code == 404 else "invalid_request_error"
        return JSONResponse(P.error_body(f"{request.method} {request.url.path}: {err.detail}",
                                         kind), status_code=err.status_code)

    async def crash(request: Request, err: Exception) -> Response:
        server.metrics.errors.inc(status="500")
        log.error("request failed", exc_info=err)
        return JSONResponse(P.error_body(f"Internal server error: {type(err).__name__}: {err}",
                                         "server_error"), status_code=500)

    routes = [
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/chat/completions", server.chat, methods=["POST"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{model:path}", server.model, methods=["GET"]),
        Route("/health", server.health, methods=["GET"]),
        Route("/metrics", server.prometheus, methods=["GET"]),
    ]
    handlers: dict[Any, Any] = {P.APIError: api_error, HTTPException: http_error,
                                Exception: crash}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    app.state.server = server
    return app


def make_app(engine: Any, *, api_key: str | None = None, model_name: str | None = None,
             max_requests: int = DEFAULT_MAX_REQUESTS,
             max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The app serving an `sf.serve.Engine` (started with the app, stopped with it)."""
    info = P.ModelInfo(model_name or engine.model_name, engine.tokenizer, engine.max_model_len)
    return build_app(AsyncEngine(engine, max_requests=max_requests), info, api_key=api_key,
                     max_body_bytes=max_body_bytes)


def serve(engine: Any, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          model_name: str | None = None, max_requests: int = DEFAULT_MAX_REQUESTS,
          log_level: str = "info") -> None:
    """Serve `engine` with uvicorn until interrupted (Ctrl-C: a graceful shutdown)."""
    import uvicorn

    app = make_app(engine, api_key=api_key, model_name=model_name, max_requests=max_requests)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
