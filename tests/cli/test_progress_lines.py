"""A run's progress lines reach stderr whole: each in one write with its newline. The store's retry thread
flushes stderr before its note; a line written apart from its newline was flushed half, and the note was
glued to the end of a step's line (where a reader, and a test, looked past it)."""

import sys
import threading

from dashbench.cli.run_cmd import Progress
from dashbench.jobs import run_guard


class Writes:
    """A stderr that keeps each write, and flushes a note from another thread between any two of them."""

    def __init__(self):
        self.writes, self.text = [], ""

    def write(self, text: str) -> int:
        self.writes.append(text)
        self.text += text
        note = threading.Thread(target=lambda: setattr(self, "text", self.text + "note: the store answers again\n"))
        note.start()
        note.join()
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("not a terminal")


def test_every_progress_line_is_one_write_and_no_note_joins_it(monkeypatch):
    stderr = Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    progress = Progress(steps=20, warmup=1, steps_per_loop=10)
    progress({"event": "compiled", "compile_s": 0.5})
    for index in range(3):
        progress(
            {"event": "sample", "loss": 0.5, "duration_s": 0.01, "steps": 10, "warmup": index == 0, "index": index}
        )
    run_guard.say("warning: the store is unreachable")
    assert all(w.endswith("\n") and w.count("\n") == 1 for w in stderr.writes), stderr.writes
    lines = stderr.text.splitlines()
    assert "note: the store answers again" in lines and lines.count("note: the store answers again") == 5
    assert [line for line in lines if line.startswith("  step")] == [
        "  step 10/20: 1.0 ms/step, loss 0.5",
        "  step 20/20: 1.0 ms/step, loss 0.5",
    ]
