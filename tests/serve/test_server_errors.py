"""Bad requests get OpenAI's error JSON with the right status, and the server lives on."""

from __future__ import annotations

import json
import sys
import threading

import httpx
import openai
import pytest

from shapeflow.errors import ShapeflowError
from shapeflow.serve.protocol import APIError, ModelInfo, parse_chat, parse_completion
from tests.serve.test_server import (
    CONFIG,
    NAME,
    TIMEOUT,
    client,
    greedy,
    make_engine,
    model,
    running_server,
    slowed,
    tok,
    wait_for_pool_full,
)

__all__ = ["model", "tok"]  # the fixtures, shared with test_server.py

CONTEXT = CONFIG["block_size"]


@pytest.fixture(scope="module")
def url(model, tok):
    with running_server(make_engine(model, tok)) as (base, _):
        yield base


def post(url: str, path: str, body, **kw) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{url}{path}", content=data, timeout=TIMEOUT,
                      headers={"Content-Type": "application/json", **kw.pop("headers", {})},
                      **kw)


def error_of(r: httpx.Response, status: int) -> dict:
    """The response's OpenAI error object, after checking its status and shape."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    return err


def completion(**kw) -> dict:
    return {"model": NAME, "prompt": "hello", "max_tokens": 4, "temperature": 0, **kw}


# ---- the request itself ----

def test_malformed_json_is_400(url):
    err = error_of(post(url, "/v1/completions", b'{"model": "tiny-char", "prompt": '), 400)
    assert err["type"] == "invalid_request_error" and "JSON" in err["message"]
    error_of(post(url, "/v1/completions", b"[1, 2]"), 400)  # JSON, but no object
    error_of(post(url, "/v1/chat/completions", b"\xff\xfe"), 400)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_unknown_or_missing_model(url, path):
    body = completion(model="gpt-9") if "chat" not in path else {
        "model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}
    err = error_of(post(url, path, body), 404)
    assert err["code"] == "model_not_found" and "gpt-9" in err["message"]
    del body["model"]
    assert error_of(post(url, path, body), 400)["param"] == "model"
    with pytest.raises(openai.NotFoundError):
        client(url).completions.create(model="gpt-9", prompt="hi", max_tokens=2)


def test_prompt_longer_than_context(url):
    err = error_of(post(url, "/v1/completions", completion(prompt="a" * CONTEXT)), 400)
    assert err["code"] == "context_length_exceeded" and err["param"] == "prompt"
    assert f"maximum context length is {CONTEXT} tokens" in err["message"]
    # prompt + max_tokens asked for beyond the context
    err = error_of(post(url, "/v1/completions",
                        completion(prompt="a" * (CONTEXT - 10), max_tokens=11)), 400)
    assert err["code"] == "context_length_exceeded"
    assert f"you requested {CONTEXT + 1} tokens" in err["message"]
    long_chat = {"model": NAME, "messages": [{"role": "user", "content": "b" * CONTEXT}]}
    err = error_of(post(url, "/v1/chat/completions", long_chat), 400)
    assert err["code"] == "context_length_exceeded" and err["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        client(url).completions.create(model=NAME, prompt="a" * CONTEXT, max_tokens=2)
    # exactly up to the context is fine
    r = post(url, "/v1/completions", completion(prompt="a" * (CONTEXT - 10), max_tokens=10))
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 10


@pytest.mark.parametrize("bad", [
    {"max_tokens": 0}, {"max_tokens": -5}, {"max_tokens": "ten"}, {"max_tokens": 2.5},
    {"temperature": 2.5}, {"temperature": -0.1}, {"temperature": "hot"},
    {"top_p": 0}, {"top_p": 1.5}, {"n": 0}, {"n": 1000}, {"stop": [""]}, {"stop": 3},
    {"logprobs": 2}, {"logprobs": 0}, {"suffix": "x"}, {"presence_penalty": 0.5},
    {"best_of": 3}, {"stream_options": {"include_usage": True}},  # without stream
    {"prompt": []}, {"prompt": ""}, {"prompt": [[]]}, {"prompt": {"text": "x"}},
    {"prompt": [1, 2, 999]}, {"prompt": "snowman \u2603"},  # a character not in the vocab
    {"stream": "yes"}, {"echo": 1},
])
def test_bad_completion_values_are_400(url, bad):
    err = error_of(post(url, "/v1/completions", completion(**bad)), 400)
    assert err["type"] == "invalid_request_error"
    key = next(iter(bad))
    if key not in ("stream_options",):
        assert err["param"] == key, err


@pytest.mark.parametrize("bad", [
    {"messages": []}, {"messages": "hi"}, {"messages": [{"content": "no role"}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
    {"max_completion_tokens": 0}, {"logprobs": True}, {"top_logprobs": 2},
    {"tools": [{"type": "function", "function": {"name": "f"}}]},
    {"response_format": {"type": "json_object"}},
])
def test_bad_chat_values_are_400(url, bad):
    body = {"model": NAME, "messages": [{"role": "user", "content": "hi"}], **bad}
    error_of(post(url, "/v1/chat/completions", body), 400)


def test_chat_content_parts_and_user_are_accepted(url, model, tok):
    body = {"model": NAME, "max_tokens": 3, "temperature": 0, "user": "u-1", "logprobs": False,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "h"},
                                                      {"type": "text", "text": "i"}]}]}
    r = post(url, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == \
        greedy(model, tok, "user: hi\nassistant:", 3)


def test_unknown_route_and_method(url):
    err = error_of(httpx.get(f"{url}/v1/engines", timeout=TIMEOUT), 404)
    assert err["type"] == "not_found_error"
    error_of(httpx.get(f"{url}/v1/completions", timeout=TIMEOUT), 405)
    error_of(httpx.get(f"{url}/v1/models/nope", timeout=TIMEOUT), 404)


def test_a_request_the_pool_cannot_hold_is_400_streamed_or_not(model, tok):
    with running_server(make_engine(model, tok, num_blocks=4)) as (url, _):  # 32 tokens
        body = completion(prompt="a" * 10, max_tokens=40)  # in the context, not the pool
        err = error_of(post(url, "/v1/completions", body), 400)
        assert err["type"] == "invalid_request_error" and "blocks" in err["message"]
        error_of(post(url, "/v1/completions", {**body, "stream": True}), 400)
        assert post(url, "/v1/completions", completion(max_tokens=20)).status_code == 200
        wait_for_pool_full(url)


# ---- limits ----

def test_body_over_the_limit_is_413(model, tok):
    with running_server(make_engine(model, tok), max_body_bytes=2048) as (url, _):
        err = error_of(post(url, "/v1/completions", completion(prompt="a" * 4000)), 413)
        assert err["code"] == "request_too_large"

        # no Content-Length (chunked): counted as it arrives
        def chunks():
            yield b'{"model": "tiny-char", "prompt": "'
            for _ in range(10):
                yield b"a" * 500
            yield b'"}'

        r = httpx.post(f"{url}/v1/completions", content=chunks(), timeout=TIMEOUT)
        error_of(r, 413)
        assert post(url, "/v1/completions", completion()).status_code == 200


def test_too_many_concurrent_requests_is_429(model, tok):
    engine = slowed(make_engine(model, tok), 0.01)
    with running_server(engine, max_requests=2) as (url, _):
        streams, opened = [], []
        try:
            for _ in range(2):  # two long streams hold both places
                s = httpx.stream("POST", f"{url}/v1/completions", timeout=TIMEOUT, json=completion(
                    max_tokens=60, stream=True, prompt="hold"))
                r = s.__enter__()
                streams.append(s)
                assert r.status_code == 200
                opened.append(r.iter_lines())  # kept: a dropped iterator closes the stream
                assert next(opened[-1]).startswith("data: {")
            r = post(url, "/v1/completions", completion())
            err = error_of(r, 429)
            assert err["code"] == "rate_limit_exceeded" and "Retry-After" in r.headers
            # a request of two prompts needs two places too
            error_of(post(url, "/v1/completions", completion(prompt=["a", "b"])), 429)
            with pytest.raises(openai.RateLimitError):
                client(url).completions.create(model=NAME, prompt="x", max_tokens=1)
        finally:
            for s in streams:
                s.__exit__(None, None, None)
        wait_for_pool_full(url)  # the two left: their places are free again
        assert post(url, "/v1/completions", completion()).status_code == 200


def test_api_key(model, tok):
    with running_server(make_engine(model, tok), api_key="s3cret") as (url, _):
        err = error_of(post(url, "/v1/completions", completion()), 401)
        assert err["code"] == "missing_api_key"
        bad = {"Authorization": "Bearer nope"}
        assert error_of(post(url, "/v1/completions", completion(), headers=bad),
                        401)["code"] == "invalid_api_key"
        error_of(httpx.get(f"{url}/v1/models", headers=bad, timeout=TIMEOUT), 401)
        with pytest.raises(openai.AuthenticationError):
            client(url, "nope").completions.create(model=NAME, prompt="hi", max_tokens=2)
        ok = client(url, "s3cret").completions.create(model=NAME, prompt="hi", max_tokens=2)
        assert len(ok.choices[0].text) == 2
        # health and metrics stay open (a load balancer's probes, Prometheus' scrapes)
        assert httpx.get(f"{url}/health", timeout=TIMEOUT).status_code == 200
        assert httpx.get(f"{url}/metrics", timeout=TIMEOUT).status_code == 200


# ---- the engine failing ----

def test_engine_failure_is_500_and_the_server_lives_on(model, tok):
    engine = make_engine(model, tok)
    step, fail = engine.step, threading.Event()

    def flaky_step():
        if fail.is_set():
            fail.clear()
            raise RuntimeError("boom inside the engine")
        return step()

    engine.step = flaky_step
    with running_server(engine) as (url, _):
        fail.set()
        err = error_of(post(url, "/v1/completions", completion()), 500)
        assert err["type"] == "server_error" and "boom" in err["message"]
        wait_for_pool_full(url)  # the failed request's blocks came back
        fail.set()  # mid-stream: the error arrives as an event, then [DONE]
        with httpx.stream("POST", f"{url}/v1/completions", timeout=TIMEOUT,
                          json=completion(stream=True)) as r:
            events = [e for e in r.read().decode().split("\n\n") if e]
        assert json.loads(events[-2].removeprefix("data: "))["error"]["type"] == "server_error"
        assert events[-1] == "data: [DONE]"
        # and the next requests are served, correctly
        r = post(url, "/v1/completions", completion(prompt="after", max_tokens=6))
        assert r.status_code == 200
        assert r.json()["choices"][0]["text"] == greedy(model, tok, "after", 6)
        assert httpx.get(f"{url}/health", timeout=TIMEOUT).status_code == 200


# ---- checks below HTTP, and the command without its extra ----

def test_parse_defaults():
    from shapeflow.serve.tokenizer import CharTokenizer

    info = ModelInfo(NAME, CharTokenizer("abc :\nusertmin"), 20)
    req = parse_completion({"model": NAME, "prompt": "abc"}, info)
    assert req.params[0].max_tokens == 16 and req.params[0].temperature == 1.0
    assert req.prompt_ids == [[0, 1, 2]] and not req.stream
    # near the context: the default 16 shrinks to what fits; chat's default is all of it
    assert parse_completion({"model": NAME, "prompt": "a" * 15}, info).params[0].max_tokens == 5
    chat = parse_chat({"model": NAME, "messages": [{"role": "user", "content": "ab"}]}, info)
    assert chat.prompts == ["user: ab\nassistant:"]
    assert chat.params[0].max_tokens == 20 - len("user: ab\nassistant:")
    with pytest.raises(APIError) as e:
        parse_completion({"model": NAME, "prompt": "abz"}, info)
    assert e.value.status == 400 and "'z'" in e.value.message


def test_serve_without_the_extra_names_it(monkeypatch, capsys, tmp_path):
    from shapeflow.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn -> ImportError
    assert main(["serve", str(tmp_path / "ckpt")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'shapeflow[serve]'" in err and "uvicorn" in err
    assert issubclass(APIError, ShapeflowError)


def test_serve_bad_options(capsys, tmp_path):
    from shapeflow.cli import main

    assert main(["serve", str(tmp_path / "missing.sf")]) == 2
    assert "missing.sf" in capsys.readouterr().err
    assert main(["serve", "x", "--max-num-seqs", "0"]) == 2
    assert "--max-num-seqs" in capsys.readouterr().err
