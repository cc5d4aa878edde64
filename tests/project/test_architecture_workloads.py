"""A workload has one home (dashbench/workloads/registry.py, with what a spec's checks need in
core/spec.py's BUILTINS): the code asks a run's workload for its facts, never tests its name against
a built-in's. Published rows (costs/, predict/published.py) name the model they were measured on, so
they may."""

import ast
from pathlib import Path

from dashbench.workloads import registry

ROOT = Path(__file__).resolve().parents[2]
HOMES = ("dashbench/workloads/registry.py", "dashbench/core/spec.py")
ASKERS = ("cli", "engine", "fleet", "jobs", "results", "store", "views", "workloads")


def name_tests(root: Path, names: tuple[str, ...]) -> list[str]:
    """'path:line' for every comparison of a value with a built-in's name (==, !=, in, not in a
    literal list of them), outside the homes, in the folders that ask the registry."""
    found = []
    for folder in ASKERS:
        for path in sorted((root / "dashbench" / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative in HOMES:
                continue
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                if isinstance(node, ast.Compare) and any(
                    _names(part, names) for part in (node.left, *node.comparators)
                ):
                    found.append(f"{relative}:{node.lineno}")
    return found


def _names(node: ast.AST, names: tuple[str, ...]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in names for e in node.elts)
    return False


def test_no_code_tests_a_run_against_a_built_ins_name():
    found = name_tests(ROOT, registry.names())
    assert not found, "ask the workload's registry entry instead of its name:\n" + "\n".join(found)


def test_the_name_walk_finds_each_way_of_testing_a_name(tmp_path):
    engine = tmp_path / "dashbench" / "engine"
    engine.mkdir(parents=True)
    (engine / "a.py").write_text('if spec.model == "llama":\n    pass\n')
    (engine / "b.py").write_text('def f(m):\n    return m in ("resnet50", "other")\n')
    (engine / "c.py").write_text('x = {"llama": 1}\nif spec.model == "mine":\n    pass\n')  # a key, another name
    home = tmp_path / "dashbench" / "workloads"
    home.mkdir()
    (home / "registry.py").write_text('if name == "llama":\n    pass\n')
    assert name_tests(tmp_path, registry.names()) == ["dashbench/engine/a.py:1", "dashbench/engine/b.py:2"]
