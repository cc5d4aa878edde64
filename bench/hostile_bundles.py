"""A hostile-bundle corpus against a real store: can any bundle break it?

Builds a valid bundle (exported from a scratch store of real runs), then bundles that break it in
every way a hostile bundle can be built (wrong types in a result, pid as text, dates out of
range, Infinity/NaN, huge numbers, lists and dicts where text belongs, a duplicate sample index,
colliding run ids, damaged files; a result that contradicts its spec,
a done run with no result, an interval that excludes its figure, an unknown key in a result, one
run id twice in a file; JSON nested 100 and 100,000 deep, a FIFO with no writer, a twin of
/dev/zero (as root), a folder, a sparse file past the size bound, a file-size limit hit mid-import)
plus `--fuzz N` random variants of the valid bundle (fields deleted or swapped for values of other
types; fixed `--seed`). Each is imported (`dashbench import`, in process; the special files and the
file-size limit in a child process, so a hang is a finding, not a stuck corpus) into a target store
that already holds runs. After each one:

- refused: the error is one line naming the file, and the store's content (every row, every sample,
  hashed) is exactly as before;
- accepted: only a colliding run (same id, other content) may be — kept as stored, the store
  unchanged, and the difference named on stderr — or a run whose figures imply a flag it lacks
  (MFU 10^6 and no above_peak): stored with the flag;
- either way the store is readable: `list --json` parses, and the Results and Compare views
  (dashbench.views) load every row, with get_run and samples for each run.

    python bench/hostile_bundles.py                     # every named case + 200 fuzzed variants
    python bench/hostile_bundles.py --fuzz 2000 --seed 7 --keep /tmp/corpus

Prints one line per failure and the counts; exit 0 when every refusal left the store unchanged and
readable, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import json
import math
import os
import random
import resource
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from dashbench.cli import main as cli
from dashbench.core.spec import RunSpec
from dashbench.results.result import RunResult
from dashbench.store import Store, bundle
from dashbench.views.common import stored_runs
from dashbench.views.compare import numbers as compare
from dashbench.views.results import runs as results

SPEC = RunSpec(model="fashion_mnist_cnn", batch_size=64, device="cpu", steps=4, warmup=1, label="corpus")


def _result(spec: RunSpec, eps: float, **extra) -> dict:
    out = RunResult(
        model=spec.model,
        unit="images",
        device="cpu",
        accelerator="CPU",
        accelerator_count=1,
        device_names=["/CPU:0"],
        replicas=1,
        global_batch_size=spec.batch_size,
        per_replica_batch_size=spec.batch_size,
        precision=spec.precision,
        xla=spec.xla,
        data=spec.data,
        status="done",
        examples_per_sec=eps,
        examples_per_sec_ci95=[eps * 0.9, eps * 1.1],
        step_time_median_s=spec.batch_size / eps,
        step_time_p10_s=0.9 * spec.batch_size / eps,
        step_time_p90_s=1.1 * spec.batch_size / eps,
        step_time_std_s=0.01,
        samples=spec.steps,
        steps=spec.steps,
        steps_per_loop=1,
        compile_s=1.5,
        flops_per_example=1e6,
        achieved_tflops=eps * 1e6 / 1e12,
        peak_tflops=0.2,
        peak_source="measured",
        mfu=0.01,
        flags=[],
        losses=[2.3, 2.2],
        spec=spec.to_dict(),
    ).to_dict()
    out.update(extra)
    return out


def _samples(n: int) -> list[dict]:
    return [
        {"index": i, "steps": 1, "duration_s": 0.01 * (i + 1), "loss": 2.3 - 0.1 * i, "warmup": i == 0}
        for i in range(n)
    ]


def fill(store: Store, label: str) -> list[str]:
    """Three done runs of a sweep and a failed one, as the engine and runner record them."""
    ids = []
    for batch in (8, 16, 32):
        spec = SPEC.replace(batch_size=batch, label=label)
        run_id = store.create_run(spec, sweep_id=f"sweep-{label}")
        store.add_samples(run_id, _samples(batch // 4))
        store.finish_run(run_id, "done", _result(spec, 10.0 * batch, flags=["above_peak"] if batch == 32 else []))
        ids.append(run_id)
    failed = store.create_run(SPEC.replace(label=label))
    store.add_samples(failed, [{"index": 0, "steps": 1, "duration_s": 0.1, "loss": None, "warmup": True}])
    store.finish_run(failed, "failed", error="ResourceExhaustedError: out of memory")
    return ids + [failed]


# -- the named cases: (name, how the valid bundle's data is changed) -----------------------------------


def _set(path, value):
    def change(data):
        holder = data["runs"][0]
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value

    return change


def _raw(text: str | bytes):
    """A file whose bytes are given, not a change to the data."""
    return ("raw", text)


def _dup_sample_index(data):
    samples = data["runs"][0]["samples"]
    samples[1][0] = samples[0][0]


def _dup_run_in_bundle(data):
    data["runs"].append(copy.deepcopy(data["runs"][0]))


def _new_id_twice_differing(data):
    data["runs"] = [copy.deepcopy(data["runs"][0]), copy.deepcopy(data["runs"][0])]
    for run in data["runs"]:
        run["run_id"] = "new-run-twice"
    data["runs"][1]["label"] = "the second copy"


def _no_result(data):
    data["runs"][0]["result"] = None


def _nested(depth: int):
    """The valid bundle with a list nested `depth` deep inside a result's env."""
    return ("nested", depth)


def _collide_differing(target_ids):
    def change(data):
        run = data["runs"][0]
        run["run_id"] = target_ids[0]  # already in the target, with other content
        run["label"] = "someone else's"
        run["result"]["examples_per_sec"] = 1.0
        run["result"]["examples_per_sec_ci95"] = [0.9, 1.1]  # its interval with it: no contradiction

    return change


NAMED = [
    # wrong types inside the result, pid text, dates out of range
    ("result.examples_per_sec text", _set(("result", "examples_per_sec"), "fast")),
    ("result.examples_per_sec negative", _set(("result", "examples_per_sec"), -1.0)),
    ("result.examples_per_sec Infinity", _set(("result", "examples_per_sec"), math.inf)),
    ("result.examples_per_sec NaN", _set(("result", "examples_per_sec"), math.nan)),
    ("result.mfu -Infinity", _set(("result", "mfu"), -math.inf)),
    ("result.accelerator_count text", _set(("result", "accelerator_count"), "1")),
    ("result.samples text", _set(("result", "samples"), "2")),
    ("result.global_batch_size text", _set(("result", "global_batch_size"), "8")),
    ("result.global_batch_size huge", _set(("result", "global_batch_size"), 10**30)),
    ("result.flags unknown", _set(("result", "flags"), ["fast_enough"])),
    ("result.flags text", _set(("result", "flags"), "above_peak")),
    ("result.losses text inside", _set(("result", "losses"), [1.0, "x"])),
    ("result.ci95 one value", _set(("result", "examples_per_sec_ci95"), [1.0])),
    ("result.accelerator list", _set(("result", "accelerator"), ["CPU"])),
    ("result.backend unknown", _set(("result", "backend"), "pytorch")),
    ("result a list", _set(("result",), [1, 2])),
    ("pid text", _set(("pid",), "abc")),
    ("pid huge", _set(("pid",), 2**70)),
    ("pid Infinity", _set(("pid",), math.inf)),
    ("created_at year 1", _set(("created_at",), "0001-01-01T00:00:00+00:00")),
    ("created_at year 2999", _set(("created_at",), "2999-01-01T00:00:00+00:00")),
    ("created_at not a date", _set(("created_at",), "yesterday")),
    ("finished_at before created_at", _set(("finished_at",), "2001-01-01T00:00:00+00:00")),
    # lists and dicts where text is expected, sample indexes, huge numbers
    ("host list", _set(("host",), ["a", "b"])),
    ("host dict", _set(("host",), {"a": 1})),
    ("label list", _set(("label",), ["x"])),
    ("label dict", _set(("label",), {"x": 1})),
    ("error dict", _set(("error",), {"x": 1})),
    # what one run may carry (the store cuts a longer error it writes itself)
    ("error past 10000 characters", _set(("error",), "x" * 10_001)),
    ("samples past 100000", _set(("samples",), [[i, 1, 0.01, None, False] for i in range(100_001)])),
    ("result.losses past 100000", _set(("result", "losses"), [1.0] * 100_001)),
    ("spec of 1.5 million host loops", _set(("spec", "steps"), 1_500_000)),
    ("sweep_id list", _set(("sweep_id",), ["s"])),
    ("duplicate sample index", _dup_sample_index),
    ("sample index 2**63", _set(("samples", 0, 0), 2**63)),
    ("sample index Infinity", _set(("samples", 0, 0), math.inf)),
    ("sample index negative", _set(("samples", 0, 0), -1)),
    ("sample steps 0", _set(("samples", 0, 1), 0)),
    ("sample duration NaN", _set(("samples", 0, 2), math.nan)),
    ("sample loss text", _set(("samples", 0, 3), "low")),
    ("sample warmup 1", _set(("samples", 0, 4), 1)),
    ("sample a dict", _set(("samples", 0), {"index": 0})),
    ("spec.batch_size huge", _set(("spec", "batch_size"), 2**70)),
    ("spec.batch_size text", _set(("spec", "batch_size"), "64")),
    ("spec.label list", _set(("spec", "label"), ["x"])),
    ("spec.model unknown", _set(("spec", "model"), "vgg")),
    ("spec unknown field", _set(("spec", "turbo"), True)),
    ("spec.backend unknown", _set(("spec", "backend"), "pytorch")),
    ("run_id path and newline", _set(("run_id",), "../../x\n")),
    ("run_id list", _set(("run_id",), ["x"])),
    ("status unknown", _set(("status",), "great")),
    ("unknown run field", _set(("turbo",), True)),
    # a run that contradicts itself, one run id twice in a file
    ("result.model differs from the spec", _set(("result", "model"), "resnet50")),
    ("result.global_batch_size differs from the spec", _set(("result", "global_batch_size"), 999)),
    ("result.spec.batch_size differs from the spec", _set(("result", "spec", "batch_size"), 999)),
    ("done with no result", _no_result),
    ("ci95 below its figure", _set(("result", "examples_per_sec_ci95"), [1.0, 2.0])),
    ("ci95 above its figure", _set(("result", "examples_per_sec_ci95"), [1e9, None])),
    ("ci95 upside down", _set(("result", "examples_per_sec_ci95"), [2e9, 1e9])),
    ("unknown key in a result", _set(("result", "turbo"), True)),
    ("a stored run twice in one bundle", _dup_run_in_bundle),
    ("a new run id twice in one bundle, other content", _new_id_twice_differing),
    # nesting past the bound (100,000 deep: past Python's recursion limit)
    ("JSON nested 100 deep", _nested(100)),
    ("JSON nested 100,000 deep", _nested(100_000)),
    # damaged files
    ("not JSON", _raw('{"format": "dashbench-bundle", "runs": [')),
    ("JSON Infinity literal", None),  # filled in below from the valid bundle's text
    ("not UTF-8", _raw(b"\xff\xfe\x00garbage")),
    ("empty file", _raw("")),
    ("a list, not a bundle", _raw("[1, 2, 3]")),
    ("wrong format", _raw(json.dumps({"format": "other", "runs": []}))),
    (
        "schema_version from the future",
        _raw(json.dumps({"format": "dashbench-bundle", "schema_version": 10**6, "runs": []})),
    ),
    ("schema_version text", _raw(json.dumps({"format": "dashbench-bundle", "schema_version": "3", "runs": []}))),
    ("runs a dict", _raw(json.dumps({"format": "dashbench-bundle", "schema_version": 1, "runs": {}}))),
    ("run not an object", _raw(json.dumps({"format": "dashbench-bundle", "schema_version": 1, "runs": [1]}))),
]

_BAD_VALUES = [
    "x",
    "",
    [],
    [1],
    [[1, [2]]],
    {},
    {"a": [1]},
    True,
    False,
    None,
    0,
    -1,
    10**30,
    -(10**30),
    2**63,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    0.5,
    "2024-01-01T00:00:00",
    "NaN",
    "\x00",
    "<img src=x>",
    "0001-01-01T00:00:00+00:00",
]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, prefix + (i,))


def mutate(data: dict, rng: random.Random) -> str:
    """One random change to one run: a field deleted, or its value swapped for one of another kind."""
    run = rng.choice(data["runs"])
    path = rng.choice([p for p in _paths(run) if p])
    holder = run
    for key in path[:-1]:
        holder = holder[key]
    if isinstance(holder, dict) and rng.random() < 0.2:
        del holder[path[-1]]
        return f"del {'.'.join(map(str, path))}"
    value = rng.choice(_BAD_VALUES)
    holder[path[-1]] = copy.deepcopy(value)
    return f"{'.'.join(map(str, path))} = {value!r}"[:120]


# -- the checks -----------------------------------------------------------------------------------------


def content_hash(db: Path) -> str:
    """Every row and every sample of the store, hashed (the file's bytes may differ: SQLite's header)."""
    with Store(db, read_only=True) as store:
        rows = store.export_rows()
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def readable(db: Path) -> str | None:
    """None when the store reads cleanly through the CLI and the views; else what failed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli(["list", "--json", "--db", str(db)])
        if code != 0:
            return f"list exited {code}: {err.getvalue().strip()[:200]}"
        json.loads(out.getvalue())
        with Store(db, read_only=True) as store:
            runs = store.runs()
            results.results_table(runs)
            compare.compare_frame(runs)
            for run_id in runs["run_id"]:
                run = store.get_run(run_id)
                stored_runs.run_detail(run)
                store.samples(run_id)
    except Exception as exc:  # the point of the corpus: anything here is a finding
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return None


def import_one(db: Path, path: Path) -> tuple[int, str]:
    """`dashbench import` in process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli(["import", "--db", str(db), str(path)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def run_corpus(folder: Path, fuzz: int, seed: int, say=print) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    source, target = folder / "source.sqlite", folder / "target.sqlite"
    for path in (source, target):
        for extra in ("", "-wal", "-shm"):
            Path(str(path) + extra).unlink(missing_ok=True)
    with Store(source) as store:
        fill(store, "source")
    with Store(target) as store:
        target_ids = fill(store, "target")
    good = folder / "good.json"
    with Store(source, read_only=True) as store:
        bundle.export_bundle(store, good, replace=True)  # a rerun in the same folder
    valid = json.loads(good.read_text())
    # A valid import first: the target then holds the source's runs too, and must keep holding them.
    code, err = import_one(target, good)
    assert code == 0, err

    cases: list[tuple[str, str, object]] = []
    for name, change in NAMED:
        if name == "JSON Infinity literal":
            text = good.read_text()
            assert '"examples_per_sec": 80.0' in text
            text = text.replace('"examples_per_sec": 80.0', '"examples_per_sec": Infinity', 1)
            cases.append(("named", name, text.encode()))
            continue
        if isinstance(change, tuple) and change[0] == "nested":
            text = json.dumps(valid)
            text = text.replace('"env": {', '"env": {"deep": ' + "[" * change[1] + "]" * change[1] + ", ", 1)
            cases.append(("named", name, text.encode()))
            continue
        if isinstance(change, tuple):
            cases.append(("named", name, change[1].encode() if isinstance(change[1], str) else change[1]))
            continue
        data = copy.deepcopy(valid)
        change(data)
        cases.append(("named", name, json.dumps(data).encode()))
    data = copy.deepcopy(valid)
    _collide_differing(target_ids)(data)
    data["runs"] = data["runs"][:1]
    cases.append(("collision", "a run id already stored, other content", json.dumps(data).encode()))
    data = copy.deepcopy(valid)
    data["runs"] = [copy.deepcopy(valid["runs"][0])]
    data["runs"][0].update(run_id="implied-above-peak")
    data["runs"][0]["result"].update(mfu=1e6, flags=[])
    cases.append(("implied", "MFU 10^6 and no above_peak flag", json.dumps(data).encode()))
    rng = random.Random(seed)
    for number in range(fuzz):
        data = copy.deepcopy(valid)
        what = "; ".join(mutate(data, rng) for _ in range(rng.randint(1, 3)))
        cases.append(("fuzz", f"fuzz #{number}: {what}", json.dumps(data).encode()))

    read_states: set[str] = set()  # content hashes the views have read cleanly
    counts = {
        "cases": len(cases),
        "named": 0,
        "fuzz": 0,
        "refused": 0,
        "accepted": 0,
        "collisions_named": 0,
        "changed_after_refusal": 0,
        "unreadable": 0,
        "not_one_line": 0,
        "accepted_named_case": 0,
        "flags_implied": 0,
        "special": 0,
        "special_refused": 0,
    }
    failures = []
    for number, (kind, name, payload) in enumerate(cases):
        counts["fuzz" if kind == "fuzz" else "named"] += 1
        path = folder / f"case{number:04d}.json"
        path.write_bytes(payload)
        before = content_hash(target)
        code, err = import_one(target, path)
        after = content_hash(target)
        lines = [line for line in err.strip().splitlines() if line]
        if code == 0:
            counts["accepted"] += 1
            if kind == "collision":  # skipped: kept as stored, and a difference is named
                if after != before:
                    failures.append(f"{name}: the stored run was overwritten")
                differs = "other content" in name
                if differs and any("differ" in line for line in lines):
                    counts["collisions_named"] += 1
                elif differs:
                    failures.append(f"{name}: accepted silently: {err.strip()[:200]}")
            elif kind == "implied":  # stored, with the flag its figures imply
                with Store(target, read_only=True) as store:
                    flags = store.get_run("implied-above-peak")["result"].flags
                if "above_peak" in flags:
                    counts["flags_implied"] += 1
                else:
                    failures.append(f"{name}: stored without above_peak (flags {flags})")
            elif kind == "named":
                counts["accepted_named_case"] += 1
                failures.append(f"{name}: accepted")
            # A fuzzed variant may be harmless (a deleted optional field): it must still read back.
        else:
            counts["refused"] += 1
            if len(lines) != 1 or not lines[0].startswith("error: ") or "Traceback" in err:
                counts["not_one_line"] += 1
                failures.append(f"{name}: not one error line: {err.strip()[:300]}")
        _check_store(name, target, code != 0 and after != before, counts, failures, after, read_states)
        if code == 0 and kind in ("fuzz", "implied") and after != before:
            # Start the next case from the store as it was, so one accepted variant cannot hide the next.
            with Store(target) as store:
                known = {r["run_id"] for r in valid["runs"]} | set(target_ids)
                store.delete_runs([r for r in store.runs()["run_id"] if r not in known])
    _special_cases(folder, target, valid, counts, failures, read_states)
    for line in failures:
        say(f"FAIL {line}")
    counts["failures"] = len(failures)
    return counts


# -- what import must not read, and a write that fails ----------------------------------------


def _special_cases(
    folder: Path, target: Path, valid: dict, counts: dict, failures: list, read_states: set[str]
) -> None:
    """Files that are no bundle to read (each in a child process with a timeout: a FIFO with no
    writer used to block for ever), and a valid bundle imported under a file-size limit."""
    special = folder / "special"
    special.mkdir(exist_ok=True)
    cases = []
    fifo = special / "fifo.json"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    cases.append(("a FIFO with no writer", fifo, "FIFO", None))
    if os.geteuid() == 0:  # a twin of /dev/zero, made here: the corpus never points at a system path
        zero = special / "zero"
        zero.unlink(missing_ok=True)
        os.mknod(zero, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        cases.append(("a character device (a /dev/zero twin)", zero, "a device", None))
    cases.append(("a folder", special, "a folder", None))
    sparse = special / "huge.json"
    with open(sparse, "wb") as fh:  # sparse: no disk used, and never read
        fh.truncate(bundle.MAX_BUNDLE_BYTES + 1)
    cases.append(("a sparse file past the size bound", sparse, "larger than", None))
    big = copy.deepcopy(valid)
    big["runs"] = [copy.deepcopy(valid["runs"][0])]
    big["runs"][0].update(run_id="too-big-to-write")
    big["runs"][0]["samples"] = [[i, 1, 0.01, 2.0, i == 0] for i in range(50_000)]
    heavy = special / "heavy.json"
    heavy.write_text(json.dumps(big))
    limit = target.stat().st_size + 64 * 1024

    def file_size_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cases.append(("a file-size limit hit mid-import", heavy, "nothing was imported", file_size_limit))
    for name, path, words, preexec in cases:
        counts["special"] += 1
        before = content_hash(target)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "dashbench", "import", "--db", str(target), str(path)],
                capture_output=True,
                text=True,
                timeout=120,
                preexec_fn=preexec,
            )
        except subprocess.TimeoutExpired:
            failures.append(f"{name}: import still running after 120 s")
            continue
        lines = [line for line in done.stderr.strip().splitlines() if line]
        if done.returncode == 0:
            failures.append(f"{name}: accepted")
        elif len(lines) != 1 or not lines[0].startswith("error: ") or words not in lines[0]:
            counts["not_one_line"] += 1
            failures.append(f"{name}: not one error line saying {words!r}: {done.stderr.strip()[-300:]}")
        else:
            counts["special_refused"] += 1
        after = content_hash(target)
        _check_store(name, target, after != before, counts, failures, after, read_states)


def _check_store(
    name: str, target: Path, changed: bool, counts: dict, failures: list, state: str, read_states: set[str]
) -> None:
    """After a refusal: the store as it was, and readable by every view — read once per content
    (`state`, content_hash: every row and sample, all that the views read), as most cases leave it as it was."""
    if changed:
        counts["changed_after_refusal"] += 1
        failures.append(f"{name}: refused, but the store changed")
    if state in read_states:
        return
    problem = readable(target)
    if problem:
        counts["unreadable"] += 1
        failures.append(f"{name}: store unreadable after it: {problem}")
    else:
        read_states.add(state)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=200, help="fuzzed variants of the valid bundle")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--keep", default=None, help="write the corpus and stores here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.keep:
        counts = run_corpus(Path(args.keep), args.fuzz, args.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="dashbench-hostile-") as folder:
            counts = run_corpus(Path(folder), args.fuzz, args.seed)
    print(json.dumps(counts))
    return 0 if counts["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
