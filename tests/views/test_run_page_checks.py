"""One click on the Run page's Launch checks the spec once and its memory once in the dashboard's
process: the form, the page and the queue each used to check it again."""

from fixtures.app_test import assert_clean, show, start, texts
from fixtures.run_page_form import fill_run_form, shown_errors

from dashbench.store import Store
from dashbench.workloads import catalog, memory


def test_a_launch_checks_its_spec_and_its_memory_once(tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])  # the rows stay queued: no training
    db = tmp_path / "checked.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    fill_run_form(at, "conv2d", batch_size=4)
    calls = {"check_spec": 0, "memory": 0}
    real_check, real_memory = catalog.check_spec, memory.check

    def check_spec(spec):
        calls["check_spec"] += 1
        return real_check(spec)

    def check_memory(spec, *args, **kwargs):
        calls["memory"] += 1
        return real_memory(spec, *args, **kwargs)

    monkeypatch.setattr(catalog, "check_spec", check_spec)
    monkeypatch.setattr(memory, "check", check_memory)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Queued 1 run(s)." in texts(at)
    assert calls == {"check_spec": 1, "memory": 1}
    with Store(db) as store:
        assert store.count_runs() == 1


def test_a_launch_past_the_machines_memory_is_refused_and_queues_nothing(tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])
    db = tmp_path / "refused.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    fill_run_form(at, "conv2d", batch_size=100_000)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    (error,) = shown_errors(at)
    assert error.startswith("Not launched: batch size: conv2d at batch 100000 needs about"), error
    assert not db.exists() or Store(db, read_only=True).count_runs() == 0
