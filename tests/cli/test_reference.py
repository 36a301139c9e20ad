"""docs/cli.md is the parser's own reference, as markdown that reads on GitHub, and never out of date."""

from __future__ import annotations

import argparse
from pathlib import Path

from puaudit_jax.cli import build_parser
from puaudit_jax.cli.reference import cli_reference, main

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands(parser: argparse.ArgumentParser, prog: str = "puaudit"):
    """(name, parser) of every command and sub-command, the top level first."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prog} {name}")


def test_docs_cli_md_is_what_the_parser_gives():
    """Fails when an option, default or help text changed without `python -m puaudit_jax.cli.reference docs/cli.md`."""
    assert CLI_MD.read_text(encoding="utf-8") == cli_reference(), (
        "docs/cli.md is out of date: run python -m puaudit_jax.cli.reference docs/cli.md"
    )


def test_every_command_and_option_is_listed_with_its_default():
    text = cli_reference()
    assert "eval-rst" not in text and "argparse::" not in text  # plain markdown, no Sphinx directive
    for name, parser in _commands(build_parser()):
        section = text.split(f"`{name}`\n", 1)[1].split("\n#", 1)[0]
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.option_strings[0]}" in section, (name, action.option_strings)
    quantify = text.split("`puaudit quantify`\n", 1)[1].split("\n#", 1)[0]
    assert "| `--level LEVEL` | `0.9` | coverage of the confidence intervals, in (0, 1) |" in quantify


def test_check_says_when_the_file_is_stale(tmp_path, capsys):
    stale = tmp_path / "cli.md"
    stale.write_text("# Command-line reference\n", encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert "out of date: run python -m puaudit_jax.cli.reference" in capsys.readouterr().err
    assert main([str(stale)]) == 0 and main(["--check", str(stale)]) == 0
