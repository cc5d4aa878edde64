"""An imported bundle can never make the store unreadable: every field of a run is checked, a bad
file is refused in one line naming the file, the run and the field, and nothing is written."""

import copy
import json
import math
import os
import random
import resource
import stat
import subprocess
import sys

import pytest
from fixtures.import_checks import exported, snapshot, write  # noqa: F401 (fixtures)
from fixtures.stored_runs import SPEC, result_for

from dashbench.results.result import RunResult, json_fields
from dashbench.results.result_checks import RULES
from dashbench.store import BundleError, ReadOnlyError, Store, StoreError, bundle
from dashbench.views.compare import numbers as compare
from dashbench.views.results import runs as results


def plain(markdown: str) -> str:
    """md_text's escapes and word breaks taken out again."""
    return markdown.replace("\\", "").replace("\u200b", "")


def set_path(run, path, value):
    *parents, last = path
    for key in parents:
        run = run[key]
    run[last] = value


# (path inside the first run, bad value, the field the message must name)
CASES = [
    (("result", "examples_per_sec"), "fast", "result.examples_per_sec"),
    (("result", "examples_per_sec"), -1.0, "result.examples_per_sec"),
    (("pid",), "abc", "pid"),
    (("created_at",), "0001-01-01T00:00:00+00:00", "created_at"),
    (("created_at",), "2999-01-01T00:00:00+00:00", "created_at"),
    (("finished_at",), "2001-01-01T00:00:00+00:00", "finished_at"),
    (("result", "accelerator_count"), "1", "result.accelerator_count"),
    (("result", "samples"), "2", "result.samples"),
    (("result", "global_batch_size"), "8", "result.global_batch_size"),
    (("result", "flags"), ["fast_enough"], "result.flags"),
    (("result", "losses"), [1.0, "x"], "result.losses[1]"),
    (("result", "examples_per_sec_ci95"), [1.0], "result.examples_per_sec_ci95"),
    (("host",), ["a", "b"], "host"),
    (("host",), {"a": 1}, "host"),
    (("label",), ["x"], "label"),
    (("label",), {"x": 1}, "label"),
    (("result", "accelerator"), ["CPU"], "result.accelerator"),
    (("samples", 1, 0), 0, "samples[1].index"),
    (("samples", 0, 0), 2**63, "samples[0].index"),
    (("samples", 0, 0), math.inf, "samples[0].index"),
    (("samples", 0, 1), 0, "samples[0].steps"),
    (("samples", 0, 2), math.nan, "samples[0].duration_s"),
    (("samples", 0, 4), 1, "samples[0].warmup"),
    (("spec", "batch_size"), 2**70, "spec: batch_size"),
    (("spec", "label"), ["x"], "spec: label"),
    (("run_id",), "../../x\n", "run_id"),
    (("run_id",), ["x"], "run_id"),
    (("result", "backend"), "pytorch", "result.backend"),
    (("result", "backend"), 3, "result.backend"),
    (("result", "backend_version"), ["0.4"], "result.backend_version"),
    (("spec", "backend"), "pytorch", "spec: backend"),
]


@pytest.mark.parametrize("path, value, field", CASES, ids=[f"{'.'.join(map(str, c[0]))}={c[1]!r}" for c in CASES])
def test_a_bad_field_is_refused_in_one_line_and_nothing_is_written(tmp_path, exported, path, value, field):
    data, db = exported
    good = write(tmp_path, data, "good.json")
    bad = copy.deepcopy(data)
    run_id = bad["runs"][0]["run_id"]
    set_path(bad["runs"][0], path, value)
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError) as caught:
            bundle.import_bundles(store, [good, write(tmp_path, bad)])
    message = str(caught.value)
    assert "\n" not in message
    assert str(tmp_path / "bad.json") in message and f"{field}:" in message
    if path != ("run_id",):
        assert run_id in message
    assert snapshot(db) == before  # the good file was not imported either


def test_the_cli_refuses_a_bad_bundle_with_one_error_line(tmp_path, exported):
    data, db = exported
    data["runs"][0]["result"]["examples_per_sec"] = "fast"
    path = write(tmp_path, data)
    before = snapshot(db)
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "import", "--db", str(db), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "result.examples_per_sec" in lines[0]
    assert "Traceback" not in done.stderr
    assert snapshot(db) == before


def test_a_valid_bundle_still_imports_whole(tmp_path, exported):
    data, db = exported
    with Store(db) as store:
        counts = bundle.import_bundles(store, [write(tmp_path, data, "good.json")])
        assert counts["runs_added"] == 4
        assert store.count_runs() == 5


def test_the_upload_shows_any_store_error_as_a_message(tmp_path, exported):
    data, db = exported
    with Store(db, read_only=True) as store:
        message, ok = results.import_uploads(store, [("good.json", json.dumps(data).encode())])
    assert (
        not ok
        and plain(message).startswith("Import failed: cannot import runs: the store")
        and "is open read-only" in plain(message)
    )


def test_the_upload_names_the_bad_field(tmp_path, exported):
    data, db = exported
    data["runs"][0]["host"] = ["a"]
    with Store(db) as store:
        message, ok = results.import_uploads(store, [("bad.json", json.dumps(data).encode())])
    assert not ok and "host: must be text or null, got ['a']" in plain(message)
    # The file is named as the user uploaded it, not by the scratch copy the import read.
    assert "bad.json" in plain(message) and "/tmp" not in plain(message) and "0-bad.json" not in plain(message)


def test_every_result_field_has_a_strict_rule_and_engine_results_pass():
    assert {f.name for f in json_fields()} == set(RULES)
    with open("tests/fixtures/result_v3.json") as fh:
        RunResult.check(json.load(fh))
    RunResult.check(result_for(SPEC, 100.0, flags=["above_peak"], losses=[2.0, None]))
    RunResult.check({"examples_per_sec_ci95": [1.0, None], "future_key": {"anything": [1]}})  # newer writers' keys
    with pytest.raises(ValueError, match="^mfu: must be a finite number >= 0 or null, got inf$"):
        RunResult.check({"mfu": math.inf})
    # from_dict stays tolerant: a row already stored still loads.
    assert RunResult.from_dict({"examples_per_sec": "fast"}).examples_per_sec == "fast"


# -- fuzz: a valid bundle, mutated at random ---------------------------------------------------------

_BAD_VALUES = [
    "x",
    "",
    [],
    [1],
    [[1, [2]]],
    {},
    {"a": [1]},
    True,
    None,
    0,
    -1,
    10**30,
    -(10**30),
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    0.5,
    "2024-01-01T00:00:00",
    "NaN",
]


def _paths(value, prefix=()):
    """Every key path inside a run (dict keys and list positions)."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, prefix + (i,))


def _mutate(data, rng: random.Random):
    run = rng.choice(data["runs"])
    path = rng.choice([p for p in _paths(run) if p])
    *parents, last = path
    holder = run
    for key in parents:
        holder = holder[key]
    if isinstance(holder, dict) and rng.random() < 0.15:
        del holder[last]
        return f"del {path}"
    value = rng.choice(_BAD_VALUES)
    holder[last] = copy.deepcopy(value)
    return f"{path} = {value!r}"


def test_fuzzed_bundles_are_refused_cleanly_or_leave_the_store_readable(tmp_path, exported, capsys):
    from dashbench.cli import main

    data, db = exported
    rng = random.Random(20261130)
    original = {run["run_id"] for run in snapshot(db)[1]}
    read_cleanly = set()  # the stores (every row and sample: all the views read) already read back cleanly
    for attempt in range(50):
        mutated = copy.deepcopy(data)
        what = [_mutate(mutated, rng) for _ in range(rng.randint(1, 3))]
        path = write(tmp_path, mutated, f"fuzz{attempt}.json")
        before = snapshot(db)
        with Store(db) as store:
            try:
                bundle.import_bundles(store, [path])
            except StoreError as exc:
                assert "\n" not in str(exc) and str(path) in str(exc), what
                assert snapshot(db) == before, what
        after = json.dumps(snapshot(db), sort_keys=True, default=str)
        if after not in read_cleanly:  # a refusal leaves the store as it was: read back once, not after each
            capsys.readouterr()
            assert main(["list", "--json", "--db", str(db)]) == 0, what
            json.loads(capsys.readouterr().out)
            with Store(db, read_only=True) as store:
                runs = store.runs()
                results.results_table(runs)
                compare.compare_frame(runs)
                for run_id in runs["run_id"]:
                    store.get_run(run_id)
                    store.samples(run_id)
            read_cleanly.add(after)
        # Start each attempt from the store as it was, so an accepted mutation does not hide the next.
        with Store(db) as store:
            store.delete_runs([r for r in store.runs()["run_id"] if r not in original])


def test_a_read_only_store_refuses_an_import_in_one_line(tmp_path, exported):
    data, db = exported
    with Store(db, read_only=True) as store:
        with pytest.raises(ReadOnlyError):
            bundle.import_bundles(store, [write(tmp_path, data)])


# -- a run whose parts contradict each other --------------------------------------


def _first_done(data) -> dict:
    return next(run for run in data["runs"] if run["status"] == "done")


CONTRADICTIONS = [
    ("result model differs from the spec", lambda run: run["result"].update(model="resnet50"), "result.model"),
    (
        "result batch differs from the spec",
        lambda run: run["result"].update(global_batch_size=999),
        "result.global_batch_size",
    ),
    ("result's own spec differs", lambda run: run["result"]["spec"].update(batch_size=999), "result.spec.batch_size"),
    ("done with no result", lambda run: run.update(result=None), "result"),
    (
        "interval below its figure",
        lambda run: run["result"].update(examples_per_sec_ci95=[1.0, 2.0]),
        "result.examples_per_sec_ci95",
    ),
    (
        "interval above its figure",
        lambda run: run["result"].update(examples_per_sec_ci95=[1e9, None]),
        "result.examples_per_sec_ci95",
    ),
    (
        "interval upside down",
        lambda run: run["result"].update(examples_per_sec_ci95=[2e9, 1e9]),
        "result.examples_per_sec_ci95",
    ),
    ("unknown key inside a result", lambda run: run["result"].update(turbo=True), "result.turbo"),
]


@pytest.mark.parametrize("name, change, field", CONTRADICTIONS, ids=[c[0] for c in CONTRADICTIONS])
def test_a_run_that_contradicts_itself_is_refused_naming_file_run_and_field(tmp_path, exported, name, change, field):
    data, db = exported
    run = _first_done(data)
    change(run)
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError) as caught:
            bundle.import_bundles(store, [write(tmp_path, data)])
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "bad.json") in message
    assert f"({run['run_id']}): {field}:" in message, message
    assert snapshot(db) == before


def test_two_copies_of_one_run_in_one_file_are_refused_as_such(tmp_path, exported):
    data, db = exported
    data["runs"].append(copy.deepcopy(data["runs"][1]))
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError, match=r"run #5 \(\S+\): run_id: appears twice in this file \(run #2") as caught:
            bundle.import_bundles(store, [write(tmp_path, data)])
    assert "already present" not in str(caught.value) and data["runs"][1]["run_id"] in str(caught.value)
    assert snapshot(db) == before


def test_a_result_of_repeats_keeps_its_interval_around_the_pooled_mean(tmp_path, exported):
    # With repeats the figure is their median, which may lie outside the pooled interval: accepted.
    data, db = exported
    result = _first_done(data)["result"]
    figure = result["examples_per_sec"]
    result.update(
        repeats=[figure, figure, figure * 1.01], repeat_cv=0.005, examples_per_sec_ci95=[figure * 1.02, figure * 1.03]
    )
    with Store(db) as store:
        assert bundle.import_bundles(store, [write(tmp_path, data)])["runs_added"] == 4


IMPLIED = [
    ("mfu far above 1", {"mfu": 1e6}, "above_peak"),
    (
        "achieved above a datasheet peak",
        {"achieved_tflops": 2.0, "peak_tflops": 1.0, "peak_source": "datasheet", "mfu": None},
        "above_peak",
    ),
    ("a NaN loss (stored as null)", {"losses": [2.3, None, 2.1]}, "non_finite_loss"),
    ("a loss that rose", {"losses": [1.0, 1.0, 2.0, 3.0]}, "loss_not_falling"),
    ("ops on another device", {"placement": {"variables": ["/device:GPU:0"], "ops": []}}, "placement_mismatch"),
    ("repeats 20% apart", {"repeats": [100.0, 80.0, 120.0], "repeat_cv": 0.01}, "unstable"),
]


@pytest.mark.parametrize("name, figures, flag", IMPLIED, ids=[c[0] for c in IMPLIED])
def test_a_flag_the_figures_imply_is_raised_on_import_whatever_the_bundle_says(tmp_path, exported, name, figures, flag):
    data, db = exported
    run = _first_done(data)
    run["result"].update(figures, flags=[])
    with Store(db) as store:
        bundle.import_bundles(store, [write(tmp_path, data)])
        assert flag in store.get_run(run["run_id"])["result"].flags
        # The runs whose figures imply nothing keep their flags as exported.
        for other in data["runs"]:
            if other is not run and other["result"]:
                assert store.get_run(other["run_id"])["result"].flags == other["result"]["flags"]


@pytest.mark.parametrize("source", ["measured", "provisional"])
def test_a_measured_cpu_peak_keeps_its_soft_margin(tmp_path, exported, source):
    # A probed CPU peak (the run's own, or the host's first kept as provisional) is soft
    # (peaks.CPU_SOFT_MARGIN), as the engine flags it: 1.2x is no flag.
    data, db = exported
    run = _first_done(data)
    run["result"].update(achieved_tflops=1.2, peak_tflops=1.0, peak_source=source, mfu=1.2, flags=[])
    with Store(db) as store:
        bundle.import_bundles(store, [write(tmp_path, data)])
        assert store.get_run(run["run_id"])["result"].flags == []


# -- what import reads, and a write that fails --------------------------------------


def _import_cli(db, path, timeout=120, preexec_fn=None):
    return subprocess.run(
        [sys.executable, "-m", "dashbench", "import", "--db", str(db), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def _one_error_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_a_fifo_with_no_writer_is_refused_at_once_not_waited_on(tmp_path, exported):
    data, db = exported
    fifo = tmp_path / "bundle.json"
    os.mkfifo(fifo)
    before = snapshot(db)
    line = _one_error_line(_import_cli(db, fifo))  # before: blocked in open() until the timeout
    assert str(fifo) in line and "FIFO" in line and "regular files only" in line
    assert snapshot(db) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_like_dev_zero_is_refused_without_reading_it(tmp_path, exported):
    data, db = exported
    zero = tmp_path / "zero"  # a twin of /dev/zero (char device 1:5) under tmp_path
    os.mknod(zero, 0o600 | stat.S_IFCHR, os.makedev(1, 5))

    def memory_cap():  # before: read until MemoryError; held to 2 GiB so a regression fails, not the host
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    line = _one_error_line(_import_cli(db, zero, preexec_fn=memory_cap))
    assert str(zero) in line and "a device" in line and "regular files only" in line


def test_a_folder_is_named_as_one(tmp_path, exported):
    data, db = exported
    with Store(db) as store:
        with pytest.raises(BundleError, match="a folder: import reads regular files only"):
            bundle.import_bundles(store, [tmp_path])


def test_a_file_past_the_size_bound_is_refused_before_it_is_read(tmp_path, exported, monkeypatch):
    data, db = exported
    good = write(tmp_path, data, "good.json")
    monkeypatch.setattr(bundle, "MAX_BUNDLE_BYTES", good.stat().st_size - 1)
    opened, real_open = [], os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    with Store(db) as store:
        with pytest.raises(BundleError, match=f"larger than {good.stat().st_size - 1} bytes, the most one bundle"):
            bundle.import_bundles(store, [good])
    assert good not in opened and str(good) not in opened  # refused from its size, never opened
    monkeypatch.undo()
    assert "256 MiB" in bundle._too_large() and bundle.MAX_BUNDLE_BYTES == 256 * 2**20


def test_a_file_that_grows_past_the_bound_while_read_is_refused(tmp_path, exported, monkeypatch):
    # The stat said small, the read finds more (a file still being written): the read is bounded too.
    data, db = exported
    good = write(tmp_path, data, "good.json")
    monkeypatch.setattr(bundle, "MAX_BUNDLE_BYTES", 100)
    monkeypatch.setattr(bundle, "_check_kind", lambda info, fail: None)  # as if the stat had said 10 bytes
    with Store(db) as store:
        with pytest.raises(BundleError, match="larger than 100 bytes"):
            bundle.import_bundles(store, [good])


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_is_one_line_not_a_recursion_error(tmp_path, exported, depth):
    data, db = exported
    text = json.dumps(data).replace('"env": {', '"env": {"deep": ' + "[" * depth + "]" * depth + ", ", 1)
    path = tmp_path / "deep.json"
    path.write_text(text)
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError, match=f"deep.json: nested more than {bundle.MAX_NESTING} levels deep"):
            bundle.import_bundles(store, [path])
    assert snapshot(db) == before
    line = _one_error_line(_import_cli(db, path))
    assert "nested more than" in line and "RecursionError" not in line


def test_a_write_error_mid_import_is_one_line_and_the_store_keeps_its_runs(tmp_path, exported):
    """A file-size limit (as a full disk) hit while the import writes: SQLite's error is one line,
    the transaction is rolled back, and the store holds exactly its old runs."""
    data, db = exported
    big = copy.deepcopy(data)
    for run in big["runs"]:
        run["samples"] = [[i, 1, 0.01, 2.0, i == 0] for i in range(20_000)]
    path = write(tmp_path, big, "big.json")
    before = snapshot(db)
    limit = db.stat().st_size + 64 * 1024  # room to open the store, not to write 80,000 samples

    def file_size_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    line = _one_error_line(_import_cli(db, path, preexec_fn=file_size_limit))
    assert f"cannot import runs into {db}" in line and "nothing was imported" in line
    assert snapshot(db) == before
    with Store(db) as store:  # and the store still takes writes: no transaction was left open
        assert bundle.import_bundles(store, [write(tmp_path, data, "good.json")])["runs_added"] == 4


def _import_here(capsys, db, path) -> str:
    """`import` in this process: its one error line (exit 2, no traceback)."""
    from dashbench.cli import main

    code = main(["import", "--db", str(db), str(path)])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# A value no time, id or sample of the bundle spells out.
MARK = 777_000_777_000_777


@pytest.mark.parametrize(
    "where, field",
    [
        (("runs", 0, "pid"), "run #1 ("),
        (("runs", 1, "result", "samples"), "run #2 ("),
        (("runs", 0, "samples", 1, 0), "run #1 ("),
        (("schema_version",), "schema_version: "),
    ],
)
def test_an_integer_of_5000_digits_names_the_file_and_the_field(tmp_path, exported, capsys, where, field):
    data, db = exported
    set_path(data, where, MARK)
    text = json.dumps(data)
    assert text.count(str(MARK)) == 1  # only the field's value is made huge, never a time's or an id's digits
    path = tmp_path / "huge.json"
    path.write_text(text.replace(str(MARK), "9" * 5000))
    before = snapshot(db)
    line = _import_here(capsys, db, path)
    named = ".".join(str(k) for k in where[2:]).replace(".1.0", "[1][0]") if where[0] == "runs" else where[0]
    assert str(path) in line and field in line and f"{named}: a whole number of 5000 digits" in line, line
    assert line.endswith("nothing was imported") and "set_int_max_str_digits" not in line, line
    assert snapshot(db) == before


def test_a_result_that_is_not_an_object_is_named_with_a_colon(tmp_path, exported, capsys):
    data, db = exported
    data["runs"][0]["result"] = "str"
    before = snapshot(db)
    line = _import_here(capsys, db, write(tmp_path, data))
    assert "): result: must be a JSON object or null, got 'str'; nothing was imported" in line, line
    assert "result.must" not in line
    assert snapshot(db) == before
