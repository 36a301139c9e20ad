"""The command-line reference, ``docs/cli.md``, written from the parser itself as plain markdown.

    python -m puaudit_jax.cli.reference docs/cli.md    # rewrite it (``make docs`` does)
    python -m puaudit_jax.cli.reference --check docs/cli.md   # exit 1 when it is out of date

Every command of :func:`~puaudit_jax.cli.main.build_parser` (sub-commands too: ``consensus scores``),
each with its arguments, their defaults, choices and help, in markdown tables that read the same on
GitHub as in the documentation site. ``tests/cli/test_reference.py`` fails when the committed file
differs from what the parser gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

INTRO = """\
# Command-line reference

Written from the parser itself (`puaudit_jax.cli.main.build_parser`) by
`python -m puaudit_jax.cli.reference docs/cli.md` (`make docs` runs it; `tests/cli/test_reference.py`
fails when this file is out of date), so it cannot drift from the code: every command, its options,
their defaults and their help texts, as `puaudit COMMAND --help` prints them. The options of `audit`,
`evaluate`, `quantify`, `plan-labels`, `consensus` and `probe` are generated from the frozen config
dataclasses of the Python API (`AuditConfig`, `EmbedConfig`, `QuantifyConfig`, `PlanConfig`,
`AlignConfig`, ...), whose `Attributes:` sections are the help texts: a default is written once, and
`tests/cli/test_options.py` checks every command-line default against its config's. What each
command writes is on [output files](output-files.md).
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """``{name: (sub-parser, its one-line help)}`` of ``parser``'s commands, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def _cell(text) -> str:
    """``text`` made safe for one cell of a markdown table (pipes, emphasis, HTML, math, line breaks)."""
    text = " ".join(str(text).split())
    for char in ("\\", "|", "*", "<", ">", "[", "$"):
        text = text.replace(char, "\\" + char)
    return text


def _default(action: argparse.Action) -> str:
    """The default as a code span, or "" where there is none to show (a flag, None, ``==SUPPRESS==``)."""
    value = action.default
    if action.required and action.option_strings:
        return "required"
    if value is None or value is argparse.SUPPRESS or isinstance(action, argparse._StoreTrueAction):
        return ""
    if isinstance(value, (tuple, list)):
        value = ",".join(map(str, value)) if value else '""'
    return f"`{value}`"


def _names(action: argparse.Action) -> str:
    """``--cache-dir CACHE_DIR`` / ``data`` as a code span, choices of a positional shown as ``{a,b}``."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return ", ".join(f"`{o} {metavar}`" if takes_value else f"`{o}`" for o in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` prints it (``%(default)s`` expanded), and the choices."""
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text = f"{text} (choices: {', '.join(map(str, action.choices))})".strip()
    return _cell(text)


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    """The markdown table of ``parser``'s arguments (its commands and ``--help`` aside)."""
    rows = [
        f"| {_names(a)} | {_default(a)} | {_help(parser, a)} |"
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]
    return ["| argument | default | help |", "|---|---|---|", *rows] if rows else []


def _section(parser: argparse.ArgumentParser, command: str, summary: str, level: int) -> list[str]:
    """The heading, description, usage line and options of ``command``, then its sub-commands'."""
    lines = [f"{'#' * level} `{command}`", ""]
    text = " ".join((parser.description or summary or "").split())
    if text:
        lines += [_cell(text), ""]
    commands = _subparsers(parser)
    if commands:
        lines += ["Commands: " + ", ".join(f"`{command} {name}`" for name in commands) + ".", ""]
    table = _options_table(parser)
    lines += [*table, ""] if table else []
    for name, (sub, helps) in commands.items():
        lines += _section(sub, f"{command} {name}", helps, min(level + 1, 3))
    return lines


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The markdown of ``docs/cli.md`` for ``parser`` (default: the ``puaudit`` parser).

    Args:
        parser: the parser to document, or None for :func:`~puaudit_jax.cli.main.build_parser`'s.

    Returns:
        The whole page, ending with one newline.
    """
    if parser is None:
        from .main import build_parser

        parser = build_parser()
    lines = _section(parser, parser.prog, "", 2)
    return INTRO + "\n" + "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the reference to the file named (``--check``: compare instead, exit 1 when it differs)."""
    args = argparse.ArgumentParser(description="write docs/cli.md from the puaudit parser")
    args.add_argument("path", help="the markdown file (docs/cli.md)")
    args.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    opts = args.parse_args(argv)
    text, path = cli_reference(), Path(opts.path)
    if not opts.check:
        path.write_text(text, encoding="utf-8")
        return 0
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return 0
    print(f"{path} is out of date: run python -m puaudit_jax.cli.reference {path}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
