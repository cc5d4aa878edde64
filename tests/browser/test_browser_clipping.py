"""Nothing a newcomer reads is cut short at a 1400 px window, in headless Chromium: the Run page's Device
select holds a long CPU name, Results' and Compare's filters show their placeholders and chips whole,
Results' table keeps each run's id in view, Compare's numbers need no sideways scroll, and the sidebar's
database path stays inside the sidebar on one line, no name broken.
Measured, not looked at: a text's drawn width (the page's own font, canvas measureText) or an element's
scrollWidth against the room its box gives it."""

import re

from fixtures import accuracy_results, dashboard_data
from fixtures.browser_fixtures import ARTIFACTS, IDLE, PAGE_TIMEOUT_MS, browser, open_page, streamlit_server  # noqa: F401 (browser: the fixture)
from fixtures.browser_tables import LABELS, geometry, grids_of, numbers_grids, sideways

from dashbench.core.spec import MODELS, RunSpec
from dashbench.store import Store
from dashbench.views.common.columns import COLUMNS, width_of
from dashbench.views.common.format import SIDEBAR_PATH_CHARS, short_path_text
from dashbench.views.predict import profiles

# Every text cut short on the page: an input's value or placeholder wider than its box, an ellipsis
# element whose text overflows (a chip, a select's value), a sidebar <code> past the sidebar's edge.
CLIPPED = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const out = [];
  const visible = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  for (const e of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
    if (!visible(e)) continue;
    const cs = getComputedStyle(e);
    if (e.tagName === 'INPUT' && !['checkbox','radio'].includes(e.type)) {
      const text = e.value || e.placeholder || '';
      if (!text) continue;
      ctx.font = cs.font;
      const room = e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      const need = ctx.measureText(text).width;
      if (need > room + 1) out.push({what: 'input', text, need: Math.round(need), room});
    } else if (e.tagName !== 'INPUT' && cs.textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1) {
      out.push({what: 'ellipsis', text: e.innerText, need: e.scrollWidth, room: e.clientWidth});
    }
  }
  const side = document.querySelector('[data-testid="stSidebarUserContent"]');
  if (side) { const edge = side.getBoundingClientRect().right;
    for (const c of side.querySelectorAll('code')) { const rects = c.getClientRects();
      for (const r of rects)
        if (r.right > edge + 1) out.push({what: 'sidebar', text: c.innerText, need: Math.round(r.right), room: Math.round(edge)});
      if (rects.length > 1) out.push({what: 'sidebar code wraps', text: c.innerText, lines: rects.length}); } }
  return out;
}"""
# The first column's cells that need more than `room` px to show up to their id (or `whole`): the grid draws
# 14 px Source Sans, 8 px padding.
ID_ROOM = """(el, [room, whole]) => { const ctx = document.createElement('canvas').getContext('2d');
  const font = getComputedStyle(el.querySelector('.stDataFrameGlideDataEditor'));
  ctx.font = `${font.getPropertyValue('--gdg-base-font-style')} ${font.getPropertyValue('--gdg-font-family')}`;
  const pad = parseFloat(font.getPropertyValue('--gdg-cell-horizontal-padding'));
  return [...el.querySelectorAll('td[aria-colindex="1"]')].map(td => td.textContent)
    .map(t => [t, Math.round(ctx.measureText(whole ? t : t.slice(0, t.indexOf('#') + 7)).width + 2 * pad)])
    .filter(([t, need]) => need > room); }"""
# Each chart's titles that Plotly's toolbar (its modebar, shown on hover over whatever lies under it) covers,
# and how many titles were looked at: none looked at would pass for none covered.
COVERED_TITLES = """() => { const over = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  const covered = plots.flatMap(plot => { const bars = [...plot.querySelectorAll('.modebar')].map(b => b.getBoundingClientRect());
    return [...plot.querySelectorAll('.gtitle')].filter(t => bars.some(b => over(b, t.getBoundingClientRect())))
      .map(t => ({what: 'modebar over title', text: t.textContent})); });
  return {looked: plots.filter(p => p.querySelector('.modebar') && p.querySelector('.gtitle')).length, covered}; }"""
XEON = "CPU: Intel(R) Xeon(R) CPU @ 2.20GHz"  # what `devices` names a cloud VM's CPU


def clipped(page) -> list[dict]:
    return page.evaluate(CLIPPED)


def covered_titles(page, charts: int) -> list[dict]:
    """The titles Plotly's toolbar covers on the page, once its `charts` charts (at least) are drawn."""
    from playwright.sync_api import expect

    # Plotly draws a chart's title and its modebar one after the other: both are waited for.
    for part in (".gtitle", ".modebar"):
        expect(page.locator(f".js-plotly-plot {part}").nth(charts - 1)).to_be_attached(timeout=PAGE_TIMEOUT_MS)
    found = page.evaluate(COVERED_TITLES)
    assert found["looked"] >= charts, found
    return found["covered"]


def names_cut(page) -> list:
    """The names in Compare's numbers tables that their column cuts short: the column is as wide as the grid's
    columns leave it (the others at their set widths)."""
    cut, names = [], []
    for table in page.locator("[data-testid='stDataFrame']:visible").all():
        grid = geometry(table)
        if grid["heads"][:1] == [COLUMNS["label"].label]:
            room = grid["scroll"] - sum(width_of(LABELS[h]) for h in grid["heads"][1:])
            cut += table.evaluate(ID_ROOM, [room, True])
            looked = [t for t, _ in table.evaluate(ID_ROOM, [0, True])]
            if any(t.startswith("published: ") for t in looked):
                table.screenshot(path=str(ARTIFACTS / f"clip-compare-numbers-{len(names)}.png"))
            names += looked
    assert any("ResNet-50 · TPU v2-8, real ImageNet" in t for t in names), names  # the longest was looked at
    return cut


def missed_target(store) -> str:
    """A to-accuracy run that ended not_reached: its status is one of Compare's default chips."""
    spec = RunSpec(**accuracy_results.SETUP, device="cpu", data="real", data_path="/x", target_accuracy=0.99)
    acc = accuracy_results.block([accuracy_results.seed_run(0, 9, 1.0, 0.5, reached=False)], target=0.99)
    return _finished_run(store, spec, "not_reached", global_batch_size=64, data="real", accuracy=acc)


def profiled_run(store, profile: dict) -> str:
    """A finished run whose result carries `profile` (as a run's result does): Predict's default source,
    a stored run, shows it first (the newest)."""
    spec = RunSpec(model=profile["model"], batch_size=profile["batch_size"], device="cpu")
    return _finished_run(store, spec, "done", global_batch_size=spec.batch_size, data="synthetic", profile=profile)


def _finished_run(store, spec: RunSpec, status: str, **fields) -> str:
    """A run of `spec` stored as ended with `status`, its result a CPU run's plus `fields`."""
    run_id = store.create_run(spec, status="running")
    result = {
        "model": spec.model,
        "device": "cpu",
        "accelerator": "CPU",
        "accelerator_count": 1,
        "replicas": 1,
        "precision": "float32",
        "examples_per_sec": 600.0,
        "losses": [2.0, 1.5],
        "steps_per_loop": 1,
        "spec": spec.to_dict(),
    }
    store.finish_run(run_id, status, result={**result, **fields})
    return run_id


def test_nothing_a_newcomer_reads_is_cut_short_at_1400_px(browser, tmp_path):  # noqa: F811
    from concurrent.futures import ThreadPoolExecutor

    from playwright.sync_api import expect

    # Predict's workload at its full size, as its "Profile it" button profiles it (the page's defaults: the
    # first model, batch 32, float32) in a child process, while the other pages are looked at.
    profiling = ThreadPoolExecutor(1)
    profiled = profiling.submit(profiles.child_profile, MODELS[0], 32, "float32")

    # A folder name with no place to break it, as pytest's and many home folders are, under one that makes the
    # sidebar's shortened path as long as it is allowed to be.
    folder = ("team_benchmarks_" * 4)[: SIDEBAR_PATH_CHARS - len("…//runs.sqlite")]
    db = tmp_path / "a_team_store_kept_under_a_long_folder_name_for_the_benchmarks" / folder / "runs.sqlite"
    db.parent.mkdir(parents=True)
    assert len(short_path_text(db)) == SIDEBAR_PATH_CHARS, short_path_text(db)
    ids = dashboard_data.fill(db, n_runs=30)
    with Store(db) as store:
        runs = store.runs()
    done = runs[runs["status"] == "done"]
    chosen = (
        done[done["model"] == "fashion_mnist_cnn"]["run_id"].tolist()[:2]
        + done[done["model"] == "resnet50"]["run_id"].tolist()[:1]
    )
    cut = {}  # what each page cuts short: all of it said at the end, not only the first
    with streamlit_server(db) as url:
        page = open_page(browser, url + "/run", "Run", "clip-run.png")
        # The last finished run's card, of six figures and more: none cut ("4× TP…").
        expect(page.get_by_text("ran on", exact=True).first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        cut["run"] = clipped(page)
        # The Device select's box has room for a cloud VM's CPU name (this machine's may be shorter).
        device = page.locator("[data-testid='stSelectbox']").filter(has_text="Device").locator("input")
        device.evaluate("(el, name) => { el.value = name; }", XEON)
        cut["run, a Xeon's name"] = clipped(page)
        page.close()
        with Store(db) as store:
            missed = missed_target(store)  # now the newest finished run: its card has fewer figures

        page = open_page(browser, url + "/compare?runs=" + ",".join(chosen + [missed]), "Compare", "clip-compare.png")
        page.get_by_text("Choose runs").click()  # a link opens with the filters folded away
        chips = page.locator("[data-testid='stMultiSelect']").filter(has_text="Status")
        expect(chips.get_by_text("not_reached")).to_be_visible()
        assert {"fashion_mnist_cnn", "not_reached"} <= {
            c.inner_text() for c in page.locator("[data-testid='stMultiSelect'] span").all()
        }
        cut["compare"] = clipped(page)
        numbers = numbers_grids(grids_of(page))
        assert numbers, "no numbers table on Compare"
        cut["compare, the numbers"] = sideways(numbers)  # every column it draws in view
        cut["compare, published names"] = names_cut(page)  # a published ResNet-50 row's long name reads whole
        cut["compare, chart titles"] = covered_titles(page, 2)
        page.close()

        page = open_page(browser, url + "/results", "Results", "clip-results.png")
        cut["results"] = clipped(page)  # the filters' placeholders
        table = page.locator("[data-testid='stDataFrame']").first
        expect(table.locator("td").first).to_be_attached(timeout=PAGE_TIMEOUT_MS)
        assert table.locator("td[aria-colindex='1']").count() >= 10
        cut["results, run ids"] = table.evaluate(ID_ROOM, [width_of("run"), False])  # every run's id in view
        # A model chosen: its chip reads whole.
        page.locator("[data-testid='stMultiSelect']").filter(has_text="Model").click()
        page.get_by_role("option", name="fashion_mnist_cnn").click()
        expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.get_by_text(f"({len(ids) + 1} stored)")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        page.keyboard.press("Escape")
        cut["results, a model chosen"] = clipped(page)
        page.close()

        # Predict, a workload profiled at its full size, stored with a run: its table reads whole, without
        # scrolling sideways.
        with Store(db) as store:
            profiled_run(store, profiled.result(timeout=600))
        profiling.shutdown()
        page = open_page(browser, url + "/predict", "Predict", "clip-predict.png")
        stored = page.locator("[data-testid='stSelectbox']").filter(has_text="Stored run").locator("input")
        expect(stored).to_have_value(re.compile(rf"^{MODELS[0]} · batch 32 · fp32 · "))  # the workload's, chosen
        expect(page.locator(".js-plotly-plot")).to_have_count(1, timeout=PAGE_TIMEOUT_MS)
        expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1, timeout=PAGE_TIMEOUT_MS)  # below it
        tables = grids_of(page)
        assert [g["heads"][0] for g in tables] == ["device"], tables
        cut["predict"] = clipped(page) + sideways(tables)
        # The workload's own form: its model, batch and precision read whole.
        page.get_by_text("a workload, profiled in a child process").click()
        expect(page.get_by_role("button", name="Profile it")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        cut["predict, a workload's form"] = clipped(page)
        page.close()
    assert not any(cut.values()), {where: texts for where, texts in cut.items() if texts}
