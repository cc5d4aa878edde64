"""--backend reaches the spec of every command that builds one (run, sweep, preset), and `run --run-id`
runs the stored spec, so a queued JAX run starts on JAX."""

from dashbench.cli import build_parser, preset_cmd, spec_args, sweep_cmd
from dashbench.core.spec import RunSpec
from dashbench.jobs import run_life, runner
from dashbench.store import Store


def test_run_sweep_and_preset_pass_the_backend_into_the_spec():
    parser = build_parser()
    args = parser.parse_args(["run", "--model", "conv2d", "--batch-size", "8", "--backend", "jax"])
    assert spec_args.spec_from_args(args).backend == "jax"
    args = parser.parse_args(["sweep", "--model", "conv2d", "--batch-sizes", "8,16", "--backend", "jax"])
    assert args.func is sweep_cmd.cmd_sweep
    assert sweep_cmd.spec_from_args(args, batch_size=16).backend == "jax"
    args = parser.parse_args(["preset", "colab-conv2d", "--device", "cpu", "--quick", "--backend", "jax"])
    assert preset_cmd.spec_from_args(args).backend == "jax"
    args = parser.parse_args(["preset", "colab-conv2d", "--device", "cpu", "--quick"])
    assert preset_cmd.spec_from_args(args).backend == "tensorflow"


def test_a_stored_run_starts_with_its_stored_backend(tmp_path):
    db = tmp_path / "q.sqlite"
    with Store(db) as store:
        run_id = store.create_run(RunSpec(model="conv2d", batch_size=8, backend="jax"), status="queued")
    life = run_life._Life(run_life.Ask(run_id=run_id, db=str(db)))  # as `run --run-id ID --db DB` asks
    try:
        spec, from_row = life.resolve()
    finally:
        life.close()
    assert spec.backend == "jax" and from_row
    assert runner.stored_spec(str(db), run_id).backend == "jax"
