"""puaudit_runtime.checks: the range checks of every package (boundaries in, everything else out, named)."""

from __future__ import annotations

import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from puaudit_runtime.checks import (
    check_choice,
    check_flag,
    check_fraction,
    check_int,
    check_range,
    check_real,
    is_flag,
    is_int,
    is_real,
)

ROOT = Path(__file__).resolve().parents[2]
NOT_NUMBERS = [True, False, np.True_, "1", "0.5", None, [1], np.array([1, 2]), float("nan"), float("inf"),
               -float("inf"), np.float64("nan"), np.float32("inf")]  # fmt: skip


def _refused(check, *args, match: str, **kwargs):
    with pytest.raises(ValueError, match=f"^{re.escape(match)}"):
        check(*args, **kwargs)


# --------------------------------------------------------------------------------------------------
# accepted: the boundary values, as Python numbers


@pytest.mark.parametrize("value", [1, 7, 10**30, np.int64(1), np.uint8(3)])
def test_check_int_accepts_integers_from_the_minimum(value):
    out = check_int("n", value, 1)
    assert out == value and type(out) is int


def test_check_int_without_a_minimum_and_optional():
    assert check_int("n", -5) == -5
    assert check_int("n", None, 0, optional=True) is None


@pytest.mark.parametrize("value", [0, 0.0, 1e-300, 2.5, 10**300, np.float32(0.5), np.int32(3), Fraction(1, 3)])
def test_check_real_accepts_finite_numbers_from_the_minimum(value):
    out = check_real("x", value, 0)
    assert out == float(value) and type(out) is float


@pytest.mark.parametrize(
    "value, low, high, bounds",
    [(0, 0, 1, "[]"), (1, 0, 1, "[]"), (0, 0, 1, "[)"), (1, 0, 1, "(]"), (1.5, 1, 2, "[)"),
     (np.float32(0.5), 0, 1, "()")],
)  # fmt: skip
def test_check_range_accepts_its_closed_ends_and_inside(value, low, high, bounds):
    assert check_range("x", value, low, high, bounds) == float(value)


def test_check_fraction_is_open_by_default_and_takes_brackets():
    assert check_fraction("p", 1e-12) == 1e-12 and check_fraction("p", 1 - 1e-12) == 1 - 1e-12
    assert check_fraction("p", 0, "[]") == 0.0 and check_fraction("p", 1, "[]") == 1.0
    assert check_fraction("p", None, optional=True) is None


def test_check_choice_and_check_flag_accept_their_values():
    assert check_choice("mode", "a", ("a", "b")) == "a"
    assert check_choice("mode", None, ("a", "b"), optional=True) is None
    assert check_flag("on", True) is True and check_flag("on", np.False_) is False
    assert type(check_flag("on", np.True_)) is bool


# --------------------------------------------------------------------------------------------------
# refused: bools, NaN, infinities, strings, out of range; the message names the argument


@pytest.mark.parametrize("value", [*NOT_NUMBERS, 2.0, 1.5, np.float64(3.0), 0, -1])
def test_check_int_refuses_non_integers_and_values_below(value):
    _refused(check_int, "batch_size", value, 1, match="batch_size must be an integer >= 1, got ")


@pytest.mark.parametrize("value", [*NOT_NUMBERS, -1e-9, -1, 10**400])
def test_check_real_refuses_non_numbers_and_values_below(value):
    _refused(check_real, "ridge", value, 0, match="ridge must be a finite number >= 0, got ")


@pytest.mark.parametrize("value", [0, 0.0, -0.0])
def test_check_real_strict_refuses_the_minimum(value):
    _refused(check_real, "tol", value, 0, strict=True, match=f"tol must be a finite number > 0, got {value!r}")


@pytest.mark.parametrize(
    "value, bounds, interval",
    [(0, "(]", "(0, 1]"), (1, "[)", "[0, 1)"), (0, "()", "(0, 1)"), (1, "()", "(0, 1)"), (-1e-9, "[]", "[0, 1]"),
     (1 + 1e-9, "[]", "[0, 1]")],
)  # fmt: skip
def test_check_range_refuses_its_open_ends_and_outside(value, bounds, interval):
    _refused(check_range, "m", value, 0, 1, bounds, match=f"m must be in {interval}, got {value!r}")


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_check_range_and_fraction_refuse_non_numbers(value):
    _refused(check_range, "eta", value, 0, 1, match="eta must be in [0, 1], got ")
    _refused(check_fraction, "level", value, match="level must be in (0, 1), got ")


@pytest.mark.parametrize("value", [True, "c", None, 1, ["a"], np.array(["a", "b"])])
def test_check_choice_refuses_other_values(value):
    _refused(check_choice, "mode", value, ("a", "b"), match="mode must be one of ('a', 'b'), got ")


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0, np.int64(1)])
def test_check_flag_refuses_non_bools(value):
    _refused(check_flag, "certify", value, match=f"certify must be True or False, got {value!r}")


def test_the_message_has_the_note_the_none_and_the_callers_words():
    _refused(check_int, "n_boot", 0, 1, "bootstrap resamples", match="n_boot must be an integer >= 1 (bootstrap "
             "resamples), got 0")  # fmt: skip
    _refused(check_int, "max_length", 0, 1, optional=True, match="max_length must be an integer >= 1 or None, got 0")
    _refused(check_real, "tol", float("inf"), 0, strict=True, what="L1", need="be positive and finite",
             match="tol must be positive and finite (L1), got inf")  # fmt: skip
    _refused(check_fraction, "eps_decay", 1.0, optional=True, need="lie in (0, 1)",
             match="eps_decay must lie in (0, 1), got 1.0")  # fmt: skip
    _refused(check_fraction, "", "x", "[]", match="must be in [0, 1], got 'x'")  # no name: an argparse type's


def test_a_bad_bounds_argument_is_a_bug_named():
    _refused(check_range, "x", 0.5, 0, 1, "[[", match="bounds must be one of")


def test_the_predicates():
    assert is_int(3) and is_int(np.int8(3)) and not is_int(True) and not is_int(np.True_) and not is_int(3.0)
    assert is_real(3) and is_real(np.float32(0.5)) and not is_real(True) and not is_real(float("nan"))
    assert not is_real(float("inf")) and not is_real("1") and not is_real(10**400)
    assert is_flag(False) and is_flag(np.bool_(True)) and not is_flag(0) and not is_flag("True")


def test_the_module_imports_no_numerical_library():
    """The CLI's parser imports the configs that call these checks, and no numerical library."""
    code = ("import sys\nimport puaudit_runtime.checks as c\nc.check_flag('x', True)\nc.check_real('x', 1.5)\n"
            "print(sorted(m for m in ('numpy', 'jax', 'scipy', 'pandas') if m in sys.modules))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
