"""Serving: a paged KV cache, continuous batching and an offline API as vLLM's.

`Engine(model, tokenizer).generate(prompts, SamplingParams(...))`; `plan(model, ...)` sizes
the KV pool and predicts latency; the OpenAI-compatible server (`shapeflow serve`, in
`shapeflow.serve.server`, needs the `serve` extra) drives the same Engine step by step.
"""

from .engine import Engine
from .loading import load_served_model
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .plan import ServePlan, plan
from .sampling_params import SamplingParams
from .tokenizer import CharTokenizer, HFTokenizer

__all__ = ["CharTokenizer", "CompletionOutput", "Engine", "HFTokenizer", "RequestMetrics",
           "RequestOutput", "SamplingParams", "ServePlan", "load_served_model", "plan"]
