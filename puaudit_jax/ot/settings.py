"""The solver settings of the OT entry points, checked in one place.

:func:`check_settings` is the one check of ``solve_partial`` and ``solve_mass_path``: each keyword
it is given is checked by the rule of that name (:data:`RULES`), and the first bad one raises a
ValueError that names it and says what is accepted (a string where a number belongs is such an
error too, not a TypeError). The data (points, weights, mass) are checked by ``problem.validate``.
"""

from __future__ import annotations

import numbers

import numpy as np

from puaudit_jax.ot import relaxation as rx

METHODS = ("auto", "sinkhorn", "exact")
DTYPES = ("float32", "float64")


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _positive_finite(what: str):
    def check(name, value):
        if not (_is_real(value) and value > 0 and np.isfinite(value)):
            raise ValueError(f"{name} must be positive and finite ({what}); got {value!r}")

    return check


def _optional(rule):
    def check(name, value):
        if value is not None:
            rule(name, value)

    return check


def _positive_int(name, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


def _auto_or_positive_int(name, value) -> None:
    if value != "auto":
        try:
            _positive_int(name, value)
        except ValueError:
            raise ValueError(f"{name} must be 'auto' or a positive integer; got {value!r}") from None


def _one_of(choices):
    def check(name, value):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{name} must be one of {choices}; got {value!r}")

    return check


def _flag(name, value) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")


def _eps_decay(name, value) -> None:
    if value is not None and not (_is_real(value) and 0 < value < 1):
        raise ValueError(f"{name} must lie in (0, 1) (or be None: no epsilon scaling); got {value!r}")


def _relaxation(name, value) -> None:
    rx.check_setting(value)


#: setting name -> its check ``rule(name, value)`` (raises ValueError naming the setting).
RULES = {
    "method": _one_of(METHODS),
    "dtype": _one_of(DTYPES),
    "epsilon": _positive_finite("cost units"),
    "tol": _positive_finite("L1 marginal error; inf would call any result converged"),
    "gap_tol": _optional(_positive_finite("cost units, or None")),
    "max_iter": _positive_int,
    "block_size": _optional(_positive_int),
    "memory_budget": _auto_or_positive_int,
    "eps_decay": _eps_decay,
    "relaxation": _relaxation,
    "certify": _flag,
    "warm_start": _flag,
    "return_plan": _flag,
}


def check_settings(**settings) -> None:
    """Raise ValueError naming the first bad setting among ``settings`` (name=value, in order).

    Accepted: ``method`` in :data:`METHODS`; ``dtype`` "float32" or "float64"; ``epsilon`` and
    ``tol`` positive finite numbers; ``gap_tol`` None or a positive finite number; ``max_iter`` a
    positive integer, ``memory_budget`` "auto" or one (bytes), ``block_size`` None or one; ``eps_decay``
    None or in (0, 1); ``relaxation`` "auto" or in [1, 2); ``certify``, ``warm_start``,
    ``return_plan`` booleans.

    Raises:
        ValueError: naming the setting and its accepted range or type.
        KeyError: a name without a rule (a bug in the caller).
    """
    for name, value in settings.items():
        RULES[name](name, value)
