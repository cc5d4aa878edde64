"""What `--db` may name and how it is opened: a database URL of a scheme
other than PostgreSQL's is refused before anything is created; a folder, or a folder that cannot be read, is one line naming it; read-only mode
opens the file O_RDONLY and still leaves no -wal/-shm files behind."""

import os
import sys

import pytest
from fixtures.cli_runs import TINY_RUN, file_hash, fill, run_cli

from dashbench.store import Store, StoreError, watch
from dashbench.views.common import context, settings

URL = "mysql://someone:secret@dbhost/results"

# Every command that takes --db, with what else it needs to get as far as opening the database.
COMMANDS = [
    ["list"],
    ["list", "--read-only"],
    ["show", "abc"],
    ["delete", "abc"],
    ["export", "--out", "{tmp}/b.json"],
    ["import", "{tmp}/b.json"],
    ["run", *TINY_RUN],
    ["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "8"],
    ["preset", "colab-conv2d", "--device", "cpu", "--quick"],
    ["prices"],
    ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "0.1"],
    ["prices", "reset"],
    ["doctor"],
    ["models"],
    ["devices"],
]


def argv_for(command, tmp_path):
    return [a.replace("{tmp}", str(tmp_path)) for a in command]


@pytest.mark.parametrize("where", ["--db", "DASHBENCH_DB"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_database_url_is_refused_in_one_line_and_nothing_is_created(command, where, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = argv_for(command, tmp_path)
    if where == "--db":
        argv += ["--db", URL]
    else:
        monkeypatch.setenv("DASHBENCH_DB", URL)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "is not accepted" in lines[0] and "postgresql+psycopg://" in lines[0], err
    assert "secret" not in err + out  # a URL's password is never echoed
    assert list(tmp_path.iterdir()) == []  # no folder named like the URL


def test_the_store_and_the_dashboard_refuse_a_database_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="mysql://… is not accepted; give postgresql"):
        Store(URL)
    monkeypatch.setenv("DASHBENCH_DB", URL)
    with pytest.raises(StoreError, match="DASHBENCH_DB: a database URL"):
        Store()
    for read_only in (False, True):
        loaded = settings.load(["--db", URL] + (["--read-only"] if read_only else []), {})
        assert "secret" not in loaded.db_path
        store, message = context.open_store(loaded)
        assert store is None and "is not accepted" in message
        loaded = settings.load([], {"DASHBENCH_DB": URL})
        assert context.open_store(loaded)[0] is None
    assert list(tmp_path.iterdir()) == []


UNREADABLE = "/proc/1/fdinfo/x.sqlite"  # only ever read: no command creates anything for these reads


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["list", "--read-only"],
        ["show", "abc"],
        ["export", "--out", "{tmp}/b.json"],
        ["prices"],
        ["prices", "--json"],
    ],
    ids=" ".join,
)
def test_a_database_in_a_folder_that_cannot_be_read_is_one_line(command, tmp_path, capsys):
    try:
        os.stat(UNREADABLE)
        pytest.skip(f"{UNREADABLE} can be looked up here")
    except PermissionError:
        pass
    except OSError:
        pytest.skip(f"{UNREADABLE}'s folder is readable here")
    code, out, err = run_cli(capsys, *argv_for(command, tmp_path), "--db", UNREADABLE)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: db: cannot open database {UNREADABLE}: its folder cannot be read (Permission denied)"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["list", "--read-only"],
        ["show", "abc"],
        ["delete", "abc"],
        ["export", "--out", "{tmp}/b.json"],
        ["import", "{tmp}/b.json"],
        ["prices"],
        ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "0.1"],
        ["run", *TINY_RUN],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_folder_given_as_db_is_named_as_a_folder(command, tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    code, out, err = run_cli(capsys, *argv_for(command, tmp_path), "--db", folder)
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: db: {folder} is a folder, not a database file; give a file path (e.g. {folder / 'dashbench.sqlite'})"
    ]
    assert "read-only" not in err
    assert list(folder.iterdir()) == []


def open_modes(path) -> list[int]:
    """The access modes (O_RDONLY, O_RDWR, …) of this process's descriptors open on `path`."""
    target, modes = os.path.realpath(path), []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != target:
                continue
            with open(f"/proc/self/fdinfo/{fd}") as fh:
                flags = next(line for line in fh if line.startswith("flags:"))
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        modes.append(int(flags.split()[1], 8) & os.O_ACCMODE)
    return modes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fdinfo")
def test_read_only_mode_opens_the_database_file_read_only(tmp_path):
    db = tmp_path / "served.sqlite"
    fill(db, runs=2)
    before = file_hash(db), os.stat(db).st_mtime_ns
    assert open_modes(db) == []
    with Store(db, read_only=True) as store:
        assert len(store.runs()) == 2
        watch.change_token(db)  # the dashboard's watcher: the same file, read-only too
        modes = open_modes(db)
        assert len(modes) >= 2 and set(modes) == {os.O_RDONLY}, modes
    watch.forget(db)
    assert open_modes(db) == []
    assert (file_hash(db), os.stat(db).st_mtime_ns) == before
    assert not list(tmp_path.glob("served.sqlite-*"))  # tidied: the last reader out removed -wal and -shm


def test_a_read_only_reader_leaves_a_writers_wal_alone(tmp_path):
    db = tmp_path / "busy.sqlite"
    fill(db)
    with Store(db) as writer:
        with Store(db, read_only=True) as reader:
            assert len(reader.runs()) == 1
        assert (tmp_path / "busy.sqlite-wal").exists()  # the writer still has it: the tidy must not take it
        fill(db, label="later")
        assert len(writer.runs()) == 2
    with Store(db, read_only=True) as reader:
        assert sorted(reader.runs()["label"]) == ["base", "later"]


@pytest.mark.parametrize("read_only", [False, True])
def test_the_dashboard_names_a_folder_or_an_unreadable_folder_in_its_message(read_only, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    paths = [folder]
    try:
        os.stat(UNREADABLE)
    except PermissionError:
        paths.append(UNREADABLE)
    except OSError:
        pass
    for path in paths:
        store, message = context.open_store(settings.load(["--db", str(path)] + (["--read-only"] * read_only), {}))
        assert store is None
        assert "is a folder, not a database file" in message or "its folder cannot be read" in message, message
    assert list(folder.iterdir()) == []
