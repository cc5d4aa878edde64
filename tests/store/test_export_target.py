"""`export --out` never destroys a file: the live database, another SQLite file, a FIFO
and a device node stay what they were; `-` is stdout; an earlier bundle is still replaced."""

import json
import os
import stat
import threading

import pytest
from fixtures.cli_runs import file_hash, fill, run_cli

from dashbench.store import Store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "live.sqlite"
    fill(path, runs=3)
    return path


def refused_in_one_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: out: "), err
    for word in words:
        assert word in lines[0], err


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "-wal name"])
def test_export_onto_the_live_database_is_refused_and_the_store_keeps_its_runs(how, db, tmp_path, capsys):
    target = {
        "same path": db,
        "symlink": tmp_path / "alias.sqlite",
        "hard link": tmp_path / "hard.sqlite",
        "-wal name": tmp_path / "live.sqlite-wal",
    }[how]
    if how == "symlink":
        target.symlink_to(db)
    elif how == "hard link":
        os.link(db, target)
    before = file_hash(db)
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", target)
    assert code == 2 and out == ""
    refused_in_one_line(err, "database being exported", "nothing was written")
    assert file_hash(db) == before
    if how == "-wal name":
        assert not target.exists()
    with Store(db, read_only=True) as store:
        assert len(store.runs()) == 3


def test_export_onto_another_sqlite_file_is_refused(db, tmp_path, capsys):
    other = tmp_path / "other.db"  # no .sqlite name: the header says what it is
    fill(other)
    before = file_hash(other)
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", other)
    assert code == 2
    refused_in_one_line(err, "is an SQLite database")
    assert file_hash(other) == before
    assert not (tmp_path / "other.db.tmp").exists()


def test_export_into_a_fifo_writes_through_and_the_fifo_stays(db, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)  # never holds pytest up
    reader.start()
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", fifo)
    reader.join(timeout=60)
    assert code == 0, err
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    bundle = json.loads(got[0])
    assert bundle["format"] == "dashbench-bundle" and len(bundle["runs"]) == 3


def test_export_onto_a_character_device_leaves_the_node_a_device(db, tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    null = tmp_path / "null"  # /dev/null's twin: the test never names a system path
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", null)
    assert code == 0 and "exported 3 runs" in out, err
    info = os.lstat(null)
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3)
    assert not (tmp_path / "null.tmp").exists()


def test_export_to_dash_prints_the_bundle_alone_on_stdout(db, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", "-")
    assert code == 0, err
    bundle = json.loads(out)  # nothing else on stdout
    assert bundle["format"] == "dashbench-bundle" and len(bundle["runs"]) == 3
    assert "exported 3 runs to stdout" in err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("how", ["file", "symlink"])
def test_export_over_an_earlier_bundle_is_refused_unless_forced(db, tmp_path, capsys, how):
    bundle = tmp_path / "b.json"
    earlier = '{"format": "dashbench-bundle", "runs": []}'
    bundle.write_text(earlier)
    target = bundle
    if how == "symlink":
        target = tmp_path / "alias.json"
        target.symlink_to(bundle)
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", target)
    assert code == 2 and out == ""
    refused_in_one_line(err, f"{target} already exists", "nothing was written", "--force")
    assert bundle.read_text() == earlier and not (tmp_path / "b.json.tmp").exists()
    code, out, err = run_cli(capsys, "export", "--db", db, "--out", target, "--force")
    assert code == 0, err
    assert stat.S_ISREG(os.lstat(bundle).st_mode) and len(json.loads(bundle.read_text())["runs"]) == 3
    assert os.path.islink(target) == (how == "symlink")  # a link stays a link to the replaced bundle


def test_export_onto_a_folder_is_refused(db, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    code, _, err = run_cli(capsys, "export", "--db", db, "--out", folder)
    assert code == 2
    refused_in_one_line(err, "is a folder")
    assert list(folder.iterdir()) == []
