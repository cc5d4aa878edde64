"""One rule for run ids, sweep ids and labels (dashbench.core.spec.check_id / check_text), used by `run`,
`sweep`, `preset`, the job queue, the store and `import`: what one accepts the others accept, so a
run that was stored always comes back from its own export."""

import json
import random

import pytest
from fixtures.cli_probe import TINY, small_cpu_probe  # noqa: F401  (the fixture: a small CPU probe)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.cli import main
from dashbench.core.spec import RunSpec, SpecError, check_id
from dashbench.engine import loop
from dashbench.jobs import queue
from dashbench.store import BundleError, Store, bundle


@pytest.fixture
def no_training(monkeypatch):
    def refuse(spec, on_event=None):
        raise AssertionError("loop.run reached: the bad input was not caught first")

    monkeypatch.setattr(loop, "run", refuse)


def stored(db) -> int:
    if not db.exists():
        return 0
    with Store(db, read_only=True) as store:
        return store.count_runs()


BAD = [
    (["--run-id", "../../etc/passwd"], "run_id"),
    (["--run-id", "é" * 300], "run_id"),
    (["--run-id", "a\nb"], "run_id"),
    (["--run-id", "x" * 129], "run_id"),
    (["--run-id", ""], "run_id"),
    (["--label", "x" * 2000], "label"),
    (["--label", "two\nlines"], "label"),
    (["--label", "esc\x1b[31m"], "label"),
]


@pytest.mark.parametrize("extra, field", BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_run_refuses_what_import_would_refuse_in_one_line_naming_the_field(tmp_path, capsys, no_training, extra, field):
    db = tmp_path / "r.sqlite"
    code = main(["run", "--model", "conv2d", "--batch-size", "8", "--device", "cpu", *extra, "--db", str(db)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}: "), err
    assert stored(db) == 0


def test_sweep_preset_queue_and_store_refuse_the_same_label_and_ids(tmp_path, capsys, no_training):
    db = tmp_path / "s.sqlite"
    long = "x" * 2000
    code = main(
        ["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "8,16", "--label", long, "--db", str(db)]
    )
    assert code == 2 and capsys.readouterr().err.strip().startswith("error: label: must be at most 1000")
    code = main(["preset", "colab-conv2d", "--device", "cpu", "--quick", "--label", "a\nb", "--db", str(db)])
    assert code == 2 and capsys.readouterr().err.strip().startswith("error: label: must be one line")
    with pytest.raises(SpecError, match="^sweep_id: must be 1-128"):
        queue.submit(SPEC, db, sweep_id="../sweep")
    with Store(db) as store:
        with pytest.raises(SpecError, match="^run_id: must be 1-128"):
            store.create_run(SPEC, run_id="bad id")
        with pytest.raises(SpecError, match="^label: "):
            store.create_run(SPEC.replace(label=long))  # a spec made in code, never checked
    assert stored(db) == 0


def _round_trip(tmp_path, runs: list[tuple[str, str | None, str | None]]) -> set:
    """Store each (run id, sweep id, label) as `run` and the queue do, export them, import them into an
    empty store; returns the ids that came back."""
    source, target, path = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "b.json"
    for db in (source, target, path):
        db.unlink(missing_ok=True)
    with Store(source) as store:
        for run_id, sweep_id, label in runs:
            spec = SPEC.replace(label=label)
            store.create_run(spec, run_id=run_id, sweep_id=sweep_id)
            store.add_samples(run_id, samples_for(3))
            store.finish_run(run_id, "done", result_for(spec, 100.0))
        bundle.export_bundle(store, path)
    with Store(target) as store:
        bundle.import_bundles(store, [path])
        return set(store.run_ids())


def test_every_id_and_label_the_store_accepts_comes_back_from_its_export(tmp_path):
    edge = [
        ("A" * 128, "s" * 128, "é" * 1000),
        ("0", None, ""),
        ("a._:+-Z9", "sweep-x.y", "label ✓ with spaces"),
        ("20261201-120000-abcdef01", "sweep-20261201-120000-abcdef01", None),
    ]
    assert _round_trip(tmp_path, edge) == {run_id for run_id, _, _ in edge}
    # Random ids and labels: whatever `run` takes, import takes back.
    rng = random.Random(20)

    def text(good: str, bad: str, lengths: tuple) -> str:
        chars = [rng.choice(good) for _ in range(rng.choice(lengths))]
        if rng.random() < 0.3:  # one character that may not be there
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(bad))
        return "".join(chars)

    accepted, refused = {}, 0
    for _ in range(400):
        run_id = text("aZ09._:+-", "/ \néZ\x00", (1, 5, 40, 127, 128, 129))
        label = text("aZ 9é✓<>'\"\\/", "\n\t\x1b\x85\x7f", (0, 1, 40, 999, 1000, 1001))
        try:
            check_id("run_id", run_id)
            RunSpec(model="conv2d", batch_size=8, label=label)
        except SpecError:
            refused += 1
            continue
        accepted.setdefault(run_id, (run_id, None, label))
    assert len(accepted) > 50 and refused > 50
    assert _round_trip(tmp_path, list(accepted.values())) == set(accepted)


def test_a_real_run_with_the_longest_id_and_label_round_trips(tmp_path, capfd, small_cpu_probe):  # noqa: F811
    db, path = tmp_path / "r.sqlite", tmp_path / "r.json"
    run_id, label = "R" + "._:+-9" * 21, "ü" * 1000
    assert len(run_id) == 127
    assert main(["run", *TINY, "--db", str(db), "--run-id", run_id, "--label", label, "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["run_id"] == run_id
    assert main(["export", "--db", str(db), "--out", str(path)]) == 0
    with Store(tmp_path / "t.sqlite") as store:
        counts = bundle.import_bundles(store, [path])
        assert counts["runs_added"] == 1 and store.get_run(run_id)["label"] == label


def test_import_still_refuses_what_run_refuses(tmp_path):
    with Store(tmp_path / "a.sqlite") as store:
        store.create_run(SPEC, run_id="fine")
        bundle.export_bundle(store, tmp_path / "b.json")
    data = json.loads((tmp_path / "b.json").read_text())
    for field, value in (("run_id", "../../etc/passwd"), ("label", "x" * 1001), ("sweep_id", "a b")):
        bad = json.loads(json.dumps(data))
        bad["runs"][0][field] = value
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with Store(tmp_path / "c.sqlite") as store:
            with pytest.raises(BundleError, match=f"{field}: must be"):
                bundle.import_bundles(store, [tmp_path / "bad.json"])
