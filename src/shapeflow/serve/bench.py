"""`shapeflow bench serve`'s client: vLLM's `bench serve` method and metric names.

Streams completions from an OpenAI-compatible server with open-loop arrivals (Poisson, or
Gamma with a burstiness), measures each request's TTFT, inter-token latencies and end-to-end
latency, and reports throughput, percentiles and goodput under the keys vLLM writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, ShapeflowError

# the default prompt alphabet: ASCII letters and space, all in the bundled char corpus
ALPHABET = string.ascii_letters + " "
METRICS = ("ttft", "tpot", "itl", "e2el")
GOODPUT_METRICS = ("ttft", "tpot", "e2el")
_HEADERS = {"ttft": "Time to First Token", "tpot": "Time per Output Token (excl. 1st token)",
            "itl": "Inter-token Latency", "e2el": "End-to-end Latency"}


@dataclass
class SampleRequest:
    """One prompt to send, its length in the server's tokens, and how many tokens to ask for."""

    prompt: str
    prompt_len: int
    expected_output_len: int


@dataclass
class RequestFuncOutput:
    """What one streamed request measured (seconds); `itl` holds the gaps between content
    chunks, `output_tokens` the server's usage count."""

    generated_text: str = ""
    success: bool = False
    latency: float = 0.0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    prompt_len: int = 0
    error: str = ""
    start_time: float = 0.0  # seconds after the benchmark started


# ---- datasets -------------------------------------------------------------------------------

def _text_of_len(rng: np.random.Generator, n: int, tokenizer=None) -> str:
    """A random text of n tokens: n alphabet letters, or n of the tokenizer's ids decoded
    (re-encoded and trimmed until it round-trips, as vLLM's random dataset does)."""
    if n <= 0:
        return ""
    if tokenizer is None:
        return "".join(rng.choice(list(ALPHABET), n))
    bad = {tokenizer.eos_token_id}
    ids: list[int] = []
    text = ""
    for _ in range(16):
        while len(ids) < n:
            ids += [int(i) for i in rng.integers(0, tokenizer.vocab_size, n - len(ids))
                    if int(i) not in bad]
        text = tokenizer.decode(ids[:n])
        ids = list(tokenizer.encode(text))
        if len(ids) == n:
            break
        ids = ids[:n]
    return text


def _length(text: str, tokenizer=None) -> int:
    return len(text) if tokenizer is None else len(tokenizer.encode(text))


def _requests(rng, input_lens, output_lens, prefix_len: int, tokenizer) -> list[SampleRequest]:
    prefix = _text_of_len(rng, prefix_len, tokenizer)
    out = []
    for n_in, n_out in zip(input_lens, output_lens):
        prompt = prefix + _text_of_len(rng, max(int(n_in), 1 if not prefix else 0), tokenizer)
        out.append(SampleRequest(prompt, _length(prompt, tokenizer), int(n_out)))
    return out


def _check_count(num_prompts: int) -> None:
    if isinstance(num_prompts, bool) or not isinstance(num_prompts, int) or num_prompts < 1:
        raise ArgumentError(f"bench: --num-prompts must be an int >= 1, got {num_prompts!r}",
                            op="bench")


def random_requests(num_prompts: int, input_len: int, output_len: int, range_ratio: float = 0.0,
                    prefix_len: int = 0, tokenizer=None, seed: int = 0) -> list[SampleRequest]:
    """vLLM's random dataset: each prompt is `prefix_len` shared tokens, then a unique part of
    uniform length in [input_len*(1-r), input_len*(1+r)]; output lengths likewise."""
    _check_count(num_prompts)
    if not 0 <= range_ratio < 1:
        raise ArgumentError(f"bench: --random-range-ratio must lie in [0, 1), got {range_ratio}",
                            op="bench")
    if input_len < 0 or output_len < 1 or prefix_len < 0 or input_len + prefix_len < 1:
        raise ArgumentError(f"bench: lengths must give prompts of >= 1 token and >= 1 output "
                            f"token (input {input_len}, prefix {prefix_len}, output "
                            f"{output_len})", op="bench")
    rng = np.random.default_rng(seed)

    def lens(n: int, low: int) -> np.ndarray:
        lo, hi = max(int(n * (1 - range_ratio)), low), max(int(n * (1 + range_ratio)), low)
        return rng.integers(lo, hi + 1, num_prompts)

    return _requests(rng, lens(input_len, 0 if prefix_len else 1), lens(output_len, 1),
                     prefix_len, tokenizer)


def longtail_requests(num_prompts: int, input_len: int = 256, output_len: int = 128,
                      sigma: float = 1.0, max_factor: float = 8.0, tokenizer=None,
                      seed: int = 0) -> list[SampleRequest]:
    """A long-tailed length mix: log-normal input and output lengths with medians `input_len`
    and `output_len` and log-space spread `sigma`, capped at `max_factor` x the median."""
    _check_count(num_prompts)
    if input_len < 1 or output_len < 1 or sigma < 0 or max_factor < 1:
        raise ArgumentError("bench: longtail needs lengths >= 1, sigma >= 0, max factor >= 1",
                            op="bench")
    rng = np.random.default_rng(seed)

    def lens(median: int) -> np.ndarray:
        x = np.round(rng.lognormal(math.log(median), sigma, num_prompts))
        return np.clip(x, 1, max(1, int(median * max_factor))).astype(np.int64)

    return _requests(rng, lens(input_len), lens(output_len), 0, tokenizer)


# ---- arrivals -------------------------------------------------------------------------------

def arrival_times(n: int, request_rate: float = math.inf, burstiness: float = 1.0,
                  seed: int = 0) -> np.ndarray:
    """When each of n requests is sent (s after the start): the first at 0, then Gamma gaps of
    shape `burstiness` and mean 1/rate (burstiness 1: Poisson arrivals); rate inf: all at 0."""
    if not request_rate > 0:
        raise ArgumentError(f"bench: --request-rate must be > 0 (inf: all at once), got "
                            f"{request_rate}", op="bench")
    if not burstiness > 0:
        raise ArgumentError(f"bench: --burstiness must be > 0, got {burstiness}", op="bench")
    if math.isinf(request_rate):
        return np.zeros(n)
    rng = np.random.default_rng([seed, 1])
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=n)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])[:n]


# ---- one request ----------------------------------------------------------------------------

def _payload(endpoint: str, model: str, req: SampleRequest, extra: dict | None) -> dict:
    body = {"model": model, "max_tokens": req.expected_output_len, "temperature": 0.0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    if endpoint.rstrip("/").endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": req.prompt}]
        body["max_completion_tokens"] = body.pop("max_tokens")
    else:
        body["prompt"] = req.prompt
    body.update(extra or {})
    return body


def _chunk_text(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    return (choice.get("delta") or {}).get("content") or ""


async def request_completion(client, url: str, payload: dict, headers: dict | None = None,
                             prompt_len: int = 0, t0: float | None = None) -> RequestFuncOutput:
    """Send one streaming request and time its content chunks (server errors are recorded in
    the output, never raised)."""
    out = RequestFuncOutput(prompt_len=prompt_len)
    st = time.perf_counter()
    out.start_time = st - (st if t0 is None else t0)
    last = st
    try:
        async with client.stream("POST", url, json=payload, headers=headers) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode("utf-8", "replace")
                out.error = f"HTTP {resp.status_code}: {body[:500]}"
                return out
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                chunk = json.loads(data)
                if "error" in chunk:
                    out.error = json.dumps(chunk["error"])[:500]
                    return out
                choices = chunk.get("choices") or []
                text = _chunk_text(choices[0]) if choices else ""
                if text:  # a content chunk: the first gives TTFT, the others an ITL each
                    if out.generated_text:
                        out.itl.append(now - last)
                    else:
                        out.ttft = now - st
                    last = now
                    out.generated_text += text
                if usage := chunk.get("usage"):
                    out.output_tokens = int(usage.get("completion_tokens") or 0)
                    out.prompt_len = int(usage.get("prompt_tokens") or prompt_len)
        out.latency = time.perf_counter() - st
        out.success = bool(out.generated_text)
        if not out.success:
            out.error = "the stream ended without any content"
    except Exception as err:  # a network failure is this request's result, not the run's end
        out.error = f"{type(err).__name__}: {err}"
    return out


# ---- metrics --------------------------------------------------------------------------------

def _pword(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def parse_goodput(items: Sequence[str] | None) -> dict[str, float]:
    """`["ttft:200", "tpot:50"]` -> {"ttft": 200.0, "tpot": 50.0} (milliseconds, vLLM's)."""
    slos: dict[str, float] = {}
    for item in items or []:
        name, _, value = item.partition(":")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if name not in GOODPUT_METRICS or not ms >= 0:
            raise ArgumentError(f"bench: --goodput takes NAME:MILLISECONDS with NAME one of "
                                f"{', '.join(GOODPUT_METRICS)}, got {item!r}", op="bench")
        slos[name] = ms
    return slos


def calculate_metrics(outputs: Sequence[RequestFuncOutput], duration_s: float,
                      percentile_metrics: Sequence[str] = METRICS,
                      percentiles: Sequence[float] = (90, 99),
                      goodput: dict[str, float] | None = None, tokenizer=None) -> dict:
    """vLLM's result keys from the requests' measurements: counts, throughputs, goodput and
    mean / median / std / pN of each latency metric in ms (TPOT of requests with > 1 token)."""
    out_lens, ttfts, tpots, all_tpots, itls, e2els = [], [], [], [], [], []
    completed = total_input = 0
    for o in outputs:
        if not o.success:
            out_lens.append(0)
            continue
        n = o.output_tokens or (len(tokenizer.encode(o.generated_text)) if tokenizer
                                else len(o.itl) + 1)
        out_lens.append(n)
        total_input += o.prompt_len
        tpot = (o.latency - o.ttft) / (n - 1) if n > 1 else 0.0
        if n > 1:
            tpots.append(tpot)
        all_tpots.append(tpot)
        itls += o.itl
        ttfts.append(o.ttft)
        e2els.append(o.latency)
        completed += 1
    good = 0
    if goodput:
        series = {"ttft": ttfts, "tpot": all_tpots, "e2el": e2els}
        names = [k for k in GOODPUT_METRICS if k in goodput]
        for values in zip(*(series[k] for k in names)):
            good += all(v <= goodput[k] / 1000 for k, v in zip(names, values))
    total_output = int(sum(out_lens))
    duration_s = max(duration_s, 1e-9)
    result = {"duration": duration_s, "completed": completed, "total_input_tokens": total_input,
              "total_output_tokens": total_output,
              "request_throughput": completed / duration_s,
              "request_goodput": good / duration_s if goodput else None,
              "output_throughput": total_output / duration_s,
              "total_token_throughput": (total_input + total_output) / duration_s}
    data = {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}
    for name in percentile_metrics:
        xs = np.asarray(data[name] or [0.0]) * 1000
        result[f"mean_{name}_ms"] = float(np.mean(xs))
        result[f"median_{name}_ms"] = float(np.median(xs))
        result[f"std_{name}_ms"] = float(np.std(xs))
        for p in percentiles:
            result[f"p{_pword(p)}_{name}_ms"] = float(np.percentile(xs, p))
    result["input_lens"] = [o.prompt_len for o in outputs]
    result["output_lens"] = out_lens
    result["ttfts"] = [o.ttft for o in outputs]
    result["itls"] = [o.itl for o in outputs]
    result["start_times"] = [o.start_time for o in outputs]
    result["generated_texts"] = [o.generated_text for o in outputs]
    result["errors"] = [o.error for o in outputs]
    return result


def format_report(result: dict, percentile_metrics: Sequence[str] = METRICS,
                  percentiles: Sequence[float] = (90, 99)) -> str:
    """The result as vLLM prints it: totals and throughputs, then each metric's block."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]

    def row(label: str, value, fmt: str = ".2f") -> None:
        lines.append(f"{label:<40} {value:<10{fmt}}")

    row("Successful requests:", result["completed"], "")
    if result.get("max_concurrency") is not None:
        row("Maximum request concurrency:", result["max_concurrency"], "")
    row("Benchmark duration (s):", result["duration"])
    row("Total input tokens:", result["total_input_tokens"], "")
    row("Total generated tokens:", result["total_output_tokens"], "")
    row("Request throughput (req/s):", result["request_throughput"])
    if result.get("request_goodput") is not None:
        row("Request goodput (req/s):", result["request_goodput"])
    row("Output token throughput (tok/s):", result["output_throughput"])
    row("Total Token throughput (tok/s):", result["total_token_throughput"])
    for name in percentile_metrics:
        short = name.upper()
        lines.append("{s:{c}^{n}}".format(s=_HEADERS[name], n=50, c="-"))
        row(f"Mean {short} (ms):", result[f"mean_{name}_ms"])
        row(f"Median {short} (ms):", result[f"median_{name}_ms"])
        for p in percentiles:
            row(f"P{_pword(p)} {short} (ms):", result[f"p{_pword(p)}_{name}_ms"])
    lines.append("=" * 50)
    return "\n".join(lines)


# ---- the run --------------------------------------------------------------------------------

def _client():
    import httpx

    # loopback or a named server: never a proxy from the environment
    return httpx.AsyncClient(timeout=httpx.Timeout(6 * 3600.0), trust_env=False,
                             limits=httpx.Limits(max_connections=None,
                                                 max_keepalive_connections=None))


def _auth(api_key: str | None) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def served_model(base_url: str, api_key: str | None = None, timeout: float = 30.0) -> str:
    """The first model id the server lists at /v1/models."""
    import httpx

    try:
        r = httpx.get(base_url.rstrip("/") + "/v1/models", headers=_auth(api_key),
                      timeout=timeout, trust_env=False)
        r.raise_for_status()
        return r.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as err:
        raise ShapeflowError(f"bench: cannot list the models of {base_url}: {err}",
                             hint="is the server running? (`shapeflow serve CHECKPOINT`, or "
                             "give `--serve CHECKPOINT` to start one)") from None


async def benchmark(requests: Sequence[SampleRequest], base_url: str,
                    endpoint: str = "/v1/completions", model: str | None = None,
                    request_rate: float = math.inf, burstiness: float = 1.0,
                    max_concurrency: int | None = None, seed: int = 0,
                    percentile_metrics: Sequence[str] = METRICS,
                    percentiles: Sequence[float] = (90, 99),
                    goodput: dict[str, float] | None = None, disable_tqdm: bool = False,
                    api_key: str | None = None, tokenizer=None, initial_test: bool = True,
                    extra_body: dict | None = None,
                    arrivals: Sequence[float] | None = None) -> dict:
    """Send `requests` open-loop at their arrival times (at most `max_concurrency` in flight)
    and return vLLM's result dict (see `calculate_metrics`) with the run's settings.

    `arrivals` (s after the start, one per request) replaces the rate's arrival process."""
    from tqdm.auto import tqdm

    unknown = [m for m in percentile_metrics if m not in METRICS]
    if unknown:
        raise ArgumentError(f"bench: unknown --percentile-metrics {unknown}; known: "
                            f"{', '.join(METRICS)}", op="bench")
    if max_concurrency is not None and max_concurrency < 1:
        raise ArgumentError(f"bench: --max-concurrency must be >= 1, got {max_concurrency}",
                            op="bench")
    model = model or served_model(base_url, api_key)
    url = base_url.rstrip("/") + endpoint
    headers = _auth(api_key)
    times = (arrival_times(len(requests), request_rate, burstiness, seed) if arrivals is None
             else np.asarray(arrivals, dtype=float))
    if len(times) != len(requests):
        raise ArgumentError(f"bench: {len(times)} arrival times for {len(requests)} requests",
                            op="bench")
    async with _client() as client:
        if initial_test:  # vLLM's: one request first, so a broken setup fails fast (and warms)
            test = await request_completion(client, url, _payload(endpoint, model, requests[0],
                                                                  extra_body), headers)
            if not test.success:
                raise ShapeflowError(f"bench: the initial test request failed: {test.error}",
                                     hint="check --base-url, --endpoint and --model")
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        pbar = tqdm(total=len(requests), disable=disable_tqdm, desc="requests")
        start = time.perf_counter()

        async def one(req: SampleRequest, at: float) -> RequestFuncOutput:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            async with sem or contextlib.nullcontext():
                o = await request_completion(client, url, _payload(endpoint, model, req,
                                                                   extra_body),
                                             headers, req.prompt_len, start)
            pbar.update(1)
            return o

        outputs = await asyncio.gather(*(one(r, float(t)) for r, t in zip(requests, times)))
        duration = time.perf_counter() - start
        pbar.close()
    result = calculate_metrics(outputs, duration, percentile_metrics, percentiles, goodput,
                               tokenizer)
    result.update(backend="openai", model_id=model, num_prompts=len(requests),
                  request_rate=request_rate if math.isfinite(request_rate) else "inf",
                  burstiness=burstiness, max_concurrency=max_concurrency,
                  date=time.strftime("%Y%m%d-%H%M%S"))
    return result


def run_benchmark(requests: Sequence[SampleRequest], base_url: str, **kwargs) -> dict:
    """`benchmark` from synchronous code (a fresh event loop)."""
    return asyncio.run(benchmark(requests, base_url, **kwargs))


def server_metrics(base_url: str, api_key: str | None = None) -> dict[str, float]:
    """The server's /metrics (Prometheus text) as {sample name with its labels: value}."""
    import httpx

    r = httpx.get(base_url.rstrip("/") + "/metrics", headers=_auth(api_key), timeout=30.0,
                  trust_env=False)
    r.raise_for_status()
    out = {}
    for line in r.text.splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            with contextlib.suppress(ValueError):
                out[name] = float(value)
    return out


# ---- a server for the run -------------------------------------------------------------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def launched_server(path: str, server_args: Sequence[str] = (), timeout: float = 180.0,
                    env: dict | None = None) -> Iterator[str]:
    """`shapeflow serve PATH` in a subprocess on a free loopback port; yields its base URL once
    /health answers, and stops it (terminate, then kill) when the block ends."""
    import httpx

    port = free_port()
    quiet = [] if any(a.startswith("--log-level") for a in server_args) else [
        "--log-level", "warning"]  # no access log line per request in the measured process
    cmd = [sys.executable, "-m", "shapeflow", "serve", str(path), "--host", "127.0.0.1",
           "--port", str(port), *quiet, *server_args]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise ShapeflowError(f"bench: `{' '.join(cmd[2:])}` exited with status "
                                         f"{proc.returncode}:\n{log.read()[-2000:]}")
                try:
                    if httpx.get(url + "/health", timeout=2.0, trust_env=False).status_code \
                            == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ShapeflowError(f"bench: the server did not answer /health within "
                                         f"{timeout:.0f} s")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


# ---- the sweep behind --plot ----------------------------------------------------------------

def sweep(base_url: str, concurrencies: Sequence[int] = (1, 2, 4, 8),
          input_lens: Sequence[int] = (64, 128, 256, 512, 1024), batch_input_len: int = 128,
          output_len: int = 64, prompts_per_point: int = 8, tokenizer=None, seed: int = 0,
          **kwargs) -> dict:
    """Latency against batch size (concurrency at `batch_input_len`) and against prompt length
    (concurrency 1, whose per-token gaps also give latency against KV length)."""
    runs = {"batch": [], "prompt": []}
    for c in concurrencies:
        reqs = random_requests(max(prompts_per_point, 2 * c), batch_input_len, output_len,
                               tokenizer=tokenizer, seed=seed + c)
        r = run_benchmark(reqs, base_url, max_concurrency=c, seed=seed, tokenizer=tokenizer,
                          **kwargs)
        runs["batch"].append({"concurrency": c, "input_len": batch_input_len,
                              "output_len": output_len, "result": r})
    for n in input_lens:
        reqs = random_requests(max(2, prompts_per_point // 2), n, output_len,
                               tokenizer=tokenizer, seed=seed + n)
        r = run_benchmark(reqs, base_url, max_concurrency=1, seed=seed, tokenizer=tokenizer,
                          **kwargs)
        runs["prompt"].append({"concurrency": 1, "input_len": n, "output_len": output_len,
                               "result": r})
    return runs
