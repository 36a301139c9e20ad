"""Checks of the consensus options: a ValueError naming the option and what it accepts.

Used by the configs (:class:`~.bradley_terry.BTConfig`, :class:`~.elo.EloConfig`,
:class:`~.alignment.AlignConfig`) and the entry points (:func:`~.matrices.score_matrices`,
:func:`~.bradley_terry.bootstrap_bt`), so ``puaudit consensus`` and the Python API reject the same
values with the same message (the CLI prints it as ``error: ...``).
"""

from __future__ import annotations

import numbers


def check_int(name: str, value, minimum: int, what: str = "") -> None:
    """ValueError unless ``value`` is an integer (not a bool) >= ``minimum``; ``what`` explains it."""
    import numpy as np  # here, not above: the configs that call this are read by the CLI's parser

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{f' ({what})' if what else ''}, got {value!r}")


def check_real(name: str, value, minimum: float | None = None, *, strict: bool = False, what: str = "") -> None:
    """ValueError unless ``value`` is a finite real number, >= ``minimum`` (> with ``strict``) when given."""
    import numpy as np

    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and bool(np.isfinite(value))
    if ok and minimum is not None:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
        raise ValueError(f"{name} must be a finite number{bound}{f' ({what})' if what else ''}, got {value!r}")
