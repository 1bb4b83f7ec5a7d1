"""The one base class of errors that mean "your input is wrong", not "jaxseeker is broken".

A malformed recipe, model config, checkpoint, trajectory file or benchmark file raises a subclass whose message
names the file, line, row or key. The `jaxseeker` command prints such an error, or a missing file, as one line and
exits with status 1 (`cli.main`); any other exception keeps its traceback.
"""

import difflib
from collections.abc import Iterable, Sequence


class InputError(ValueError):
    """Bad user input: a file, row, key or argument the message names (a ValueError, for callers that catch those)."""


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word closest to `word` (difflib's similarity ratio >= 0.6), or None when none is close."""
    match = difflib.get_close_matches(word, list(known), n=1)
    return match[0] if match else None


def did_you_mean(unknown: Sequence[str], known: Iterable[str]) -> str:
    """` (did you mean 'steps'?)` naming the known word closest to each unknown one, or '' when none is close: the
    tail of a message about an unknown flag, command, choice or key."""
    known = list(known)
    found = [(word, close) for word in unknown if (close := closest(word, known))]
    if not found:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {found[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{close!r} for {word!r}" for word, close in found) + "?)"
