"""The modules' import graph, read from the source with `ast`: imports run one way (DESIGN.md, "Imports run one way").

Every `jaxseeker.*` import is an arrow, at module level or inside a function (a function-local import still makes the
two modules depend on each other, only later); imports under `if TYPE_CHECKING:` are not (they never run). A name
taken from a package (`from jaxseeker.train import run_sft`) points at the module its `__init__.pyi` stub loads it
from; the package itself (`from jaxseeker import model`) points at every module its stub names.
"""

import ast
import graphlib
from pathlib import Path

import jaxseeker

ROOT = Path(jaxseeker.__file__).parent


# The command line sits above every stage: `cli.py` and each stage's `command.py`, which parse flags and join the
# stages a command needs (`eval --config`, `bench rollout --model` read a pipeline config). Nothing else imports them.
def is_command_line(name: str) -> bool:
    """`jaxseeker.cli` or a stage's command module (`jaxseeker.train.rl.command`)."""
    return name == "jaxseeker.cli" or name.rpartition(".")[2] == "command"


def module_name(path: Path) -> str:
    """`jaxseeker/train/sft/loop.py` → `jaxseeker.train.sft.loop`; a package's `__init__.py` is the package."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`."""
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def imported(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, int]]:
    """Every import statement that can run, with its line, skipping the bodies of `if TYPE_CHECKING:`."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, node.lineno))
        todo.extend(ast.iter_child_nodes(node))
    return found


def stub_exports(package: str) -> dict[str, str]:
    """The names a lazily loaded package exports, each mapped to the module its `__init__.pyi` takes it from."""
    stub = MODULES[package].with_suffix(".pyi")
    if not stub.exists():
        return {}
    return {
        alias.asname or alias.name: f"{package}.{node.module}"
        for node in ast.parse(stub.read_text()).body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }


def owner(name: str) -> str | None:
    """The module that `name` (a module, or a module's attribute) lives in, if it is one of jaxseeker's."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def arrows_from(name: str) -> dict[str, int]:
    """The modules `name` imports, each with the line of its first import there."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: dict[str, int] = {}
    for node, line in imported(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found = [owner(alias.name) for alias in node.names if alias.name.startswith("jaxseeker")]
        else:
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(above + ([node.module] if node.module else []))
            if not base.startswith("jaxseeker"):
                continue
            found = []
            for alias in node.names:
                full = f"{base}.{alias.name}"
                exports = stub_exports(base) if base in MODULES else {}
                found.append(full if full in MODULES else exports.get(alias.name) or owner(base))
        for target in found:
            if target and target != name:
                targets.setdefault(target, line)
    if path.name == "__init__.py":  # a lazy package loads each module its stub names on first use
        for target in stub_exports(name).values():
            targets.setdefault(target, 0)
    return targets


GRAPH = {name: arrows_from(name) for name in MODULES}


def test_the_reader_sees_imports_at_every_depth_but_type_checking():
    """The reader itself: an import inside a function or a branch is an arrow, one under `TYPE_CHECKING` is not."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import jaxseeker.errors\n"
        "if TYPE_CHECKING:\n"
        "    from jaxseeker.train import rl\n"
        "else:\n"
        "    from jaxseeker import jsonl\n"
        "def run():\n"
        "    if True:\n"
        "        from jaxseeker.agent import Episode\n"
    )
    found = sorted(
        (getattr(node, "module", None) or node.names[0].name, line) for node, line in imported(ast.parse(source))
    )
    assert found == [("jaxseeker", 6), ("jaxseeker.agent", 9), ("jaxseeker.errors", 2), ("typing", 1)]


def test_the_graph_resolves_names_through_the_package_stubs():
    """A name taken from a package points at its module; the whole package points at all of them."""
    assert len(GRAPH) > 200
    assert "jaxseeker.model.forward" in GRAPH["jaxseeker.model"]  # the stub's `from .forward import …`
    assert "jaxseeker.agent.episode" in GRAPH["jaxseeker.train.rl.collect"]  # `from jaxseeker.agent import Episode`
    assert "jaxseeker.train.rl.loop" not in GRAPH["jaxseeker.train.rl.collect"]  # only under TYPE_CHECKING


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Import cycles, each as `a (line n) → b` steps: graphlib finds one, its first arrow is set aside, and again."""
    edges = {name: set(targets) for name, targets in graph.items()}
    found = []
    while True:
        try:
            graphlib.TopologicalSorter(edges).prepare()
            return found
        except graphlib.CycleError as error:
            cycle = error.args[1][::-1]  # graphlib lists each node before the ones that import it
        found.append([f"{a} (line {graph[a][b]}) → {b}" for a, b in zip(cycle, cycle[1:], strict=False)])
        edges[cycle[0]].discard(cycle[1])


def test_no_module_imports_itself_back():
    """No cycle among jaxseeker's modules: each one can be read, tested and moved knowing only those below it."""
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n\n".join("\n".join(cycle) for cycle in found)


def test_nothing_below_the_pipeline_imports_it():
    """Only the command line imports the offline pipeline (`jaxseeker pipeline`, and `eval` / `plan` / `bench rollout`
    of a pipeline recipe); the stages it runs, and the planner its recipes use, know nothing of it."""
    upward = [
        f"{name} (line {line}) → {target}"
        for name, targets in GRAPH.items()
        if not is_command_line(name) and not name.startswith("jaxseeker.pipeline")
        for target, line in targets.items()
        if target.startswith("jaxseeker.pipeline")
    ]
    assert not upward, "\n".join(upward)


def test_only_the_command_line_imports_a_command():
    """A command module is the command line's part of a stage: a library function inside one would drag the parser
    along, and tie the stage to the commands above it."""
    upward = [
        f"{name} (line {line}) → {target}"
        for name, targets in GRAPH.items()
        if not is_command_line(name)
        for target, line in targets.items()
        if is_command_line(target)
    ]
    assert not upward, "\n".join(upward)


def test_nothing_below_the_planner_imports_it():
    """The planner sits above the stages it plans (train, model, generation, agent, data …): they run the recipe they
    are given, and the commands and the pipeline above them resolve the plan and pass it down."""
    upward = [
        f"{name} (line {line}) → {target}"
        for name, targets in GRAPH.items()
        if not is_command_line(name) and not name.startswith(("jaxseeker.planning", "jaxseeker.pipeline"))
        for target, line in targets.items()
        if target.startswith("jaxseeker.planning")
    ]
    assert not upward, "\n".join(upward)


MAX_LINES = 400  # STYLE.md: files under ~400 lines, a module a reader holds in mind at once


def test_no_module_passes_the_line_limit():
    """Every module has one job and stays readable: a file past the limit is split by concept."""
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split each by concept): {long}"
