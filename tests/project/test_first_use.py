"""What a newcomer meets first: the app without its requirements, a typed /run on a
read-only dashboard, Compare's published-row chooser on the empty store."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.app_test import start  # AppTest of app.py on a store in tmp_path

from dashbench.views.streamlit import needs

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")

PAGES = ["app.py", *sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))]

# The app in a fresh interpreter where `import MODULE` fails, as in a Python without requirements-app.txt:
# its root address and each page opened directly (a browser's first request, which Streamlit may run
# before app.py: views/streamlit/pages_folder.py). One interpreter takes every module in turn: the
# module and its submodules are taken out of sys.modules and barred (None), and every dashbench module is
# dropped, so each module's pages import dashbench afresh without it; the module is put back after.
# Streamlit, imported once, keeps what it holds: it is running, as for a user.
WITHOUT = f"""
import json, sys
from streamlit.testing.v1 import AppTest

shown = {{}}
for name in sys.argv[1:]:
    held = {{key: sys.modules.pop(key) for key in list(sys.modules)
            if key == name or key.startswith(name + ".") or key.split(".")[0] == "dashbench"}}
    sys.modules[name] = None
    shown[name] = {{}}
    for page in {PAGES!r}:
        at = AppTest.from_file({APP!r}, default_timeout=120)
        if page != "app.py":
            at.switch_page(page)
        at.run()
        shown[name][page] = {{"errors": [e.value for e in at.error], "exceptions": [e.value for e in at.exception],
                             "titles": [t.value for t in at.title]}}
    del sys.modules[name]
    for key in [key for key in sys.modules if key.split(".")[0] == "dashbench"]:
        del sys.modules[key]
    sys.modules.update(held)
print(json.dumps(shown))
"""


@pytest.fixture(scope="module")
def pages_without(tmp_path_factory):
    """module -> page -> what the page showed, with that module unimportable (one interpreter for all)."""
    home = tmp_path_factory.mktemp("without")
    env = {"DASHBENCH_DB": str(home / "runs.sqlite"), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, *needs.APP_MODULES],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.xdist_group("pages_without")  # one worker, one interpreter for every module
@pytest.mark.parametrize("module", needs.APP_MODULES)
def test_the_app_without_a_requirement_says_in_one_line_what_is_missing_on_every_page(pages_without, module):
    shown = pages_without[module]
    assert sorted(shown) == sorted(PAGES)
    for page, on_it in shown.items():
        assert on_it["exceptions"] == [] and on_it["titles"] == [], (page, on_it)  # no traceback, no page under it
        (line,) = on_it["errors"]
        assert "\n" not in line and f"missing: {module}" in line and "`bash scripts/serve.sh`" in line, (page, line)


# Every third-party package a page's modules import comes with those the check names.
IMPORTS = f"""
import json, sys
import streamlit, streamlit.testing.v1
for name in {needs.APP_MODULES!r}:
    __import__(name)
before = {{name.split(".")[0] for name in sys.modules}}
sys.path.insert(0, {str(ROOT)!r})
for page in ("compare", "results", "prices", "run"):
    __import__(f"dashbench.views.{{page}}.page")
new = {{name.split(".")[0] for name in sys.modules}} - before - set(sys.stdlib_module_names) - {{"dashbench"}}
print(json.dumps(sorted(new)))
"""


def test_every_package_the_pages_import_is_one_the_check_names():
    done = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    unchecked = [name for name in json.loads(done.stdout.strip().splitlines()[-1]) if not name.startswith("_")]
    assert unchecked == [], f"the pages import {unchecked}: add them to needs.APP_MODULES and requirements-app.txt"


def test_the_checked_modules_are_requirements_app_txt():
    listed = {
        line.split("==")[0].split("[")[0].strip().lower()
        for line in (ROOT / "requirements-app.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    imported_as = {"pillow": "PIL"}  # a distribution whose module has another name
    assert set(needs.APP_MODULES) == {imported_as.get(name, name) for name in listed} - {"streamlit"}
    assert needs.missing_message() is None  # this environment has them all
    assert needs.missing_modules(("json", "no_such_module_dashbench")) == ["no_such_module_dashbench"]


def test_compare_on_the_empty_store_shows_every_published_row_it_chose(tmp_path, monkeypatch):
    from dashbench.costs import reference

    at = start(monkeypatch, tmp_path / "empty.sqlite")  # Compare is the default page
    # Pills: every row in view, chosen or not (a multiselect's box cut the chosen ones off after three lines).
    rows = at.button_group(key="cmp_ref_rows")
    published = reference.rows()
    assert len(rows.options) == len(published)
    with_figure = published[published["examples_per_sec"].notna()]["key"].tolist()
    assert sorted(rows.value) == sorted(with_figure) and len(with_figure) > 6
    rows.unselect(with_figure[0]).run()  # one click drops a row from the charts
    assert with_figure[0] not in at.button_group(key="cmp_ref_rows").value


def test_a_typed_run_address_on_a_read_only_dashboard_says_why_it_shows_compare(tmp_path, monkeypatch):
    from dashbench.store import Store
    from dashbench.views.streamlit import ui

    db = tmp_path / "runs.sqlite"
    Store(db).close()
    at = start(monkeypatch, db, read_only=True)
    assert not at.info
    # What the hidden page that claims /run on a read-only dashboard records before it switches to Compare
    # (tests/browser/test_browser.py opens /run itself).
    at.session_state[ui.READ_ONLY_RUN_KEY] = True
    at.run()
    (note,) = [i.value for i in at.info if "read-only" in i.value]
    assert "no Run page" in note and "--read-only" in note and "\n" not in note
    at.run()
    assert not [i for i in at.info if "read-only" in i.value]  # said once, not on every rerun


def test_the_cli_references_tpu_price_line_replaces_the_row_it_says_and_runs_are_priced_as_it_says(tmp_path):
    import re
    import shlex

    from dashbench.costs import prices, run_cost
    from dashbench.store import Store

    page = (ROOT / "docs" / "cli.md").read_text()
    (line,) = re.findall(r'^python -m dashbench prices set --device "TPU v2" .*$', page, re.M)
    assert "replaces `gcp-tpu-v2-8`" in page and "beside the four shipped TPU v2 rows" in page
    shipped = prices.catalog()
    assert (shipped["device"] == "TPU v2").sum() == 4

    def price_set(argv, db):
        done = subprocess.run(
            [sys.executable, "-m", "dashbench", *argv, "--db", str(db)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        with Store(db, read_only=True) as store:
            return done.stdout, prices.catalog(store)

    argv = shlex.split(line)[3:]
    out, catalog = price_set(argv, tmp_path / "as-written.sqlite")
    assert "gcp-tpu-v2-8" in out and "overrides the shipped price" in out
    assert (catalog["device"] == "TPU v2").sum() == 4  # replaced, not added
    assert run_cost.match_price("TPU v2", 4, catalog)["key"] == "gcp-tpu-v2-8"
    assert run_cost.match_price("TPU v2", 4, catalog)["on_demand_usd_per_hour"] == float(argv[-1])

    without = [a for i, a in enumerate(argv) if "--provider" not in (a, argv[i - 1])]
    out, catalog = price_set(without, tmp_path / "no-provider.sqlite")
    assert "new price" in out and (catalog["device"] == "TPU v2").sum() == 5  # beside the four shipped
    row = run_cost.match_price("TPU v2", 4, catalog)  # yours before any shipped row
    assert row["origin"] == "override" and row["provider"] == "user"
