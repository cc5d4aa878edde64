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

from dashbench.core.spec import MODEL_BUILDER, MODEL_FILE_NAME, MODELS, SpecError, check_text

SUFFIXES = (".py", ".keras")
DEFAULT_BUILDER = "build"
MODELS_DIR_ENV = "DASHBENCH_MODELS_DIR"
_BUILDER = re.compile(MODEL_BUILDER)
_FILE_NAME = re.compile(MODEL_FILE_NAME + r"\.(py|keras)")
NAME_RULE = (
    "a model file's name is one line of at most 200 characters before its suffix (spaces and Unicode "
    "welcome), without control characters"
)


def is_builtin(model: str) -> bool:
    return model in MODELS


def looks_like_file(model: str) -> bool:
    """Does a --model value name a file (rather than a built-in workload)?"""
    return (
        isinstance(model, str)
        and not is_builtin(model)
        and ("/" in model or os.sep in model or model.rsplit(":", 1)[0].endswith((*SUFFIXES, ".h5", ".hdf5")))
    )


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
        raise SpecError(
            "model",
            f"{path}: .h5 files load without Keras's safe mode; save the model as .keras "
            "(model.save('model.keras')) or give a builder file.py:build",
        )
    if not path.endswith(SUFFIXES):
        raise SpecError(
            "model",
            f"{text!r} is neither a built-in ({', '.join(MODELS)}) nor a model file: "
            "give path/file.py:build or path/model.keras",
        )
    if path.endswith(".py"):
        builder = builder or DEFAULT_BUILDER
        if not _BUILDER.fullmatch(builder):
            raise SpecError(
                "model", f"{builder!r} is not a Python function name of at most 100 characters (file.py:build)"
            )
    return path, builder


def reference(text: str) -> dict:
    """The spec fields of a --model file reference: model (the identity), model_path (absolute) and
    model_sha256. A missing file is one line naming it."""
    path, builder = split(text)
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise SpecError("model", f"no such model file: {path}")
    resolved = resolved.resolve()
    check_name(resolved)
    if builder is not None:
        found = builders_in(resolved)
        if builder not in found:
            listed = ", ".join(found) or "none"
            raise SpecError(
                "model", f"{resolved.name} has no function {builder}() at its top level (functions there: {listed})"
            )
    sha = sha256_of(resolved)
    return {"model": identity(resolved.name, builder, sha), "model_path": str(resolved), "model_sha256": sha}


def check_name(path: Path) -> None:
    """The rule a model file's name and path keep, so its identity can be stored: the same for `run`'s
    --model and the page's models folder, which offers only what passes it."""
    if not _FILE_NAME.fullmatch(path.name):
        raise SpecError("model", f"{path.name!r}: {NAME_RULE}")
    check_text("model_path", str(path))


def identity(file_name: str, builder: Optional[str], sha: str) -> str:
    return f"{file_name}:{builder}@{sha[:12]}" if builder else f"{file_name}@{sha[:12]}"


_VERSION = re.compile(r"@[0-9a-f]{12}$")


def family(model: str) -> str:
    """The file and builder an identity names, whatever the file's version: 'mlp.py:build@3fa9c2d1e0b4'
    → 'mlp.py:build' (what Compare groups by: an edit elsewhere in the file keeps the builder's runs
    together). A built-in's name as it is."""
    return _VERSION.sub("", model) if isinstance(model, str) and not is_builtin(model) else model


def version(model: str) -> Optional[str]:
    """The file's version in an identity: the first 12 hex digits of its sha256; None for a built-in."""
    found = _VERSION.search(model) if isinstance(model, str) and not is_builtin(model) else None
    return found.group()[1:] if found else None


def short_identity(model: str, chars: int) -> str:
    """An identity cut to `chars` characters from its file name's end, so the version that tells two
    files apart stays: 'transformer_classi…:build@3fa9c2d1e0b4'."""
    if len(model) <= chars or version(model) is None:
        return model
    name, tail = model[:-13], model[-13:]
    builder = name[name.rindex(":") :] if ".py:" in name else ""
    keep = chars - len(tail) - len(builder) - 1
    if keep < 1:
        return model[: chars - len(tail) - 1] + "…" + tail
    return name[: len(name) - len(builder)][:keep] + "…" + builder + tail


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
        raise SpecError(
            "model",
            f"{path.name} changed since this run was set up (sha256 {spec.model_sha256[:12]}… "
            f"then, {sha[:12]}… now): refused; queue it again to measure the new file",
        )


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
        try:
            check_name(path.resolve())
        except SpecError:
            continue  # the launch would refuse it: never offered
        relative = path.relative_to(folder).as_posix()
        if path.suffix == ".keras":
            out.append(relative)
            continue
        try:
            out += [
                f"{relative}:{name}"
                for name in builders_in(path)
                if name.startswith(DEFAULT_BUILDER) and _BUILDER.fullmatch(name)
            ]
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


# -- what a run records of the model (RunResult.model_info) -------------------------------------

INFO_KEYS = ("source", "file", "builder", "sha256", "parameters", "inputs", "outputs", "loss", "optimizer", "task")


def check_info(name: str, value) -> None:
    """RunResult.check's rule for model_info: None, or an object of INFO_KEYS (ValueError "field: why")."""
    if value is None:
        return

    def fail(where: str, what: str, got) -> None:
        shown = repr(got)
        raise ValueError(f"{where}: must be {what}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")

    if not isinstance(value, dict):
        fail(name, "an object", value)
    for key in value:
        if key not in INFO_KEYS:
            fail(
                f"{name}.{key}" if isinstance(key, str) and key.isidentifier() else name,
                f"one of the keys {', '.join(INFO_KEYS)}",
                key,
            )
    for key in ("source", "file", "builder", "sha256", "loss", "optimizer", "task"):
        if value.get(key) is not None and not isinstance(value[key], str):
            fail(f"{name}.{key}", "text or null", value[key])
    count = value.get("parameters")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 2**63):
        fail(f"{name}.parameters", "a whole number >= 0 or null", count)
    for key in ("inputs", "outputs"):
        tensors = value.get(key, [])
        if not isinstance(tensors, list) or not all(isinstance(t, dict) for t in tensors):
            fail(f"{name}.{key}", "a list of objects", tensors)


def info_text(info: dict) -> tuple[str, str]:
    """('mlp.py:build', 'sha256 3fa9c2d1e0b4…, 12,345 parameters, inputs x (32,) float32, …'): a user's
    model as `show` and the pages name it."""
    name = f"{info.get('file')}:{info['builder']}" if info.get("builder") else str(info.get("file") or "?")
    parts = []
    if isinstance(info.get("sha256"), str):
        parts.append(f"sha256 {info['sha256'][:12]}…")
    count = info.get("parameters")
    if isinstance(count, int) and not isinstance(count, bool):
        parts.append(f"{count:,} parameters")
    inputs = [t for t in info.get("inputs") or [] if isinstance(t, dict)]
    if inputs:
        parts.append(
            "inputs " + ", ".join(f"{t.get('name')} {tuple(t.get('shape') or ())} {t.get('dtype')}" for t in inputs)
        )
    if info.get("task"):
        parts.append(str(info["task"]))
    return name, ", ".join(parts)
