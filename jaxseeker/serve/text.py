"""Sampled tokens → the text a client sees: incremental detokenization, stop strings, streaming hold-back.

Text grows only by whole characters: a token that ends inside a multi-byte character adds nothing until
the token that completes it (the prefix / read offsets of Hugging Face's text streamers); at the end, an
incomplete last character is decoded as the tokenizer does (U+FFFD), so the final text equals decoding
every token at once. A stop string
cuts the text where it begins and ends the completion; while streaming, a tail that could still grow into
a stop string is held back, so no client ever sees part of a stop.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence


class TextStream:
    """The text of one completion, fed one sampled token at a time; `take` hands out what is final."""

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str] = ()):
        if any(not s for s in stop):
            raise ValueError(f"TextStream: stop strings must be non-empty, got {list(stop)}")
        self._decode = decode
        self.stop_strings = tuple(stop)
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""  # whole characters decoded so far, cut at a stop string
        self.stop: str | None = None  # the stop string that ended the text
        self._ends: list[int] = []  # characters decoded once token i was read (before any stop cut)
        self._prefix = self._read = 0  # token offsets: decode context start, end of the decoded part
        self._sent_chars = self._sent_tokens = 0

    def push(self, token: int, logprob: float) -> bool:
        """Add one sampled token; True when the text now contains a stop string (the text is cut before it)."""
        if self.stop is not None:
            raise ValueError("TextStream.push: the completion already ended at a stop string")
        self.tokens.append(int(token))
        self.logprobs.append(float(logprob))
        self._ends.append(self._decode_pending(flush=False))
        return self.stop is not None

    def _decode_pending(self, flush: bool) -> int:
        """Append the text of the tokens not decoded yet (unless it ends inside a character and not `flush`),
        cut it at a stop string; return the text's length before the cut."""
        before = self._decode(self.tokens[self._prefix : self._read])
        after = self._decode(self.tokens[self._prefix :])
        if len(after) <= len(before) or (after.endswith("\ufffd") and not flush):
            return len(self.text)
        start = max(len(self.text) - max((len(s) for s in self.stop_strings), default=0) + 1, 0)
        self.text += after[len(before) :]
        self._prefix, self._read = self._read, len(self.tokens)
        length = len(self.text)
        hits = [(i, s) for s in self.stop_strings if (i := self.text.find(s, start)) >= 0]
        if hits:
            cut, self.stop = min(hits)
            self.text = self.text[:cut]
        return length

    def _held_back(self) -> int:
        """Length of the longest tail of the unsent text that is a proper prefix of a stop string."""
        tail = self.text[self._sent_chars :]
        for n in range(min(len(tail), max((len(s) for s in self.stop_strings), default=1) - 1), 0, -1):
            if any(s.startswith(tail[-n:]) for s in self.stop_strings):
                return n
        return 0

    def take(self, final: bool = False) -> tuple[str, list[int], list[float]]:
        """(new text, its tokens, their log-probs) safe to send now; `final` sends everything that is left.

        A token goes out with the text that completes it; at a stop string, the tokens whose text begins
        before the cut go out and the stop's own tokens do not.
        """
        if final and self.stop is None and self.tokens:  # a last character left incomplete: decoded as is
            self._ends[-1] = self._decode_pending(flush=True)
        if self.stop is not None:
            limit = len(self.text)
            count = bisect.bisect_left([0, *self._ends[:-1]], limit)  # tokens starting before the cut
        elif final:
            limit, count = len(self.text), len(self.tokens)
        else:
            limit = len(self.text) - self._held_back()
            count = min(bisect.bisect_right(self._ends, limit), self._read)  # decoded, and all before the limit
        count = max(count, self._sent_tokens)
        limit = max(limit, self._sent_chars)
        text = self.text[self._sent_chars : limit]
        tokens = self.tokens[self._sent_tokens : count]
        logprobs = self.logprobs[self._sent_tokens : count]
        self._sent_chars, self._sent_tokens = limit, count
        return text, tokens, logprobs
