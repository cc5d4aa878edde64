"""Bad input is refused before a run row exists; errors keep the --json and exit-code contract;
`list` filters devices the way it shows them. No TensorFlow: every check here fails before it loads."""

import json
import signal

import numpy as np
import pytest
from fixtures.no_training import no_training  # noqa: F401 (fixtures)
from fixtures.stored_runs import SPEC, result_for

from dashbench.cli import main
from dashbench.core import stats
from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import loop
from dashbench.jobs import queue, run_signals, runner
from dashbench.results.result import RunResult
from dashbench.store import Store
from dashbench.views.run import form as run_form
from dashbench.workloads import catalog, datasets

TINY = [
    "--model",
    "conv2d",
    "--batch-size",
    "8",
    "--image-size",
    "16",
    "--width",
    "8",
    "--steps",
    "2",
    "--warmup",
    "1",
    "--device",
    "cpu",
]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def stored_runs(db) -> int:
    with Store(db) as store:
        return len(store.runs())


BAD_RUNS = [
    (["--model", "fashion_mnist_cnn", "--batch-size", "8", "--data", "real", "--data-path", "{missing}"], "data_path"),
    (["--model", "fashion_mnist_cnn", "--batch-size", "8", "--data", "real", "--image-size", "32"], "image_size"),
    (["--model", "bilstm", "--batch-size", "8", "--image-size", "32"], "image_size"),
]


@pytest.mark.parametrize("argv, field", BAD_RUNS)
def test_run_with_bad_input_leaves_no_row_and_prints_one_invalid_object(argv, field, tmp_path, capsys, no_training):
    db = tmp_path / "r.sqlite"
    argv = [a.format(missing=tmp_path / "nowhere") for a in argv]
    code, out, err = run_cli(capsys, "run", *argv, "--db", str(db), "--json")
    assert code == 2 and stored_runs(db) == 0
    obj = json.loads(out)
    assert (obj["status"], obj["field"], obj["model"]) == ("invalid", field, argv[1]) and "run_id" not in obj
    assert err.strip() == f"error: {obj['error']}" and obj["error"].startswith(f"{field}: ")


def test_preset_sweep_jobs_and_form_refuse_the_same_before_a_row(tmp_path, capsys, no_training):
    db = tmp_path / "p.sqlite"
    missing = str(tmp_path / "nowhere")
    code, out, _ = run_cli(
        capsys,
        "preset",
        "colab-fashion-mnist",
        "--device",
        "cpu",
        "--data",
        "real",
        "--data-path",
        missing,
        "--db",
        str(db),
        "--json",
    )
    assert code == 2 and json.loads(out)["field"] == "data_path"
    code, _, err = run_cli(
        capsys,
        "sweep",
        "--model",
        "bilstm",
        "--device",
        "cpu",
        "--batch-sizes",
        "8,16",
        "--image-size",
        "32",
        "--db",
        str(db),
    )
    assert code == 2 and err.splitlines() == [
        "error: image_size: bilstm has no image_size override; it accepts: seq_len, width"
    ]
    bad = RunSpec(model="fashion_mnist_cnn", batch_size=8, data="real", data_path=missing)
    with pytest.raises(SpecError, match="data_path"):
        queue.submit(bad, db)
    with pytest.raises(SpecError, match="image_size: real fashion_mnist_cnn data is 28 px"):
        run_form.build_spec({"model": "fashion_mnist_cnn", "batch_size": 8, "data": "real", "image_size": 32})
    assert stored_runs(db) == 0


def test_a_queued_row_that_fails_the_checks_ends_failed_with_the_message(tmp_path, capsys):
    db = tmp_path / "q.sqlite"
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=8, data="real", data_path=str(tmp_path / "gone"))
    with Store(db) as store:
        run_id = store.create_run(spec, status="queued")  # queued while the folder was there
    with pytest.raises(SpecError, match="data_path"):
        runner.execute(None, db, run_id=run_id)
    with Store(db) as store:
        row = store.get_run(run_id)
    assert row["status"] == "failed" and "no Fashion-MNIST file" in row["error"]

    with Store(db) as store:
        run_id = store.create_run(spec, status="queued")
    # As the job queue starts it: the run id alone, the spec from the row.
    code, out, _ = run_cli(capsys, "run", "--run-id", run_id, "--db", str(db), "--json")
    obj = json.loads(out)
    assert code == 2 and (obj["status"], obj["field"], obj["run_id"]) == ("invalid", "data_path", run_id)


def test_run_id_of_a_stored_run_runs_the_stored_spec_and_refuses_spec_options(
    tmp_path, capsys, monkeypatch, no_training
):
    db = tmp_path / "id.sqlite"
    with Store(db) as store:
        run_id = store.create_run(SPEC, status="queued")
    code, out, err = run_cli(
        capsys, "run", "--run-id", run_id, "--db", str(db), "--label=--no-store", "--steps", "3", "--json"
    )
    obj = json.loads(out)
    assert code == 2 and (obj["status"], obj["field"]) == ("invalid", "steps")
    assert err.splitlines() == [f"error: {obj['error']}"] and "leave out --steps" in obj["error"]
    code, out, err = run_cli(capsys, "run", "--run-id", "no-such-run", "--db", str(db), "--json")
    assert code == 2 and json.loads(out)["field"] == "run_id" and len(err.splitlines()) == 1
    with Store(db) as store:
        assert store.get_run(run_id)["status"] == "queued" and store.count_runs() == 1

    measured = []
    monkeypatch.setattr(
        loop, "run", lambda spec, on_event=None: measured.append(spec) or RunResult.from_dict(result_for(spec, 5.0))
    )
    code, out, _ = run_cli(capsys, "run", "--run-id", run_id, "--db", str(db), "--json")
    assert code == 0 and measured == [SPEC] and json.loads(out)["run_id"] == run_id
    # An id that is not stored: a new run from the options, recorded under that id.
    code, out, _ = run_cli(capsys, "run", "--run-id", "chosen-id", "--db", str(db), *TINY, "--json")
    assert code == 0 and json.loads(out)["run_id"] == "chosen-id"
    with Store(db) as store:
        assert store.get_run("chosen-id")["spec"]["image_size"] == 16


def test_cli_and_run_page_read_sweep_batch_sizes_alike(tmp_path, capsys, no_training):
    db = tmp_path / "s.sqlite"
    for text in ("8,x", "8, 0", "-4", " , ", "32,,64"):
        code, _, err = run_cli(
            capsys, "sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", text, "--db", str(db)
        )
        with pytest.raises(SpecError) as form:
            run_form.specs_from_form(run_form.run_form_defaults(["cpu"]) | {"run_sweep": text}, sweep=True)
        assert code == 2 and err.splitlines() == [f"error: {form.value}"]
        assert form.value.field == "batch_sizes" and "whole numbers >= 1" in str(form.value)
    assert stored_runs(db) == 0


def _broken(exc):
    def run(spec, on_event=None):
        on_event({"event": "phase", "phase": "setup"})
        raise exc

    return run


@pytest.mark.parametrize("command", [["run", *TINY], ["preset", "colab-conv2d", "--device", "cpu", "--quick"]])
def test_failed_and_cancelled_runs_print_one_object_and_keep_their_exit_codes(command, tmp_path, capsys, monkeypatch):
    db = tmp_path / "f.sqlite"
    monkeypatch.setattr(loop, "run", _broken(RuntimeError("OOM when allocating tensor")))
    code, out, err = run_cli(capsys, *command, "--db", str(db), "--json")
    obj = json.loads(out)
    assert code == 1 and (obj["status"], obj["model"], obj["device"]) == ("failed", "conv2d", "cpu")
    assert obj["error"] == "RuntimeError: OOM when allocating tensor"
    with Store(db) as store:
        assert store.get_run(obj["run_id"])["status"] == "failed"

    monkeypatch.setattr(loop, "run", _broken(run_signals.RunCancelled(signal.SIGTERM)))
    code, out, _ = run_cli(capsys, *command, "--db", str(db), "--json")
    obj = json.loads(out)
    assert code == 128 + signal.SIGTERM and obj["status"] == "cancelled" and "SIGTERM" in obj["error"]
    with Store(db) as store:
        assert store.get_run(obj["run_id"])["status"] == "cancelled"


def test_an_unusable_db_is_the_same_line_for_run_preset_and_sweep(tmp_path, capsys, no_training):
    (tmp_path / "file").write_text("not a folder")
    db = str(tmp_path / "file" / "x.sqlite")
    code, _, run_err = run_cli(capsys, "run", *TINY, "--db", db)
    assert code == 2 and run_err.startswith("error: db: ") and len(run_err.splitlines()) == 1
    code, _, preset_err = run_cli(capsys, "preset", "colab-conv2d", "--device", "cpu", "--quick", "--db", db)
    assert code == 2 and preset_err.splitlines()[-1] == run_err.strip()
    code, _, sweep_err = run_cli(
        capsys, "sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "8,16", "--db", db
    )
    assert code == 2 and sweep_err.splitlines() == [run_err.strip()]  # no sweep header first


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "l.sqlite"
    with Store(path) as store:
        for xla in (False, True):
            spec = SPEC.replace(xla=xla)
            store.finish_run(store.create_run(spec), "done", result_for(spec, 1000.0, replicas=2 if xla else 1))
        failed = store.create_run(SPEC.replace(model="bilstm", seq_len=8))
        store.finish_run(failed, "failed", error="OOM")
    return path


def test_list_device_filter_takes_any_case_and_accelerator_names(db, capsys):
    def listed(*filters):
        code, out, err = run_cli(capsys, "list", "--db", str(db), "--json", *filters)
        assert code == 0, err
        return sorted(r["run_id"] for r in json.loads(out))

    every = listed()
    assert len(every) == 3
    assert listed("--device", "CPU") == listed("--device", "cpu") == every  # the failed run too
    assert listed("--device", "Cpu", "--status", "done") == listed("--accelerator", "cpu") != every
    assert listed("--device", "v100") == []  # a known accelerator with no runs here
    code, _, err = run_cli(capsys, "list", "--db", str(db), "--device", "npu")
    assert code == 2 and err.startswith("error: device: no such device 'npu'; use a device kind (cpu, gpu, tpu)")
    assert "in this database: CPU" in err


def test_list_table_tells_xla_and_replicas_apart(db, capsys):
    code, out, _ = run_cli(capsys, "list", "--db", str(db), "--status", "done")
    header, *rows = out.splitlines()
    assert code == 0 and "xla" in header.split() and "replicas" in header.split()
    # The two runs differ only in XLA and replicas: without those columns their lines would match.
    assert len(rows) == 2 and rows[0].split()[1:] != rows[1].split()[1:]


def test_an_interval_unbounded_above_is_printed_as_a_lower_bound():
    # In words, not "95% CI ≥ 812.3": a newcomer cannot read a one-sided interval.
    lower = "95% CI at least 812.3, no upper end: too few or too noisy samples"
    assert stats.ci95_text([812.3, None]) == lower
    assert stats.ci95_text([812.3, float("inf")]) == lower
    assert stats.ci95_text([800.0, 900.0]) == "95% CI 800.0–900.0"
    assert stats.ci95_text([None, None]) == ""
    result = result_for(SPEC.replace(precision="mixed_float16"), 1000.0, examples_per_sec_ci95=[812.3, None])
    assert f"images/s ({lower})" in RunResult.from_dict(result).describe().splitlines()[0]


def test_check_spec_resolves_shapes_without_tensorflow(tmp_path):
    datasets.write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((2, 28, 28), "uint8"))
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=8, data="real", data_path=str(tmp_path))
    with pytest.raises(SpecError, match="data_path: no Fashion-MNIST file train-labels-idx1-ubyte"):
        catalog.check_spec(spec)
    datasets.write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2, "uint8"))
    assert catalog.check_spec(spec).image_size == 28


def test_unsound_idx_files_are_refused_before_a_row(tmp_path, capsys, no_training):
    images, labels = tmp_path / "train-images-idx3-ubyte", tmp_path / "train-labels-idx1-ubyte"
    datasets.write_idx(images, np.zeros((4, 28, 28), "uint8"))
    datasets.write_idx(labels, np.array([0, 1, 2, 3], "uint8"))
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=4, data="real", data_path=str(tmp_path))
    assert catalog.check_spec(spec).image_size == 28
    cases = [
        (lambda: images.write_bytes(images.read_bytes()[:-100]), "truncated"),
        (lambda: datasets.write_idx(labels, np.array([0, 1, 2], "uint8")), "disagree"),
        (lambda: datasets.write_idx(labels, np.array([0, 1, 2, 42], "uint8")), "class numbers 0–9"),
        (lambda: images.write_bytes(b"\x00\x00\x08\x03\x00"), "cut short"),
    ]
    for spoil, message in cases:
        datasets.write_idx(images, np.zeros((4, 28, 28), "uint8"))
        datasets.write_idx(labels, np.array([0, 1, 2, 3], "uint8"))
        spoil()
        with pytest.raises(SpecError, match=message):
            catalog.check_spec(spec)
    db = tmp_path / "r.sqlite"
    code, out, _ = run_cli(
        capsys,
        "run",
        "--model",
        "fashion_mnist_cnn",
        "--batch-size",
        "4",
        "--data",
        "real",
        "--data-path",
        str(tmp_path),
        "--db",
        str(db),
        "--json",
    )
    assert code == 2 and json.loads(out)["field"] == "data_path" and stored_runs(db) == 0


# Python's int() and float() read fullwidth and other scripts' digits (８ is 8, ٨ is 8) and underscores.
NOT_ASCII = [
    (["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes=８"], "batch_sizes"),
    (["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "16,٨"], "batch_sizes"),
    (["sweep", "--model", "conv2d", "--device", "cpu", "--find-max-batch", "--start-batch", "８"], "start_batch"),
    (["run", "--model", "conv2d", "--device", "cpu", "--batch-size", "８"], "batch_size"),
    (["run", "--model", "conv2d", "--device", "cpu", "--batch-size", "8", "--steps", "1_0"], "steps"),
    (["run", "--model", "fashion_mnist_cnn", "--batch-size", "8", "--target-accuracy", "０.９"], "target_accuracy"),
    (["list", "--limit", "８"], "limit"),
    (["list", "--batch-size", "３２"], "batch_size"),
    (["prices", "set", "--device", "V100", "--unit", "GPU-hour", "--on-demand", "１.５"], "on_demand_usd_per_hour"),
    (
        ["prices", "set", "--device", "V100", "--unit", "GPU-hour", "--on-demand", "1", "--chips", "４"],
        "chips_per_unit",
    ),
]


@pytest.mark.parametrize("argv, field", NOT_ASCII, ids=[" ".join(a[-2:]) for a, _ in NOT_ASCII])
def test_numbers_on_the_command_line_are_ascii_digits_only(argv, field, tmp_path, capsys, no_training):
    db = tmp_path / "n.sqlite"
    code, out, err = run_cli(capsys, *argv, "--db", str(db))
    assert code == 2 and out == "", (out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("error: ") and field in line, line
    if db.exists():
        with Store(db) as store:
            assert len(store.runs()) == 0 and store.price_overrides() == []
