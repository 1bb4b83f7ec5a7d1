"""What the command tests share: the one line argparse prints when it refuses a command line."""

import pytest


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The last stderr line of `jaxseeker ARGV`, a parse that must fail as a usage error (exit status 2)."""
    from jaxseeker.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2, f"exit status {exit_.value.code!r}, not 2"
    return capsys.readouterr().err.strip().splitlines()[-1]
