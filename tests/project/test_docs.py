"""The manual in docs/ is checked against the code, as datasette's is: every command and option of the
parser has its row in docs/cli.md, every `DASHBENCH_*` variable the code reads has its row in
docs/environment.md's table (and no row outlives its variable), every link of the README and of the
docs pages resolves, and the README stays a landing page."""

import argparse
import re
from pathlib import Path

import pytest

from dashbench.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
CLI = (DOCS / "cli.md").read_text()
ENVIRONMENT = (DOCS / "environment.md").read_text()
README_MAX_LINES = 150
# Where the variables are read: the package, the dashboard, the scripts, the benchmarks, the tests' helpers.
CODE = [ROOT / "dashbench", ROOT / "app.py", ROOT / "pages", ROOT / "scripts", ROOT / "bench", ROOT / "tests"]
VARIABLE = re.compile(r"\bDASHBENCH_[A-Z0-9_]*[A-Z0-9]\b")


# -- the parser ----------------------------------------------------------------------------------


def commands(parser=None, path=()):
    """(command path, its parser) for `dashbench` itself and every command and subcommand below it."""
    parser = parser or build_parser()
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def options(parser) -> list[str]:
    """Every option a user may type (hidden ones, help=SUPPRESS, are the CLI's own plumbing)."""
    return [
        action.option_strings[0]
        for action in parser._actions
        if action.option_strings and action.help != argparse.SUPPRESS and "--help" not in action.option_strings
    ]


# -- the pages -----------------------------------------------------------------------------------


def command_sections(text: str) -> dict[str, str]:
    """A `### ` heading's text under every command it names in backticks: `### `run`, `sweep`: …`
    counts for run and for sweep; `### `dashbench`` for the top-level options."""
    sections: dict[str, str] = {}
    parts = re.split(r"^(### .*)$", text, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2]):
        body = re.split(r"^## ", body, maxsplit=1, flags=re.M)[0]
        for name in re.findall(r"`([^`]+)`", heading):
            name = "" if name == "dashbench" else name
            sections[name] = sections.get(name, "") + body
    return sections


def option_rows(body: str) -> set[str]:
    """The options a section's table rows name: `| `--batch-size N` | … |` gives --batch-size."""
    return set(re.findall(r"^\| `(--[a-z0-9-]+)", body, flags=re.M))


def table_variables(text: str) -> list[str]:
    """The variables named in a table row's first cell."""
    return re.findall(r"^\| `(DASHBENCH_[A-Z0-9_]+)`", text, flags=re.M)


def variables_in_code(roots=CODE, skip=(Path(__file__).resolve(),), base: Path = ROOT) -> dict[str, str]:  # noqa: B008
    """Every DASHBENCH_* name in the code, with the first file that names it."""
    found: dict[str, str] = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".py", ".sh"))
        for path in files:
            if path.resolve() in skip:
                continue
            for name in VARIABLE.findall(path.read_text(errors="replace")):
                found.setdefault(name, str(path.relative_to(base)))
    return found


def links(page: Path) -> list[tuple[str, str]]:
    """(target, anchor) of every relative markdown link of a page, code blocks left out."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        found.append((path, anchor))
    return found


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }


def broken_links(pages: list[Path], root: Path = ROOT) -> list[str]:
    broken = []
    for page in pages:
        for path, anchor in links(page):
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(root)}: {path} does not exist")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.relative_to(root)}: {path}#{anchor}: no such heading")
    return broken


MANUAL = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


# -- the tests -----------------------------------------------------------------------------------


def test_every_command_has_its_section_in_the_cli_reference():
    sections = command_sections(CLI)
    missing = [name for name, _ in commands() if name not in sections]
    assert not missing, f"commands with no `### `NAME`` section in docs/cli.md (add one there): {missing}"


def test_every_option_of_every_command_is_in_the_cli_reference():
    sections = command_sections(CLI)
    missing = [
        f"dashbench {name} {option}".replace("  ", " ")
        for name, parser in commands()
        for option in options(parser)
        if option not in option_rows(sections.get(name, ""))
    ]
    assert not missing, (
        "options missing from docs/cli.md: add a row `| `OPTION …` | what it does |` to the "
        'command\'s table under "Every command and option":\n' + "\n".join(missing)
    )


def test_the_cli_reference_names_no_option_the_parser_lacks():
    sections = command_sections(CLI)
    parsers = dict(commands())
    stale = [
        f"{name or 'dashbench'}: {option}"
        for name, body in sections.items()
        if name in parsers
        for option in sorted(option_rows(body) - set(options(parsers[name])))
    ]
    assert not stale, f"docs/cli.md documents options the parser does not take: {stale}"


def test_every_environment_variable_is_in_the_table_and_every_row_is_read():
    in_code = variables_in_code()
    rows = table_variables(ENVIRONMENT)
    assert len(rows) == len(set(rows)), "a variable has two rows in docs/environment.md"
    missing = sorted(f"{name} ({where})" for name, where in in_code.items() if name not in rows)
    assert not missing, (
        "variables read in the code but missing from docs/environment.md's table (add a row "
        f"`| `NAME` | default | what it does |`): {missing}"
    )
    stale = sorted(set(rows) - set(in_code))
    assert not stale, f"rows of docs/environment.md for variables no code reads any more: {stale}"


def test_every_link_of_the_readme_and_the_docs_resolves():
    assert len(MANUAL) > 10 and any(links(page) for page in MANUAL)
    broken = broken_links(MANUAL)
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_landing_page():
    lines = README.count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}: move text to docs/"
    linked = {(ROOT / path).resolve() for path, _ in links(ROOT / "README.md")}
    pages = {p.resolve() for p in DOCS.glob("*.md")}
    unlinked = sorted(p.name for p in pages - linked)
    assert not unlinked, f"docs pages the README does not link to: {unlinked}"


def test_every_command_has_an_example_in_the_cli_reference():
    top = [name for name, _ in commands() if name and " " not in name]
    missing = [name for name in top if f"python -m dashbench {name}" not in CLI]
    assert not missing, f"commands with no `python -m dashbench NAME …` example in docs/cli.md: {missing}"


def _shell_commands(text: str) -> list[str]:
    """A page's shell examples, continuation lines joined and comments dropped."""
    commands, pending = [], ""
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = pending + line.split(" #")[0].strip()
            pending = line[:-1] + " " if line.endswith("\\") else ""
            if line and not pending:
                commands.append(" ".join(line.split()))
    return commands


def test_the_manuals_quick_examples_are_the_catalogs_recipe():
    """One quick recipe: every run in the README or docs/ with a shape override is its model's quick try
    as `models` prints it (dashbench.workloads.registry), and every preset's --quick is its model's recipe."""
    from dashbench.workloads import presets, registry

    recipe_options = ("--image-size", "--seq-len", "--width", "--layers", "--batch-size", "--steps")
    shown = [c for page in MANUAL for c in _shell_commands(page.read_text())]
    quick_runs = [
        c
        for c in shown
        if c.startswith("python -m dashbench run ")
        and any(f"{o} " in c for o in ("--image-size", "--seq-len", "--width"))
    ]
    assert quick_runs, "the manual shows no quick try"
    for command in quick_runs:
        words = command.split()
        options = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        workload = registry.get(options["--model"])
        recipe = {f"--{k.replace('_', '-')}": str(v) for k, v in workload.quick_recipe().items()}
        assert {k: v for k, v in options.items() if k in recipe_options} == recipe, command
    assert registry.get("fashion_mnist_cnn").quick_command() in README  # the tour's first line
    for preset in presets.PRESETS.values():
        recipe = registry.get(preset.model).quick_recipe()
        spec = presets.quick_spec(preset.slug, "cpu", check=False)  # its shapes, not its data files
        assert {k: getattr(spec, k) for k in recipe} == recipe, preset.slug


def test_the_bench_scripts_blocks_stay_whole_and_rewritable(tmp_path):
    """Each `<!-- name -->` block a bench script rewrites (bench/docs_block.py) opens once and closes once
    after it, and rewriting one on a copy of its page changes that block alone."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from docs_block import write_block

    for page in (DOCS / "PERFORMANCE.md", DOCS / "CONVERGENCE.md", DOCS / "MEMORY.md"):
        text = page.read_text()
        names = re.findall(r"<!-- ([\w-]+) -->", text)
        assert names, page.name
        for name in names:
            start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
            assert text.count(start) == 1 and text.count(end) == 1 and text.index(start) < text.index(end), name
        copy = tmp_path / page.name
        copy.write_text(text)
        write_block(copy, names[0], "new figures")
        before, after = text.split(f"<!-- /{names[0]} -->")[1], copy.read_text().split(f"<!-- /{names[0]} -->")[1]
        assert after == before and "new figures" in copy.read_text(), page.name


def test_readme_keeps_the_two_setup_commands():
    assert "bash scripts/serve.sh" in README and "bash scripts/test.sh" in README
    for script in ("scripts/serve.sh", "scripts/test.sh"):
        assert (ROOT / script).exists()


# -- the checks themselves ------------------------------------------------------------------------


def test_the_checks_find_what_they_look_for(tmp_path):
    text = """### `run`, `sweep`: the spec options

| option | what it does |
|---|---|
| `--steps N` | measured steps |

### `run`

| `--json` | one object |

## Rules

| `--not-an-option` | prose below the reference |
"""
    sections = command_sections(text)
    assert option_rows(sections["run"]) == {"--steps", "--json"} and option_rows(sections["sweep"]) == {"--steps"}
    assert table_variables("| `DASHBENCH_DB` | x | y |\n`DASHBENCH_NOT_A_ROW`\n") == ["DASHBENCH_DB"]
    (tmp_path / "code.py").write_text('os.environ.get("DASHBENCH_X_S")  # and DASHBENCH_Y\n')
    assert variables_in_code([tmp_path], skip=(), base=tmp_path) == {
        "DASHBENCH_X_S": "code.py",
        "DASHBENCH_Y": "code.py",
    }
    (tmp_path / "a.md").write_text(
        "# A page\n\n## Two words\n\n[b](b.md) [here](#two-words) [x](#nowhere) "
        "[web](https://example.com)\n\n```\n[not](a-link.md)\n```\n"
    )
    assert anchors(tmp_path / "a.md") == {"a-page", "two-words"}
    assert links(tmp_path / "a.md") == [("b.md", ""), ("", "two-words"), ("", "nowhere")]
    assert broken_links([tmp_path / "a.md"], tmp_path) == [
        "a.md: b.md does not exist",
        "a.md: #nowhere: no such heading",
    ]
    (tmp_path / "b.md").write_text("# B\n")
    assert broken_links([tmp_path / "a.md"], tmp_path) == ["a.md: #nowhere: no such heading"]


@pytest.mark.parametrize(
    "heading, anchor",
    [
        ("Run options, bounds and exit codes", "run-options-bounds-and-exit-codes"),
        ("A Llama-style LM (`llama`, unit tokens)", "a-llama-style-lm-llama-unit-tokens"),
        ("Results: list, show, delete, export, import", "results-list-show-delete-export-import"),
    ],
)
def test_anchors_are_githubs(tmp_path, heading, anchor):
    (tmp_path / "p.md").write_text(f"## {heading}\n")
    assert anchors(tmp_path / "p.md") == {anchor}
