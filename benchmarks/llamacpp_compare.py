"""Single-stream decode (batch 1) and a 512-token prefill: shapeflow against llama.cpp on the
same weights (issue 34's llama.cpp target), one thread each.

    CMAKE_ARGS="-DGGML_NATIVE=ON" pip install 'shapeflow[bench-llamacpp]'   # builds llama.cpp
    python benchmarks/llamacpp_compare.py [--models char,gpt2] [--decode-tokens 64]
                                          [--repeats 3] [--json PATH]

llama-cpp-python builds llama.cpp from source when it installs (~10 minutes on two cores), so
it is no test dependency; without it this script says so and exits 0. Each model gets random
weights (seed 0) and is exported with `sf.io.export_gguf(..., dtype="f32")`; llama.cpp runs
that file. Models: "char", `shapeflow train gpt`'s shape (2 layers, d 128, 4 heads, the
corpus's 76 characters) with a 1,024-token context so the 512-token prefill fits; "gpt2", a
GPT-2-small-sized model (12 layers, d 768, 12 heads, 50,257 tokens: a byte-level BPE
padded with unused tokens, since the prompts are token ids). Both use GPT-2's tanh GELU, the
form llama.cpp's gpt2 graph computes.

Per model, the best of --repeats runs of: TPOT, ms per generated token after the first,
for a 16-token prompt and --decode-tokens greedy tokens; and TTFT of a 512-token prompt
(prefill plus the first token). shapeflow is measured through the serving Engine (paged KV
cache, one sequence, prefix caching off so repeats recompute) and through `GPT.generate`
(its contiguous cache), llama.cpp through llama-cpp-python's `Llama.generate` / `eval` as
a user calls them. Greedy tokens must agree (llama.cpp's GELU reads a half-precision
table, so logits agree to ~1e-2, not bit for bit); the script reports both.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread each, set before numpy loads a BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

PREFILL = 512
PROMPT = 16


def build(kind: str, workdir: Path):
    """(model, tokenizer, gguf path) for 'char' or 'gpt2', random weights, seed 0."""
    import shapeflow as sf
    from shapeflow.models import GPT
    from shapeflow.serve.tokenizer import CharTokenizer, load_tokenizer

    sf.manual_seed(0)
    if kind == "char":
        from shapeflow.data.datasets import text_corpus

        tok = CharTokenizer(sorted(set(text_corpus())))
        model = GPT(vocab_size=tok.vocab_size, block_size=1024, n_layer=2, n_head=4,
                    n_embd=128, activation="gelu_tanh")
    else:
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(["a GPT-2-small-sized model with random weights"] * 4,
                                vocab_size=300, special_tokens=["<|endoftext|>"],
                                show_progress=False)
        (workdir / "tok").mkdir(exist_ok=True)
        bpe.save(str(workdir / "tok" / "tokenizer.json"))
        tok = load_tokenizer(workdir / "tok")
        model = GPT(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768,
                    activation="gelu_tanh")
    model.eval()
    path = sf.io.export_gguf(model, tok, workdir / f"{kind}.gguf", dtype="f32")
    return model, tok, path


def engine_run(engine, prompt: list[int], n: int) -> tuple[list[int], float, float]:
    """(tokens, TTFT s, TPOT s) of one greedy request through the serving Engine."""
    from shapeflow.serve import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
    start = time.perf_counter()
    engine.add_request(prompt, params)
    tokens, first, last = [], None, None
    while engine.has_unfinished():
        for out in engine.step():
            tokens += out.outputs[0].delta_token_ids
        now = time.perf_counter()
        if tokens and first is None:
            first = now
        last = now
    tpot = (last - first) / (len(tokens) - 1) if len(tokens) > 1 else float("nan")
    return tokens, first - start, tpot


def generate_run(model, prompt: list[int], n: int) -> tuple[list[int], float, float]:
    """(tokens, TTFT s, TPOT s) of `GPT.generate(do_sample=False)`: n tokens against one."""
    import shapeflow as sf

    idx = sf.tensor([prompt])
    t0 = time.perf_counter()
    model.generate(idx, 1, do_sample=False)
    t1 = time.perf_counter()
    out = model.generate(idx, n, do_sample=False)
    t2 = time.perf_counter()
    tpot = ((t2 - t1) - (t1 - t0)) / (n - 1) if n > 1 else float("nan")
    return out[0].tolist()[len(prompt):], t1 - t0, tpot


def llama_run(llm, prompt: list[int], n: int) -> tuple[list[int], float, float]:
    """(tokens, TTFT s, TPOT s) of llama-cpp-python's greedy `generate` from a fresh cache."""
    llm.reset()
    tokens, stamps = [], []
    start = time.perf_counter()
    for t in llm.generate(prompt, top_k=1, temp=0.0, reset=True):
        tokens.append(t)
        stamps.append(time.perf_counter())
        if len(tokens) == n:
            break
    tpot = (stamps[-1] - stamps[0]) / (n - 1) if n > 1 else float("nan")
    return tokens, stamps[0] - start, tpot


def best(runs: list[tuple]) -> tuple:
    """The run list's tokens (the same each time) with the lowest TTFT and TPOT."""
    return runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs)


def compare(kind: str, decode_tokens: int, repeats: int, workdir: Path) -> dict:
    import llama_cpp

    import shapeflow as sf
    from shapeflow.serve import Engine

    model, tok, path = build(kind, workdir)
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, tok.vocab_size, PROMPT).tolist()
    long_prompt = rng.integers(0, tok.vocab_size, PREFILL).tolist()
    engine = Engine(model, tok, max_num_seqs=1, max_num_batched_tokens=PREFILL,
                    enable_prefix_caching=False, max_model_len=1024)
    llm = llama_cpp.Llama(str(path), n_ctx=1024, n_batch=PREFILL, n_ubatch=PREFILL,
                          n_threads=1, n_threads_batch=1, verbose=False)
    rows = {}
    for name, run in (("shapeflow Engine", lambda p, n: engine_run(engine, p, n)),
                      ("shapeflow GPT.generate", lambda p, n: generate_run(model, p, n)),
                      ("llama.cpp", lambda p, n: llama_run(llm, p, n))):
        run(prompt, 4)  # warm-up: first allocations, page faults
        dec = best([run(prompt, decode_tokens) for _ in range(repeats)])
        pre = best([run(long_prompt, 1) for _ in range(repeats)])
        rows[name] = {"tokens": dec[0], "tpot_ms": dec[2] * 1e3, "ttft_512_ms": pre[1] * 1e3,
                      "first_512": pre[0]}
    del llm
    # logits of every position of the 512-token prompt, both sides (llama-cpp-python keeps
    # them in `scores` only with logits_all)
    llm = llama_cpp.Llama(str(path), n_ctx=1024, n_batch=PREFILL, n_ubatch=PREFILL,
                          n_threads=1, n_threads_batch=1, verbose=False, logits_all=True)
    llm.eval(long_prompt)
    theirs = np.asarray(llm.scores[:PREFILL])
    with sf.no_grad():
        ours = model(sf.tensor([long_prompt]))[0].numpy()[0]
    ref = rows["llama.cpp"]
    return {
        "model": kind, "params": sum(p.numel() for p in model.parameters()),
        "decode_tokens": decode_tokens, "repeats": repeats,
        "rows": {k: {"tpot_ms": v["tpot_ms"], "ttft_512_ms": v["ttft_512_ms"]}
                 for k, v in rows.items()},
        "greedy_tokens_agree": {k: v["tokens"] == ref["tokens"]
                                and v["first_512"] == ref["first_512"]
                                for k, v in rows.items() if k != "llama.cpp"},
        "logits_max_abs_diff": float(np.abs(ours - theirs).max()),
        "logits_max_abs": float(np.abs(ours).max()),
    }


def report(result: dict) -> None:
    ref = result["rows"]["llama.cpp"]
    print(f"\n{result['model']} ({result['params'] / 1e6:.1f}M parameters), best of "
          f"{result['repeats']}, {result['decode_tokens']} decode tokens, one thread")
    print(f"  {'':<24}{'TPOT ms/token':>14}{'vs llama.cpp':>14}{'TTFT 512 ms':>14}"
          f"{'vs llama.cpp':>14}")
    for name, row in result["rows"].items():
        print(f"  {name:<24}{row['tpot_ms']:>14.3f}{row['tpot_ms'] / ref['tpot_ms']:>13.2f}x"
              f"{row['ttft_512_ms']:>14.1f}{row['ttft_512_ms'] / ref['ttft_512_ms']:>13.2f}x")
    agree = ", ".join(f"{k}: {'yes' if v else 'NO'}"
                      for k, v in result["greedy_tokens_agree"].items())
    print(f"  greedy tokens equal llama.cpp's: {agree}; logits (all 512 positions) differ by "
          f"{result['logits_max_abs_diff']:.2e} (largest |logit| {result['logits_max_abs']:.2f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="char,gpt2")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("llama-cpp-python is not installed: CMAKE_ARGS=\"-DGGML_NATIVE=ON\" "
              "pip install 'shapeflow[bench-llamacpp]' (builds llama.cpp, ~10 minutes)")
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.models.split(","):
            results.append(compare(kind.strip(), args.decode_tokens, args.repeats, Path(tmp)))
            report(results[-1])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
