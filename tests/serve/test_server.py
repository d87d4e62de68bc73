"""`shapeflow serve`'s HTTP server against the official `openai` client, on loopback.

A tiny random-weight GPT with a character vocabulary; greedy answers must equal
`GPT.generate(do_sample=False)`. Each server runs in a thread (uvicorn) and is stopped in a
finally; each HTTP call has a timeout.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import string
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn

import shapeflow as sf
from shapeflow.models import GPT
from shapeflow.serve.engine import Engine
from shapeflow.serve.protocol import chat_prompt
from shapeflow.serve.server import make_app
from shapeflow.serve.tokenizer import CharTokenizer

VOCAB = string.printable
CONFIG = dict(vocab_size=len(VOCAB), block_size=64, n_layer=2, n_head=2, n_embd=32)
NAME = "tiny-char"
TIMEOUT = 30.0  # seconds, any one HTTP call


@pytest.fixture(scope="module")
def model():
    sf.manual_seed(0)
    return GPT(**CONFIG).eval()


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer(VOCAB)


def greedy(model, tok, prompt: str, n: int) -> str:
    """The reference: GPT.generate(do_sample=False), decoded."""
    ids = tok.encode(prompt)
    out = model.generate(sf.tensor([ids]), n, do_sample=False)
    return tok.decode(out[0].tolist()[len(ids):])


def make_engine(model, tok, **kw) -> Engine:
    kw.setdefault("num_blocks", 64)
    return Engine(model, tok, block_size=8, seed=0, **kw)


def slowed(engine: Engine, seconds: float) -> Engine:
    """The engine with each step taking at least `seconds` (time for a client to leave)."""
    step = engine.step

    def slow_step():
        time.sleep(seconds)
        return step()

    engine.step = slow_step
    return engine


@contextlib.contextmanager
def running_server(engine, **kw):
    """(base URL, app) of a uvicorn server in a thread, on a free loopback port; stopped
    (its engine thread with it) on exit."""
    app = make_app(engine, model_name=NAME, **kw)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        assert not thread.is_alive(), "server did not stop"
        assert not app.state.server.engine.alive, "engine thread did not stop"


def client(url: str, api_key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, timeout=TIMEOUT, max_retries=0)


# ---- Prometheus text, parsed strictly enough to catch a malformed exposition ----

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|'
                     r'\\.)*",?)*\})? (\S+)$')


def parse_prometheus(text: str) -> tuple[dict, dict]:
    """({(name, labels): value}, {family: type}); asserts the format and the histograms."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            types[family] = kind
        elif line.startswith("# HELP ") or not line:
            continue
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a Prometheus sample line: {line!r}"
            labels = tuple(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            samples[(m.group(1), labels)] = float(m.group(3))
    for family, kind in types.items():
        if kind == "histogram":
            buckets = sorted(((float(dict(lab)["le"]), v) for (n, lab), v in samples.items()
                              if n == family + "_bucket"))
            assert buckets and math.isinf(buckets[-1][0]), family
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), f"{family}: buckets not cumulative"
            assert counts[-1] == samples[(family + "_count", ())], family
    return samples, types


def metrics(url: str) -> dict:
    r = httpx.get(f"{url}/metrics", timeout=TIMEOUT)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return parse_prometheus(r.text)[0]


def wait_for_pool_full(url: str, timeout: float = 20.0) -> dict:
    """Poll /metrics until no request runs or waits and every KV block is free."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(url)
        idle = (m[("shapeflow_num_requests_running", ())] == 0
                and m[("shapeflow_num_requests_waiting", ())] == 0
                and m[("shapeflow_kv_cache_blocks_free", ())]
                == m[("shapeflow_kv_cache_blocks_total", ())])
        if idle:
            return m
        assert time.monotonic() < deadline, f"the pool never came back: {m}"
        time.sleep(0.05)


# ---- completions ----

def test_completion_greedy_equals_generate(model, tok):
    prompt = "Hello world"
    want = greedy(model, tok, prompt, 12)
    with running_server(make_engine(model, tok)) as (url, _):
        r = client(url).completions.create(model=NAME, prompt=prompt, max_tokens=12,
                                           temperature=0, user="someone")
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.model == NAME
    assert isinstance(r.created, int) and abs(r.created - time.time()) < 120
    assert [c.index for c in r.choices] == [0]
    assert r.choices[0].text == want
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == \
        (len(prompt), 12, len(prompt) + 12)


def test_completion_stream_with_usage(model, tok):
    prompt = "stream me"
    want = greedy(model, tok, prompt, 10)
    with running_server(make_engine(model, tok)) as (url, _):
        chunks = list(client(url).completions.create(
            model=NAME, prompt=prompt, max_tokens=10, temperature=0, stream=True,
            stream_options={"include_usage": True}))
        # the raw framing: `data: {json}` events, a usage chunk, then `data: [DONE]`
        with httpx.stream("POST", f"{url}/v1/completions", timeout=TIMEOUT, json={
                "model": NAME, "prompt": prompt, "max_tokens": 3, "temperature": 0,
                "stream": True}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            raw = r.read().decode()
    text_chunks, usage_chunk = chunks[:-1], chunks[-1]
    assert "".join(c.choices[0].text for c in text_chunks) == want
    assert all(c.usage is None and c.object == "text_completion" for c in text_chunks)
    assert text_chunks[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in text_chunks[:-1])
    assert usage_chunk.choices == []
    assert (usage_chunk.usage.prompt_tokens, usage_chunk.usage.completion_tokens) == \
        (len(prompt), 10)
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: {") for e in events[:-2])
    assert '"usage"' not in raw  # no include_usage: no usage field at all


def test_echo_and_token_id_prompts(model, tok):
    prompt = "abc def"
    want = greedy(model, tok, prompt, 5)
    with running_server(make_engine(model, tok)) as (url, _):
        c = client(url)
        echoed = c.completions.create(model=NAME, prompt=prompt, max_tokens=5, temperature=0,
                                      echo=True)
        by_ids = c.completions.create(model=NAME, prompt=tok.encode(prompt), max_tokens=5,
                                      temperature=0)
        streamed = c.completions.create(model=NAME, prompt=prompt, max_tokens=5, temperature=0,
                                        echo=True, stream=True)
        streamed = "".join(ch.choices[0].text for ch in streamed)
    assert echoed.choices[0].text == streamed == prompt + want
    assert by_ids.choices[0].text == want


def test_n2_and_several_prompts(model, tok):
    prompts = ["first one", "second"]
    want = [greedy(model, tok, p, 6) for p in prompts]
    with running_server(make_engine(model, tok)) as (url, _):
        c = client(url)
        r = c.completions.create(model=NAME, prompt=prompts, n=2, max_tokens=6, temperature=0)
        sampled = [c.completions.create(model=NAME, prompt="seeded", n=2, max_tokens=8,
                                        temperature=1.0, seed=7) for _ in range(2)]
        stream = list(c.completions.create(model=NAME, prompt=prompts, n=2, max_tokens=6,
                                           temperature=0, stream=True))
    # choice i * n + j: prompt i's completion j
    assert [ch.index for ch in r.choices] == [0, 1, 2, 3]
    assert [ch.text for ch in r.choices] == [want[0], want[0], want[1], want[1]]
    assert r.usage.prompt_tokens == sum(map(len, prompts))
    assert r.usage.completion_tokens == 4 * 6
    # a seed makes a request's draws reproducible
    assert [ch.text for ch in sampled[0].choices] == [ch.text for ch in sampled[1].choices]
    assert all(len(ch.text) == 8 for ch in sampled[0].choices)
    streamed = {k: "" for k in range(4)}
    for ch in stream:
        for choice in ch.choices:
            streamed[choice.index] += choice.text
    assert list(streamed.values()) == [want[0], want[0], want[1], want[1]]


def test_n2_completions_that_end_at_different_steps(model, tok):
    """A finished completion is listed again while its sibling runs: counted and ended once."""
    from shapeflow.serve import SamplingParams

    stop = list(string.ascii_lowercase)
    offline = make_engine(model, tok)
    for seed in range(50):  # a seed whose two completions stop at different lengths
        params = SamplingParams(n=2, temperature=1.0, seed=seed, max_tokens=20, stop=stop)
        want = offline.generate(["sampled"], params)[0].outputs
        if len({len(c.token_ids) for c in want}) == 2:
            break
    else:
        pytest.fail("no seed of 50 made the completions end apart")
    kw = dict(model=NAME, prompt="sampled", n=2, temperature=1.0, seed=seed, max_tokens=20,
              stop=stop)
    with running_server(make_engine(model, tok)) as (url, _):
        c = client(url)
        r = c.completions.create(**kw)
        chunks = list(c.completions.create(stream=True, stream_options={"include_usage": True},
                                           **kw))
    assert [ch.text for ch in r.choices] == [w.text for w in want]
    assert [ch.finish_reason for ch in r.choices] == [w.finish_reason for w in want]
    assert r.usage.completion_tokens == sum(len(w.token_ids) for w in want)
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    ends = [ch.choices[0].index for ch in chunks[:-1] if ch.choices[0].finish_reason]
    assert sorted(ends) == [0, 1]  # one finishing chunk per choice
    for k in (0, 1):
        assert "".join(ch.choices[0].text for ch in chunks[:-1]
                       if ch.choices[0].index == k) == want[k].text


def test_stop_string(model, tok):
    prompt = "stop test"
    full = greedy(model, tok, prompt, 20)
    stop = full[5:7]  # a string the greedy answer meets
    cut = full[:full.index(stop)]
    with running_server(make_engine(model, tok)) as (url, _):
        r = client(url).completions.create(model=NAME, prompt=prompt, max_tokens=20,
                                           temperature=0, stop=[stop])
    assert r.choices[0].text == cut
    assert r.choices[0].finish_reason == "stop"


def test_bpe_tokenizer_text_equals_the_offline_engine():
    """A byte-level BPE (multi-byte characters split across tokens): the server relays
    exactly what `Engine.generate` makes, streamed or not."""
    import tokenizers

    from shapeflow.serve import SamplingParams
    from shapeflow.serve.tokenizer import HFTokenizer

    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(["Unicode: héllo wörld, naïve café, 😀 and ünïcödé."] * 4,
                            vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    tok = HFTokenizer(bpe)
    sf.manual_seed(1)
    bpe_model = GPT(**dict(CONFIG, vocab_size=tok.vocab_size)).eval()
    prompt = "naïve café 😀"
    # sampled (seeded): bytes of split characters, not one token repeated as greedy gives
    params = SamplingParams(max_tokens=16, temperature=1.0, seed=5, ignore_eos=True)
    want = Engine(bpe_model, tok, block_size=8, num_blocks=32).generate([prompt], params)
    want = want[0].outputs[0].text
    with running_server(make_engine(bpe_model, tok)) as (url, _):
        c = client(url)
        kw = dict(model=NAME, prompt=prompt, max_tokens=16, temperature=1.0, seed=5,
                  extra_body={"ignore_eos": True})
        r = c.completions.create(**kw)
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(stream=True, **kw))
    assert r.choices[0].text == streamed == want
    assert len(set(want)) > 5 and r.usage.completion_tokens == 16
    assert r.usage.prompt_tokens == len(tok.encode(prompt)) < len(prompt.encode())


# ---- chat ----

def test_chat_stream_and_not(model, tok):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    prompt = chat_prompt(messages)
    assert prompt == "system: be brief\nuser: hi\nassistant:"
    want = greedy(model, tok, prompt, 9)
    with running_server(make_engine(model, tok)) as (url, _):
        c = client(url)
        r = c.chat.completions.create(model=NAME, messages=messages, max_tokens=9,
                                      temperature=0)
        chunks = list(c.chat.completions.create(model=NAME, messages=messages, max_tokens=9,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        # no max_tokens: up to the context (64 tokens)
        long = c.chat.completions.create(model=NAME, messages=messages, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == 9
    first, *middle, last_choice, usage = chunks
    assert first.object == "chat.completion.chunk"
    assert first.choices[0].delta.role == "assistant" and first.choices[0].delta.content == ""
    assert "".join(ch.choices[0].delta.content for ch in middle) == want
    assert all(ch.choices[0].delta.role is None for ch in middle)
    assert last_choice.choices[0].finish_reason == "length"
    assert last_choice.choices[0].delta.content is None
    assert usage.choices == [] and usage.usage.completion_tokens == 9
    assert long.usage.completion_tokens == CONFIG["block_size"] - len(prompt)
    assert long.choices[0].message.content == greedy(model, tok, prompt,
                                                     long.usage.completion_tokens)


# ---- many at once ----

def test_concurrent_requests_all_correct(model, tok):
    prompts = [f"request {i}: " + "xyz"[: i % 3] for i in range(8)]
    lengths = [4 + 3 * (i % 4) for i in range(8)]
    want = [greedy(model, tok, p, n) for p, n in zip(prompts, lengths)]
    with running_server(make_engine(model, tok, max_num_seqs=4)) as (url, _):
        c = client(url)

        def ask(i):
            if i % 2:
                return "".join(ch.choices[0].text for ch in c.completions.create(
                    model=NAME, prompt=prompts[i], max_tokens=lengths[i], temperature=0,
                    stream=True))
            return c.completions.create(model=NAME, prompt=prompts[i], max_tokens=lengths[i],
                                        temperature=0).choices[0].text

        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(ask, range(8)))
        m = wait_for_pool_full(url)
    assert got == want
    assert m[("shapeflow_request_success_total", (("finished_reason", "length"),))] == 8
    assert m[("shapeflow_generation_tokens_total", ())] == sum(lengths)


# ---- models, health, metrics ----

def test_models_health_and_metrics(model, tok):
    prompt = "count me in, please"
    with running_server(make_engine(model, tok)) as (url, _):
        c = client(url)
        listed = c.models.list()
        assert [m.id for m in listed.data] == [NAME]
        assert c.models.retrieve(NAME).id == NAME
        health = httpx.get(f"{url}/health", timeout=TIMEOUT)
        assert health.status_code == 200
        before, types = parse_prometheus(httpx.get(f"{url}/metrics", timeout=TIMEOUT).text)
        for _ in range(2):
            c.completions.create(model=NAME, prompt=prompt, max_tokens=7, temperature=0)
        after = wait_for_pool_full(url)
    for name, kind in [("shapeflow_time_to_first_token_seconds", "histogram"),
                       ("shapeflow_inter_token_latency_seconds", "histogram"),
                       ("shapeflow_num_requests_running", "gauge"),
                       ("shapeflow_num_requests_waiting", "gauge"),
                       ("shapeflow_kv_cache_blocks_used", "gauge"),
                       ("shapeflow_kv_cache_blocks_free", "gauge"),
                       ("shapeflow_prefix_cache_queries_total", "counter"),
                       ("shapeflow_prefix_cache_hits_total", "counter"),
                       ("shapeflow_prefix_cache_hit_rate", "gauge"),
                       ("shapeflow_requests_received_total", "counter")]:
        assert types[name] == kind, name

    def moved(name):
        return after[(name, ())] - before[(name, ())]

    assert moved("shapeflow_time_to_first_token_seconds_count") == 2
    assert moved("shapeflow_inter_token_latency_seconds_count") == 2 * 6  # 7 tokens: 6 gaps
    assert moved("shapeflow_requests_received_total") == 2
    assert moved("shapeflow_generation_tokens_total") == 14
    assert moved("shapeflow_prompt_tokens_total") == 2 * len(prompt)
    assert moved("shapeflow_prefix_cache_queries_total") > 0
    # the second request's prompt was the first's: its full blocks came from the cache
    assert moved("shapeflow_prefix_cache_hits_total") > 0
    rate = after[("shapeflow_prefix_cache_hit_rate", ())]
    assert rate == pytest.approx(after[("shapeflow_prefix_cache_hits_total", ())]
                                 / after[("shapeflow_prefix_cache_queries_total", ())])


# ---- a client that leaves ----

def test_disconnect_mid_stream_frees_blocks(model, tok):
    with running_server(slowed(make_engine(model, tok), 0.01)) as (url, _):
        m0 = metrics(url)
        with httpx.stream("POST", f"{url}/v1/completions", timeout=TIMEOUT, json={
                "model": NAME, "prompt": "a long one", "max_tokens": 50, "temperature": 0,
                "stream": True}) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: {")  # it is generating...
            m1 = metrics(url)
            assert m1[("shapeflow_kv_cache_blocks_used", ())] > 0
        # ...and the client hangs up with ~45 tokens to go
        m2 = wait_for_pool_full(url)
    assert m2[("shapeflow_kv_cache_blocks_free", ())] == m0[("shapeflow_kv_cache_blocks_total", ())]
    assert m2.get(("shapeflow_request_success_total", (("finished_reason", "length"),)), 0) == 0
    assert m2[("shapeflow_generation_tokens_total", ())] < 50


def test_disconnect_while_waiting_non_stream(model, tok):
    """A non-streamed request is aborted too when its client gives up."""
    with running_server(slowed(make_engine(model, tok), 0.02)) as (url, _):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/completions", timeout=httpx.Timeout(TIMEOUT, read=0.3),
                       json={"model": NAME, "prompt": "x", "max_tokens": 63,
                             "temperature": 0, "ignore_eos": True, "top_k": 1})
        m = wait_for_pool_full(url)
    assert m.get(("shapeflow_request_success_total", (("finished_reason", "length"),)), 0) == 0


# ---- the command ----

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_a_checkpoint_and_shuts_down(model, tmp_path: Path):
    ckpt = tmp_path / "tiny.sf"
    sf.save({"model": model.state_dict(), "config": CONFIG, "vocab": VOCAB}, str(ckpt))
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "shapeflow", "serve", str(ckpt), "--port",
                             str(port), "--api-key", "sekrit", "--block-size", "8",
                             "--model-name", "tiny", "--max-prefill-tokens-per-step", "8",
                             "--log-level", "warning"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "shapeflow serve did not come up"
            time.sleep(0.1)
        r = client(url, "sekrit").completions.create(model="tiny", prompt="Hi", max_tokens=5,
                                                     temperature=0)
        assert r.choices[0].text == greedy(model, CharTokenizer(VOCAB), "Hi", 5)
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong").models.list()
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a graceful shutdown, status 0
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert f"serving tiny (context 64 tokens) on {url}/v1" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_metrics_exposition_by_hand():
    from shapeflow.serve.metrics import Counter, Histogram, ServerMetrics

    h = Histogram("x_seconds", "help", (0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 3.0):
        h.observe(v)
    samples, types = parse_prometheus(h.render())
    assert types == {"x_seconds": "histogram"}
    assert [samples[("x_seconds_bucket", (("le", le),))] for le in ("0.1", "1", "+Inf")] == \
        [2, 3, 4]
    assert samples[("x_seconds_sum", ())] == pytest.approx(3.65)
    c = Counter("y_total", "help", ("reason",))
    c.inc(reason='a "quoted"\nvalue')
    c.set_total(5, reason="b")
    c.set_total(3, reason="b")  # a total that would go down is ignored
    with pytest.raises(ValueError):
        c.inc(-1, reason="b")
    samples, _ = parse_prometheus(c.render())
    assert samples[("y_total", (("reason", "b"),))] == 5
    assert samples[("y_total", (("reason", r'a \"quoted\"\nvalue'),))] == 1
    m = ServerMetrics()
    m.update_engine({"kv_blocks_total": 10, "kv_blocks_used": 4, "kv_blocks_free": 6,
                     "prefix_cache_queries": 8, "prefix_cache_hits": 2})
    samples, _ = parse_prometheus(m.render())
    assert samples[("shapeflow_prefix_cache_hit_rate", ())] == 0.25
    assert samples[("shapeflow_kv_cache_usage_perc", ())] == 0.4
