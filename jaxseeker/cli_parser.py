"""The argument parser class of every `jaxseeker` command: defaults shown in `--help`, "did you mean" for a
misspelled flag, command or choice, and one-line usage errors.

`cli.build_parser` makes the top-level parser a `Parser`; argparse makes each subparser of the same class, so every
command gets this behaviour without asking for it. Python 3.14's `suggest_on_error` does part of this, but jaxseeker
runs on 3.11: the suggestions come from difflib (`errors.did_you_mean`).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from jaxseeker.errors import closest, did_you_mean


def _shown(default: Any) -> str | None:
    """How `--help` writes a default, or None for one not worth writing (no value, an off switch)."""
    if default is None or default is False or default == argparse.SUPPRESS or default == [] or default == "":
        return None
    if isinstance(default, tuple | list):
        return ",".join(map(str, default))
    return str(default)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; each option's help ends with its default, unless the help already says
    it or there is none (`argparse.ArgumentDefaultsHelpFormatter` also prints `None`, `False` and help-less options
    without their default)."""

    def _default_text(self, action: argparse.Action) -> str | None:
        if not action.option_strings or isinstance(action, argparse._VersionAction | argparse._HelpAction):
            return None
        shown = _shown(action.default)
        return None if shown is None else f"default: {shown}".replace("%", "%%")

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        default = self._default_text(action)
        if default is None or "default" in help_text:  # "(default: the latest)", "%(default)s"
            return help_text
        return f"{help_text} ({default})" if help_text else default

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._default_text(action):  # argparse writes no help line at all without a help
            action = copy.copy(action)
            action.help = self._default_text(action)
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` with `HelpFormatter` and "did you mean" in its errors."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # `--n` is no `--no-progress`: a flag is named in full
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        """Parse like argparse; arguments no command takes are refused by the innermost command, naming the
        closest flag it has (argparse would print the top-level usage)."""
        parsed, extras = self.parse_known_args(args, namespace)
        command = self._innermost(parsed)
        if extras:
            flags = [a.split("=", 1)[0] for a in extras if a.startswith("-")]
            known = [s for a in command._actions if a.help != argparse.SUPPRESS for s in a.option_strings]
            command.error(f"unrecognized arguments: {' '.join(extras)}{did_you_mean(flags, known)}")
        return parsed

    def _innermost(self, parsed: argparse.Namespace) -> Parser:
        """The (sub)parser of the command `parsed` names, e.g. `jaxseeker bench sft`'s."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen._innermost(parsed)
        return self

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check that `value` is one of `action.choices`, its message naming the closest choice."""
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        if isinstance(action, argparse._SubParsersAction):  # a misspelled command: the closest, else the list
            near = closest(str(value), choices)
            listed = f" (did you mean {near!r}?)" if near else f"; choose from {', '.join(choices)}"
            raise argparse.ArgumentError(None, f"unknown command {value!r}{listed}")
        hint = did_you_mean([str(value)], choices)
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint}; choose from {', '.join(choices)}")

    def error(self, message: str) -> NoReturn:
        """One line, `PROG: error: MESSAGE`, exit status 2; the usage comes first only when something is missing."""
        if message.startswith("the following arguments are required"):
            self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")
