"""The solver settings of the OT entry points, checked in one place.

The settings live in two frozen configs, each with one default per field: :class:`PartialSinkhorn`
(the Sinkhorn solver: epsilon, tol, max_iter, ...) and ``solve.SolveOptions`` (how ``solve_partial``
runs it: method, dtype, memory budget, ...). Both check themselves in ``__post_init__`` with
:func:`check_settings`: each keyword it is given is checked by the rule of that name (:data:`RULES`),
and the first bad one raises a ValueError that names it and says what is accepted (a string where a
number belongs is such an error too, not a TypeError). The data (points, weights, mass) are checked
by ``problem.validate``.

:func:`~puaudit_runtime.deprecation.replace_deprecated` (defined there, named here too) maps the
keywords the entry points took before the configs (``epsilon=``, ``tol=``, ...) onto them for one
release, with a DeprecationWarning that names the replacement.
"""

from __future__ import annotations

import numbers

import jax
import numpy as np

from puaudit_jax.ot import relaxation as rx
from puaudit_runtime.checks import check_choice, check_flag, check_fraction, check_int, check_real
from puaudit_runtime.deprecation import UNSET, replace_deprecated, spelled  # noqa: F401  (their home before)

METHODS = ("auto", "sinkhorn", "exact")
DTYPES = ("float32", "float64")
EXACT_BACKENDS = ("emd", "highs")
#: The products behind a cost computed from points (``geometry.py`` says what each means).
COST_PRECISIONS = ("default", "highest", "bfloat16")
#: Where :func:`~puaudit_jax.ot.solve.solve_partial` checks and normalises the points (``SolveOptions.prepare``).
PREPARE_ON = ("auto", "device", "host")


def _positive_finite(what: str):
    def check(name, value):
        check_real(name, value, 0, strict=True, what=what, need="be positive and finite")

    return check


def _optional(rule):
    def check(name, value):
        if value is not None:
            rule(name, value)

    return check


def _positive_int(name, value) -> None:
    check_int(name, value, 1, need="be a positive integer")


def _auto_or_positive_int(name, value) -> None:
    if not (isinstance(value, str) and value == "auto"):
        check_int(name, value, 1, need="be 'auto' or a positive integer")


def _one_of(choices):
    return lambda name, value: check_choice(name, value, choices)


def _flag(name, value) -> None:
    check_flag(name, value)


def _eps_decay(name, value) -> None:
    check_fraction(name, value, optional=True, what="or be None: no epsilon scaling", need="lie in (0, 1)")


def _absorb_threshold(name, value) -> None:
    check_real(name, value, 1, strict=True, what="scalings are absorbed when they leave [1/T, T]",
               need="be a finite number > 1")  # fmt: skip


def _relaxation(name, value) -> None:
    rx.check_setting(value)


#: setting name -> its check ``rule(name, value)`` (raises ValueError naming the setting).
RULES = {
    "method": _one_of(METHODS),
    "dtype": _one_of(DTYPES),
    "exact_backend": _one_of(EXACT_BACKENDS),
    "cost_precision": _one_of(COST_PRECISIONS),
    "prepare": _one_of(PREPARE_ON),
    "epsilon": _positive_finite("cost units"),
    "tol": _positive_finite("L1 marginal error; inf would call any result converged"),
    "gap_tol": _optional(_positive_finite("cost units, or None")),
    "max_iter": _positive_int,
    "block_size": _optional(_positive_int),
    "memory_budget": _auto_or_positive_int,
    "eps_decay": _eps_decay,
    "eps_init": _optional(_positive_finite("cost units, or None: max |C|")),
    "eps_steps": _positive_int,
    "absorb_threshold": _absorb_threshold,
    "relaxation": _relaxation,
    "certify": _flag,
    "warm_start": _flag,
    "return_plan": _flag,
}


def check_settings(**settings) -> None:
    """Raise ValueError naming the first bad setting among ``settings`` (name=value, in order).

    Accepted: ``method`` in :data:`METHODS`; ``dtype`` "float32" or "float64"; ``exact_backend`` "emd"
    or "highs"; ``cost_precision`` in :data:`COST_PRECISIONS`; ``prepare`` in :data:`PREPARE_ON`;
    ``epsilon`` and ``tol`` positive finite numbers; ``gap_tol`` None or a positive finite
    number; ``eps_init`` None or a positive finite number; ``absorb_threshold`` a finite number > 1;
    ``max_iter`` and ``eps_steps`` positive integers, ``memory_budget`` "auto" or one (bytes), ``block_size``
    None or one; ``eps_decay`` None or in (0, 1); ``relaxation`` "auto" or in [1, 2); ``certify``,
    ``warm_start``, ``return_plan`` booleans.

    Raises:
        ValueError: naming the setting and its accepted range or type.
        KeyError: a name without a rule (a bug in the caller).
    """
    for name, value in settings.items():
        RULES[name](name, value)


def concrete(value) -> bool:
    """Whether ``value`` is a setting as a user gives it, which its rule then checks.

    A number, string, bool or None, a 0-d array, or what no setting accepts (a list, a type, an array
    of more dimensions), which its rule refuses. A pytree config is also rebuilt by JAX with tracers or
    placeholders (``object()``) as its leaves (under ``jit``, ``vmap``); those are not checked.
    """
    if isinstance(value, jax.core.Tracer):
        return False
    return value is None or isinstance(value, (str, bool, numbers.Number, np.generic, np.ndarray, jax.Array, list,
                                               tuple, type))  # fmt: skip


def _setting(value):
    """A 0-d array as the number it holds (``np.array(0.05)`` is checked as 0.05); anything else as is."""
    return value.item() if isinstance(value, (np.ndarray, jax.Array)) and value.ndim == 0 else value


def check_fields(config, names) -> None:
    """:func:`check_settings` on the fields ``names`` of ``config`` that hold concrete values."""
    values = {name: getattr(config, name) for name in names}
    check_settings(**{name: _setting(value) for name, value in values.items() if concrete(value)})
