"""A lazy CLI: the parser and every command's --help import no numerical library; the packages stay whole."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("jax", "jaxlib", "scipy", "pandas", "pyarrow", "sklearn", "matplotlib", "flax", "optax", "ott", "torch",
         "transformers", "numpy")  # fmt: skip
PACKAGES = ("audit", "consensus", "datasets", "evaluate", "judges", "quantify")

# Builds the parser, prints the --help of every command (sub-commands included) and lists the heavy
# modules that were imported, in a fresh interpreter (this process has imported them all already).
HELP_EVERY_COMMAND = """
import argparse, contextlib, io, json, sys
from puaudit_jax.cli.main import build_parser

def helps(parser):
    with contextlib.redirect_stdout(io.StringIO()):
        parser.print_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                helps(child)

helps(build_parser())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)))
"""


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_help_of_every_command_imports_no_numerical_library():
    done = _run(f"HEAVY = {HEAVY!r}\n{HELP_EVERY_COMMAND}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_puaudit_help_exits_0_without_jax():
    done = _run("import sys\nfrom puaudit_jax.cli.main import main\ntry:\n    main(['audit', '--help'])\n"
                "except SystemExit as e:\n    assert e.code == 0\nprint('jax' in sys.modules)")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage: puaudit audit" in done.stdout and done.stdout.splitlines()[-1] == "False"


@pytest.mark.parametrize("package", PACKAGES)
def test_lazy_packages_give_every_public_name(package):
    """``__all__``, ``dir()`` and ``from package import *`` as when the package imported everything at once."""
    module = importlib.import_module(f"puaudit_jax.{package}")
    assert set(module.__all__) <= set(dir(module))
    namespace = {}
    exec(f"from puaudit_jax.{package} import *", namespace)
    assert set(module.__all__) <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_a_public_name_wins_over_its_submodule():
    """``audit.score`` is the function even after ``audit/score.py`` is imported on its own."""
    importlib.import_module("puaudit_jax.audit.score")
    importlib.import_module("puaudit_jax.evaluate.consistency")
    from puaudit_jax.audit import score
    from puaudit_jax.evaluate import consistency

    assert not isinstance(score, types.ModuleType) and callable(score)
    assert not isinstance(consistency, types.ModuleType) and callable(consistency)


def test_the_light_names_are_the_registries():
    """The parser's choices (audit/names.py) are the keys of the scorer and rule registries."""
    from puaudit_jax.audit.names import RULE_NAMES, SCORER_NAMES
    from puaudit_jax.audit.rules import RULES
    from puaudit_jax.audit.scorers import SCORERS

    assert SCORER_NAMES == tuple(SCORERS) and RULE_NAMES == tuple(RULES)
