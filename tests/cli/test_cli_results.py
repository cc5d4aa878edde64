"""`list`, `show`, `delete`, `export`, `import` and a real `sweep`, through the command line."""

import json

import pytest
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.cli import main
from dashbench.store import Store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "cli.sqlite"
    with Store(path) as store:
        for batch in (16, 32):
            spec = SPEC.replace(batch_size=batch)
            run_id = store.create_run(spec, sweep_id="sweep-x")
            store.add_samples(run_id, samples_for(3))
            store.finish_run(
                run_id, "done", result_for(spec, 50.0 * batch, flags=["above_peak"] if batch == 32 else [])
            )
        failed = store.create_run(SPEC.replace(model="bilstm", seq_len=8))
        store.finish_run(failed, "failed", error="ResourceExhaustedError: OOM when allocating tensor")
    return path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_table_json_and_filters(db, capsys):
    code, out, _ = run_cli(capsys, "list", "--db", str(db))
    assert code == 0
    assert "bilstm" in out and "above_peak" in out and "1,600.0" in out and "failed" in out

    # The failed run never measured: its device reads as the others' (CPU, not cpu) with the default replicas.
    failed_line = next(line for line in out.splitlines() if "bilstm" in line).split()
    assert failed_line[3:5] == ["failed", "bilstm"] and failed_line[5] == "CPU" and failed_line[8] == "1"

    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 3
    done = [r for r in rows if r["status"] == "done"]
    assert {r["batch_size"] for r in done} == {16, 32} and all(r["samples"] == 4 for r in done)
    assert rows[0]["created_at"].endswith("+00:00")
    # Cost columns come from dashbench.costs: the CPU has no catalog price, and says so.
    assert all(r["price_note"] == "no price" for r in rows)

    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--json", "--status", "done", "--batch-size", "32")
    assert [r["batch_size"] for r in json.loads(out)] == [32]
    code, out, _ = run_cli(
        capsys, "list", "--db", str(db), "--json", "--sweep", "sweep-x", "--model", "fashion_mnist_cnn,bilstm"
    )
    assert len(json.loads(out)) == 2
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--until", "2001-01-01")
    assert "no runs match" in out

    code, _, err = run_cli(capsys, "list", "--db", str(db), "--status", "finished")
    assert code == 2 and err.startswith("error: status: unknown status 'finished'")
    code, _, err = run_cli(capsys, "list", "--db", str(db), "--since", "last week")
    assert code == 2 and "since/until: not a date" in err


@pytest.fixture
def two_backends(tmp_path):
    """The same model, batch and device measured on TensorFlow and on JAX, and a queued JAX run."""
    path = tmp_path / "backends.sqlite"
    ids = {}
    with Store(path) as store:
        for backend, version, eps in (("tensorflow", "2.19.1", 100.0), ("jax", "0.10.2", 150.0)):
            spec = SPEC.replace(backend=backend)
            ids[backend] = store.create_run(spec)
            store.finish_run(ids[backend], "done", result_for(spec, eps, backend=backend, backend_version=version))
        ids["queued"] = store.create_run(SPEC.replace(backend="jax", batch_size=32), status="queued")
    return path, ids


def test_list_filters_and_shows_the_backend(two_backends, capsys):
    db, ids = two_backends
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--json", "--backend", "jax")
    rows = json.loads(out)
    assert code == 0 and {r["run_id"] for r in rows} == {ids["jax"], ids["queued"]}
    assert all(r["backend"] == "jax" for r in rows)
    assert {r["run_id"]: r["backend_version"] for r in rows} == {ids["jax"]: "0.10.2", ids["queued"]: None}
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--json", "--backend", "tensorflow")
    assert [(r["run_id"], r["backend"], r["backend_version"]) for r in json.loads(out)] == [
        (ids["tensorflow"], "tensorflow", "2.19.1")
    ]
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--backend", "tensorflow,jax", "--status", "done")
    header, *lines = out.splitlines()
    assert "backend" in header.split() and len(lines) == 2
    assert {line.split()[0]: line.split()[header.split().index("backend") + 1] for line in lines} == {
        ids["tensorflow"]: "tensorflow",
        ids["jax"]: "jax",
    }  # "created" takes two words
    code, _, err = run_cli(capsys, "list", "--db", str(db), "--backend", "torch")
    assert code == 2 and err.startswith("error: backend: unknown backend 'torch'; choose one of: tensorflow, jax")


def test_show_names_the_backend_and_its_version(two_backends, capsys):
    db, ids = two_backends
    code, out, _ = run_cli(capsys, "show", ids["jax"], "--db", str(db))
    assert code == 0 and "  backend: jax 0.10.2" in out.splitlines()
    code, out, _ = run_cli(capsys, "show", ids["queued"], "--db", str(db))
    assert "  backend: jax" in out.splitlines()
    code, out, _ = run_cli(capsys, "show", ids["tensorflow"], "--db", str(db))
    assert "  backend: tensorflow 2.19.1" in out.splitlines()


def test_list_without_a_database_creates_none(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "list", "--db", str(tmp_path / "nothing.sqlite"))
    assert code == 0 and "no runs yet" in out and not (tmp_path / "nothing.sqlite").exists()


def test_show_text_and_json(db, capsys):
    with Store(db) as store:
        run_id = store.runs(batch_size=32)["run_id"].iloc[0]
        failed = store.runs(status="failed")["run_id"].iloc[0]
    code, out, _ = run_cli(capsys, "show", run_id[:-3], "--db", str(db))  # a unique prefix will do
    assert (
        code == 0
        and run_id in out
        and "1,600.0 images/s" in out
        and "above peak: faster than the hardware" in out
        and "3 samples stored" in out
    )
    code, out, _ = run_cli(capsys, "show", failed, "--db", str(db))
    assert "failed (ResourceExhaustedError: OOM when allocating tensor)" in out
    code, out, _ = run_cli(capsys, "show", run_id, "--db", str(db), "--json")
    data = json.loads(out)
    assert data["run_id"] == run_id and data["result"]["examples_per_sec"] == 1600.0 and len(data["samples"]) == 3
    code, _, err = run_cli(capsys, "show", "zzz", "--db", str(db))
    assert code == 2 and err.strip() == f"error: run_id: no run 'zzz' in {db}"
    # The dashboard's short form, with or without its '#', names the same run for every command.
    short = "#" + run_id[-6:]
    for given in (short, short[1:]):
        code, out, _ = run_cli(capsys, "show", given, "--db", str(db))
        assert code == 0 and f"run {run_id} ({short} in the dashboard)" in out
    code, _, err = run_cli(capsys, "delete", short, "--db", str(db))
    assert code == 0, err
    with Store(db) as store:
        assert store.get_run(run_id) is None and store.get_run(failed) is not None


def _strict_json(text: str):
    """json.loads that refuses Infinity and NaN, which are not JSON (RFC 8259)."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_list_and_show_json_are_strict_json_for_non_finite_figures(db, capsys):
    """A stored run (a hand-made row, an old bundle) may hold Infinity or NaN: --json prints null."""
    with Store(db) as store:
        spec = SPEC.replace(batch_size=8)
        odd = store.create_run(spec)
        store.add_samples(odd, samples_for(2))
        store.finish_run(
            odd,
            "done",
            result_for(spec, float("inf"), mfu=float("nan"), examples_per_sec_ci95=[float("-inf"), float("inf")]),
        )
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--json")
    assert code == 0
    (row,) = [r for r in _strict_json(out) if r["run_id"] == odd]
    assert row["examples_per_sec"] is None and row["mfu"] is None and row["batch_size"] == 8
    code, out, _ = run_cli(capsys, "show", odd, "--db", str(db), "--json")
    assert code == 0
    data = _strict_json(out)
    assert data["result"]["examples_per_sec"] is None and data["result"]["mfu"] is None
    assert data["result"]["examples_per_sec_ci95"] == [None, None] and len(data["samples"]) == 2
    assert data["result"]["global_batch_size"] == 8


def test_delete(db, capsys):
    with Store(db) as store:
        ids = list(store.runs(status="done")["run_id"])
        running = store.create_run(SPEC)  # this process: alive, so it stays running
    code, _, err = run_cli(capsys, "delete", running, "--db", str(db))
    assert code == 2 and "is running; cancel it first, or pass --force" in err
    code, out, _ = run_cli(capsys, "delete", *ids, "--db", str(db))
    assert code == 0 and out.strip() == "deleted 2 runs"
    with Store(db) as store:
        assert store.count_runs() == 2 and store._read("SELECT count(*) FROM samples")[0][0] == 0
    code, _, err = run_cli(capsys, "delete", "nope", "--db", str(db))
    assert code == 2 and "no run 'nope'" in err


def test_export_then_import_elsewhere(db, tmp_path, capsys):
    bundle = tmp_path / "out.json"
    code, out, _ = run_cli(capsys, "export", "--db", str(db), "--status", "done", "--out", str(bundle))
    assert code == 0 and out.strip() == f"exported 2 runs to {bundle}"
    other = tmp_path / "other.sqlite"
    code, out, _ = run_cli(capsys, "import", str(bundle), "--db", str(other))
    assert code == 0 and "imported 2 runs (6 samples) from 1 file; 0 already present" in out
    code, out, _ = run_cli(capsys, "import", str(bundle), str(bundle), "--db", str(other))
    assert "imported 0 runs (0 samples) from 2 files; 4 already present" in out
    broken = tmp_path / "broken.json"
    broken.write_text(bundle.read_text()[:100])
    code, _, err = run_cli(capsys, "import", str(broken), "--db", str(other))
    assert code == 2 and err.startswith(f"error: {broken}: not valid JSON") and "nothing was imported" in err


def test_real_sweep_of_tiny_runs(tmp_path, monkeypatch, capfd):
    """The sweep in this process, its points real run processes: on JAX (a third of TensorFlow's start-up;
    the sweep does not depend on the backend) with a CPU peak given by hand, so no point probes the CPU."""
    db = tmp_path / "sweep.sqlite"
    monkeypatch.setenv("DASHBENCH_CPU_PEAKS", '{"float32": 0.2}')
    code = main(
        [
            "sweep",
            "--model",
            "conv2d",
            "--image-size",
            "8",
            "--width",
            "2",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--device",
            "cpu",
            "--backend",
            "jax",
            "--batch-sizes",
            "2,4",
            "--db",
            str(db),
            "--json",
        ]
    )
    out = capfd.readouterr()
    assert code == 0, out.err[-3000:]
    data = json.loads(out.out)
    assert [p["status"] for p in data["points"]] == ["done", "done"]
    assert "[2/2] batch 4: done" in out.err
    # Each point says what it is doing as it starts a phase, not only when it ends.
    assert "[1/2] batch 2: setting up (JAX, devices, model)" in out.err
    assert "[2/2] batch 4: setting up (JAX, devices, model)" in out.err
    with Store(db) as store:
        runs = store.runs(sweep_id=data["sweep_id"]).sort_values("batch_size")
        assert list(runs["batch_size"]) == [2, 4] and (runs["examples_per_sec"] > 0).all()
        # one after the other, each in its own process
        assert runs["started_at"].iloc[1] >= runs["finished_at"].iloc[0]
        assert runs["pid"].nunique() == 2


def test_export_into_a_missing_folder_is_one_line(db, tmp_path, capsys):
    code, out, err = run_cli(capsys, "export", "--db", str(db), "--out", str(tmp_path / "no" / "such" / "b.json"))
    assert code == 2 and out == ""
    assert err.strip().startswith("error: out: cannot write ") and "No such file or directory" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "no").exists()


def test_show_formats_the_peak(db, capsys):
    with Store(db) as store:
        run_id = store.runs(batch_size=[16])["run_id"][0]
    code, out, _ = run_cli(capsys, "show", "--db", str(db), run_id)
    assert code == 0 and "MFU 1.0% of 0.2 TFLOP/s peak (measured)" in out


def test_list_carries_the_shape_overrides(tmp_path, capsys):
    import json as _json

    from dashbench.core.spec import RunSpec
    from dashbench.store import Store

    db = str(tmp_path / "shapes.sqlite")
    with Store(db) as store:
        full = store.create_run(RunSpec(model="fashion_mnist_cnn", batch_size=32, device="cpu"))
        quick = store.create_run(
            RunSpec(model="fashion_mnist_cnn", batch_size=32, device="cpu", image_size=28, width=8)
        )
    code, out, _ = run_cli(capsys, "list", "--db", db, "--json")
    rows = {r["run_id"]: r for r in _json.loads(out)}
    assert code == 0 and rows[quick]["width"] == 8 and rows[quick]["image_size"] == 28
    assert rows[full]["width"] is None and rows[quick]["seq_len"] is None
    code, out, _ = run_cli(capsys, "list", "--db", db)
    assert code == 0 and "width" in out.splitlines()[0]
    line = next(row for row in out.splitlines() if row.startswith(quick))
    assert line.split()[-2:] == ["28", "8"]


def list_in_a_terminal(db, columns: int, *extra) -> tuple[int, str]:
    """`list` run with a real terminal (a pty of `columns` columns) as its stdout, as a user types it."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashbench", "list", "--db", str(db), *extra],
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=300)
    return proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n").rstrip("\n")


def test_list_fits_the_terminal_and_wide_or_a_pipe_gets_every_column(db, capsys):
    code, piped, _ = run_cli(capsys, "list", "--db", str(db))  # not a terminal: every column, full ids
    wide_lines = piped.rstrip("\n").splitlines()
    assert code == 0 and max(map(len, wide_lines)) > 120 and "sweep-x" in piped

    code, out = list_in_a_terminal(db, 80)
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= 80, out
    header, *rows = lines[:4]
    note = " ".join(lines[4:])
    assert {"run_id", "status", "model", "examples/s"} <= set(header.split()) and "sweep" not in header.split()
    assert "left out to fit 80 characters: " in note and "sweep" in note and "--wide" in note, note
    short = rows[0].split()[0]
    assert short.startswith("#") and len(short) == 7
    code, shown_run, _ = run_cli(capsys, "show", "--db", str(db), short)  # the short id printed is taken
    assert code == 0 and shown_run.startswith("run ")

    code, out = list_in_a_terminal(db, 80, "--wide")
    assert code == 0 and out.splitlines() == wide_lines  # --wide: what a pipe gets
    code, out = list_in_a_terminal(db, 400)  # room for every column: nothing left out
    assert code == 0 and out.splitlines() == [line.rstrip() for line in wide_lines]
