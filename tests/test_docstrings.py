"""Docstrings: every public function with 3+ parameters has an ``Args:`` section naming each one.

The checker is :func:`args_gaps` of ``docs/check_api_coverage.py`` (``make docs`` runs it too).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_api_coverage", ROOT / "docs" / "check_api_coverage.py")
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)

GOOD = '''
def f(x, y, *rest, z=1, **kw):
    """One line.

    Args:
        x: the first, shape (n,).
        y (int): the second,
            over two lines.
        z: the third.

    Returns:
        x: not an argument.
    """
'''


def test_every_public_function_with_three_parameters_has_args():
    """The packages pass, the files in ``IN_FLIGHT`` (being rewritten elsewhere; to be emptied) aside."""
    assert checker.undocumented_args() == []


def test_in_flight_names_existing_files():
    """An ``IN_FLIGHT`` entry that names nothing would hide nothing: it is stale and goes."""
    assert [p for p in checker.IN_FLIGHT if not (ROOT / p).exists()] == []


def test_a_complete_args_section_passes():
    assert checker.args_gaps(GOOD) == []


def test_a_missing_args_section_fails():
    source = 'def f(a, b, c):\n    """One line, no sections."""\n'
    assert checker.args_gaps(source, "m.py") == ["m.py:1 f: no Args: section"]


def test_a_missing_entry_fails():
    """A parameter named only in another section (or in prose) is not documented."""
    source = GOOD.replace("        z: the third.\n", "").replace("    Returns:\n        x:", "    Returns:\n        z:")
    assert checker.args_gaps(source) == ["<source>:2 f: Args: lacks z"]


def test_only_public_functions_with_three_parameters_count():
    source = """
def _private(a, b, c): pass
def two(self, a, b): pass
class Public:
    def method(self, a, b, c): pass
    def _hidden(self, a, b, c): pass
class _Private:
    def method(self, a, b, c): pass
def outer():
    def inner(a, b, c): pass
"""
    assert checker.args_gaps(source) == ["<source>:5 Public.method: no Args: section"]
