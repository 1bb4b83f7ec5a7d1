"""The most text a prompt may hold and still fit the context, so that a longer one is refused before tokenization.

Each token stands for at most `longest` units of the text the tokenizer splits, where `longest` is the longest
entry of its vocabulary (special tokens included): bytes for a byte-level BPE (Qwen, Llama 3, SmolLM2: an entry is
written one character per byte), characters otherwise (SentencePiece). So a text of more than `max_len · longest`
units has more than `max_len` tokens, whatever it says, provided the model is a BPE that never folds a run of
unknown characters into one token (`fuse_unk` without `byte_fallback`). The text counted is the one the tokenizer
splits: Unicode NFC or NFKC composition (Qwen's normaliser) can merge up to four code points into one, so a prompt
over the bound as sent is counted again once composed (in C, `unicodedata`; instant for text already composed). A
tokenizer whose normaliser or pre-tokenizer may delete text (BERT's whitespace split, `Strip`, SentencePiece's
precompiled normaliser), or whose model may fold it (WordPiece, Unigram), gets no bound: its prompts are tokenized
and checked as before.
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from collections.abc import Sequence
from typing import Any

# Normalisers and pre-tokenizers that never shorten the text (Prepend, Lowercase: only lengthen; Replace: checked
# by its strings); the Unicode compositions shorten it by a known rule (counted with `unicodedata`).
_KEEPING_NORMALIZERS = {"NFD", "NFKD", "Lowercase", "Prepend"}
_COMPOSING = {"NFC", "NFKC"}
_KEEPING_SPLITTERS = {"ByteLevel", "Metaspace", "Digits", "Punctuation", "Split", "UnicodeScripts"}


@dataclasses.dataclass(frozen=True)
class PromptBound:
    """`max_units` bytes (`byte_level`) or characters of text hold more than the context's tokens; None: no bound."""

    max_units: int | None
    byte_level: bool = False
    compose: str | None = None  # "NFC" / "NFKC": the composition the tokenizer applies first

    def units(self, texts: Sequence[str]) -> int:
        """The size of `texts` as sent, in this bound's units."""
        return sum(len(t.encode("utf-8", "surrogatepass")) if self.byte_level else len(t) for t in texts)

    def oversized(self, texts: Sequence[str]) -> int | None:
        """The size of `texts` as the tokenizer will split them, when over `max_units` (they cannot fit the
        context), else None."""
        if self.max_units is None or self.units(texts) <= self.max_units:
            return None
        if self.compose is not None:
            texts = [unicodedata.normalize(self.compose, t) for t in texts]
        size = self.units(texts)
        return size if size > self.max_units else None


def _parts(component: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    if component is None:
        return []
    return (
        [p for c in component.get(key, []) for p in _parts(c, key)] if component["type"] == "Sequence" else [component]
    )


def _keeps_text(part: dict[str, Any]) -> bool:
    kind = part["type"]
    if kind == "Replace":
        pattern = part.get("pattern", {})
        return "String" in pattern and len(part.get("content", "")) >= len(pattern["String"])
    if kind == "Split":
        return part.get("behavior") != "Removed"
    return kind in _KEEPING_NORMALIZERS | _COMPOSING | _KEEPING_SPLITTERS


def prompt_bound(tokenizer: Any, max_len: int) -> PromptBound:
    """The bound of a Hugging Face fast tokenizer for a context of `max_len` tokens (module docstring)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return PromptBound(None)
    spec = json.loads(backend.to_str())
    model = spec.get("model", {})
    if model.get("type") != "BPE" or (model.get("fuse_unk") and not model.get("byte_fallback")):
        return PromptBound(None)
    normalizers = _parts(spec.get("normalizer"), "normalizers")
    splitters = _parts(spec.get("pre_tokenizer"), "pretokenizers")
    if not all(_keeps_text(p) for p in normalizers + splitters):
        return PromptBound(None)
    composing = [p["type"] for p in normalizers if p["type"] in _COMPOSING]
    longest = max(len(t) for t in tokenizer.get_vocab())
    byte_level = any(p["type"] == "ByteLevel" for p in splitters)
    return PromptBound(max_len * longest, byte_level, "NFKC" if "NFKC" in composing else (composing or [None])[0])
