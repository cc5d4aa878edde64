"""`predict` from the command line: a table over the catalog, a stored measurement beside its
prediction, time to a stored run's target, bad input in one line naming the field, nothing stored."""

import json
import subprocess
import sys

import pytest
from fixtures.planted_chips import reached_block
from fixtures.stored_runs import result_for

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.results.result import RunResult
from dashbench.store import Store

LM = ["--model", "llama", "--width", "64", "--layers", "2", "--seq-len", "64", "--batch-size", "8"]
SPEC = RunSpec(model="llama", width=64, layers=2, seq_len=64, batch_size=8, precision="mixed_bfloat16", backend="jax")


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*argv):
    """`python -m dashbench …` in a process of its own: a step is profiled on JAX, and this test process
    may already hold Keras on TensorFlow (another test's run), which a process takes only once."""
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", *[str(a) for a in argv]], capture_output=True, text=True, timeout=600
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
    """One JSON prediction over two families, against a database that does not exist."""
    db = tmp_path_factory.mktemp("p") / "none.sqlite"
    code, out, err = run_process(
        "predict", *LM, "--precision", "bf16", "--devices", "TPU v6e", "H100", "--json", "--db", db
    )
    assert code == 0, err
    return db, json.loads(out)


def test_every_asked_device_is_predicted_and_nothing_is_stored(predicted):
    db, data = predicted
    assert not db.exists()  # predict never creates a database
    devices = [r["device"] for r in data["predictions"]]
    assert devices[0] == "TPU v6e" and len(devices) >= 3 and all(d.startswith("H100") for d in devices[1:])
    for row in data["predictions"]:
        assert row["kind"] == "prediction" and row["unit"] == "tokens" and row["measured_throughput"] is None
        assert row["step_s"] > 0 and row["bound"] in ("compute", "memory", "communication")
        assert (row["throughput_low"] is None) == bool(row["band_note"])
    assert data["profile"]["model"] == "llama" and data["profile"]["flops"] > 0


def test_a_measured_run_sits_beside_its_prediction_and_a_target_run_gives_time_to_target(predicted, tmp_path, capsys):
    _, data = predicted
    profile = data["profile"]
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        result = result_for(SPEC, 4000.0, accelerator="TPU v6e", unit="tokens", profile=profile)
        store.finish_run(store.create_run(SPEC, run_id="measured"), "done", RunResult.from_dict(result).to_dict())
        block = reached_block(1000)
        target = result_for(SPEC, 3000.0, accelerator="CPU", unit="tokens", profile=profile, accuracy=block)
        store.finish_run(store.create_run(SPEC, run_id="totarget"), "done", target)
    code, out, err = run_process(
        "predict", *LM, "--precision", "bf16", "--devices", "TPU v6e,H100", "--db", db, "--json"
    )
    assert code == 0, err
    rows = {r["device"]: r for r in json.loads(out)["predictions"]}
    v6e = rows["TPU v6e"]
    assert v6e["measured_runs"] == ["measured"] and v6e["ratio"] == pytest.approx(
        v6e["step_s"] / v6e["measured_step_s"]
    )
    assert all(
        r["steps_to_target"] == 1000 and r["target_s"] == pytest.approx(1000 * r["step_s"]) for r in rows.values()
    )
    code, out, err = run_process("predict", *LM, "--precision", "bf16", "--devices", "TPU v6e", "H100", "--db", db)
    assert code == 0, err
    assert "(predicted)" in out and "To the target (val_accuracy 0.9; 1,000 steps" in out and "← cheapest" in out


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--devices", "TPU v99"], "devices"),
        (["--devices", "V100", "--precision", "fp8"], "precision"),
        (["--chips", "0"], "chips"),
        (["--precision", "fp4"], "precision"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(extra, field, tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    code, out, err = run_cli(capsys, "predict", *LM, *extra, "--db", db)
    assert code == 2 and out == "" and not db.exists()
    assert err.count("\n") == 1 and err.startswith(f"error: {field}: "), err


def test_a_model_file_that_fails_is_one_line_naming_the_model(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def build():\n    raise RuntimeError('no such layer')\n")
    code, out, err = run_process("predict", "--model", f"{bad}:build", "--batch-size", "4", "--db", tmp_path / "x")
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: model: "), err
