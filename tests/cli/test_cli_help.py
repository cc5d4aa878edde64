"""Every command's --help prints its usage and exits 0. The commands are found by walking the parser,
so a command added later is covered without touching this file."""

import argparse

import pytest

from dashbench.cli import build_parser, main


def command_paths(parser: argparse.ArgumentParser, prefix: tuple = ()) -> list[tuple]:
    """Every (sub)command as the words typed to reach it: ("run",), ("prices", "set"), ..."""
    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                paths.append((*prefix, name))
                paths += command_paths(child, (*prefix, name))
    return paths


COMMANDS = command_paths(build_parser())


def test_the_walk_finds_the_commands_and_the_nested_ones():
    assert {("run",), ("sweep",), ("preset",), ("list",), ("prices", "set"), ("prices", "reset")} <= set(COMMANDS)


@pytest.mark.parametrize("words", [(), *COMMANDS], ids=lambda words: " ".join(words) or "top")
def test_help_prints_usage_and_exits_0(words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*words, "--help"])
    out, err = capsys.readouterr()
    assert exit_.value.code in (0, None)
    assert out.startswith("usage: python -m dashbench" + "".join(f" {w}" for w in words))
    assert err == ""
