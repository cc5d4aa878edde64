import os
import shutil
import tempfile

import pytest
from fixtures.pg_server import pg_own_server, pg_server, pg_url  # noqa: F401 (fixtures: a real PostgreSQL server)
from fixtures.ray_cluster import ray_cluster, ray_session_cluster  # noqa: F401 (a real 4-node Ray cluster, once per process)
from fixtures.xla import FAST_XLA_COMPILE

# The session's own temporary folder: whatever goes to tempfile's default folder (TensorFlow's autograph
# files, a library's scratch files) in this process and every process it starts (TMPDIR), never /tmp.
# Made by the first process (the xdist controller, before its workers start: they inherit it), removed
# by it at the end. Short, right under the system's temp dir: Unix sockets made under it (PostgreSQL's
# -k folder, Ray's sockets ~70 bytes below its temp dir) must stay under 108 bytes.
SESSION_TMP_ENV = "DASHBENCH_TESTS_TMPDIR"
_session_tmp: list[str] = []  # the folder, when this process made it


def pytest_configure(config):
    given = os.environ.get(SESSION_TMP_ENV)
    if given and os.path.isdir(given) and os.environ.get("TMPDIR") == given:
        tempfile.tempdir = given  # an xdist worker: the controller's folder
        return
    # pytest's own tmp_path folders stay where they were (kept for a look after a failure).
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    folder = tempfile.mkdtemp(prefix="dbt-")
    # As /tmp is: processes a test runs as another user (`postgres`, `nobody`) make their files here too.
    os.chmod(folder, 0o1777)
    _session_tmp.append(folder)
    os.environ[SESSION_TMP_ENV] = os.environ["TMPDIR"] = tempfile.tempdir = folder
    # dashbench's cache (each Ray node's Python: fleet/node_python.py), one for the whole session, as a
    # user's is for all their commands: the cluster's hosts are asked once, not by every `run --cluster`.
    os.environ["DASHBENCH_CACHE_DIR"] = os.path.join(folder, "cache")


def pytest_unconfigure(config):
    for folder in _session_tmp:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_default_database(tmp_path_factory, monkeypatch):
    """No test may touch the user's real results database, even one that forgets --db."""
    monkeypatch.setenv("DASHBENCH_DB", str(tmp_path_factory.mktemp("default-db") / "dashbench.sqlite"))
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)


@pytest.fixture(autouse=True)
def _small_cpu_probe(monkeypatch):
    """Run processes started by a test probe the CPU's peak on 512² matrices: the probe's size is not
    under test, and the full 4096² probe costs each run process ~10 s on a quiet 2-core machine."""
    monkeypatch.setenv("DASHBENCH_CPU_PROBE_SIZE", "512")


@pytest.fixture(autouse=True)
def _own_device_locks(tmp_path_factory, monkeypatch):
    """Each test's runs take device locks of their own, so tests (and a real run on this machine)
    never wait for one another."""
    monkeypatch.setenv("DASHBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("device-locks")))


@pytest.fixture(autouse=True)
def _fast_xla_compile(monkeypatch):
    import os

    flags = os.environ.get("XLA_FLAGS", "")
    if FAST_XLA_COMPILE not in flags:
        monkeypatch.setenv("XLA_FLAGS", f"{flags} {FAST_XLA_COMPILE}".strip())


# The longest tests (over 20 s each on this 2-core machine, `pytest --durations`), longest first.
# pytest-xdist hands tests out in collection order, so started first they overlap the many short
# ones on the other worker instead of leaving one worker alone with a two-minute test at the end.
LONGEST_FIRST = (
    "test_lm_to_target.py::test_both_backends_train_to_the_target_loss_and_show_list_compare_and_parity_read_it",
    "test_jax_backend.py::test_every_workload_trains_on_jax_with_tensorflows_keys_and_flops",
    "test_jax_backend.py::test_four_devices_and_two_hosts_give_the_one_device_loss",
    "test_browser.py::test_every_page_in_a_real_browser",
    "test_bench_server_cost.py::test_server_cost_prints_cpu_per_visit_for_a_tiny_store",
    # the first of the group carries its module fixture: one interpreter for all eight modules
    "test_first_use.py::test_the_app_without_a_requirement_says_in_one_line_what_is_missing_on_every_page[numpy]",
    "test_workloads.py::test_every_workload_trains_with_a_falling_loss[inception_v3]",
    "test_engine.py::test_data_parallel_runs_give_the_loss_of_one_replica_at_the_same_global_batch",
    "test_workloads.py::test_every_workload_trains_with_a_falling_loss[resnet50]",
    "test_app.py::test_a_tiny_real_jax_run_launched_from_the_run_page_shows_on_compare",
    "test_accuracy_real.py::test_real_runs_to_target_give_predictions_parity_and_the_pages",
    "test_contention_repeats.py::test_a_cpu_hog_beside_a_run_flags_it_contended",
    "test_to_accuracy.py::test_jax_trains_to_the_target_and_stops_early",
    "test_to_accuracy.py::test_three_seeds_reach_the_target_and_stop_early_with_three_curves_and_a_median",
    "test_cli_results.py::test_real_sweep_of_tiny_runs",
    "test_app.py::test_the_app_process_never_imports_tensorflow",
)


LOSES_HOSTS = "test_fleet_when_hosts_are_lost.py"


def _name_xdist_groups(config, items):
    """`--dist loadgroup` sends the tests of one `xdist_group` to one worker by the `@group` suffix
    pytest-xdist 3.8 writes into `item._nodeid`, which pytest 9.2 no longer reads (it keeps `_id`):
    without this the groups were silently ignored, and both workers started a Ray cluster."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")
        }
        if names and not item.nodeid.endswith("@" + "_".join(sorted(names))):
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(sorted(names))}")


def pytest_collection_modifyitems(config, items):
    _name_xdist_groups(config, items)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def place(item):
        name = item.nodeid.rsplit("/", 1)[-1]
        if getattr(config.option, "loadgroup", False) and item.get_closest_marker("xdist_group"):
            name = name.rsplit("@", 1)[0]  # without its group's suffix (_name_xdist_groups)
        return rank.get(name, len(rank))

    items.sort(key=place)  # stable: every other test keeps its order
    # The lost hosts' tests kill cluster nodes: after them, the next Ray test would wait for those nodes
    # to be started again (tests/fixtures/ray_cluster.py's restore). Last, they leave none to start.
    items.sort(key=lambda item: item.nodeid.split("::")[0].endswith(LOSES_HOSTS))


@pytest.fixture(autouse=True)
def _no_device_look_ahead(monkeypatch):
    """The dashboard starts the Run page's device discovery (a TensorFlow process) on any page's first run:
    a test's app does not, in this process or in a `streamlit run` it starts (its environment), unless it is
    the test's subject (tests/views/test_device_discovery.py); the Run page still discovers them when shown."""
    from dashbench.views.common import devices

    monkeypatch.setattr(devices, "look_ahead", lambda: None)
    monkeypatch.setenv(devices.LOOK_AHEAD_ENV, "0")
