"""Every command against a team store that refuses it says so in one `error: db: …` line, exit 2, no
traceback, nothing stored: a role with no rights, a role that may read but not write, a server down or
restarted under the command, nonsense in the URL. Real PostgreSQL roles and a real server crash."""

import subprocess
import sys
import textwrap

import pytest
from fixtures.cli_probe import TINY
from fixtures.cli_runs import fill, run_cli
from fixtures.no_training import no_training  # noqa: F401 (a fixture: no command here may train)
from fixtures.pg_restart import crash, pg_own, start_again  # noqa: F401 (pg_own: a fixture)
from fixtures.pg_server import create_reader
from sqlalchemy.engine import make_url

from dashbench.store import Store

BUNDLE_RUNS = 2


def no_rights_role(url: str) -> str:
    """`CREATE ROLE w LOGIN` and nothing more (PUBLIC's CONNECT is all it has); `url` as that role."""
    parsed = make_url(url)
    role = f"w_{parsed.database}"
    with Store(url) as store, store._write("make the role") as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    return parsed.set(username=role).render_as_string(hide_password=False)


@pytest.fixture
def team(pg_url, tmp_path, capsys):
    """A team store with runs in it, a bundle of them to import, and a local store to copy in."""
    ids = fill(pg_url, runs=BUNDLE_RUNS)
    fill(tmp_path / "local.sqlite")
    bundle = tmp_path / "bundle.json"
    assert run_cli(capsys, "export", "--db", pg_url, "--out", bundle)[0] == 0
    return pg_url, ids, bundle


def held(url) -> tuple:
    with Store(url, read_only=True) as store:
        return store.change_token(), store.count_runs()


def commands(db: str, run_id: str, bundle, tmp_path) -> dict[str, list]:
    """Every command that opens the store, by name, as a user types it."""
    return {
        "list": ["list", "--db", db],
        "list --read-only": ["list", "--read-only", "--db", db],
        "show": ["show", run_id, "--db", db],
        "show --read-only": ["show", run_id, "--read-only", "--db", db],
        "export": ["export", "--db", db, "--out", tmp_path / "out.json"],
        "export --read-only": ["export", "--read-only", "--db", db, "--out", tmp_path / "out-ro.json"],
        "delete": ["delete", run_id, "--db", db],
        "import": ["import", bundle, "--db", db],
        "run": ["run", *TINY, "--db", db],
        "run --json": ["run", *TINY, "--json", "--db", db],
        "sweep": ["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", "8,16", "--db", db],
        "preset": ["preset", "colab-conv2d", "--device", "cpu", "--quick", "--db", db],
        "prices": ["prices", "--db", db],
        "doctor": ["doctor", "--db", db],
        "prices set": ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "1", "--db", db],
        "store upgrade": ["store", "upgrade", "--db", db],
        "store copy --from": ["store", "copy", "--from", db, "--to", tmp_path / "copy.sqlite"],
        "store copy --to": ["store", "copy", "--from", tmp_path / "local.sqlite", "--to", db],
    }


def one_line(capsys, argv, field="db") -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, (argv, code, out, err)
    lines = err.strip().splitlines()
    if argv[0] == "preset":  # its one header line ("Colab conv2d on cpu: …") comes first, as for any error
        lines = lines[1:]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), (argv, err)
    assert "Traceback" not in err and "psycopg.errors" not in err
    return lines[0]


def field_of(name: str) -> str:
    return {"store copy --from": "from", "store copy --to": "to"}.get(name, "db")


def test_a_role_with_no_rights_is_one_line_naming_what_to_grant_on_every_command(team, tmp_path, capsys, no_training):
    url, ids, bundle = team
    w = no_rights_role(url)
    before = held(url)
    role = make_url(w).username
    for name, argv in commands(w, ids[0], bundle, tmp_path).items():
        line = one_line(capsys, argv, field_of(name))
        assert f"the role {role} cannot read dashbench_schema" in line and "pg_read_all_data" in line, (name, line)
    assert held(url) == before  # nothing stored, nothing deleted


def test_a_role_that_may_only_read_is_told_to_open_it_read_only_by_every_writing_command(
    team, tmp_path, capsys, no_training
):
    url, ids, bundle = team
    before = held(url)
    reader = create_reader(url)
    every = commands(reader, ids[0], bundle, tmp_path)
    for name in (
        "delete",
        "import",
        "run",
        "sweep",
        "preset",
        "prices set",
        "doctor",
        "store upgrade",
        "store copy --to",
    ):
        line = one_line(capsys, every[name], field_of(name))
        assert "may only SELECT" in line and "read-only" in line, (name, line)
    for name in ("list", "list --read-only", "show", "export --read-only", "prices", "store copy --from"):
        assert run_cli(capsys, *every[name])[0] == 0, name  # reading is what this role is for
    assert held(url) == before


def test_a_server_that_is_down_or_restarted_under_the_commands_is_one_line_then_works_again(
    pg_own, tmp_path, capsys, no_training
):
    url = pg_own.url()
    ids = fill(url)
    fill(tmp_path / "local.sqlite")
    bundle = tmp_path / "bundle.json"
    assert run_cli(capsys, "export", "--db", url, "--out", bundle)[0] == 0
    with pg_own.connect() as conn:
        conn.execute("CHECKPOINT")  # what was stored survives the crash (the tests' server does not fsync)
    assert run_cli(capsys, "list", "--db", url)[0] == 0  # this process now keeps pooled connections
    crash(pg_own)
    for name, argv in commands(url, ids[0], bundle, tmp_path).items():
        line = one_line(capsys, argv, field_of(name))
        assert "is unreachable (Connection refused); try again once it answers" in line, (name, line)
    start_again(pg_own)  # the pooled connections are dead: taken again, not said
    code, out, err = run_cli(capsys, "show", ids[0], "--db", url)
    assert (code, err) == (0, "") and ids[0] in out


def test_nonsense_in_the_url_is_one_line_naming_it(pg_url, capsys):
    fill(pg_url)
    assert 'sslmode "bogus" is not one of disable, allow' in one_line(
        capsys, ["list", "--db", pg_url + "?sslmode=bogus"]
    )
    assert '"colour" is not a libpq connection parameter' in one_line(capsys, ["list", "--db", pg_url + "?colour=red"])
    port = str(make_url(pg_url).port)
    assert "cannot be read" in one_line(capsys, ["list", "--db", pg_url.replace(port, "port")])


def test_a_connection_the_server_dropped_is_never_logged_on_the_terminal(pg_own):
    # A pooled connection given back after the server restarted under it: SQLAlchemy's pool logged its
    # failed reset ("Exception during reset or similar") with a traceback on the user's terminal.
    url = pg_own.url()
    fill(url)
    with pg_own.connect() as conn:
        conn.execute("CHECKPOINT")
    script = textwrap.dedent(f"""
        from dashbench.store import Store
        store = Store({url!r})
        print(store.count_runs(), flush=True)
        input()  # the server crashes and starts again meanwhile
        store.close()  # its connection, dead, goes back to the pool
        with Store({url!r}) as again:
            print(again.count_runs(), flush=True)
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "1"
        crash(pg_own)
        start_again(pg_own)
        out, err = child.communicate("\n", timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert err == "" and out.strip() == "1"
