"""The CLI's options come from the config dataclasses: same defaults, help from their docstrings."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field, fields

import pytest

from probes.config import FitConfig
from probes.encode_config import EncodeConfig
from puaudit_jax.audit import AuditConfig
from puaudit_jax.audit.embed import EmbedConfig
from puaudit_jax.audit.rules import CalibratedRule
from puaudit_jax.cli import build_parser
from puaudit_jax.cli.audit import AUDIT_FIELDS, RULE_FIELDS, RULE_RENAME
from puaudit_jax.cli.inputs import embed_config
from puaudit_jax.cli.options import add_options, field_docs, options_from_args
from puaudit_jax.consensus import AlignConfig, BTConfig, EloConfig
from puaudit_jax.consensus.runs import ScoresConfig
from puaudit_jax.datasets.read_config import ReadConfig
from puaudit_jax.evaluate import Protocol
from puaudit_jax.judges.serve import ServeConfig
from puaudit_jax.quantify.monitor_config import MonitorConfig
from puaudit_jax.quantify.pipeline import QuantifyConfig
from puaudit_jax.quantify.plan import PlanConfig
from puaudit_runtime.flags import DeviceFlags

DATA_CONFIGS = (AuditConfig, CalibratedRule, EmbedConfig, EncodeConfig, DeviceFlags)
CONFIGS = {
    "audit": (*DATA_CONFIGS, ReadConfig),
    "evaluate": (*DATA_CONFIGS, Protocol, ReadConfig),
    "demo": (*DATA_CONFIGS, Protocol),
    "quantify": (QuantifyConfig, AuditConfig, EmbedConfig, EncodeConfig, DeviceFlags, ReadConfig),
    "plan-labels": (PlanConfig, AuditConfig, EmbedConfig, EncodeConfig, DeviceFlags, ReadConfig),
    "monitor": (MonitorConfig, ReadConfig),
    "convert": (ReadConfig,),
    "attack": (ReadConfig,),
    "judge": (ReadConfig,),
    "serve-local": (ServeConfig,),
    "consensus scores": (ScoresConfig, BTConfig, EloConfig),
    "consensus align": (AlignConfig,),
    "consensus table4": (),
    "probe fit": (FitConfig, DeviceFlags),
    "probe predict": (DeviceFlags,),
}
"""Every command of ``puaudit``, and the configs whose fields its options set."""
SHARED = {"consensus scores": {"seed": EloConfig, "anchor": EloConfig}}
"""Options generated from one config whose value also sets the same field of another."""


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("command", ["audit", "evaluate", "demo"])
def test_cli_defaults_are_the_dataclass_defaults(command):
    args = build_parser().parse_args([command, "DATA", "--out", "x"] if command != "demo" else [command])
    assert AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_FIELDS)) == AuditConfig()
    rule = options_from_args(args, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME)
    assert rule == {"threshold": CalibratedRule.threshold, "confidence": CalibratedRule.confidence}
    assert embed_config(args) == EmbedConfig()
    if command == "evaluate":
        assert Protocol(**options_from_args(args, Protocol)) == Protocol()


def test_cli_help_is_the_docstring_of_each_field():
    helps = {a.dest: a.help for a in _subparser("audit")._actions}
    docs = field_docs(AuditConfig)
    for name in AUDIT_FIELDS:
        assert helps[name] == docs[name] and len(docs[name]) > 10
    assert helps["flip_threshold"] == field_docs(CalibratedRule)["threshold"]


def test_cli_parses_values_and_none_choices():
    args = build_parser().parse_args(
        [
            "audit",
            "D",
            "--m",
            "0.8",
            "--group-by",
            "none",
            "--min-group-size",
            "3",
            "--flip-threshold",
            "0.6",
            "--long-inputs",
            "truncate",
        ]
    )
    cfg = AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_FIELDS))
    assert (cfg.m, cfg.group_by, cfg.min_group_size) == (0.8, None, 3)
    assert options_from_args(args, CalibratedRule, include=("threshold",), rename=RULE_RENAME) == {"threshold": 0.6}
    assert options_from_args(args, EncodeConfig, include=("long_inputs",)) == {"long_inputs": "truncate"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "D", "--group-by", "model"])


def _knobs(default_rate: float):
    @dataclass(frozen=True)
    class Knobs:
        """Knobs.

        Attributes:
            rate (float): a rate
                over two lines
            name: a name
            flag: a flag

        Example:
            not: a field
        """

        rate: float = field(default=default_rate)
        name: str | None = field(default=None, metadata={"choices": ("x", "y")})
        flag: bool = False

    return Knobs


def test_a_changed_default_changes_the_cli():
    """The parser reads defaults from the dataclass at build time: no second copy to drift."""
    for rate in (0.25, 0.5):
        knobs = _knobs(rate)
        p = argparse.ArgumentParser()
        add_options(p, knobs)
        assert options_from_args(p.parse_args([]), knobs) == {"rate": rate, "name": None, "flag": False}
        assert options_from_args(p.parse_args(["--rate", "2", "--name", "y", "--flag"]), knobs) == {
            "rate": 2.0,
            "name": "y",
            "flag": True,
        }
    assert field_docs(_knobs(0.1)) == {"rate": "a rate over two lines", "name": "a name", "flag": "a flag"}


def _commands(parser, words=()):
    """(command words, parser) of every command that takes no sub-command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(words), parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, (*words, name))


def _parsed_default(action, f: dataclasses.Field):
    """An option's default as a config receives it (argparse types a str default; "none" is None)."""
    value = action.default
    if isinstance(value, str) and callable(action.type):
        value = action.type(value)
    return None if value == "none" and f.metadata.get("choices") else value


def _fields_set_by(action, command: str) -> list[tuple[type, dataclasses.Field]]:
    """The config fields an option of ``command`` sets.

    Its origin (an option generated by add_options) and the fields :data:`SHARED` names; for a
    hand-written option, every field of the command's configs named as its destination.
    """
    named = lambda cls, name: [(cls, f) for f in fields(cls) if f.name == name]  # noqa: E731
    origin = getattr(action, "config_field", None)
    if origin is None:
        return [pair for cls in CONFIGS[command] for pair in named(cls, action.dest)]
    assert origin[0] in CONFIGS[command], f"{command}: {action.option_strings} from {origin[0]}"
    shared = SHARED.get(command, {}).get(action.dest)
    return named(*origin) + (named(shared, origin[1]) if shared else [])


def test_every_option_default_is_its_config_field_default():
    """Each option generated from a config (and a hand-written one named as a field of its command's
    configs) defaults to that field's default: the CLI and the Python API agree."""
    commands = dict(_commands(build_parser()))
    assert set(commands) == set(CONFIGS)  # a new command names its configs here
    generated = 0
    for command, parser in commands.items():
        for action in parser._actions:
            generated += hasattr(action, "config_field")
            for cls, f in _fields_set_by(action, command):
                assert f.default is not dataclasses.MISSING, f"{cls.__name__}.{f.name} has no default"
                assert _parsed_default(action, f) == f.default, (
                    f"puaudit {command} {'/'.join(action.option_strings)} defaults to {action.default!r}, "
                    f"{cls.__name__}.{f.name} to {f.default!r}"
                )
    assert generated > 120


def test_a_hand_written_drifted_default_fails_the_comparison():
    parser = argparse.ArgumentParser()
    add_options(parser, AlignConfig, include=("w_consensus",))
    action = next(a for a in parser._actions if a.dest == "w_consensus")
    assert _parsed_default(action, fields(AlignConfig)[2]) == AlignConfig.w_consensus
    drifted = argparse.ArgumentParser().add_argument("--w-consensus", type=float, default=AlignConfig.w_consensus / 4)
    assert _parsed_default(drifted, fields(AlignConfig)[2]) != AlignConfig.w_consensus
    with pytest.raises(ValueError, match="only help and metavar"):
        add_options(argparse.ArgumentParser(), AlignConfig, include=("steps",), overrides={"steps": {"default": 9}})


def test_a_field_without_an_attributes_entry_is_an_error():
    @dataclass(frozen=True)
    class Partly:
        """Some fields documented.

        Attributes:
            x: documented
        """

        x: int = 1
        y: float = 2.0

    add_options(argparse.ArgumentParser(), Partly, include=("x",))
    with pytest.raises(ValueError, match=r"Partly.y has no help text in its docstring's Attributes: section"):
        add_options(argparse.ArgumentParser(), Partly)


def test_a_field_without_help_is_an_error():
    @dataclass(frozen=True)
    class Bare:
        """No attributes section."""

        x: int = 1

    with pytest.raises(ValueError, match="no help text"):
        add_options(argparse.ArgumentParser(), Bare)
    assert [f.name for f in fields(Bare)] == ["x"]


# options that only the audit of --with-audit reads: refused without it when the user gave them

GIVEN = {"embeddings": "e.npz", "encoder": "smollm2", "cache_dir": "c", "no_cache": None, "batch_size": "4",
         "max_length": "64", "long_inputs": "chunk", "save_embeddings": "s.npz", "devices": "2", "mesh": "2",
         "coordinator": "h:1", "num_processes": "2", "process_id": "1", "cluster_auto": None,
         "cluster_timeout": "5", "evidence": "style", "other_judges": "judge2"}  # fmt: skip


@pytest.mark.parametrize("command", ["quantify", "plan-labels"])
def test_options_only_the_audit_reads_are_refused_without_with_audit(command):
    from puaudit_jax.cli.options import option_name
    from puaudit_jax.cli.quantify import WITH_AUDIT_ONLY, refuse_unused_audit_options
    from puaudit_jax.cli.requests import audit_source

    def parse(argv):  # the request's part that says which options only the audit reads were given
        return audit_source(build_parser().parse_args(argv))

    assert set(GIVEN) == set(WITH_AUDIT_ONLY)
    refuse_unused_audit_options(parse([command, "D"]))  # nothing given: the defaults pass (tuples included)
    for dest, value in GIVEN.items():
        flag = [option_name(dest)] + ([] if value is None else [value])
        refuse_unused_audit_options(parse([command, "D", "--with-audit", *flag]))
        with pytest.raises(ValueError, match=f"^{option_name(dest)} only applies with --with-audit"):
            refuse_unused_audit_options(parse([command, "D", *flag]))


def test_parser_errors_read_error_and_name_the_command(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["audit", "D", "--eta", "x"])
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: puaudit audit: argument --eta: invalid float value: 'x'\n" \
                                      "(usage: puaudit audit --help)\n"  # fmt: skip


def test_every_option_of_every_command_has_a_help_text():
    """The CLI reference page (docs/cli.md) is generated from these texts: none may be empty."""
    import argparse

    from puaudit_jax.cli.main import build_parser

    def bare(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                yield from (b for name, sub in action.choices.items() for b in bare(sub, [*path, name]))
            elif not action.help and not isinstance(action, argparse._HelpAction):
                yield " ".join([*path, *(action.option_strings or [action.dest])])

    assert list(bare(build_parser(), ["puaudit"])) == []


def test_the_solver_dtype_option_agrees_with_the_solver_settings():
    """--solver-dtype is written by hand (the parser imports no solver): its default and choices are
    SolveOptions.dtype and ot.settings.DTYPES."""
    from puaudit_jax.cli.audit import SOLVER_DTYPES
    from puaudit_jax.ot.settings import DTYPES
    from puaudit_jax.ot.solve import SolveOptions

    assert SOLVER_DTYPES[0] == SolveOptions.dtype and set(SOLVER_DTYPES) == set(DTYPES)


def test_quantify_prints_at_most_a_screen_of_rows_and_says_where_the_rest_are():
    """Before: the README's quantify example printed 719 lines."""
    import pandas as pd

    from puaudit_jax.cli.quantify import PRINTED_ROWS, _table_text

    frame = pd.DataFrame({"target": [f"t{i}" for i in range(PRINTED_ROWS + 5)], "estimate": 0.5})
    text = _table_text(frame, "out")
    assert len(text.splitlines()) == PRINTED_ROWS + 2 and text.endswith("... 5 more rows in out/leaderboard.csv")
    assert "more rows" not in _table_text(frame.head(3), "out")
