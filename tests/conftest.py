import pytest


@pytest.fixture(autouse=True)
def _own_default_database(tmp_path_factory, monkeypatch):
    """No test may touch the user's real results database, even one that forgets --db."""
    monkeypatch.setenv("DASHBENCH_DB", str(tmp_path_factory.mktemp("default-db") / "dashbench.sqlite"))
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)
