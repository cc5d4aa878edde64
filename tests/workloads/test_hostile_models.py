"""Hostile model files: a builder that hangs, exits, forks or prints, a model too big for the host,
and `.keras` files that are no Keras archive or a zip bomb. Each ends in one `model:` or `memory:`
line (exit 2, nothing stored, no traceback), or, for a builder that forks, in a run that leaves no
process behind and prints exactly one JSON object. Each real run is a process of its own, as dashbench
launches it: what is tested is what that process does with the user's code."""

import json
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fixtures.child_env import child_env

from dashbench.cli import main
from dashbench.store import Store

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--device", "cpu"]

HOSTILE = """
import os, sys, time
import keras

def hangs():
    time.sleep(600)

def stubborn():  # keeps the stop for itself: the process is ended from the backstop
    while True:
        try:
            time.sleep(600)
        except BaseException:
            pass

def exits():
    sys.exit(3)

def huge():  # 40 layers of 256 M parameters, 1 GB each in float32: 10 B parameters
    x = keras.Input((16000,))
    h = x
    for _ in range(40):
        h = keras.layers.Dense(16000)(h)
    return keras.Model(x, keras.layers.Dense(10)(h))
"""

FORKS = """
import os, time
import keras
print("printed by the file")

def build():
    print("printed by build")
    if os.fork() == 0:  # a daemon: its parent exits, it is orphaned
        if os.fork() == 0:
            with open(os.environ["PID_FILE"], "a") as handle:
                handle.write(f"{os.getpid()}\\n")
            time.sleep(300)
        os._exit(0)
    x = keras.Input((4,), name="x")
    return keras.Model(x, keras.layers.Dense(2)(x))
"""


def rows(db: Path) -> list:
    if not db.exists():
        return []
    with Store(db) as store:
        return store.runs().to_dict("records")


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


def run(model: str, db: Path, backend: str, cwd: Path, limit_gb: float = 0, **env) -> subprocess.CompletedProcess:
    def cap():  # never the real allocation, should the check before the build fail
        if limit_gb:
            resource.setrlimit(resource.RLIMIT_AS, (int(limit_gb * 2**30), resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "dashbench", "run", "--model", model, "--backend", backend, "--db", str(db)]
        + ["--json", *TINY],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=child_env(PYTHONPATH=str(ROOT), **{"DASHBENCH_MODEL_IMPORT_TIMEOUT_S": "2", **env}),
        timeout=600,
        preexec_fn=cap,
    )


def refused(done: subprocess.CompletedProcess, line: str, field: str) -> None:
    """Exit 2, one error line starting with `line`, no traceback, one JSON object naming `field`."""
    errors = [text for text in done.stderr.splitlines() if text.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and errors[0].startswith(line), done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (obj,) = [json.loads(text) for text in done.stdout.splitlines()]
    assert obj["status"] == "invalid" and obj["field"] == field, obj


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_builder_that_never_returns_is_stopped_at_the_time_limit(backend, tmp_path):
    path = write(tmp_path, "hostile.py", HOSTILE)
    db = tmp_path / "runs.sqlite"
    done = run(f"{path}:hangs", db, backend, tmp_path)
    refused(
        done, "error: model: hostile.py:hangs() did not return within 2 s (DASHBENCH_MODEL_IMPORT_TIMEOUT_S)", "model"
    )
    assert rows(db) == []


def test_a_builder_that_keeps_its_stop_is_ended_from_outside(tmp_path):
    path = write(tmp_path, "hostile.py", HOSTILE)
    db = tmp_path / "runs.sqlite"
    # The backstop's grace made short: what is proved is that it ends the process, not how long it waits.
    done = run(f"{path}:stubborn", db, "jax", tmp_path, DASHBENCH_MODEL_BACKSTOP_S="1")
    refused(done, "error: model: hostile.py:stubborn() did not return within 2 s", "model")
    assert rows(db) == []


def test_a_file_that_exits_is_refused_whatever_its_code(tmp_path, capfd):
    quits = write(tmp_path, "quits.py", "import os\n\ndef build():\n    pass\n\nos._exit(0)\n")
    db = tmp_path / "runs.sqlite"
    refused(
        run(f"{quits}:build", db, "jax", tmp_path),
        "error: model: quits.py called os._exit(0): a model file defines and returns a model, it never exits",
        "model",
    )
    # sys.exit(3) in build() would be dashbench's out-of-memory exit: refused in this process too.
    path = write(tmp_path, "hostile.py", HOSTILE)
    assert main(["run", "--model", f"{path}:exits", "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert (
        err.strip()
        == "error: model: hostile.py:exits() called sys.exit(3): a model file defines and returns a model, it never exits"
    )
    assert rows(db) == []


def test_a_builder_that_forks_and_prints_leaves_no_process_and_one_json_object(tmp_path):
    path = write(tmp_path, "forks.py", FORKS)
    db, pids = tmp_path / "runs.sqlite", tmp_path / "pids"
    # Its pipes closed, so this returns: a child left alive would hold them open for its 300 s.
    done = run(f"{path}:build", db, "jax", tmp_path, PID_FILE=str(pids), DASHBENCH_MODEL_IMPORT_TIMEOUT_S="300")
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = [json.loads(line) for line in done.stdout.splitlines()]  # the prints went to stderr
    assert result["status"] == "done" and "printed by build" in done.stderr
    forked = [int(pid) for pid in pids.read_text().split()]
    assert forked and not [pid for pid in forked if Path(f"/proc/{pid}").exists()], forked


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_model_the_host_cannot_hold_is_refused_before_its_weights_exist(backend, tmp_path):
    path = write(tmp_path, "hostile.py", HOSTILE)
    db = tmp_path / "runs.sqlite"
    done = run(f"{path}:huge", db, backend, tmp_path, limit_gb=12, DASHBENCH_MEMORY_BUDGET_GB="4")
    refused(done, "error: memory: hostile.py:huge@", "memory")
    assert "no batch size fits at these shapes" in done.stderr and "GB of memory (estimate)" in done.stderr
    assert rows(db) == []


def bomb(path: Path) -> Path:
    """A zip whose config.json unpacks to 1 GiB of zeros: about a megabyte on disk."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("metadata.json", "{}")
        with archive.open("config.json", "w", force_zip64=True) as member:
            chunk = bytes(2**20)
            for _ in range(1024):
                member.write(chunk)
    return path


def test_keras_files_that_are_no_archive_or_a_bomb_are_refused_before_parsing(tmp_path, capfd):
    from fixtures.keras_files import save_tiny_keras

    good = save_tiny_keras(tmp_path / "good.keras").read_bytes()
    (tmp_path / "empty.keras").write_bytes(b"")
    (tmp_path / "cut.keras").write_bytes(good[: len(good) // 2])
    (tmp_path / "text.keras").write_text("not a zip")
    with zipfile.ZipFile(tmp_path / "bare.keras", "w") as archive:
        archive.writestr("metadata.json", "{}")
    bomb(tmp_path / "bomb.keras")
    cases = {
        "empty.keras": "error: model: empty.keras is not a Keras archive (a .keras file is a zip holding config.json): it is empty",
        "cut.keras": "error: model: cut.keras is not a Keras archive (a .keras file is a zip holding config.json): it is truncated or not a zip file",
        "text.keras": "error: model: text.keras is not a Keras archive (a .keras file is a zip holding config.json): it is truncated or not a zip file",
        "bare.keras": "error: model: bare.keras is not a Keras archive (a .keras file is a zip holding config.json): it has no config.json",
        "bomb.keras": "error: model: bomb.keras's config.json would unpack to 1,024 MiB, past the 64 MiB a model's config may take: refused before reading it",
    }
    db = tmp_path / "runs.sqlite"
    for name, line in cases.items():
        assert main(["run", "--model", str(tmp_path / name), "--db", str(db), *TINY]) == 2
        err = capfd.readouterr().err
        assert err.strip() == line, err
    assert rows(db) == []


INT_INPUT = (
    "import keras\n\ndef build():\n    i = keras.Input((4,), dtype='int32', name='ids')\n"
    "    return keras.Model(i, keras.layers.Dense(2)(keras.ops.cast(i, 'float32')))\n"
)


CAPPED = (
    "import resource, runpy, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (12 * 2**30, resource.RLIM_INFINITY))\n"
    "sys.argv = ['dashbench', *sys.argv[1:]]\n"
    "runpy.run_module('dashbench', run_name='__main__')\n"
)


def test_the_queue_and_a_sweep_store_nothing_for_a_bad_model_file(tmp_path, capfd, monkeypatch):
    from dashbench.core.spec import RunSpec, SpecError
    from dashbench.jobs import queue
    from dashbench.workloads import model_file

    # The check's process under an address-space cap: never the real allocation, should it build for real.
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, "-c", CAPPED, "run"])
    path = write(tmp_path, "ints.py", INT_INPUT)
    db = tmp_path / "runs.sqlite"
    line = "input 'ids' is int32 and feeds no Embedding, so its range is unknown"
    spec = RunSpec(batch_size=8, steps=2, warmup=1, device="cpu", **model_file.reference(f"{path}:build"))
    with pytest.raises(SpecError, match=line) as caught:
        queue.submit(spec, db)
    assert caught.value.field == "model" and rows(db) == []
    sweep = ["sweep", "--model", f"{path}:build", "--device", "cpu", "--batch-sizes", "8,16", "--steps", "2"]
    assert main([*sweep, "--warmup", "0", "--db", str(db)]) == 2
    err = capfd.readouterr().err
    assert f"error: model: {line}" in err and "Traceback" not in err, err
    assert rows(db) == []
    # A model too big for the host: the check's counts refuse each point here, before any is stored.
    hostile = write(tmp_path, "hostile.py", HOSTILE)
    monkeypatch.setenv("DASHBENCH_MEMORY_BUDGET_GB", "4")  # the check's process and this one
    huge = RunSpec(batch_size=8, device="cpu", **model_file.reference(f"{hostile}:huge"))
    with pytest.raises(SpecError, match="no batch size fits") as caught:
        queue.submit(huge, db)
    assert caught.value.field == "memory" and rows(db) == []


@pytest.mark.parametrize(
    "variable, read, default",
    [("DASHBENCH_MODEL_BACKSTOP_S", "backstop_s", 5.0), ("DASHBENCH_MODEL_IMPORT_TIMEOUT_S", "timeout_s", 60.0)],
)
def test_the_time_limits_are_read_from_their_variables(monkeypatch, variable, read, default):
    from dashbench.engine.workloads import user_import

    for value, seconds in [(None, default), ("1", 1.0), ("0.5", 0.5), ("0", default), ("-2", default)] + [
        ("soon", default),
        ("", default),
        ("inf", default),
    ]:
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
        assert getattr(user_import, read)() == seconds, value
