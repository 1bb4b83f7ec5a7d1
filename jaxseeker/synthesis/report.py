"""Statistics of a trajectory file: tool calls per trajectory (WebSailor Fig. 3 style), tokens, thought
lengths, actions per type, how the thoughts reason (quoted evidence, the clue tested next, oracle jumps), and the
funnel's pass rate per stage (from FILE.stats.json when present)."""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from jaxseeker.agent.parser import ToolCall, parse_answer, parse_tool_calls, split_think
from jaxseeker.errors import InputError
from jaxseeker.synthesis.ledger import NEXT, UNCHECKED

_QUOTE = re.compile(r"“([^”]+)”")
RFT_CALLS, RFT_TOKENS = 5, 32768  # WebSailor's RFT filter: more calls than this, at most this many tokens


@dataclasses.dataclass
class TrajectoryStats:
    """Distributions over a set of trajectory records."""

    n: int = 0
    tool_calls: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # calls → records
    tokens: list[int] = dataclasses.field(default_factory=list)  # per record (from provenance)
    think_words: list[int] = dataclasses.field(default_factory=list)  # per assistant turn
    actions: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # tool name / "answer"
    teachers: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    tries: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    stages: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)  # stage → (entered, passed)
    after_observation: int = 0  # assistant turns with an observation before them
    quoted: int = 0  # … whose thought quotes a sentence an earlier observation shows
    named_next: int = 0  # … whose thought names the clue it tests next or what stays unchecked (`ledger` words)
    reasoned: int = 0  # … both
    oracle_jumps: int = 0  # candidates taken unseen out of several (provenance.oracle_jumps)
    names_nothing: int = 0  # records of questions that name no entity (provenance.names_nothing)
    rft_kept: int = 0  # records WebSailor's RFT filter keeps: more than 5 tool calls, at most 32,768 tokens


def reasons(thought: str, seen: str) -> tuple[bool, bool]:
    """(the thought quotes a sentence of `seen`, the observations so far with spaces collapsed; it names the clue
    it tests next or the clues still unchecked)."""
    quoted = any((q := " ".join(m.split())) and q in seen for m in _QUOTE.findall(thought))
    return quoted, any(marker in thought for marker in NEXT + UNCHECKED)


def stats_path(path: str | Path) -> Path:
    """Where `synth trajectories` writes the funnel statistics of FILE: FILE.stats.json."""
    return Path(f"{path}.stats.json")


def trajectory_stats(records: Sequence[Mapping[str, Any]], funnel: Mapping[str, Any] | None = None) -> TrajectoryStats:
    """The distributions of `records` (and the stage pass counts of a `SynthStats.to_json()` dict)."""
    st = TrajectoryStats(n=len(records))
    for r in records:
        prov = r.get("provenance", {})
        calls, seen, asked = 0, "", False
        for m in r["messages"]:
            if m["role"] in ("user", "tool"):  # the question, then the observations
                seen += " " + " ".join(m["content"].split()) if asked else ""
                asked = True
            if m["role"] != "assistant":
                continue
            thought, _ = split_think(m["content"])
            if seen:
                quoted, named = reasons(thought, seen)
                st.after_observation += 1
                st.quoted += quoted
                st.named_next += named
                st.reasoned += quoted and named
            st.think_words.append(len(thought.split()))
            made = [c for c in parse_tool_calls(m["content"]) if isinstance(c, ToolCall)]
            calls += len(made)
            st.actions.update(c.name for c in made)
            if parse_answer(m["content"]) is not None:
                st.actions["answer"] += 1
        st.tool_calls[calls] += 1
        st.oracle_jumps += int(prov.get("oracle_jumps", 0))
        st.names_nothing += bool(prov.get("names_nothing"))
        st.rft_kept += calls > RFT_CALLS and int(prov.get("tokens", 0)) <= RFT_TOKENS
        if "tokens" in prov:
            st.tokens.append(int(prov["tokens"]))
        st.teachers[prov.get("teacher", "?")] += 1
        if "tries" in prov:
            st.tries[int(prov["tries"])] += 1
    if funnel:
        entered, passed = funnel.get("entered", {}), funnel.get("passed", {})
        st.stages = {name: (int(entered[name]), int(passed.get(name, 0))) for name in entered}
    return st


def _spread(values: Sequence[int]) -> str:
    """Mean, median, p90 and max of `values`; the p90 interpolates between the values (`inclusive`: the default
    `exclusive` method extrapolates past the max for a few values, p90 2.7 of [1, 2])."""
    if not values:
        return "n/a"
    q = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else [values[0]] * 9
    return (
        f"mean {statistics.fmean(values):.1f}, median {statistics.median(values):g}, p90 {q[8]:.0f}, max {max(values)}"
    )


def format_report(st: TrajectoryStats) -> str:
    """The statistics as text."""
    lines = [f"{st.n} trajectories (teachers: {dict(st.teachers)})"]
    calls = [k for k, v in st.tool_calls.items() for _ in range(v)]
    lines.append(f"tool calls per trajectory: {_spread(calls)}")
    lines.append("  distribution: " + ", ".join(f"{k}: {v}" for k, v in sorted(st.tool_calls.items())))
    lines.append(f"tokens per trajectory: {_spread(st.tokens)}")
    lines.append(f"thought length (words per turn): {_spread(st.think_words)}")
    lines.append("actions: " + ", ".join(f"{k} {v}" for k, v in st.actions.most_common()))
    turns = max(1, st.after_observation)
    lines.append(
        f"turns after an observation: {st.after_observation}; quoting it {st.quoted / turns:.0%}, naming the next "
        f"clue or what is unchecked {st.named_next / turns:.0%}, both {st.reasoned / turns:.0%}"
    )
    lines.append(
        f"oracle jumps: {st.oracle_jumps}; questions that name nothing: {st.names_nothing}; more than {RFT_CALLS} "
        f"tool calls within {RFT_TOKENS:,} tokens (WebSailor's RFT filter): {st.rft_kept} of {st.n}"
    )
    if st.tries:
        lines.append("tries of kept: " + ", ".join(f"{k}: {v}" for k, v in sorted(st.tries.items())))
    for name, (n_in, n_out) in st.stages.items():
        lines.append(f"stage {name:<12} {n_out}/{n_in} pass {n_out / max(1, n_in):.0%}")
    return "\n".join(lines)


def plot_path(path: str | Path) -> Path:
    """The file `plot_report` writes for `path` (FILE.png when it has no suffix); InputError naming it when
    matplotlib writes no files of its type."""
    out = Path(path)
    if not out.suffix:
        return out.with_name(f"{out.name}.png")
    if out.suffix[1:].lower() not in FigureCanvasAgg.get_supported_filetypes():
        raise InputError(f"{out}: matplotlib writes no {out.suffix} files; use .png, .svg or .pdf")
    return out


def plot_report(st: TrajectoryStats, path: str | Path) -> Path:
    """One PNG with five panels: tool calls, tokens, thought length, actions, stage pass rates."""
    fig = Figure(figsize=(15, 3.4), dpi=100)
    FigureCanvasAgg(fig)  # the Agg canvas: no display, no pyplot state
    axes = fig.subplots(1, 5)
    keys = sorted(st.tool_calls)
    axes[0].bar([str(k) for k in keys], [st.tool_calls[k] for k in keys], color="#4c72b0")
    axes[0].set(title="tool calls per trajectory", xlabel="tool calls", ylabel="trajectories")
    axes[1].hist(st.tokens or [0], bins=30, color="#55a868")
    axes[1].set(title="tokens per trajectory", xlabel="tokens", ylabel="trajectories")
    axes[2].hist(st.think_words or [0], bins=30, color="#c44e52")
    axes[2].set(title="thought length", xlabel="words per turn", ylabel="turns")
    names = [k for k, _ in st.actions.most_common()]
    axes[3].bar(names, [st.actions[k] for k in names], color="#8172b2")
    axes[3].set(title="actions per type", ylabel="count")
    stages = list(st.stages)
    rates = [100 * out / max(1, n) for n, out in st.stages.values()]
    axes[4].bar(stages, rates, color="#ccb974")
    axes[4].set(title="filter pass rate per stage", ylabel="% of episodes entering", ylim=(0, 100))
    for x, v in zip(stages, rates, strict=True):
        axes[4].annotate(f"{v:.0f}%", (x, v), ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    out = plot_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def load_funnel(path: str | Path) -> dict[str, Any] | None:
    """The FILE.stats.json next to a trajectory file, or None; InputError naming it when it does not hold the
    stage counts `synth trajectories` writes."""
    p = stats_path(path)
    if not p.is_file():
        return None
    try:
        funnel = json.loads(p.read_bytes())
    except ValueError as err:  # not UTF-8, or not JSON
        raise InputError(f"{p}: not a JSON file: {err}") from None
    counts = [funnel.get(key, {}) for key in ("entered", "passed")] if isinstance(funnel, dict) else [None]
    if not all(isinstance(c, dict) and all(isinstance(n, int) for n in c.values()) for c in counts):
        raise InputError(f"{p}: expected a JSON object whose 'entered' and 'passed' map stages to episode counts")
    return funnel
