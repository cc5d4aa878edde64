"""A dashboard table's geometry in Chromium at a newcomer's window (issue 21): every table shows a row's
figures and flags without scrolling sideways, at the widths dashbench.views.columns sets."""

from browser_fixtures import PAGE_TIMEOUT_MS, WINDOW
from dashbench.views.common.columns import COLUMNS, MUST_SEE, width_of

# Streamlit's grid draws on a canvas; its scroller's width is the columns' sum, and its hidden accessibility
# table names the columns drawn, in order.
GRID = """el => { const sc = el.querySelector('.dvn-scroller'); const box = el.getBoundingClientRect();
  return {left: box.left, right: box.right, scroll: sc.scrollWidth, client: sc.clientWidth,
          heads: [...el.querySelectorAll('th')].map(t => t.textContent)}; }"""
LABELS = {spec.label: name for name, spec in COLUMNS.items() if name not in ("device", "price")}


def geometry(locator) -> dict:
    """A table's geometry, once it is drawn (a grid out of view waits to be scrolled to)."""
    from playwright.sync_api import expect

    locator.scroll_into_view_if_needed()
    expect(locator.locator(".dvn-scroller")).to_have_count(1, timeout=PAGE_TIMEOUT_MS)
    expect(locator.locator("th").first).to_be_attached(timeout=PAGE_TIMEOUT_MS)
    return locator.evaluate(GRID)


def grids_of(page) -> list[dict]:
    """The geometry of every table the page shows."""
    return [geometry(g) for g in page.locator("[data-testid='stDataFrame']:visible").all()]


def must_see_edges(grid: dict, marker: int) -> dict[str, float]:
    """The right edge, in the grid's own px, of each MUST_SEE column it shows."""
    edges, right = {}, marker
    for label in grid["heads"]:
        name = LABELS.get(label)
        assert name and width_of(name), f"column {label!r} is drawn before the figures at a width not set here"
        right += width_of(name)
        if name in MUST_SEE:
            edges[name] = right
        if len(edges) == sum(m in LABELS.values() for m in MUST_SEE):
            break
    return edges


def assert_figures_and_flags_in_view(grids: dict[str, list[dict]], every_column) -> None:
    """The widths set in dashbench.views.columns are the ones drawn (the Results grid, with `every_column`
    set, is their sum plus its selection boxes), and the Results, published and Compare tables show each
    row's figures and flags whole inside the window."""
    (table,) = grids["results"]
    marker = table["scroll"] - sum(width_of(c) for c in every_column)
    assert 0 < marker <= 50, (table["scroll"], marker)
    checked = {"results": table, "published": grids["prices"][1], "compare": grids["compare"][0]}
    assert {"published row", "run / published row"} <= {g["heads"][0] for g in checked.values()}
    for name, grid in checked.items():
        assert 0 <= grid["left"] and grid["right"] <= WINDOW, (name, grid)  # the table inside the window
        edges = must_see_edges(grid, marker if name == "results" else 0)
        assert {"examples_per_sec", "mfu", "flags"} <= set(edges), (name, grid["heads"])
        for column, right in edges.items():
            assert right <= grid["client"], (name, column, right, grid["client"])  # whole, no sideways scroll
