"""The Run page's "What to measure" under AppTest: each mode shows exactly its boxes, and a launch from
each mode queues the spec of that mode only, whatever the boxes of another mode were given before."""

from fixtures.app_test import assert_clean, show, start, texts
from fixtures.learnable_data import learnable_idx  # noqa: F401 (fixture: IDX files made here)
from fixtures.run_page_form import fill_run_form

from dashbench.store import Store
from dashbench.views.run import form as run_form

BOX_KEYS = {f"run_{name}" for name in run_form.ACCURACY_BOXES}
TO_ACCURACY = ("target_accuracy", "max_epochs", "epochs", "steps_per_epoch", "eval_every", "seeds")


def shown_boxes(at) -> set[str]:
    return {box.key for box in at.number_input} & BOX_KEYS


def launch(at) -> None:
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Not launched" not in texts(at), texts(at)


def test_each_mode_shows_its_boxes_and_launches_its_spec(tmp_path, monkeypatch, learnable_idx):  # noqa: F811
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])  # the rows stay queued: no training
    db = tmp_path / "modes.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    assert at.radio(key="run_mode").value == "throughput" and shown_boxes(at) == set()
    at.selectbox(key="run_data").set_value("real")
    at.text_input(key="run_data_path").input(str(learnable_idx))

    at.radio(key="run_mode").set_value("target").run()  # a choice redraws at once, no launch needed
    assert_clean(at)
    assert shown_boxes(at) == {
        "run_target_accuracy",
        "run_max_epochs",
        "run_steps_per_epoch",
        "run_eval_every",
        "run_seeds",
    }
    fill_run_form(at, batch_size=8, width=4, target_accuracy=0.8, max_epochs=7, eval_every=5, seeds=2)
    launch(at)

    at.radio(key="run_mode").set_value("epochs").run()
    assert_clean(at)
    assert shown_boxes(at) == {"run_epochs", "run_steps_per_epoch", "run_eval_every", "run_seeds"}
    at.number_input(key="run_epochs").set_value(3)
    at.number_input(key="run_steps_per_epoch").set_value(4)
    launch(at)

    at.radio(key="run_mode").set_value("throughput").run()
    assert_clean(at)
    assert shown_boxes(at) == set()
    launch(at)

    at.radio(key="run_mode").set_value("target").run()  # the boxes kept what was typed while hidden
    assert at.number_input(key="run_target_accuracy").value == 0.8 and at.number_input(key="run_seeds").value == 2

    ids = at.session_state["my_runs"]  # in launch order
    with Store(db) as store:
        assert sorted(store.runs()["run_id"]) == sorted(ids)
        specs = [store.get_run(run_id)["spec"] for run_id in ids]
        for run_id in ids:
            store.request_cancel(run_id)
    target, epochs, throughput = [{k: s.get(k) for k in TO_ACCURACY} for s in specs]
    assert (target["target_accuracy"], target["max_epochs"], target["eval_every"], target["seeds"]) == (0.8, 7, 5, 2)
    assert target["epochs"] is None
    assert (epochs["epochs"], epochs["steps_per_epoch"], epochs["eval_every"], epochs["seeds"]) == (3, 4, 5, 2)
    assert epochs["target_accuracy"] is None
    # Throughput after both: none of the to-accuracy fields, though their boxes were filled before.
    assert throughput["target_accuracy"] is None and throughput["epochs"] is None
    assert throughput["seeds"] in (None, 1) and throughput["eval_every"] is None
    assert {(s["data"], s["batch_size"], s["width"]) for s in specs} == {("real", 8, 4)}
