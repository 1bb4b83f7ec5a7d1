"""The README and docs/ hold: the generated pages match the code, every relative link resolves, and every
`jaxseeker …` command they quote parses with the real parser (parsed, not run)."""

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from jaxseeker.cli import build_parser
from jaxseeker.cli_args import mesh_argument, mesh_config

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(.*?)\n(.*?)^```", re.M | re.S)
SHELL_BLOCKS = ("", "bash", "sh", "shell", "console")  # fenced blocks whose lines may be commands


def load_generator():
    """docs/generate.py as a module (it lives beside the pages, outside the package)."""
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prose(text: str) -> str:
    """`text` without its fenced code blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of `page`: lower case, punctuation but - and _ dropped, spaces to
    hyphens, and `-1`, `-2` … after a repeat."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().replace("`", "").lower()
            slug = "".join(c for c in title if c.isalnum() or c in " -_").replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def test_the_generated_pages_are_what_the_code_gives():
    """docs/configs.md and docs/cli.md are written by docs/generate.py from the dataclasses and the parser."""
    for path, text in load_generator().pages().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run python docs/generate.py"


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text())):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            inside = resolved == ROOT or ROOT in resolved.parents
            if not inside or not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken


def fenced_commands(page: Path) -> list[list[str]]:
    """The `jaxseeker …` argument lists of the lines of `page`'s shell blocks (continuation lines joined; after
    `tpu.py launch … --`, the command run on the workers)."""
    found = []
    for info, body in FENCE.findall(page.read_text()):
        if info.strip() not in SHELL_BLOCKS:
            continue
        for line in body.replace("\\\n", " ").splitlines():
            tokens = shlex.split(line, comments=True)
            if any(t.endswith("tpu.py") for t in tokens) and "launch" in tokens and "--" in tokens:
                found.append(tokens[tokens.index("--") + 1 :])
                continue
            starts = [i for i, t in enumerate(tokens) if t == "jaxseeker" or t.endswith("/jaxseeker")]
            if starts:
                found.append(tokens[starts[0] + 1 :])
    return found


def commands(page: Path) -> list[list[str]]:
    """The `jaxseeker …` argument lists `page` quotes: those of its shell blocks and the inline code spans that
    start with `jaxseeker `."""
    text = page.read_text()
    found = fenced_commands(page)
    for span in re.findall(r"`(jaxseeker [^`\n]+)`", FENCE.sub("", text)):
        tokens = shlex.split(span)[1:]
        if not tokens[0].endswith(":"):  # `jaxseeker plan: run.yaml: …` is a message, not a command
            found.append(tokens)
    return found


def parse_error(parser: argparse.ArgumentParser, tokens: list[str]) -> str | None:
    """Why `tokens` is not a command line of `parser`, or None. Prose may name a command (or group) alone, with a
    metavar for its subcommand (`synth RECIPE`), or followed by flags alone (`eval --model`): those must exist.
    Anything else must parse, with no renamed flag's note."""
    node, i = parser, 0
    while i < len(tokens):
        groups = [a for a in node._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups or not (tokens[i] in groups[0].choices or tokens[i].isupper()):
            break
        if tokens[i].isupper():
            return None if i == len(tokens) - 1 else f"{tokens[i]}: a metavar in place of a command"
        node, i = groups[0].choices[tokens[i]], i + 1
    if not tokens:
        return "no command"
    rest = tokens[i:]
    if all(t.startswith("--") for t in rest):  # a command named alone, or with some of its flags
        unknown = [t for t in rest if t not in node._option_string_actions]
        return f"{node.prog} has no {', '.join(unknown)}" if unknown else None
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            parser.parse_args(tokens)
    except SystemExit as e:
        if e.code:
            return err.getvalue().strip() or f"exit {e.code}"
    return err.getvalue().strip() or None  # a renamed flag says so on stderr


def shape_only(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` with every `--mesh` that lays itself over this machine's devices reading only the mesh's shape:
    laying it out is running the command, not parsing it."""
    for action in parser._actions:
        if action.type is mesh_argument:
            action.type = mesh_config
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                shape_only(sub)
    return parser


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_quoted_command_parses(page):
    parser = shape_only(build_parser())
    wrong = [
        f"jaxseeker {shlex.join(tokens)}: {error}"
        for tokens in commands(page)
        for error in [parse_error(parser, tokens)]
        if error
    ]
    assert not wrong


def test_every_quoted_pipeline_command_names_keys_its_recipe_has():
    """A `jaxseeker pipeline` command quoted in the docs loads its recipe with its `--set` keys (loaded, not run): a
    key renamed in the schema cannot linger in a quoted command."""
    from jaxseeker.pipeline import pipeline_config
    from jaxseeker.train.recipe import read_recipe

    parser = build_parser()
    quoted = [tokens for page in PAGES for tokens in commands(page) if tokens[:1] == ["pipeline"]]
    wrong = []
    for tokens in quoted:
        args = parser.parse_args(tokens)
        if str(args.config).isupper():  # a metavar (`--config RECIPE`), not a recipe
            continue
        try:
            pipeline_config(read_recipe(args.config, args.set), quick=args.quick)
        except ValueError as e:  # RecipeError is an InputError, a ValueError
            wrong.append(f"jaxseeker {shlex.join(tokens)}: {e}")
    assert len(quoted) > 20 and not wrong


def test_the_docs_quote_commands():
    """The command test reads what the pages quote: they quote many, in blocks and inline."""
    quoted = [tokens for page in PAGES for tokens in commands(page)]
    assert len(quoted) > 100 and ["pipeline", "--config", "demo_focus"] in quoted


MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
HISTORY = re.compile(
    r"[Ss]ession \d|learning_log|LEARNING_NOTES|PERF_NOTES|\.\./shared"  # work sessions, notes outside the product
    r"|\b(?:[Mm]easured|[Tt]imed|[Bb]enchmarked|[Aa]s of)\b[^.\n]{0,40}"
    rf"\b(?:(?:19|20)\d\d-\d\d-\d\d|(?:{MONTHS}) 20\d\d)"
    r"|\b(?:previous|yesterday's|today's|last) (?:sessions?|attempts?)\b|\b(?:yesterday's|today's) runs?\b"
    r"|\b(?:[Ww]e|I) (?:tried|measured|ran|found|noticed|fixed)\b|\b(?:first|second|third) (?:try|attempt)\b"
    r"|\b(?:this|yesterday) (?:morning|afternoon|evening)\b|\b(?:last night|earlier today|overnight run)\b"
    # a date of these years standing in prose (not a quoted or assigned value: `date="2026-01-01"` is data)
    r"|(?<![\w\"'`=/.-])20[2-9]\d-[01]\d-[0-3]\d(?![\w\"'`/.-])"
)  # dates of measurement and run diaries


@pytest.mark.parametrize(
    "line",
    [
        "the 40-question eval (measured 2026-12-04) took 164 s",
        "Timed in December 2026 on a quiet machine",
        "as in the previous session, RL lost points",
        "We tried lr 5e-5 first; it lost 6 points",
        "today's run reused the SFT stage",
        "on the second attempt the eval took 161 s",
        "| demo_rl | 0.31 | 0.42 | (2026-12-04)",
        "## Results, 2026-12-04",
        "the 2-core figures were measured on 2026-12-05 under load",
        "this morning's eval reused the SFT stage",
        "an overnight run of 200 steps",
    ],
)
def test_the_history_check_finds_dates_of_measurement_and_run_diaries(line):
    """What the product must not carry: each of these lines would fail the check below."""
    assert HISTORY.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "`3 March 1962` for `1962-03-03`",
        "Rows an earlier run wrote are kept",
        "a run resumed from its checkpoint",
        'RolloutConfig(date="2026-01-01")',
        "  date: '2025-01-01'",
        '"content": "Current date: 2026-01-01"',
        "`--set rollout.date=2026-01-01`",
    ],
)
def test_the_history_check_leaves_data_and_resume_semantics_alone(line):
    """Dates that are data and runs that are the program's own (a resumed run) are not history."""
    assert not HISTORY.search(line)


def test_no_development_history_in_the_product():
    """Docs, recipes, code and tests say what is, not when or in which work session it was found."""
    files = [
        *PAGES,
        *ROOT.glob("jaxseeker/**/*.py"),
        *ROOT.glob("jaxseeker/**/*.yaml"),
        *ROOT.glob("tests/**/*.py"),
        *ROOT.glob("notebooks/*.ipynb"),
        *ROOT.glob("docs/**/*.py"),
        *ROOT.glob("tpu_scripts/*"),
        *(ROOT / name for name in ("CHANGELOG.md", "CONTRIBUTING.md", "CITATION.cff", "mkdocs.yml")),
        ROOT / "Makefile",
        ROOT / "pyproject.toml",
    ]
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}"
        for path in files
        if path != Path(__file__)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found
