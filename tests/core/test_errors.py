"""One error, one line: the helper every one-line message is made with."""

import pytest

from dashbench.core.errors import one_line


def test_whitespace_is_folded_and_an_empty_error_says_its_type():
    assert one_line(ValueError("bad\n   input\tthere")) == "bad input there"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(OSError("disk\nfull"), typed=True) == "OSError: disk full"
    assert one_line("") == "(no message)"
    assert one_line("  a\n b ") == "a b"


@pytest.mark.parametrize("limit", [3, 300, None])
def test_a_long_error_is_cut_at_its_limit_and_says_so(limit):
    text = "x" * 1000
    line = one_line(RuntimeError(text), limit)
    assert line == (text if limit is None else "x" * limit + "…")
    assert one_line(RuntimeError("short"), 300) == "short"
