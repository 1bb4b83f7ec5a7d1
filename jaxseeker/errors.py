"""The one base class of errors that mean "your input is wrong", not "jaxseeker is broken".

A malformed recipe, model config, checkpoint, trajectory file or benchmark file raises a subclass whose message
names the file, line, row or key. The `jaxseeker` command prints such an error, or a missing file, as one line and
exits with status 1 (`cli.main`); any other exception keeps its traceback.
"""


class InputError(ValueError):
    """Bad user input: a file, row, key or argument the message names (a ValueError, for callers that catch those)."""
