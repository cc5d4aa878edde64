"""Text from the store or the command line reaches the terminal with its control characters escaped:
a host, label, error or price written straight into the database (as an old version, another tool
or a hand edit could) forges no line and sends no escape sequence. --json stays JSON."""

import json
import sqlite3

import pytest
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.cli import main
from dashbench.cli.terminal import CONTROL, shown, shown_lines
from dashbench.store import Store

HOST = "evil\nhost\x1b[31m"
LABEL = "lab\tel\x1b]0;pwned\x07\u202egnp.exe"
ERROR = "boom\r\x9b2J\x7f"
ACCELERATOR = "CPU\x1b[2J"


def raw(text: str) -> bool:
    """Does text hold a control character the terminal would act on (newline aside)?"""
    return bool(CONTROL.search(text.replace("\n", "")))


def test_shown_escapes_c0_del_c1_bidi_and_keeps_plain_text():
    assert shown(HOST) == "evil\\nhost\\x1b[31m"
    assert shown("a\tb\rc\x00d\x7fe\x9bf\u202eg\u2028h") == "a\\tb\\rc\\x00d\\x7fe\\x9bf\\u202eg\\u2028h"
    assert shown("héllo, 東京 — ok \\n") == "héllo, 東京 — ok \\n"
    assert shown_lines("one\x1b[1m\ntwo") == "one\\x1b[1m\ntwo"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "hostile.sqlite"
    with Store(path) as store:
        done = store.create_run(SPEC)
        store.add_samples(done, samples_for(3))
        store.finish_run(done, "done", result_for(SPEC, 100.0))
        failed = store.create_run(SPEC.replace(batch_size=8))
        store.finish_run(failed, "failed", error="placeholder")
        store.set_price_override(
            {
                "key": "k",
                "device": "V100",
                "provider": "user",
                "unit": "GPU-hour",
                "chips_per_unit": 1,
                "on_demand_usd_per_hour": 1.0,
                "spot_usd_per_hour": None,
                "region": "",
                "source": "me",
                "as_of": "2025-01-01",
                "unconfirmed": False,
            }
        )
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET host = ?, label = ?", (HOST, LABEL))
        conn.execute("UPDATE runs SET error = ? WHERE run_id = ?", (ERROR, failed))
        conn.execute("UPDATE runs SET accelerator = ? WHERE run_id = ?", (ACCELERATOR, done))
        blob = json.loads(conn.execute("SELECT result_json FROM run_blobs WHERE run_id = ?", (done,)).fetchone()[0])
        blob["accelerator"] = ACCELERATOR
        conn.execute("UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(blob), done))
        conn.execute("UPDATE price_overrides SET key = ?, provider = ?", ("k\x1b[5m", "us\ner\x1b[8m"))
    return path, done, failed


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_escapes_a_stored_host_label_error_and_accelerator(db, capsys):
    path, done, failed = db
    code, out, err = cli(capsys, "show", "--db", str(path), done)
    assert code == 0 and not raw(out + err)
    assert "evil\\nhost\\x1b[31m" in out and "\\x1b]0;pwned\\x07\\u202e" in out and "CPU\\x1b[2J" in out
    assert not any(line.startswith("host") for line in out.splitlines())  # no forged line

    code, out, err = cli(capsys, "show", "--db", str(path), failed)
    assert code == 0 and not raw(out + err) and "boom\\r\\x9b2J\\x7f" in out


def test_list_table_escapes_every_cell(db, capsys):
    path, _, _ = db
    code, out, err = cli(capsys, "list", "--db", str(path))
    assert code == 0 and not raw(out + err)
    assert "CPU\\x1b[2J" in out and len(out.strip().splitlines()) == 3  # header + two runs


def test_json_output_stays_json_and_round_trips_the_text(db, capsys):
    path, done, failed = db
    code, out, _ = cli(capsys, "show", "--db", str(path), "--json", done)
    assert code == 0 and not raw(out)
    run = json.loads(out)
    assert (run["host"], run["label"], run["result"]["accelerator"]) == (HOST, LABEL, ACCELERATOR)
    code, out, _ = cli(capsys, "list", "--db", str(path), "--json")
    assert code == 0 and not raw(out)
    assert {r["error"] for r in json.loads(out)} == {None, ERROR}
    code, out, err = cli(capsys, "prices", "--db", str(path), "--json")
    assert code == 0 and not raw(out + err) and "k\\x1b[5m" in err  # the override is refused on stderr
    assert all(r["origin"] == "shipped" for r in json.loads(out))


def test_prices_escape_a_stored_override_they_leave_out(db, capsys):
    path, _, _ = db
    code, out, err = cli(capsys, "prices", "--db", str(path))
    assert code == 0 and not raw(out + err)
    # A key with control characters breaks today's checks: left out, and named escaped on one line.
    assert "k\\x1b[5m" in err and err.count("\n") == 1 and "k\\x1b[5m" not in out


def test_error_lines_quoting_typed_text_are_escaped(db, tmp_path, capsys):
    path, _, _ = db
    for argv in (
        ["show", "--db", str(path), "\x1b[2Jnope"],
        ["list", "--db", str(path), "--status", "\x1b[31mdone"],
        ["list", "--db", str(path), "--device", "gpu\n\x1b[0m"],
        ["prices", "--db", str(path), "reset", "--key", "\x1b[1mnone"],
        ["run", "--model", "\x1b[31mnet", "--batch-size", "8", "--db", str(tmp_path / "r.sqlite")],
    ):
        code, out, err = cli(capsys, *argv)
        assert code == 2 and not raw(out + err), argv
        assert len(err.strip().splitlines()) == 1 and "\\x1b[" in err, argv


def test_the_prices_table_escapes_its_cells():
    from dashbench.cli.prices_cmd import format_table
    from dashbench.costs import prices

    frame = prices.shipped_catalog().head(1)
    frame.loc[frame.index[0], ["key", "source", "as_of"]] = ["k\x1b[5m", "s", "2025\n01"]
    out = format_table(frame)
    assert not raw(out) and "k\\x1b[5m" in out and "2025\\n01" in out and len(out.splitlines()) == 3
