"""A model file's runs across edits: a run's identity still hashes the whole file (the version), but
Compare groups one file's builder across versions, shows each version's hash with a note that they
differ, and `list` keeps the version in view at 120 columns."""

from pathlib import Path

from fixtures.app_test import assert_clean, show, start

from dashbench.cli import main
from dashbench.cli.run_table import format_table
from dashbench.store import Store
from dashbench.views.compare import numbers as compare
from dashbench.workloads import model_file

TINY = ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--device", "cpu"]
FILE = """import keras


def build():
    inputs = keras.Input((8,), name="features")
    return keras.Model(inputs, keras.layers.Dense(3, name="logits")(inputs))


def build_transformer():
    inputs = keras.Input((8,), name="features")
    return keras.Model(inputs, keras.layers.Dense({width}, name="logits")(inputs))
"""


def two_versions(tmp_path: Path) -> tuple[Path, list[str]]:
    """`build` run, `build_transformer` edited, `build` run again: two runs of one builder, two versions."""
    path, db = tmp_path / "transformer_classifier.py", tmp_path / "runs.sqlite"
    identities = []
    for width in (4, 5):
        path.write_text(FILE.format(width=width))
        assert main(["run", "--model", f"{path}:build", "--db", str(db), *TINY]) == 0
        identities.append(model_file.reference(f"{path}:build")["model"])
    assert identities[0] != identities[1]  # the file's versions differ
    return db, identities


def test_one_builders_runs_compare_across_versions_of_its_file(tmp_path, capfd, monkeypatch):
    db, identities = two_versions(tmp_path)
    with Store(db) as store:
        runs = store.runs()
    frame = compare.compare_frame(runs)
    groups = dict(compare.workload_groups(frame))
    assert list(groups) == ["transformer_classifier.py:build"] and len(groups["transformer_classifier.py:build"]) == 2
    first = frame.loc[frame["model"] == identities[0], "id"].iloc[0]
    assert compare.speedup_vs(frame, first)["speedup"].notna().all()  # compared, not refused
    versions = [model_file.version(i) for i in identities]
    (note,) = compare.version_notes(frame)
    assert note.startswith("transformer_classifier.py:build: these runs come from 2 versions of the file")
    assert all(v in note for v in versions)
    assert all(any(v in label for label in frame["label"]) for v in versions)  # each run's version shown

    # list, fitted to 120 columns, keeps what tells the two versions apart.
    listed = format_table(runs, width=120)
    assert all(line and len(line) <= 120 for line in listed.splitlines())
    assert all(f"@{v}" in listed for v in versions), listed
    assert "transformer_classifier.py:build@" not in listed  # cut, in the name

    # The Compare page shows the two runs in one section, with the note.
    at = start(monkeypatch, db)
    at.query_params["runs"] = ",".join(runs["run_id"])
    show(at, "pages/compare.py")
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "these runs come from 2 versions of the file" in captions, captions
