"""Tokenizers the engine serves with: a character vocabulary (what `shapeflow train gpt`
saves), or a Hugging Face `tokenizers` file (GPT-2's byte-level BPE)."""

from __future__ import annotations

from ..errors import ArgumentError


class CharTokenizer:
    """One id per character of `vocab`, as `CharDataset` numbers them; no end-of-text token."""

    def __init__(self, vocab: str | list[str], name: str = "char") -> None:
        self.vocab = list(vocab)
        self.stoi = {ch: i for i, ch in enumerate(self.vocab)}
        self.name = name
        self.eos_token_id: int | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """The ids of text's characters; one outside the vocabulary is an ArgumentError."""
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as err:
            raise ArgumentError(f"{self.name} tokenizer: character {err.args[0]!r} is not in "
                                f"the vocabulary of {len(self.vocab)} characters",
                                op="serve") from None

    def decode(self, ids: list[int]) -> str:
        return "".join(self.vocab[i] for i in ids)


EOS_TOKEN = "<|endoftext|>"  # GPT-2's end of text (and its bos)


class HFTokenizer:
    """A Hugging Face `tokenizers` tokenizer (GPT-2's byte-level BPE) with the interface
    the engine uses: encode, decode, eos_token_id, vocab_size, name."""

    def __init__(self, tokenizer, name: str = "hf", eos_token_id: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.name = name
        if eos_token_id is None:
            eos_token_id = tokenizer.token_to_id(EOS_TOKEN)
        self.eos_token_id: int | None = eos_token_id

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of text, as `tokenizers` encodes it (GPT-2 adds no special tokens)."""
        if not isinstance(text, str):
            raise ArgumentError(f"{self.name} tokenizer: encode takes a str, got "
                                f"{type(text).__name__}", op="serve")
        return self.tokenizer.encode(text).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """Text of ids; special tokens (<|endoftext|>) left out unless asked for, as vLLM."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def tokens(self) -> list[str]:
        """Every token's string (byte-level form for GPT-2: "Ġ" is a space), by id."""
        vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        out = [""] * (max(vocab.values()) + 1 if vocab else 0)
        for token, i in vocab.items():
            out[i] = token
        return out

    def special_ids(self) -> set[int]:
        """Ids of the special (control) tokens."""
        return {i for i, t in self.tokenizer.get_added_tokens_decoder().items() if t.special}

    def merges(self) -> list[str]:
        """The BPE merges, "left right" in rank order (empty for a model without them)."""
        import json

        model = json.loads(self.tokenizer.to_str()).get("model", {})
        return [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]


def load_tokenizer(path) -> HFTokenizer:
    """The tokenizer of a Hugging Face directory (tokenizer.json, or vocab.json + merges.txt),
    or a tokenizer.json file; eos from config.json, tokenizer_config.json or <|endoftext|>."""
    import json
    from pathlib import Path

    from ..errors import CheckpointError

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    hint = "a Hugging Face model directory holds tokenizer.json (or vocab.json and merges.txt)"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise CheckpointError(f"{path}: reading a Hugging Face tokenizer needs the "
                              "'tokenizers' package", op="load_tokenizer",
                              hint="pip install 'shapeflow[serve]'") from None
    try:
        if path.is_file():
            tok = Tokenizer.from_file(str(path))
        elif (path / "tokenizer.json").is_file():
            tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        elif (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
            from tokenizers import decoders, pre_tokenizers
            from tokenizers.models import BPE

            # GPT-2's byte-level BPE, as transformers' GPT2TokenizerFast builds it
            tok = Tokenizer(BPE.from_file(str(path / "vocab.json"), str(path / "merges.txt")))
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            if tok.token_to_id(EOS_TOKEN) is not None:  # mark GPT-2's end of text special
                tok.add_special_tokens([EOS_TOKEN])
        else:
            raise CheckpointError(f"{path}: no tokenizer.json, nor vocab.json and merges.txt",
                                  op="load_tokenizer", hint=hint)
    except CheckpointError:
        raise
    except Exception as err:  # tokenizers raises plain Exceptions for malformed files
        raise CheckpointError(f"{path}: not a readable tokenizer ({err})", op="load_tokenizer",
                              hint=hint) from None
    eos = None
    for file, key in (("config.json", "eos_token_id"), ("tokenizer_config.json", "eos_token")):
        try:
            value = json.loads((folder / file).read_text()).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, dict):  # tokenizer_config's AddedToken form
            value = value.get("content")
        if isinstance(value, str):
            value = tok.token_to_id(value)
        if isinstance(value, int) and 0 <= value < tok.get_vocab_size(with_added_tokens=True):
            eos = value
            break
    return HFTokenizer(tok, name=folder.name or "hf", eos_token_id=eos)
