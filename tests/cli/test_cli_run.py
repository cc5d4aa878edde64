"""`python -m dashbench run / models / devices`: the CLI contract scripts and the dashboard rely on."""

import json

import pytest
from fixtures.cli_probe import TINY, small_cpu_probe  # noqa: F401 (fixtures)

from dashbench.cli import main

CONTRACT_KEYS = {
    "model",
    "device",
    "replicas",
    "global_batch_size",
    "precision",
    "xla",
    "status",
    "examples_per_sec",
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "samples",
    "compile_s",
    "flops_per_example",
    "achieved_tflops",
    "mfu",
    "flags",
    "losses",
    "env",
}


def test_run_json_prints_exactly_one_object_and_progress_on_stderr(capfd):
    assert main(["run", *TINY, "--no-store", "--json"]) == 0
    out, err = capfd.readouterr()
    result = json.loads(out)  # the whole of stdout is one JSON object
    assert out.count("\n") == 1
    assert CONTRACT_KEYS <= set(result)
    assert result["status"] == "done" and result["device"] == "cpu" and "run_id" not in result
    assert "compiled in" in err and "step 4/4" in err
    assert "setting up (TensorFlow, devices, model)" in err and "probing the CPU's peak (for MFU)" in err


def test_run_stored_through_the_runner(tmp_path, capfd):
    from dashbench.store import Store

    db = tmp_path / "runs.sqlite"
    assert main(["run", *TINY, "--db", str(db), "--json", "--label", "cli"]) == 0
    result = json.loads(capfd.readouterr().out)
    with Store(db) as store:
        row = store.get_run(result["run_id"])
        assert row["status"] == "done" and row["label"] == "cli"
        assert row["result"].to_dict() == result
        samples = store.samples(result["run_id"])
    assert len(samples) == 5 and samples["warmup"].sum() == 1


def test_run_without_json_prints_a_summary(capfd):
    assert main(["run", *TINY, "--no-store"]) == 0
    out, _ = capfd.readouterr()
    assert out.startswith("conv2d on CPU ×1 (1 replica(s), batch 8, float32)")
    assert "images/s" in out and "flags:" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "vgg", "--batch-size", "8"], "error: model: unknown model 'vgg'; choose one of: conv2d, "),
        (["--batch-size", "8"], "error: model: is required"),
        (["--model", "conv2d", "--batch-size", "0"], "error: batch_size: must be an integer >= 1, got 0"),
        (
            ["--model", "conv2d", "--batch-size", "7", "--replicas", "2"],
            "error: batch_size: batch size 7 is not divisible by 2 replicas: use a multiple of 2 (e.g. 8)",
        ),
        (
            ["--model", "conv2d", "--batch-size", "8", "--precision", "fp8"],
            "error: precision: unknown precision 'fp8'; choose one of: float32, mixed_float16, mixed_bfloat16",
        ),
        (
            ["--model", "conv2d", "--batch-size", "8", "--device", "npu"],
            "error: device: unknown device 'npu'; choose one of: auto, cpu, gpu, tpu",
        ),
        (
            ["--model", "conv2d", "--batch-size", "8", "--device", "gpu"],
            "error: device: gpu requested but TensorFlow sees no GPU; found: CPU",
        ),
        (
            ["--model", "resnet50", "--batch-size", "8", "--width", "3"],
            "error: width: resnet50 has no width override; it accepts: image_size",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_field(argv, message, capfd):
    assert main(["run", *argv, "--no-store", "--json"]) == 2
    out, err = capfd.readouterr()
    obj = json.loads(out)  # --json: still exactly one object on stdout
    assert obj["status"] == "invalid" and message.startswith(f"error: {obj['field']}: ") and "run_id" not in obj
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(message), err


def test_models_and_devices(capfd):
    assert main(["models", "--json"]) == 0
    names = [row["name"] for row in json.loads(capfd.readouterr().out)]
    assert names == ["conv2d", "fashion_mnist_cnn", "resnet50", "inception_v3", "bilstm", "llama"]
    assert main(["devices", "--json"]) == 0
    info = json.loads(capfd.readouterr().out)
    assert info["tensorflow"].startswith("2.19") and info["default_device"] == "cpu"
    assert main(["models"]) == 0
    text = capfd.readouterr().out
    assert (
        "sequences" in text
        and (
            "quick try: python -m dashbench run --model conv2d --device cpu --image-size 32 "
            "--width 16 --batch-size 16 --steps 4"
        )
        in text
    )
    assert main(["devices"]) == 0 and "default device: cpu" in capfd.readouterr().out


def test_a_failed_run_is_one_line_and_exit_1(monkeypatch, capfd):
    from dashbench.engine import loop

    def broken(spec, on_event=None):
        on_event({"event": "phase", "phase": "setup"})
        raise RuntimeError("OOM when allocating tensor\nwith shape [128, 256]")

    monkeypatch.setattr(loop, "run", broken)
    assert main(["run", *TINY, "--no-store", "--json"]) == 1
    out, err = capfd.readouterr()
    obj = json.loads(out)
    assert (obj["status"], obj["model"], obj["device"]) == ("failed", "conv2d", "cpu") and "run_id" not in obj
    assert obj["error"] == "RuntimeError: OOM when allocating tensor with shape [128, 256]"
    assert err.splitlines()[-1] == "error: run failed: RuntimeError: OOM when allocating tensor with shape [128, 256]"


GRAPH_ERROR = (
    "Graph execution error:\n\n"
    "Detected at node while/SparseSoftmaxCrossEntropyWithLogits defined at (most recent call last):\n"
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n\n'
    + "".join(f'  File "/x/engine.py", line {n}, in train_loop\n\n' for n in range(40))
    + "Received a label value of 200 which is outside the valid range of [0, 10).\n"
    "\t [[{{node while/SparseSoftmaxCrossEntropyWithLogits}}]] [Op:__inference_train_loop_1779]"
)


def test_a_tensorflow_graph_error_keeps_its_cause_not_its_trace(monkeypatch, tmp_path, capfd):
    """TF's message puts a long Python trace before the cause; the CLI line and the stored error
    must say the cause."""
    from dashbench.engine import loop
    from dashbench.store import Store

    def broken(spec, on_event=None):
        raise RuntimeError(GRAPH_ERROR)

    monkeypatch.setattr(loop, "run", broken)
    db = tmp_path / "e.sqlite"
    assert main(["run", *TINY, "--db", str(db)]) == 1
    line = capfd.readouterr().err.splitlines()[-1]
    assert line == (
        "error: run failed: RuntimeError: Graph execution error: Received a label value of 200 "
        "which is outside the valid range of [0, 10)."
    )
    with Store(db) as store:
        error = store.get_run(store.runs()["run_id"][0])["error"]
    assert "File " not in error and "[[{{node" not in error
    assert error.endswith("Received a label value of 200 which is outside the valid range of [0, 10).")


def test_output_into_a_closed_pipe_is_not_a_traceback():
    import subprocess
    import sys

    reader = subprocess.Popen(
        [sys.executable, "-m", "dashbench", "models", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    reader.stdout.read(10)
    reader.stdout.close()  # as `| head -c 10` does
    err = reader.stderr.read().decode()
    reader.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err
