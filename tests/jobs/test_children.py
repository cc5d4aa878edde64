"""A run's process is a child subreaper only while the run lasts: one left a subreaper (a test worker, a
notebook that ran `main(["run", …])`) would take in every later orphan as a zombie nobody reaps."""

import ctypes
import sys

import pytest

from dashbench.jobs import children

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_CHILD_SUBREAPER is Linux's")


def subreaper() -> bool:
    flag = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(children.PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


def test_a_run_is_a_subreaper_only_while_it_lasts():
    assert not subreaper()
    with children.ending_with_run():
        assert subreaper()
    assert not subreaper()
