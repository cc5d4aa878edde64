"""A user's model file, without importing it: a `--model` reference (`path/file.py:build`, or
`path/model.keras`), the file's content hash, the identity a run is stored and grouped under, and the
models folder the dashboard lists (a page never takes a free-text path).

Nothing here runs the user's code: the builder is imported only in the run's own process
(dashbench/engine/workloads/user.py). A `.py` file's builders are found by reading its syntax tree.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from pathlib import Path
from typing import Optional

from dashbench.spec import MODELS, SpecError

SUFFIXES = (".py", ".keras")
DEFAULT_BUILDER = "build"
MODELS_DIR_ENV = "DASHBENCH_MODELS_DIR"
_BUILDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_builtin(model: str) -> bool:
    return model in MODELS


def looks_like_file(model: str) -> bool:
    """Does a --model value name a file (rather than a built-in workload)?"""
    return isinstance(model, str) and not is_builtin(model) and (
        "/" in model or os.sep in model or model.rsplit(":", 1)[0].endswith((*SUFFIXES, ".h5", ".hdf5")))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def split(text: str) -> tuple[str, Optional[str]]:
    """'dir/file.py:build' → ('dir/file.py', 'build'); 'm.keras' → ('m.keras', None). A .py file with
    no builder named means `build`."""
    path, builder = text, None
    head, sep, tail = text.rpartition(":")
    if sep and head.endswith(".py"):
        path, builder = head, tail
    if path.endswith((".h5", ".hdf5")):
        raise SpecError("model", f"{path}: .h5 files load without Keras's safe mode; save the model as .keras "
                                 "(model.save('model.keras')) or give a builder file.py:build")
    if not path.endswith(SUFFIXES):
        raise SpecError("model", f"{text!r} is neither a built-in ({', '.join(MODELS)}) nor a model file: "
                                 "give path/file.py:build or path/model.keras")
    if path.endswith(".py"):
        builder = builder or DEFAULT_BUILDER
        if not _BUILDER.fullmatch(builder):
            raise SpecError("model", f"{builder!r} is not a Python function name (file.py:build)")
    return path, builder


def reference(text: str) -> dict:
    """The spec fields of a --model file reference: model (the identity), model_path (absolute) and
    model_sha256. A missing file is one line naming it."""
    path, builder = split(text)
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise SpecError("model", f"no such model file: {path}")
    resolved = resolved.resolve()
    if builder is not None:
        found = builders_in(resolved)
        if builder not in found:
            listed = ", ".join(found) or "none"
            raise SpecError("model", f"{resolved.name} has no function {builder}() at its top level "
                                     f"(functions there: {listed})")
    sha = sha256_of(resolved)
    return {"model": identity(resolved.name, builder, sha), "model_path": str(resolved), "model_sha256": sha}


def identity(file_name: str, builder: Optional[str], sha: str) -> str:
    return f"{file_name}:{builder}@{sha[:12]}" if builder else f"{file_name}@{sha[:12]}"


def builder_of(model: str) -> Optional[str]:
    """The builder named in a stored identity ('mlp.py:build@…' → 'build'; a .keras file → None)."""
    name = model.rsplit("@", 1)[0]
    return name.rpartition(":")[2] if ".py:" in name else None


def argument(spec) -> str:
    """The --model value that names the spec's model again on a command line (a child `sweep`)."""
    if is_builtin(spec.model):
        return spec.model
    builder = builder_of(spec.model)
    return f"{spec.model_path}:{builder}" if builder else spec.model_path


def builders_in(path: Path) -> list[str]:
    """The top-level functions of a .py file, read from its syntax tree (nothing runs)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        raise SpecError("model", f"{path.name} is not readable Python: {str(exc).splitlines()[0]}") from None
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


# A cluster run's Ray job carries the file (its working_dir): on the node the run reads that copy, named
# here, and checks its hash as everywhere else.
ARRIVED_ENV = "DASHBENCH_MODEL_FILE"


def local_path(spec) -> Path:
    """Where this process reads the spec's model file: the copy a Ray job brought (in its working
    directory), else the path the spec names."""
    arrived = os.environ.get(ARRIVED_ENV)
    if arrived and Path(arrived).name == Path(spec.model_path).name:
        return Path.cwd() / Path(arrived).name
    return Path(spec.model_path)


def check_file(spec) -> None:
    """The file a spec names is still there, with the content it was checked with (its hash): a file
    that changed between queueing and running (or on its way to a cluster's node) is refused."""
    path = local_path(spec)
    if not path.is_file():
        raise SpecError("model", f"no such model file: {spec.model_path}")
    sha = sha256_of(path)
    if sha != spec.model_sha256:
        raise SpecError("model", f"{path.name} changed since this run was set up (sha256 {spec.model_sha256[:12]}… "
                                 f"then, {sha[:12]}… now): refused; queue it again to measure the new file")


# -- the models folder (the Run page's only way to name a file) ---------------------------------


def models_dir(configured: Optional[str] = None) -> Optional[Path]:
    """The models folder named at server start (--models-dir or DASHBENCH_MODELS_DIR), or None."""
    value = configured if configured is not None else os.environ.get(MODELS_DIR_ENV)
    if not value:
        return None
    folder = Path(value).expanduser().resolve()
    return folder if folder.is_dir() else None


def choices(folder: Optional[Path]) -> list[str]:
    """Every model the folder offers, as 'relative/file.py:builder' or 'relative/model.keras', sorted;
    files whose real path lies outside the folder (a symlink out) are not offered."""
    if folder is None:
        return []
    out = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file() or any(p.startswith(".") for p in path.parts):
            continue
        if not _inside(path.resolve(), folder):
            continue
        relative = path.relative_to(folder).as_posix()
        if path.suffix == ".keras":
            out.append(relative)
            continue
        try:
            out += [f"{relative}:{name}" for name in builders_in(path) if name.startswith(DEFAULT_BUILDER)]
        except SpecError:
            continue
    return out


def reference_in(folder: Optional[Path], choice: str) -> dict:
    """A page's choice resolved inside the models folder: the same fields as `reference`, refused
    (one line) when the real path is outside the folder."""
    if folder is None:
        raise SpecError("model", f"no models folder was named at server start (--models-dir or {MODELS_DIR_ENV})")
    path, builder = split(choice)
    target = (folder / path).resolve()
    if not _inside(target, folder):
        raise SpecError("model", f"{choice!r} is outside the models folder {folder}: only its files can be chosen")
    return reference(f"{target}:{builder}" if builder else str(target))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True
