"""The CLI's options come from the config dataclasses: same defaults, help from their docstrings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields

import pytest

from puaudit_jax.audit import AuditConfig
from puaudit_jax.audit.embed import EmbedConfig
from puaudit_jax.audit.rules import CalibratedRule
from puaudit_jax.cli import build_parser
from puaudit_jax.cli.audit import AUDIT_FIELDS, RULE_FIELDS, RULE_RENAME
from puaudit_jax.cli.inputs import EMBED_FIELDS
from puaudit_jax.cli.options import add_options, field_docs, options_from_args
from puaudit_jax.evaluate import Protocol


def _subparser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("command", ["audit", "evaluate", "demo"])
def test_cli_defaults_are_the_dataclass_defaults(command):
    args = build_parser().parse_args([command, "DATA", "--out", "x"] if command != "demo" else [command])
    assert AuditConfig(**options_from_args(args, AuditConfig, include=AUDIT_FIELDS)) == AuditConfig()
    rule = options_from_args(args, CalibratedRule, include=RULE_FIELDS, rename=RULE_RENAME)
    assert rule == {"threshold": CalibratedRule.threshold, "confidence": CalibratedRule.confidence}
    assert EmbedConfig(**options_from_args(args, EmbedConfig, include=EMBED_FIELDS)) == EmbedConfig()
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
    assert options_from_args(args, EmbedConfig, include=("long_inputs",)) == {"long_inputs": "truncate"}
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

    parse = build_parser().parse_args
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
