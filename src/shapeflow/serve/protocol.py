"""The OpenAI wire format: request parsing and checking, response and stream-chunk building.

Requests are checked here, before the engine sees them, so each mistake gets OpenAI's error
JSON with its status (`APIError`). Prompts are tokenized here too: the context check needs
their length, and the engine then takes token ids.

Chat template for models without one (a character model, GPT-2): each message becomes a
line `"{role}: {content}\\n"`, and the prompt ends with `"assistant:"`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import ShapeflowError
from .sampling_params import SamplingParams

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_N = 128  # OpenAI's bound on n


class APIError(ShapeflowError):
    """An error the client gets as `{"error": {message, type, param, code}}` with `status`."""

    kind = "APIError"

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message, op="serve")
        self.status, self.type, self.param, self.code = status, type, param, code

    def body(self) -> dict:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | int | None = None) -> dict:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 invalid_request_error."""
    return APIError(400, message, param=param, code=code)


@dataclass
class ModelInfo:
    """What the checks need to know of the served model."""

    name: str
    tokenizer: Any
    max_model_len: int


@dataclass
class GenerationRequest:
    """A checked /v1/completions or /v1/chat/completions request, prompts tokenized."""

    chat: bool
    model: str
    prompts: list[str]  # the text of each prompt (decoded when given as token ids)
    prompt_ids: list[list[int]]
    params: list[SamplingParams]  # one per prompt (max_tokens fitted to its length)
    stream: bool = False
    include_usage: bool = False
    echo: bool = False
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def n(self) -> int:
        return self.params[0].n

    @property
    def id(self) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + self.request_id


# parameters of OpenAI's API this server does not implement: (name, the values that are fine)
_UNSUPPORTED = {
    "logprobs": (None, False), "top_logprobs": (None,), "suffix": (None, ""),
    "logit_bias": (None, {}), "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0), "tools": (None, []), "functions": (None, []),
    "tool_choice": (None, "none"), "function_call": (None, "none"), "audio": (None,),
    "prediction": (None,),
}


def parse_json(raw: bytes) -> dict:
    """The request body as a JSON object, or a 400."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise bad(f"We could not parse the JSON body of your request: {err}") from None
    if not isinstance(body, dict):
        raise bad("The request body must be a JSON object")
    return body


def parse_completion(body: dict, info: ModelInfo) -> GenerationRequest:
    """Check a /v1/completions body and tokenize its prompt(s)."""
    model = _check_model(body, info)
    _check_unsupported(body)
    if body.get("best_of") not in (None, 1, body.get("n", 1)):
        raise bad("best_of other than n is not supported by this server", "best_of",
                  "unsupported_parameter")
    if "prompt" not in body or body["prompt"] is None:
        raise bad("you must provide a prompt", "prompt", "missing_required_parameter")
    texts, ids = _prompts(body["prompt"], info.tokenizer)
    echo = _typed(body, "echo", bool, False)
    return _request(body, info, model, texts, ids, chat=False, echo=echo,
                    default_max=COMPLETION_DEFAULT_MAX_TOKENS, max_key="max_tokens")


def parse_chat(body: dict, info: ModelInfo) -> GenerationRequest:
    """Check a /v1/chat/completions body; its messages become one prompt (chat_prompt)."""
    model = _check_model(body, info)
    _check_unsupported(body)
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise bad("response_format other than text is not supported by this server",
                  "response_format", "unsupported_parameter")
    text = chat_prompt(body.get("messages"), info.tokenizer)
    ids = _encode(info.tokenizer, text, "messages")
    max_key = "max_completion_tokens" if body.get("max_completion_tokens") is not None \
        else "max_tokens"
    return _request(body, info, model, [text], [ids], chat=True, echo=False,
                    default_max=None, max_key=max_key)


def chat_prompt(messages: Any, tokenizer: Any = None) -> str:
    """The prompt for `messages`: the tokenizer's own chat template where it has one, else
    `"role: content"` lines and `"assistant:"`."""
    if not isinstance(messages, list) or not messages:
        raise bad("messages must be a non-empty array of {role, content} objects", "messages")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise bad(f"messages[{i}] must be an object with a string role", f"messages[{i}]")
        turns.append({"role": m["role"], "content": _content(m.get("content"), i)})
    template = getattr(tokenizer, "apply_chat_template", None)
    if callable(template):
        return template(turns)
    return "".join(f"{t['role']}: {t['content']}\n" for t in turns) + "assistant:"


def _content(content: Any, i: int) -> str:
    """A message's text: a string, or the text parts of a content array."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise bad("only text content parts are supported", f"messages[{i}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise bad("content must be a string or an array of text parts", f"messages[{i}].content")


def _check_model(body: dict, info: ModelInfo) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("you must provide a model parameter", "model", "missing_required_parameter")
    if model != info.name:
        raise APIError(404, f"The model `{model}` does not exist or you do not have access "
                       f"to it. This server serves `{info.name}`.", param="model",
                       code="model_not_found")
    return model


def _check_unsupported(body: dict) -> None:
    for name, fine in _UNSUPPORTED.items():
        # 0 == False: the type counts too (logprobs=0 asks for logprobs)
        if name in body and not any(type(body[name]) is type(f) and body[name] == f
                                    for f in fine):
            raise bad(f"{name} is not supported by this server", name, "unsupported_parameter")


def _typed(body: dict, key: str, kinds: type | tuple, default: Any) -> Any:
    """body[key] if it has one of `kinds` (bool is no number here), default when absent."""
    v = body.get(key)
    if v is None:
        return default
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        names = " or ".join(k.__name__ for k in kinds).replace("float", "number") \
            .replace("int", "integer").replace("bool", "boolean").replace("str", "string")
        raise bad(f"{key} must be a {names}, got {json.dumps(v)}", key, "invalid_type")
    return v


def _prompts(prompt: Any, tokenizer: Any) -> tuple[list[str], list[list[int]]]:
    """The prompt in each of OpenAI's forms: a string, strings, token ids, lists of them."""
    def is_ids(x):
        return isinstance(x, list) and x and all(isinstance(t, int) and not isinstance(t, bool)
                                                 for t in x)
    if isinstance(prompt, str) or is_ids(prompt):
        items = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) or is_ids(p)
                                                     for p in prompt):
        items = prompt
    else:
        raise bad("prompt must be a string, an array of strings, an array of token ids or "
                  "an array of token-id arrays, none empty", "prompt")
    texts, ids = [], []
    for p in items:
        if isinstance(p, str):
            texts.append(p)
            ids.append(_encode(tokenizer, p, "prompt"))
        else:
            vocab = tokenizer.vocab_size
            if any(t < 0 or t >= vocab for t in p):
                raise bad(f"prompt token ids must lie in [0, {vocab})", "prompt")
            texts.append(tokenizer.decode(p))
            ids.append(list(p))
    return texts, ids


def _encode(tokenizer: Any, text: str, param: str) -> list[int]:
    try:
        ids = tokenizer.encode(text)
    except ShapeflowError as err:
        raise bad(err.message, param) from None
    if not ids:
        raise bad("the prompt is empty: the model needs at least one token to continue", param)
    return list(ids)


def _request(body: dict, info: ModelInfo, model: str, texts: list[str], ids: list[list[int]],
             *, chat: bool, echo: bool, default_max: int | None,
             max_key: str) -> GenerationRequest:
    stream = _typed(body, "stream", bool, False)
    options = body.get("stream_options")
    if options is not None and not stream:
        raise bad("stream_options is only allowed when stream is true", "stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad("stream_options must be an object", "stream_options")
    include_usage = bool(options and _typed(options, "include_usage", bool, False))
    max_tokens = _typed(body, max_key, int, None)
    if max_tokens is not None and max_tokens < 1:
        raise bad(f"{max_key} must be at least 1, got {max_tokens}", max_key,
                  "integer_below_min_value")
    n = _typed(body, "n", int, 1)
    if not 1 <= n <= MAX_N:
        raise bad(f"n must lie in [1, {MAX_N}], got {n}", "n")
    temperature = _typed(body, "temperature", (int, float), 1.0)
    if not 0 <= temperature <= 2:
        raise bad(f"temperature must lie in [0, 2], got {temperature}", "temperature",
                  "decimal_above_max_value" if temperature > 2 else "decimal_below_min_value")
    top_p = _typed(body, "top_p", (int, float), 1.0)
    if not 0 < top_p <= 1:
        raise bad(f"top_p must lie in (0, 1], got {top_p}", "top_p")
    top_k = _typed(body, "top_k", int, 0)  # vLLM's extensions (extra_body)
    seed = _typed(body, "seed", int, None)
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop
    if stop is not None and not (isinstance(stop, list)
                                 and all(isinstance(s, str) and s for s in stop)):
        raise bad("stop must be a non-empty string or an array of them", "stop")
    stop_ids = body.get("stop_token_ids") or []
    if not (isinstance(stop_ids, list) and all(isinstance(t, int) for t in stop_ids)):
        raise bad("stop_token_ids must be an array of integers", "stop_token_ids")
    ignore_eos = _typed(body, "ignore_eos", bool, False)
    params = []
    for p in ids:
        room = info.max_model_len - len(p)
        if room < 1 or max_tokens is not None and max_tokens > room:
            asked = max_tokens if max_tokens is not None else 1
            where = "messages" if chat else "prompt"
            raise bad(f"This model's maximum context length is {info.max_model_len} tokens. "
                      f"However, you requested {len(p) + asked} tokens ({len(p)} in the "
                      f"{where}, {asked} for the completion). Please reduce the length of the "
                      f"{where} or the completion.", where, "context_length_exceeded")
        budget = max_tokens if max_tokens is not None else min(room, default_max or room)
        params.append(SamplingParams(n=n, temperature=float(temperature), top_p=float(top_p),
                                     top_k=top_k, seed=seed, max_tokens=budget,
                                     stop=list(stop or []), stop_token_ids=stop_ids,
                                     ignore_eos=ignore_eos))
    return GenerationRequest(chat=chat, model=model, prompts=texts, prompt_ids=ids,
                             params=params, stream=stream, include_usage=include_usage,
                             echo=echo)


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_response(req: GenerationRequest, choices: list[dict], use: dict) -> dict:
    """A non-streamed response; `choices` from completion_choice or chat_choice."""
    obj = "chat.completion" if req.chat else "text_completion"
    return {"id": req.id, "object": obj, "created": req.created, "model": req.model,
            "choices": choices, "usage": use}


def completion_choice(index: int, text: str, reason: str | None) -> dict:
    return {"index": index, "text": text, "logprobs": None,
            "finish_reason": reason}


def chat_choice(index: int, text: str, reason: str | None) -> dict:
    return {"index": index, "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": None, "finish_reason": reason}


def chunk(req: GenerationRequest, choices: list[dict], use: dict | None = None) -> dict:
    """One streamed chunk; with include_usage each carries `usage` (null until the last)."""
    obj = "chat.completion.chunk" if req.chat else "text_completion"
    out = {"id": req.id, "object": obj, "created": req.created, "model": req.model,
           "choices": choices}
    if req.include_usage:
        out["usage"] = use
    return out


def completion_delta(index: int, text: str, reason: str | None = None) -> dict:
    return completion_choice(index, text, reason)


def chat_delta(index: int, delta: dict, reason: str | None = None) -> dict:
    return {"index": index, "delta": delta, "logprobs": None,
            "finish_reason": reason}


def sse(obj: dict) -> bytes:
    """One Server-Sent Event as OpenAI frames it."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def models_response(info: ModelInfo, created: int) -> dict:
    return {"object": "list", "data": [model_card(info, created)]}


def model_card(info: ModelInfo, created: int) -> dict:
    return {"id": info.name, "object": "model", "created": created, "owned_by": "shapeflow",
            "max_model_len": info.max_model_len}
