"""What Compare says beyond its default choice of runs: the runs a ?runs= link names (with the short ids
the command line takes), and the newest runs of other models that the Model filter hides. Plain
functions of a store, kept per store version by the page (ui.shared)."""

from __future__ import annotations

from dashbench.views.common.format import md_text

HIDDEN_SCAN = 100  # the newest runs hidden_models looks among: what was just done, at a fifth of the default's scan


def hidden_models(store, query: dict, limit: int) -> dict[str, int]:
    """{model: runs} of the newest runs of each setup (at most `limit`, among the newest HIDDEN_SCAN) that
    pass every filter but Model, whose model it leaves out, in the order of their newest run: what the user just
    did on another model, which the default view (the newest run's model) would not show."""
    models = query.get("model")
    if not models:
        return {}
    wanted = set(models) if isinstance(models, (list, tuple)) else {models}
    others = {k: v for k, v in query.items() if k not in ("model", "status")}
    hidden: dict[str, int] = {}
    for _run_id, model in store.newest_setups(
        statuses=query.get("status") or (), limit=limit, scan=HIDDEN_SCAN, **others
    ):
        if model not in wanted:
            hidden[model] = hidden.get(model, 0) + 1
    return hidden


def hidden_text(hidden: dict[str, int]) -> str:
    """hidden_models said in words, and how to show them."""
    total = sum(hidden.values())
    names = [md_text(m) for m in hidden]
    if len(names) == 1:
        return (
            f"{total} of the newest runs {'is' if total == 1 else 'are'} of {names[0]}, which the Model filter "
            f"hides: add {names[0]} to Model above to show its section."
        )
    listed = ", ".join(f"{name} ({n})" for name, n in zip(names, hidden.values()))
    return (
        f"{total} of the newest runs are of {len(names)} other models, {listed}, which the Model filter hides: "
        "add them to Model above to show each model's section."
    )


LINK_IDS = 200  # ids of one ?runs= link looked up at most: each id that is not a full one costs a query


def linked_runs(store, given: tuple) -> tuple[list[str], list[str]]:
    """(the runs a ?runs= link names, in its order and each once; what it gave that names no run, or
    several, as a note each): the full ids, the unique prefixes and the short forms ('0e8b0a', '#0e8b0a')
    that the command line takes (Store.resolve_run_id), looked up once per store version (ui.shared)."""
    from dashbench.store import StoreError

    wanted = list(dict.fromkeys(text.strip() for text in given if text.strip()))[:LINK_IDS]
    stored = set(store.known_ids(wanted)) if wanted else set()  # full ids: one query for all of them
    ids, unknown, several = [], [], []
    for text in wanted:
        if text in stored:
            run_id = text
        else:
            try:
                run_id = store.resolve_run_id(text)
            except StoreError as exc:
                (several if "several" in str(exc) else unknown).append(text)
                continue
        if run_id not in ids:
            ids.append(run_id)
    notes = []
    if unknown:
        notes.append("Not found in this store: " + ", ".join(md_text(t) for t in unknown) + ".")
    if several:
        notes.append(
            "Each of these is the start or end of several run ids; give more characters: "
            + ", ".join(md_text(t) for t in several)
            + "."
        )
    return ids, notes
