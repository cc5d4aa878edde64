"""docs/architecture.md holds in the code: its folder list, its import picture, its forbidden arrows,
no TensorFlow outside engine/, views/' folders and the places that may import Streamlit. The page is
read, not copied here, so the two cannot drift apart."""

import ast
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
ML_FRAMEWORKS = ("tensorflow", "keras", "jax")
# The arrows the issue names: the page may forbid more, never fewer.
REQUIRED_RULES = {
    ("app.py", "dashbench/engine/"),
    ("pages/", "dashbench/engine/"),
    ("pages/", "dashbench/store/"),
    ("dashbench/views/", "dashbench/store/*"),
    ("dashbench/store/", "dashbench/engine/"),
    ("dashbench/costs/", "dashbench/engine/"),
}
FOUNDATION_LINE = "every part ──▶"  # the picture's last line: the floors every part may import


# -- the code ------------------------------------------------------------------------------------


def module_files(root: Path) -> dict[str, Path]:
    """Every Python file of the app and the package, by module name: app.py is `app`, pages/run.py `pages.run`."""
    files = [root / "app.py", *sorted((root / "pages").glob("*.py")), *sorted((root / "dashbench").rglob("*.py"))]
    names = {}
    for path in files:
        if path.exists():
            parts = path.relative_to(root).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, at module level and inside functions alike.

    `from a import b` counts as an arrow to a.b when that is a module, else to a."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
    return found


def arrows(root: Path):
    """(file, line, importer, imported) for every import of a module of the app or the package."""
    files = module_files(root)
    for name, path in files.items():
        for line, target in imports_of(name, path, set(files)):
            if target.split(".")[0] in ("dashbench", "app", "pages"):
                yield path.relative_to(root), line, name, target


def matches(module: str, where: str) -> bool:
    """Does a module lie at a page place: `app.py`, `pages/` (and below), `dashbench/store/*` (below only)?"""
    if where.endswith(".py"):
        return module == where[:-3].replace("/", ".")
    if where.endswith("/*"):
        return module.startswith(where[:-2].replace("/", ".") + ".")
    package = where.rstrip("/").replace("/", ".")
    return module == package or module.startswith(package + ".")


# -- the page ----------------------------------------------------------------------------------


def code_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```\n(.*?)```", text, flags=re.S)]


def folder_list(text: str) -> list[str]:
    """The parts of the page's folder list, top first, as paths: app.py, pages/, dashbench/cli/, …"""
    parts = []
    for line in code_blocks(text)[0]:
        entry = line.split()[0] if line.strip() else ""
        if not entry or entry == "dashbench/":
            continue
        if line.startswith(" "):
            entry = "dashbench/" + entry
        if entry not in parts:
            parts.append(entry)
    return parts


def foundation(text: str, parts: list[str]) -> set[str]:
    """The floors the picture's `every part ──▶ …` line names: any part above them may import them."""
    by_short = {part.removeprefix("dashbench/"): part for part in parts}
    for block in code_blocks(text):
        for line in block:
            if line.strip().startswith(FOUNDATION_LINE):
                return {by_short[t] for t in line.split(FOUNDATION_LINE)[1].split() if t in by_short}
    return set()


def drawn_arrows(text: str, places: dict[str, str]) -> set[tuple[str, str]]:
    """The arrows of a page picture: lines `PLACE ──▶ PLACE PLACE …  words`, each place as `places` names it."""
    drawn = set()
    for block in code_blocks(text):
        for line in block:
            source, arrow, rest = line.partition("──▶")
            if not arrow or source.strip() not in places:
                continue
            for token in rest.split():
                if token not in places:
                    break  # the words after the targets
                drawn.add((places[source.strip()], places[token]))
    return drawn


def picture(text: str, parts: list[str]) -> set[tuple[str, str]]:
    """The arrows of the page's import picture: lines `PART ──▶ PART PART …  words`."""
    return drawn_arrows(text, {part.removeprefix("dashbench/"): part for part in parts})


def assert_drawn_exactly(drawn: set, actual: dict, picture_name: str) -> None:
    """Every import drawn (actual: arrow → where it is imported), and nothing drawn that is imported nowhere."""
    undrawn = [
        f"{where}: {source} ──▶ {dest}"
        for (source, dest), where in sorted(actual.items())
        if (source, dest) not in drawn
    ]
    assert not undrawn, f"imports missing from {picture_name}:\n" + "\n".join(undrawn)
    stale = sorted(drawn - set(actual))
    assert not stale, f"drawn in {picture_name}, imported nowhere: {stale}"


def readme_rules(text: str) -> set[tuple[str, str]]:
    """The forbidden arrows as the page states them: lines `- `FROM` ✗→ `TO` …`."""
    return set(re.findall(r"^- `([^`]+)` ✗→ `([^`]+)`", text, flags=re.M))


def part_of(module: str, parts: list[str]) -> str | None:
    if module == "dashbench.__main__":
        return "dashbench/cli/"  # `python -m dashbench` is the CLI
    for part in parts:
        if matches(module, part):
            return part
    if module == "dashbench" and parts:
        return parts[-1]  # the package's __init__ holds its version only: the lowest floor
    return None


def violations(root: Path, rules) -> list[str]:
    return [
        f"{path}:{line}: {name} → {target} (forbidden: {source} ✗→ {forbidden})"
        for path, line, name, target in arrows(root)
        for source, forbidden in rules
        if matches(name, source) and matches(target, forbidden)
    ]


# -- the tests -----------------------------------------------------------------------------------


def test_the_folder_list_names_every_part_of_the_code():
    parts = folder_list(ARCHITECTURE)
    assert parts[:3] == ["app.py", "pages/", "dashbench/cli/"] and parts[-1] == "dashbench/core/", parts
    unlisted = sorted(name for name in module_files(ROOT) if part_of(name, parts) is None)
    assert not unlisted, f"not in the page's folder list: {unlisted}"
    missing = [part for part in parts if not (ROOT / part).exists()]
    assert not missing, f"listed but not in the tree: {missing}"


def test_the_package_root_holds_subpackages_only():
    loose = sorted(p.name for p in (ROOT / "dashbench").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], f"loose modules at the package root: {loose}"


MAX_LINES = 500  # past this a module holds more than one concern: split it by concern


def test_no_module_of_the_package_is_longer_than_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "dashbench").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_every_import_points_down_the_folder_list():
    parts = folder_list(ARCHITECTURE)
    upward = []
    for path, line, name, target in arrows(ROOT):
        source, dest = part_of(name, parts), part_of(target, parts)
        if source != dest and parts.index(dest) <= parts.index(source):
            upward.append(f"{path}:{line}: {name} → {target} ({dest} is listed above {source})")
    assert not upward, "\n".join(upward)


def test_the_readme_picture_draws_exactly_the_imports():
    parts = folder_list(ARCHITECTURE)
    drawn, floors = picture(ARCHITECTURE, parts), foundation(ARCHITECTURE, parts)
    assert floors, "no `every part ──▶` line in the page picture"
    actual = {}
    for path, line, name, target in arrows(ROOT):
        source, dest = part_of(name, parts), part_of(target, parts)
        if source != dest and (source in floors or dest not in floors):
            actual.setdefault((source, dest), f"{path}:{line}")
    assert drawn, "no picture found in the page's architecture section"
    assert_drawn_exactly(drawn, actual, "the page picture")


def test_the_readme_forbids_the_arrows_of_the_design():
    assert REQUIRED_RULES <= readme_rules(ARCHITECTURE), REQUIRED_RULES - readme_rules(ARCHITECTURE)


def test_no_import_takes_an_arrow_the_readme_forbids():
    found = violations(ROOT, readme_rules(ARCHITECTURE))
    assert not found, "\n".join(found)


ENGINE = "dashbench.engine"


def backend_folders(root: Path) -> set[str]:
    """The engine's backend folders: its packages whose __init__ defines BACKEND."""
    folders = set()
    for init in (root / "dashbench" / "engine").glob("*/__init__.py"):
        tree = ast.parse(init.read_text())
        names = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
        }
        if "BACKEND" in names:
            folders.add(f"{ENGINE}.{init.parent.name}")
    return folders


def backend_reaches(root: Path) -> list[str]:
    """Imports of a backend folder by shared engine code, or by another backend's folder: the shared
    code reaches a backend only through backends.get(name)."""
    folders = backend_folders(root)

    def folder(module: str) -> str | None:
        return next((f for f in folders if module == f or module.startswith(f + ".")), None)

    return [
        f"{path}:{line}: {name} → {target}"
        for path, line, name, target in arrows(root)
        if name.startswith(ENGINE + ".") and folder(target) and folder(name) != folder(target)
    ]


def test_shared_engine_code_never_imports_a_backend_folder():
    assert backend_folders(ROOT) == {f"{ENGINE}.tensorflow", f"{ENGINE}.jax"}
    found = backend_reaches(ROOT)
    assert not found, "shared engine code imports a backend folder (use backends.get(name)):\n" + "\n".join(found)


def test_the_backend_walk_finds_a_lazy_reach_into_a_backend(tmp_path):
    for package in (
        "dashbench",
        "dashbench/engine",
        "dashbench/engine/jax",
        "dashbench/engine/tf",
        "dashbench/engine/w",
    ):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    engine = tmp_path / "dashbench" / "engine"
    for name in ("jax", "tf"):
        (engine / name / "__init__.py").write_text("BACKEND = object()\n")
    (engine / "jax" / "devices.py").write_text("from dashbench.engine import probe\n")  # a backend uses shared code
    (engine / "probe.py").write_text("")
    (engine / "jax" / "loop.py").write_text("from . import devices\n")  # its own folder
    (engine / "tf" / "loop.py").write_text("from dashbench.engine.jax import devices\n")
    (engine / "w" / "user.py").write_text("def later():\n    from dashbench.engine.jax import devices\n")
    assert backend_folders(tmp_path) == {"dashbench.engine.jax", "dashbench.engine.tf"}
    assert sorted(backend_reaches(tmp_path)) == [
        "dashbench/engine/tf/loop.py:1: dashbench.engine.tf.loop → dashbench.engine.jax.devices",
        "dashbench/engine/w/user.py:2: dashbench.engine.w.user → dashbench.engine.jax.devices",
    ]


def test_the_import_walk_finds_forbidden_arrows_wherever_they_hide(tmp_path):
    """The walk itself: relative imports, imports inside functions, `from package import module`."""
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "run.py").write_text(
        "import streamlit\n\n\ndef later():\n    from dashbench.engine import loop\n"
    )
    for package in ("dashbench", "dashbench/views", "dashbench/store", "dashbench/engine"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "dashbench" / "store" / "database.py").write_text("")
    (tmp_path / "dashbench" / "engine" / "loop.py").write_text("")
    (tmp_path / "dashbench" / "views" / "ok.py").write_text("from dashbench.store import Store\n")
    (tmp_path / "dashbench" / "views" / "bad.py").write_text("from ..store import database\n")
    (tmp_path / "app.py").write_text("import dashbench.engine.loop as loop\n")
    assert violations(tmp_path, REQUIRED_RULES) == [
        "app.py:1: app → dashbench.engine.loop (forbidden: app.py ✗→ dashbench/engine/)",
        "pages/run.py:5: pages.run → dashbench.engine.loop (forbidden: pages/ ✗→ dashbench/engine/)",
        "dashbench/views/bad.py:1: dashbench.views.bad → dashbench.store.database "
        "(forbidden: dashbench/views/ ✗→ dashbench/store/*)",
    ]


def test_the_readme_is_read_as_the_tests_expect():
    text = """## Architecture

```
app.py      entry
pages/      pages
dashbench/
  views/    logic
  store/    the store
  workloads/ what can be measured
  core/     contract
```

```
 app.py ──▶ views/  pages/
 views/ ──▶ store/  contracts and words
 workloads/ ──▶ core/
 every part ──▶ workloads/  core/
```

- `app.py` ✗→ `dashbench/store/` — why
"""
    parts = folder_list(text)
    assert parts == [
        "app.py",
        "pages/",
        "dashbench/views/",
        "dashbench/store/",
        "dashbench/workloads/",
        "dashbench/core/",
    ]
    assert picture(text, parts) == {
        ("app.py", "dashbench/views/"),
        ("app.py", "pages/"),
        ("dashbench/views/", "dashbench/store/"),
        ("dashbench/workloads/", "dashbench/core/"),
    }
    assert foundation(text, parts) == {"dashbench/workloads/", "dashbench/core/"}
    assert readme_rules(text) == {("app.py", "dashbench/store/")}
    assert part_of("dashbench.core.stats", parts) == "dashbench/core/"
    assert part_of("dashbench.views.ui", parts) == "dashbench/views/"
    assert part_of("dashbench.jobs.queue", parts) is None  # not listed: the folder-list test fails


@pytest.mark.parametrize(
    "where, module, expected",
    [
        ("app.py", "app", True),
        ("app.py", "apps", False),
        ("pages/", "pages.run", True),
        ("dashbench/store/", "dashbench.store", True),
        ("dashbench/store/*", "dashbench.store", False),
        ("dashbench/store/*", "dashbench.store.database", True),
        ("dashbench/engine/", "dashbench.engines", False),
    ],
)
def test_readme_places_name_modules(where, module, expected):
    assert matches(module, where) is expected


def test_nothing_outside_the_engine_imports_a_framework_at_import_time():
    """In a fresh interpreter: every module of the package outside engine/ (not __main__, which runs the
    CLI), and everything app.py and the pages import. Function-level imports may stay lazy."""
    files = module_files(ROOT)
    modules = {
        name
        for name in files
        if name.startswith("dashbench") and not matches(name, "dashbench/engine/") and name != "dashbench.__main__"
    }
    for face in [n for n in files if not n.startswith("dashbench")]:  # app and pages
        modules |= {target for _, target in imports_of(face, files[face], set(files))}
    assert {"dashbench.views.streamlit.ui", "dashbench.cli.run_cmd", "dashbench.jobs.runner", "streamlit"} <= modules
    script = (
        "import importlib, json, sys\n"
        f"for name in {sorted(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {ML_FRAMEWORKS!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"imported at import time: {loaded[:10]}"


# -- the views: a folder per page, and which modules import Streamlit ------------------------------

VIEWS = "dashbench/views/"
SHARED_FOLDERS = ("common", "streamlit")  # the views' folders that are no page
STREAMLIT_PLACES = {"app.py", "pages/", "dashbench/views/streamlit/", "dashbench/views/*/page.py"}  # at most these


def page_names(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "pages").glob("*.py"))


def view_folders(root: Path) -> list[str]:
    return sorted(p.name for p in (root / VIEWS).iterdir() if (p / "__init__.py").exists())


def streamlit_rule(text: str) -> set[str]:
    """The places the page lets import Streamlit: the line `- `streamlit` only in `PLACE`, `PLACE` … — why`."""
    found = re.search(r"^- `streamlit` only in (.+?) —", text, flags=re.M)
    return set(re.findall(r"`([^`]+)`", found.group(1))) if found else set()


def at_place(path: str, place: str) -> bool:
    """Does a file lie at a page place: `pages/` (and below), `app.py`, `dashbench/views/*/page.py` (a pattern)?"""
    return path.startswith(place) if place.endswith("/") else fnmatch.fnmatchcase(path, place)


def streamlit_imports(root: Path) -> dict[str, int]:
    """file → the line of its first import of Streamlit, at module level or inside a function."""
    files = module_files(root)
    found = {}
    for name, path in files.items():
        lines = [line for line, target in imports_of(name, path, set(files)) if target.split(".")[0] == "streamlit"]
        if lines:
            found[path.relative_to(root).as_posix()] = min(lines)
    return found


def views_place(module: str, pages: list[str]) -> tuple[str, str] | None:
    """(the place in the page's views picture, the page folder or ""): app.py, pages/X.py, X/page.py, X/, …"""
    if module == "app":
        return "app.py", ""
    if module.startswith("pages."):
        return "pages/X.py", module.removeprefix("pages.")
    folder, _, rest = module.removeprefix("dashbench.views.").partition(".")
    if not module.startswith("dashbench.views.") or folder not in (*pages, *SHARED_FOLDERS):
        return None
    if folder in SHARED_FOLDERS:
        return folder + "/", ""
    return ("X/page.py" if rest == "page" else "X/"), folder


def views_arrows(root: Path) -> dict[tuple[str, str], str]:
    """(place, place) → where, for every import between the views' places; a page's import of another
    page's module keeps that page's name (`compare/`), which no picture can draw."""
    pages = page_names(root)
    found = {}
    for path, line, name, target in arrows(root):
        source, dest = views_place(name, pages), views_place(target, pages)
        if source is None or dest is None:
            continue
        (place, page), (dest_place, dest_page) = source, dest
        if page and dest_page and page != dest_page:
            dest_place = dest_place.replace("X", dest_page)  # another page's part: not drawable
        if place != dest_place:
            found.setdefault((place, dest_place), f"{path}:{line}")
    return found


def views_picture(text: str) -> set[tuple[str, str]]:
    """The arrows of the page's views picture: lines ` PLACE ──▶ PLACE PLACE …  words`."""
    places = ("app.py", "pages/X.py", "X/page.py", "X/", *(f"{folder}/" for folder in SHARED_FOLDERS))
    return drawn_arrows(text, {place: place for place in places})


def test_the_views_hold_one_folder_per_page_and_the_shared_ones():
    pages, files = page_names(ROOT), module_files(ROOT)
    assert pages, "no pages/*.py"
    assert view_folders(ROOT) == sorted([*pages, *SHARED_FOLDERS]), view_folders(ROOT)
    loose = sorted(p.name for p in (ROOT / VIEWS).glob("*.py"))
    assert loose == ["__init__.py"], f"loose modules in views/: {loose}"
    for page in pages:
        assert (ROOT / VIEWS / page / "page.py").exists(), f"no {VIEWS}{page}/page.py"
        imported = {target for _, target in imports_of(f"pages.{page}", files[f"pages.{page}"], set(files))}
        assert f"dashbench.views.{page}.page" in imported, f"pages/{page}.py does not call its views/{page}/page.py"


def test_only_the_readme_places_import_streamlit():
    places = streamlit_rule(ARCHITECTURE)
    assert places and places <= STREAMLIT_PLACES, places  # the page may allow fewer places, never more
    importers = streamlit_imports(ROOT)
    outside = [
        f"{path}:{line}"
        for path, line in sorted(importers.items())
        if not any(at_place(path, place) for place in places)
    ]
    assert not outside, "Streamlit imported outside the page's places:\n" + "\n".join(outside)
    pages_without = [page for page in page_names(ROOT) if f"{VIEWS}{page}/page.py" not in importers]
    assert not pages_without, f"a page.py that draws no widget: {pages_without}"


def test_the_readme_views_picture_draws_exactly_the_imports_between_the_views_folders():
    drawn, actual = views_picture(ARCHITECTURE), views_arrows(ROOT)
    assert drawn, "no picture of views/ found in the page's architecture section"
    assert_drawn_exactly(drawn, actual, "the page's views picture")


def test_the_views_walk_finds_streamlit_and_a_page_reaching_into_another(tmp_path):
    """A lazy `from streamlit.x import y`, and Compare's page importing Results' logic."""
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "compare.py").write_text("from dashbench.views.compare import page\n")
    (tmp_path / "pages" / "results.py").write_text("")
    for package in (
        "dashbench",
        "dashbench/views",
        "dashbench/views/compare",
        "dashbench/views/results",
        "dashbench/views/common",
    ):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    views = tmp_path / "dashbench" / "views"
    (views / "compare" / "page.py").write_text("import streamlit as st\nfrom dashbench.views.results import runs\n")
    (views / "results" / "runs.py").write_text("def later():\n    from streamlit.runtime import exists\n")
    (views / "common" / "format.py").write_text("")
    (views / "results" / "page.py").write_text("from dashbench.views.common import format\n")
    assert streamlit_imports(tmp_path) == {"dashbench/views/compare/page.py": 1, "dashbench/views/results/runs.py": 2}
    assert not at_place("dashbench/views/results/runs.py", "dashbench/views/*/page.py")
    assert at_place("dashbench/views/results/page.py", "dashbench/views/*/page.py")
    assert set(views_arrows(tmp_path)) == {
        ("pages/X.py", "X/page.py"),
        ("X/page.py", "results/"),
        ("X/page.py", "common/"),
    }
    drawn = "```\n pages/X.py ──▶ X/page.py  words\n X/ ──▶ common/\n app.py ──▶ views/\n```\n"
    assert views_picture(drawn) == {("pages/X.py", "X/page.py"), ("X/", "common/")}  # app.py's main arrow is not one


# -- import circles ------------------------------------------------------------------------------


def import_circles(root: Path) -> list[list[str]]:
    """Every circle of imports between the package's modules, at module level and inside functions
    alike (a lazy import only hides a circle until the day someone lifts it): one list of modules,
    first repeated last, per strongly connected group, smallest module first."""
    graph: dict[str, set[str]] = {}
    for _, _, name, target in arrows(root):
        if name.startswith("dashbench") and target.startswith("dashbench") and target != name:
            graph.setdefault(name, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components; the package is shallow
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, group) for group in sorted(groups)]


def _circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One circle through the group's first module, found breadth-first inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, set()) & members):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    return group  # not reached: a strongly connected group always closes


def test_the_package_has_no_import_circle():
    circles = import_circles(ROOT)
    assert not circles, "import circles:\n" + "\n".join(" → ".join(circle) for circle in circles)


def test_the_circle_finder_finds_circles_wherever_they_hide(tmp_path):
    """Through a function-level import, a relative import and `from package import module`."""
    for package in ("dashbench", "dashbench/engine"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    engine = tmp_path / "dashbench" / "engine"
    (engine / "devices.py").write_text("def peak():\n    from dashbench.engine import probe\n")
    (engine / "probe.py").write_text("from . import jax_devices\n")
    (engine / "jax_devices.py").write_text("from dashbench.engine.devices import peak\n")
    (engine / "loop.py").write_text("from dashbench.engine import devices, probe\n")  # below the circle: not in it
    (engine / "a.py").write_text("import dashbench.engine.b\n")
    (engine / "b.py").write_text("from dashbench.engine import a\n")
    assert import_circles(tmp_path) == [
        ["dashbench.engine.a", "dashbench.engine.b", "dashbench.engine.a"],
        [
            "dashbench.engine.devices",
            "dashbench.engine.probe",
            "dashbench.engine.jax_devices",
            "dashbench.engine.devices",
        ],
    ]
