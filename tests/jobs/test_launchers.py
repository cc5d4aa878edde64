"""The launch interface: this machine's queue and the Ray fleet behind one Protocol, picked in one place,
with Ray (and the fleet's cluster code) never imported when a run stays on this machine.
(The fleet's launches on a real cluster: tests/fleet/test_fleet.py, tests/fleet/test_fleet_lifecycle.py.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dashbench.core.spec import RunSpec, SpecError
from dashbench.fleet.launcher import RayFleet, every, pick
from dashbench.jobs.launchers import Launcher, LocalQueue
from dashbench.store import Store

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(model="conv2d", image_size=8, width=2, batch_size=4, device="cpu", steps=2, warmup=1)


def _interface(cls) -> set[str]:
    """Its public methods and attributes, those only declared (a Protocol's) included."""
    return {name for name in [*vars(cls), *vars(cls).get("__annotations__", {})] if not name.startswith("_")}


def test_both_launchers_have_every_name_of_the_interface():
    wanted = {"checks_here", "stop_wait_s", "check", "launch", "cancel", "cancel_all", "tend", "note"}
    assert wanted <= _interface(Launcher)
    for cls in (LocalQueue, RayFleet):
        assert _interface(Launcher) <= _interface(cls), (cls, _interface(Launcher) - _interface(cls))
    assert LocalQueue.checks_here and not RayFleet.checks_here


def test_the_picker_sends_a_run_to_the_cluster_only_when_one_is_given():
    local = pick(None, "gpu:x@host", owner_pid=123)
    assert isinstance(local, LocalQueue) and local.owner_pid == 123
    fleet = pick("ray://head:10001", "gpu:x@host")
    assert isinstance(fleet, RayFleet) and (fleet.address, fleet.on) == ("ray://head:10001", "gpu:x@host")
    assert [type(each) for each in every(None)] == [LocalQueue]
    assert [type(each) for each in every("ray://head:10001")] == [LocalQueue, RayFleet]


def test_this_machines_queue_is_picked_without_importing_ray_or_the_fleets_cluster_code():
    script = (
        "import json, sys\n"
        "from dashbench.fleet.launcher import pick\n"
        "pick(None).note(None)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'"
        " or m in ('dashbench.fleet.launch', 'dashbench.fleet.inventory', 'dashbench.fleet.submit'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_a_launch_either_launcher_refuses_stores_nothing(tmp_path):
    """Bad input is one SpecError naming the field, before any row: on this machine (the queue's checks)
    and on a cluster (a store every host reaches), with no cluster needed to say so."""
    db = tmp_path / "runs.sqlite"
    with pytest.raises(SpecError) as refused:
        pick(None).launch(RunSpec(**{**TINY, "batch_size": 10**9}), db)  # past any host's memory
    assert refused.value.field == "batch_size"
    with pytest.raises(SpecError) as refused:
        pick("ray://head:10001").check(db)
    assert refused.value.field == "db"
    with Store(db) as store:
        assert len(store.runs()) == 0
