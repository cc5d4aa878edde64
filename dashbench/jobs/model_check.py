"""A model file's run checked before it is stored: bad input stores nothing, in the queue as in `run`.
The file may be imported only in a run's own kind of process, so `python -m dashbench run
--check-spec` imports and builds it there and says either its one line (raised here as the SpecError
it was) or the model's counts, which the memory estimate here then knows: a sweep's points past the
host's memory are refused before any is stored. One check per file, hash, builder and what shapes the
build (the batch only where the builder takes it) in this process. `answer` is that process's side."""

from __future__ import annotations

import json
import subprocess

from dashbench.core.spec import RunSpec, SpecError, is_user_model
from dashbench.jobs import children
from dashbench.workloads import memory_counts

CHECK_TIMEOUT_S = 900.0  # the framework's start and the file's own limits (each of its parts) inside it
# What does not change a build: a sweep of these is checked once.
UNBUILT = ("batch_size", "steps", "warmup", "steps_per_loop", "repeats", "label", "seed", "seeds")

_checked: dict[str, dict | None] = {}


def check(spec: RunSpec, run_command: list[str]) -> None:
    fields = spec.to_dict()
    key = json.dumps({k: v for k, v in fields.items() if k not in UNBUILT}, sort_keys=True)
    if key not in _checked:
        _checked[key] = _ask(spec, run_command)
    if _checked[key]:
        memory_counts.know(spec.model, _checked[key])


def _ask(spec: RunSpec, run_command: list[str]) -> dict | None:
    try:
        done = subprocess.run(
            [*run_command, "--check-spec", json.dumps(spec.to_dict())],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError("model", f"{spec.model} could not be checked: {exc}") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    answer = json.loads(lines[-1]) if lines else {}
    if done.returncode == 0 and answer.get("status") == "ok":
        return answer.get("facts")
    if answer.get("status") == "invalid":
        field = answer.get("field") or "model"
        raise SpecError(field, str(answer.get("error", "")).removeprefix(f"{field}: "))
    tail = " | ".join(done.stderr.strip().splitlines()[-3:])
    raise SpecError("model", f"{spec.model} could not be checked (exit {done.returncode}): {tail}")


def answer(spec: RunSpec) -> dict | None:
    """`run --check-spec`'s side, in the process `_ask` starts: the model file imported and built as its
    run would (its SpecError raised); returns the model's counts for the memory estimate."""
    if not is_user_model(spec):
        raise SpecError("check_spec", "only a model file's run is checked this way")
    from dashbench.engine.workloads import user

    with children.ending_with_run():
        user.prepare(spec, _fits_at_some_batch)  # the caller checks the batch, with the counts
    return memory_counts.USER_MODEL_FACTS.get(spec.model)


def _fits_at_some_batch(spec: RunSpec) -> None:
    """A model no batch size makes fit is refused before it is built; a batch too large is the caller's."""
    from dashbench.workloads import memory

    try:
        memory.check(spec)
    except SpecError as exc:
        if exc.field != "batch_size":
            raise
