"""In a 120-column terminal every line of `run`, `show` and `models` fits (wrapped, a command with a shell
continuation that still runs when copied); a pipe and --json keep each line whole. The commands run in a
real pseudo-terminal, as a user's shell runs them."""

import fcntl
import json
import os
import pty
import select
import shlex
import struct
import subprocess
import sys
import termios

import pytest
from fixtures.cli_runs import TINY_RUN

from dashbench.cli.terminal import fit

COLUMNS = 120


def in_terminal(argv: list[str], cwd, columns: int = COLUMNS) -> str:
    """`python -m dashbench ARGV` with a pseudo-terminal `columns` wide as its stdout; what it printed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns))
    # What a user's shell has: not the level an in-process `import jax` set here, which lets TensorFlow's
    # C++ log (a machine without CUDA's "failed call to cuInit") through.
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashbench", *argv], stdout=follower, stderr=follower, cwd=cwd, env=env
    )
    os.close(follower)
    out = b""
    while select.select([leader], [], [], 300)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, out.decode(errors="replace")[-2000:]
    return out.decode().replace("\r\n", "\n")


def piped(argv: list[str], cwd) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", *argv], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def too_wide(text: str, columns: int = COLUMNS) -> list[str]:
    return [line for line in text.split("\n") if len(line) > columns]


def words(text: str) -> list[str]:
    return text.replace(" \\\n", " ").split()


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """One tiny real run, launched in the terminal: (database, run id, what the terminal showed)."""
    home = tmp_path_factory.mktemp("width")
    db = home / "runs.sqlite"
    shown = in_terminal(["run", *TINY_RUN, "--db", str(db)], home)
    run_id = json.loads(piped(["list", "--json", "--db", str(db)], home))[0]["run_id"]
    return db, run_id, shown


def test_run_and_show_fit_a_120_column_terminal_and_a_pipe_keeps_each_line_whole(stored_run):
    db, run_id, shown = stored_run
    assert "MFU" in shown and too_wide(shown) == []
    terminal = in_terminal(["show", run_id, "--db", str(db)], db.parent)
    assert "spec: model=conv2d" in terminal and too_wide(terminal) == []
    whole = piped(["show", run_id, "--db", str(db)], db.parent)
    (spec_line,) = [line for line in whole.split("\n") if line.startswith("  spec: ")]
    assert len(spec_line) > COLUMNS  # what the terminal wrapped, the pipe gets on one line
    assert words(terminal) == words(whole)  # wrapped, nothing cut
    assert json.loads(piped(["show", run_id, "--json", "--db", str(db)], db.parent))["spec"]["model"] == "conv2d"


def test_models_fit_a_120_column_terminal_and_their_quick_tries_still_run_when_copied(tmp_path):
    terminal = in_terminal(["models"], tmp_path)
    assert too_wide(terminal) == []
    whole = piped(["models"], tmp_path)
    assert max(len(line) for line in whole.split("\n")) > 2 * COLUMNS  # the longest description, whole
    assert words(terminal) == words(whole)
    # A wrapped quick try, as a shell reads it (a line ending in a backslash goes on), is the command in full.
    lines = terminal.split("\n")
    at = next(i for i, line in enumerate(lines) if "quick try: " in line)
    command = [lines[at].split("quick try: ")[1]]
    while command[-1].endswith(" \\"):
        at += 1
        command.append(lines[at])
    assert len(command) > 1  # it was wrapped
    first_whole = whole.split("quick try: ")[1].split("\n")[0]
    assert shlex.split("\n".join(command).replace("\\\n", "")) == shlex.split(first_whole)  # as bash joins
    assert len(json.loads(piped(["models", "--json"], tmp_path))[0]["description"]) > COLUMNS


def test_fit_keeps_an_option_with_its_value_and_leaves_text_for_a_pipe_alone():
    line = "  quick try: python -m dashbench run " + " ".join(f"--option-{i} {i * 111}" for i in range(12))
    lines = fit(line, 60).split("\n")
    assert all(len(piece) <= 60 for piece in lines) and all(piece.endswith(" \\") for piece in lines[:-1])
    assert all(piece.lstrip().startswith("--") for piece in lines[1:])  # never a value without its option
    assert shlex.split(" ".join(piece.rstrip("\\") for piece in lines)) == shlex.split(line)
    prose = "  note: " + "word " * 40 + "run `python -m dashbench doctor` to calibrate"
    assert [piece for piece in fit(prose, 60).split("\n") if piece.endswith("\\")] == []  # prose, not a command
    assert fit(prose, None) == prose
