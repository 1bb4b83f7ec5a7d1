"""Compiled HLO read back as text: its computations, which of them run inside a loop, and its all-gathers.

For tests that check where XLA placed a collective (a weight gathered once outside a loop rather than on every
iteration); `jax.stages.Compiled.as_text()` gives the text.
"""

import re


def computations(hlo: str) -> dict[str, list[str]]:
    """The instruction lines of each computation of an HLO module's text, by name."""
    out, name = {}, None
    for line in hlo.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\) -> .* \{$", line)
        if header:
            name = header.group(1)
            out[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None:
            out[name].append(line)
    return out


def loop_computations(comps: dict[str, list[str]]) -> set[str]:
    """Names of the computations that run inside a `while` loop: its bodies and all they call."""
    todo = [m for lines in comps.values() for line in lines for m in re.findall(r"\bbody=%?([\w.\-]+)", line)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for line in comps[name]:
            for group in re.findall(
                r"(?:body|condition|to_apply|calls|branch_computations|true_computation|"
                r"false_computation)=\{?(%[\w.\-]+(?:, %[\w.\-]+)*)",
                line,
            ):
                todo += [g.strip().lstrip("%") for g in group.split(",")]
    return seen


def all_gathers(hlo: str) -> list[dict]:
    """Every all-gather of a compiled program: its result dims and whether it runs inside a loop."""
    comps = computations(hlo)
    loops = loop_computations(comps)
    out = []
    for name, lines in comps.items():
        for line in lines:
            match = re.search(r"= \w+\[([\d,]*)\]\S* all-gather(?:-start)?\(", line)
            if match:
                out.append({"dims": [int(d) for d in match.group(1).split(",") if d], "in_loop": name in loops})
    return out
