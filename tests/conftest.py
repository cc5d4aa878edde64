import pytest


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


# XLA:CPU without LLVM's optimisation passes: what the tests check (losses, placement, keys) does not
# depend on them, and a JAX run's compile drops from ~13 s to ~4 s here (run processes inherit it).
FAST_XLA_COMPILE = "--xla_backend_optimization_level=0"


@pytest.fixture(autouse=True)
def _fast_xla_compile(monkeypatch):
    import os

    flags = os.environ.get("XLA_FLAGS", "")
    if FAST_XLA_COMPILE not in flags:
        monkeypatch.setenv("XLA_FLAGS", f"{flags} {FAST_XLA_COMPILE}".strip())
