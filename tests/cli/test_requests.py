"""Each command reads the command line once: only the request builders take argparse's ``args``."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "puaudit_jax" / "cli"

# The functions allowed a parameter named ``args``: the builders of cli/requests.py, each command's
# ``cmd_x(args)`` (one line: ``run_x(x_request(args))``), and the option plumbing.
BUILDERS = {"data_request", "feature_request", "embed_config", "device_flags", "output_request", "scoring_request",
            "audit_fields", "audit_source", "audit_request", "quantify_request", "plan_request", "evaluate_request",
            "demo_request", "monitor_request", "convert_request", "judge_settings", "judge_request", "serve_config",
            "probe_request", "consensus_request"}  # fmt: skip
COMMANDS = {"audit.py": {"cmd_audit"}, "quantify.py": {"cmd_quantify"}, "plan.py": {"cmd_plan_labels"},
            "evaluate.py": {"cmd_evaluate", "cmd_demo"}, "monitor.py": {"cmd_monitor"}, "convert.py": {"run"},
            "judges.py": {"cmd_attack", "cmd_judge", "cmd_serve"}, "probe.py": {"cmd_probe"},
            "consensus.py": {"cmd_consensus"}}  # fmt: skip
ALLOWED = {"requests.py": BUILDERS, "options.py": {"options_from_args"}, **COMMANDS}


def _taking_args(path: Path) -> list[tuple[str, int]]:
    """(name, line) of each function in ``path`` with a parameter named ``args`` (``*args`` is not one)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            if "args" in [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]:
                found.append((node.name, node.lineno))
    return found


def test_only_the_request_builders_take_args():
    stray = [f"{path.name}:{line} {name}" for path in sorted(CLI.glob("*.py"))
             for name, line in _taking_args(path) if name not in ALLOWED.get(path.name, set())]  # fmt: skip
    assert not stray, f"functions reading argparse's args outside the request builders: {stray}"


def test_the_check_finds_a_function_taking_args(tmp_path):
    """The walk above sees a stray ``args`` (and not ``*args``)."""
    module = tmp_path / "m.py"
    module.write_text("def helper(x, args):\n    pass\n\ndef f(*args):\n    pass\n")
    assert _taking_args(module) == [("helper", 1)]


def test_a_command_passes_args_to_its_builder_only():
    """``cmd_x(args)`` is one ``return run(builder(args))``: args reaches the builder, nothing else."""
    for name, commands in COMMANDS.items():
        for node in ast.parse((CLI / name).read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in commands:
                body = [n for n in node.body if not isinstance(n, ast.Expr)]  # the docstring aside
                (ret,) = body
                (inner,) = ret.value.args
                assert inner.func.id in BUILDERS and [a.id for a in inner.args] == ["args"], f"{name}:{node.name}"


def test_a_request_is_frozen_and_built_from_the_command_line():
    import dataclasses

    from puaudit_jax.audit import AuditConfig
    from puaudit_jax.cli import build_parser
    from puaudit_jax.cli.requests import audit_request, quantify_request

    args = build_parser().parse_args(["audit", "a.csv", "b.csv", "--m", "0.7", "--quiet", "--out", "O"])
    request = audit_request(args)
    assert request.data.files == ("a.csv", "b.csv") and request.data.name == "a.csv, b.csv"
    assert request.audit == AuditConfig(m=0.7, scorer=args.scorer, rule=args.rule)
    assert request.output.out == "O" and request.output.quiet and not request.output.no_figures
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.audit = AuditConfig()  # type: ignore[misc]
    q = quantify_request(build_parser().parse_args(["quantify", "D", "--encoder", "smollm2", "--level", "0.8"]))
    assert q.quantify.level == 0.8 and q.source.unused == ("--encoder",) and not q.source.with_audit


def test_evaluate_takes_its_settings_as_objects_and_the_old_keywords_warn():
    """``evaluate(protocol=, config=)``; the keywords of before give the same result, with a DeprecationWarning."""
    from puaudit_jax.audit import AuditConfig
    from puaudit_jax.audit.synthetic import cone_comparisons
    from puaudit_jax.evaluate import Protocol, evaluate

    data = cone_comparisons(120, 0, d=16, seed=6)
    pairs = [("centroid", "paper")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the objects' route warns about nothing
        new = evaluate(data.table, data.embeddings, pairs=pairs, protocol=Protocol(seeds=[3], p_ratio=0.3),
                       config=AuditConfig(eta=0.4), progress=False)  # fmt: skip
    with pytest.warns(DeprecationWarning, match=r"evaluate\(seeds=\.\.\., p_ratio=\.\.\., eta=\.\.\.\) is deprecated"):
        old = evaluate(data.table, data.embeddings, pairs=pairs, seeds=[3], p_ratio=0.3, eta=0.4, progress=False)
    assert new.meta["audit_config"] == old.meta["audit_config"] and new.meta["seeds"] == old.meta["seeds"] == [3]
    cols = ["scorer", "rule", "question_type", "n", "cons_orig_mean", "cons_adj_mean", "flip_rate", "m_mean"]
    assert new.summary[cols].equals(old.summary[cols])
