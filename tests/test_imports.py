"""Importing jaxseeker must not start the XLA backend: multi-host programs call `jax.distributed.initialize()`
after their imports."""

import subprocess
import sys

STAGES = [
    "model",
    "parallel",
    "losses",
    "rewards",
    "generation",
    "agent",
    "tools",
    "world",
    "synthesis",
    "data",
    "train",
    "planning",
    "eval",
    "pipeline",
    "serve",
    "cli",
]


def test_no_stage_starts_the_backend_at_import():
    code = (
        "import importlib\n"
        f"for name in {STAGES!r}: importlib.import_module('jaxseeker.' + name)\n"
        "from jax._src import xla_bridge\n"
        "print(bool(xla_bridge._backends))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr[-2000:]


def test_every_exported_name_resolves():
    """Each package's `__init__.pyi` stub names what its modules define: `from jaxseeker.<stage> import X` works for
    every X in `__all__`, loaded on first use."""
    code = (
        "import importlib\n"
        f"for name in {STAGES[:-1]!r} + ['synthesis.qa']:\n"
        "    package = importlib.import_module('jaxseeker.' + name)\n"
        "    missing = [n for n in package.__all__ if getattr(package, n, None) is None]\n"
        "    assert package.__all__ and not missing, (name, missing)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_no_exported_name_is_also_the_name_of_another_submodule():
    """A package exporting `f` from `a.py` next to a module `f.py`: importing `f.py` (as any sibling may) would bind
    the package attribute `f` to that module, and with lazy exports `from package import f` would then return it."""
    import ast
    from pathlib import Path

    import jaxseeker

    clashes = []
    for stub in Path(jaxseeker.__file__).parent.rglob("__init__.pyi"):
        submodules = {p.stem for p in stub.parent.glob("*.py")} | {p.name for p in stub.parent.iterdir() if p.is_dir()}
        for node in ast.parse(stub.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                clashes += [
                    f"{stub.parent.name}.{a.name} (from .{node.module})"
                    for a in node.names
                    if a.name in submodules and a.name != node.module
                ]
    assert not clashes


def test_the_command_line_builds_without_jax_torch_or_matplotlib():
    """`jaxseeker --help` and every subcommand's parser load no heavy library (they import where they run)."""
    code = (
        "import sys\n"
        "from jaxseeker.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print(sorted(m for m in ('jax', 'torch', 'transformers', 'matplotlib', 'grain') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


def test_the_leaf_stages_import_no_other_stage():
    """DESIGN's one-way imports: `model`, `losses`, `world` and `rewards` use only themselves and the package's root
    modules (`errors`, `jsonl`, `resolve`), never another stage."""
    import ast
    from pathlib import Path

    import jaxseeker

    root = Path(jaxseeker.__file__).parent
    stages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    crossings = []
    for leaf in ("model", "losses", "world", "rewards"):
        for source in (root / leaf).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module] + [f"jaxseeker.{a.name}" for a in node.names if node.module == "jaxseeker"]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                crossings += [
                    f"{source.relative_to(root)}: {name}"
                    for name in names
                    if name.split(".")[0] == "jaxseeker"
                    and len(name.split(".")) > 1
                    and name.split(".")[1] in stages - {leaf}
                ]
    assert not crossings
