"""Writes docs/configs.md (every key of every recipe schema, read from the dataclasses that parse each section) and
docs/cli.md (every command and flag, read from the argparse parser), so that neither page can drift from the code:

    python docs/generate.py            # rewrite both pages
    python docs/generate.py --check    # exit 1, naming the page, when a committed page differs from the code's

It lives beside the pages it writes rather than in the package: it imports the command line, which nothing in the
package may import (only `cli.py` imports every stage, and nothing imports it), and users of the installed package
never need it.
`tests/test_docs.py` regenerates both pages and fails when the committed ones differ.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------------------- configs


def field_notes(cls: type) -> dict[str, str]:
    """Each field's comment in `cls`'s source: its trailing `# …` plus the full-line comments that belong to it. A
    block of full-line comments goes with the field below it, unless both that field and the one above have a
    trailing comment: then the block continues the comment of the field above."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    trailing = {
        tok.start[0]: tok.string.lstrip("#").strip()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].strip()[:1] != "#"
    }
    body = ast.parse(source).body[0].body
    fields = [n for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    notes: dict[str, list[str]] = {}
    with_trailing: set[str] = set()
    previous = None
    for node in fields:
        name = node.target.id
        own = [trailing[i] for i in range(node.lineno, node.end_lineno + 1) if i in trailing]
        block, i = [], node.lineno - 1
        while i >= 1 and lines[i - 1].strip().startswith("#"):
            block.insert(0, lines[i - 1].strip().lstrip("#").strip())
            i -= 1
        if block and own and previous is not None and previous in with_trailing:
            notes[previous] += block
            block = []
        notes[name] = block + own
        if own:
            with_trailing.add(name)
        previous = name
    return {name: " ".join(parts) for name, parts in notes.items()}


def type_text(hint: Any) -> str:
    """A field's type as a recipe writes it: int, float, str, bool, list of …, mapping, or a section."""
    if hint is type(None):
        return "null"
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join(type_text(a) for a in typing.get_args(hint))
    if dataclasses.is_dataclass(hint):
        return "section"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            if typing.get_origin(item) is tuple:  # ((key, value), …): written as a mapping
                return "mapping"
            if typing.get_origin(item) in (Mapping, dict) or item is Mapping:
                return "list of mappings"
            return f"list of {type_text(item)}"
        return "[" + ", ".join(type_text(a) for a in args) + "]"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return "mapping"
    return getattr(hint, "__name__", str(hint))


def yaml_text(value: Any) -> str:
    """A default as YAML writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return "{" + ", ".join(f"{k}: {yaml_text(v)}" for k, v in value) + "}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(yaml_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {yaml_text(v)}" for k, v in value.items()) + "}"
    return repr(value)


def cell(text: str) -> str:
    """`text` safe inside a markdown table cell: pipes escaped, and `<…>` outside code spans (`runs/<name>`), which
    markdown would take for an HTML tag."""
    parts = text.replace("|", "\\|").replace("\n", " ").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def section_table(
    cls: type, path: str, defaults: Mapping[str, str] | None = None, nested: Mapping[str, str] | None = None
) -> list[str]:
    """One table row per field of `cls`: key, type, default (`defaults` overrides what the recipe reader fills in),
    meaning. `nested` names the sub-section documenting a field that is a section of its own."""
    notes, hints = field_notes(cls), typing.get_type_hints(cls)
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        kind = type_text(hints[f.name])
        if (defaults or {}).get(f.name):
            default = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f"`{yaml_text(f.default)}`"
            if kind == "mapping" and f.default == ():  # ((key, value), …) read from a YAML mapping
                default = "`{}`"
            elif dataclasses.is_dataclass(f.default):
                default = "(below)"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"`{yaml_text(f.default_factory())}`"
        else:
            default = "required"
        note = notes.get(f.name, "")
        if (nested or {}).get(f.name):
            note = (note + "; " if note else "") + f"see `{nested[f.name]}`"
        rows.append(f"| `{path}.{f.name}` | {kind} | {cell(default)} | {cell(note)} |")
    return rows


def doc_of(cls: type) -> str:
    """The class docstring as one paragraph."""
    return " ".join(inspect.getdoc(cls).split())


def schemas() -> Iterator[tuple[str, str, list[tuple[str, Any, dict]]]]:
    """(title, introduction, [(section path, dataclass or text, options)]) for each recipe schema."""
    from jaxseeker.agent import RolloutConfig
    from jaxseeker.data import DataConfig
    from jaxseeker.generation import SamplingConfig
    from jaxseeker.model import LoraConfig, ModelConfig
    from jaxseeker.parallel import MeshConfig
    from jaxseeker.pipeline import config as pipeline
    from jaxseeker.tools.llm_client import LLMConfig
    from jaxseeker.train.optimizer import OptimizerConfig
    from jaxseeker.train.recipe import read_recipe, shipped_configs
    from jaxseeker.train.rl import config as rl_config
    from jaxseeker.train.rl.scoring import RewardConfig
    from jaxseeker.train.sft import loop as sft

    name = (
        "name",
        "The run's name: `runs/<name>/` unless an `out_dir` says otherwise. Default: the recipe file's "
        "name without `.yaml`.",
        {},
    )
    docs = {
        "extend": "The context extension, run when this section sets a key: more SFT steps from the SFT policy, with "
        "the `sft` section's recipe and these keys laid on it, key by key (rows as long as the rollouts' context, "
        "their own learning rate). The pipeline sets `data.seed` to the sft's + 1 (a new draw order).",
        "rft": "With `rl.method: rft`, the fine-tunes on the kept episodes: the `sft` section's recipe with these "
        "keys laid on it, key by key (rows that hold whole episodes, their own steps and learning rate); "
        "`data.unlikelihood_weight` > 0 also trains the loops of the rollouts' malformed turns to be unlikely. "
        "The pipeline sets `data.seed` to the sft's + 1 + round + 10·k (fine-tune k of a soup, `rl.rft_seeds`).",
    }
    pipeline_sections = [name] + [(s, cls, {"doc": docs.get(s)}) for s, cls in pipeline.STAGES.items()]
    shipped = [n for n in shipped_configs() if set(read_recipe(n)) <= {"name", *pipeline.SHARED, *pipeline.STAGES}]
    yield (
        "Pipeline recipe: `jaxseeker pipeline`, `jaxseeker eval --config`",
        "The sections `world` and `tools`, written as in an RL recipe ([below](#tools-and-world-the-pipeline-and-rl-"
        "recipes-alike)); the pipeline's own sections (`qa`, `expert`, `policy`, `eval`); and each training "
        "stage's recipe: `sft`, `extend` and `rft` hold sections of an [SFT recipe](#sft-recipe-jaxseeker-sft), "
        "`rl` those of an [RL recipe](#rl-recipe-jaxseeker-rl), with only the keys set there; a key means what it "
        "means in the recipe, and the recipe's own default fills every key not set. Each training stage writes "
        "the whole recipe it ran as `runs/<name>/<stage>/recipe.yaml`, which `jaxseeker sft --config` (or "
        "`jaxseeker rl --config`) runs alone. The pipeline's sections' defaults suit the embedded offline run. "
        "Shipped: " + ", ".join(f"`{n}`" for n in shipped) + ".",
        pipeline_sections,
    )
    shared = [
        (
            "model",
            "`hf_path`: the checkpoint to start from, an HF directory, a GGUF file or a registered name "
            "([guides/pretrained_models.md](guides/pretrained_models.md)); the keys of `model.config` below "
            "override its `config.json` (or, without `hf_path`, give the shape of a model initialised at "
            "random); `lora`: adapters instead of full fine-tuning (`model.lora`, "
            "[guides/lora.md](guides/lora.md)).",
            {},
        ),
        ("model.config", ModelConfig, {}),
        ("model.lora", LoraConfig, {}),
        (
            "optimizer",
            OptimizerConfig,
            {
                "defaults": {
                    "total_steps": "SFT: `train.steps`; RL: rl.steps · rl.mini_batches · rl.epochs / grad_accum",
                    "warmup_steps": "SFT `20`; RL a tenth of total_steps, rounded down",
                    "lr": "SFT `0.001`; RL `1e-06`, with `model.lora` `1e-05` (`rl.config.RL_OPTIMIZER_DEFAULTS`)",
                    "min_lr": "SFT `1e-05`; RL the lr (constant after the warm-up)",
                    "weight_decay": "SFT `0.1`; RL `0.0`",
                }
            },
        ),
        ("mesh", MeshConfig, {}),
        (
            "rules",
            "A mapping from logical axis name to mesh axes, over the defaults of `jaxseeker.parallel.rules`"
            " (`batch: [data, fsdp, expert]`, `embed: [fsdp, context]`, `heads: [tensor]`, …); `null` or `[]` "
            "replicates that axis.",
            {},
        ),
        (
            "target",
            "The machine the recipe is planned for: `v5p-128`, `v6e-64` or `h100x8` (`planning.chips.TARGETS`); "
            "`jaxseeker plan --config FILE` plans on it, `--target NAME` fits a recipe to one. The loops ignore it.",
            {},
        ),
    ]
    alike = tools_and_world()
    yield (
        "`tools` and `world`: the pipeline and RL recipes alike",
        "A pipeline recipe and a `jaxseeker rl` recipe write these two sections the same way, so a block copied from "
        "one kind into the other loads there. A key a block leaves out takes the default below; where a pipeline's "
        "default differs, the table gives both.",
        alike,
    )
    assert {s for s, *_ in shared} >= set(sft.SECTIONS) & set(rl_config.SECTIONS) - {"name"}
    yield (
        "Sections shared by the SFT and RL recipes",
        "`jaxseeker sft` and `jaxseeker rl` read these sections alike (`train.policy.build_policy`).",
        shared,
    )
    sft_sections = [("data", DataConfig, {}), ("train", sft.TrainConfig, {})]
    assert {"name", *(s for s, *_ in shared), *(s for s, *_ in sft_sections)} - {"model.config", "model.lora"} == set(
        sft.SECTIONS
    )
    yield (
        "SFT recipe: `jaxseeker sft`",
        "Sections `name`, `model`, `optimizer`, `mesh`, `rules` (above) and:",
        sft_sections,
    )
    rl_sections = [
        ("rl", rl_config.RLConfig, {"nested": {"context_stages": "rl.context_stages"}}),
        ("rl.context_stages", rl_config.ContextStage, {}),
        ("rollout", RolloutConfig, {}),
        ("sampling", SamplingConfig, {"defaults": {"temperature": "`1.0` in RL (top_p and top_k must stay off)"}}),
        ("engine", rl_config.EngineConfig, {}),
        ("reward", RewardConfig, {"nested": {"llm": "reward.llm"}}),
        ("reward.llm", LLMConfig, {}),
    ]
    documented = {"name", *(s for s, *_ in shared), *(s for s, *_ in rl_sections), *(s for s, *_ in alike)}
    assert {s for s in documented if "." not in s} == set(rl_config.SECTIONS)
    yield (
        "RL recipe: `jaxseeker rl`",
        "Sections `name`, `model`, `optimizer`, `mesh`, `rules`, `tools` and `world` (above) and:",
        rl_sections,
    )


def changed_defaults(library: Any, ours: Any) -> dict[str, str]:
    """The default column of the fields whose pipeline default (`ours`) differs from the library's: both."""
    return {
        f.name: f"`{yaml_text(getattr(library, f.name))}`; pipeline `{yaml_text(getattr(ours, f.name))}`"
        for f in dataclasses.fields(library)
        if getattr(library, f.name) != getattr(ours, f.name) and not dataclasses.is_dataclass(getattr(library, f.name))
    }


def tools_and_world() -> list[tuple[str, Any, dict]]:
    """The sections every recipe that rolls out writes alike, with the pipeline's defaults beside the library's."""
    from jaxseeker.pipeline.data_config import PIPELINE_TOOLS, PIPELINE_WORLD
    from jaxseeker.tools import ToolsConfig
    from jaxseeker.tools.http import HttpConfig
    from jaxseeker.tools.llm_client import LLMConfig
    from jaxseeker.tools.python_exec import PythonConfig
    from jaxseeker.tools.visit import VisitOptions
    from jaxseeker.world import WorldSpec

    tools_doc = (
        doc_of(ToolsConfig) + " A pipeline's rollouts run offline over its world: it refuses a live back-end "
        "(`search_backend`, `visit_backend`, `summarizer`) and tools other than `search` and `visit`."
    )
    world_doc = (
        "The world the local `search` and `visit` tools read, as a spec string or as a mapping of the keys below: "
        "`atlas:GB,FR` is `{source: atlas, countries: [GB, FR]}`, `synthetic:3000:7` is `{source: synthetic, "
        "size: 3000, seed: 7}`, `pages:FILE.jsonl` is `{source: pages, path: FILE.jsonl}`, and a saved world's "
        "directory (`jaxseeker world build --out`) is `{source: saved, path: DIR}`. In an RL recipe `null` (or no "
        "section) is no world: web back-ends, or no tools. A pipeline draws its questions from a world's entities, "
        "so its world is synthetic or atlas; with no section it is `synthetic:3000:0`."
    )
    nested = {"http": "tools.http", "visit": "tools.visit", "python": "tools.python", "summarizer": "tools.summarizer"}
    tools_defaults = changed_defaults(ToolsConfig(), PIPELINE_TOOLS)
    visit_defaults = changed_defaults(VisitOptions(), PIPELINE_TOOLS.visit)
    return [
        ("tools", ToolsConfig, {"doc": tools_doc, "nested": nested, "defaults": tools_defaults}),
        ("tools.http", HttpConfig, {}),
        ("tools.visit", VisitOptions, {"defaults": visit_defaults}),
        ("tools.python", PythonConfig, {}),
        ("tools.summarizer", LLMConfig, {}),
        ("world", WorldSpec, {"doc": world_doc, "defaults": changed_defaults(WorldSpec(), PIPELINE_WORLD)}),
    ]


def heading(section: str, title: str) -> str:
    """A section's heading; the pipeline's sections share names with the RL recipe's, so their headings say whose."""
    whose = " (pipeline)" if title.startswith("Pipeline") and section != "name" else ""
    return f"### `{section}`{whose}"


def render_configs() -> str:
    """docs/configs.md."""
    out = [
        "# Recipe keys",
        "",
        "<!-- Generated by `python docs/generate.py` from the dataclasses that read each section; edit those, "
        "not this page. -->",
        "",
        "A recipe is a YAML file with one mapping per section. `--set section.key=value` overrides one key on the "
        "command line (the value is read as YAML: `--set optimizer.lr=5e-4`, `--set qa.e2hqa_rounds=[0,1]`). An "
        "unknown section or key, or a value of the wrong type, stops the command with one line naming it "
        "(`jaxseeker plan --config FILE` checks a recipe without running it). A `--config` is a file or the "
        "name of a recipe shipped in `jaxseeker/configs/` (the repository's `configs/`).",
        "",
    ]
    for title, intro, sections in schemas():
        out += [f"## {title}", "", intro, ""]
        for section, what, options in sections:
            out.append(heading(section, title))
            out.append("")
            if isinstance(what, str):
                out += [what, ""]
                continue
            out += [options.get("doc") or doc_of(what), ""]
            path = "model" if section == "model.config" else section
            out += section_table(what, path, options.get("defaults"), options.get("nested"))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# -------------------------------------------------------------------------------------------------------------- cli


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """(command path, one-line summary, parser) of `parser` and of every subcommand below it, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), summaries.get(name, ""), sub
                yield from commands(sub, path + (name,))


def options_table(parser: argparse.ArgumentParser) -> list[str]:
    """The flags and positionals of one command as a table; hidden (renamed) flags left out, help as `--help`
    writes it, default included."""
    formatter = parser.formatter_class(prog=parser.prog)
    rows = ["| argument | value | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(f"`{s}`" for s in action.option_strings)
            metavar = formatter._get_default_metavar_for_optional(action)
        else:
            name = f"`{action.metavar or action.dest}`"
            metavar = formatter._get_default_metavar_for_positional(action)
        value = formatter._format_args(action, metavar) if action.nargs != 0 else ""
        meaning = formatter._expand_help(action) if action.help else (formatter._default_text(action) or "")
        if action.required and action.option_strings:
            meaning = "required; " + meaning if meaning else "required"
        rows.append(f"| {name} | {cell(f'`{value}`' if value else '')} | {cell(meaning)} |")
    return rows


def render_cli() -> str:
    """docs/cli.md."""
    from jaxseeker.cli import build_parser

    parser = build_parser()
    out = [
        "# Command line",
        "",
        "<!-- Generated by `python docs/generate.py` from `jaxseeker.cli.build_parser()`; edit the parsers, not "
        "this page. -->",
        "",
        "`--help` after any command prints the same. Bad input ends a command with one line naming the file, "
        "key or flag (exit status 2 for a usage error, 1 otherwise). Ctrl-C or SIGTERM during training saves the "
        "step in flight and exits 130 / 143; `sft` and `rl` go on from it with `--resume`, `pipeline`, `eval` and "
        "`synth trajectories` when run again.",
        "",
        "```text",
        "jaxseeker [--version] COMMAND [options]",
        "```",
        "",
        parser.description,
        "",
        "```text",
        parser.epilog,
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    found = list(commands(parser))
    for path, summary, _ in found:
        out.append(f"| [`jaxseeker {' '.join(path)}`](#{anchor('jaxseeker ' + ' '.join(path))}) | {cell(summary)} |")
    out.append("")
    for path, summary, sub in found:
        out += [f"## jaxseeker {' '.join(path)}", "", summary, ""]
        if sub.description:
            out += [sub.description, ""]
        rows = options_table(sub)
        if len(rows) > 2:
            out += rows + [""]
    return "\n".join(out).rstrip() + "\n"


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, spaces to hyphens, punctuation other than - and _ dropped."""
    kept = "".join(c for c in title.lower().replace("`", "") if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


# ------------------------------------------------------------------------------------------------------------- main


def pages() -> dict[Path, str]:
    """The generated pages and their text."""
    return {DOCS / "configs.md": render_configs(), DOCS / "cli.md": render_cli()}


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with `--check` report those that differ from the code's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
    for path in stale:
        print(f"{path}: differs from what the code gives; run python docs/generate.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
