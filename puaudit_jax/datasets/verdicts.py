"""Pairwise verdict spellings and their normal form.

A verdict says which of two responses is better. Every table in this package stores verdicts in one
normal form:

=============  ===========================================================================
``"A"``        response_a is better
``"B"``        response_b is better
``"tie"``      neither (a tie, or an inconsistent verdict)
``"missing"``  no verdict (human column only: an unlabelled comparison)
=============  ===========================================================================

Accepted input spellings (compared after ``str.strip().lower()``):

- A: ``a``, ``model_a``, ``model_1`` (FastChat), ``left``, ``1`` (also the integer 1 or the float 1.0)
- B: ``b``, ``model_b``, ``model_2`` (FastChat), ``right``, ``2`` (also the integer 2 or the float 2.0)
- tie: ``tie``, ``draw``, ``c`` (the paper's judge prompt's ``[[C]]``), ``tie (inconsistent)``
  (MT-Bench: GPT-4 changed its verdict when the order was swapped), ``tie (bothbad)`` (Chatbot Arena)
- missing (human column only): an empty cell, ``None``/NaN, ``missing``, ``na``, ``n/a``, ``nan``,
  ``none``, ``null``

``0`` is deliberately not accepted: some sources use it for "tie", others for "the first response".
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

A, B, TIE, MISSING = "A", "B", "tie", "missing"
NO_TYPE = "(none)"
"""The question type of a row whose ``question_type`` is missing."""
JUDGE_VERDICTS = (A, B, TIE)
HUMAN_VERDICTS = (A, B, TIE, MISSING)

_SPELLINGS: dict[str, str] = {
    "a": A,
    "model_a": A,
    "model_1": A,
    "left": A,
    "1": A,
    "b": B,
    "model_b": B,
    "model_2": B,
    "right": B,
    "2": B,
    "tie": TIE,
    "draw": TIE,
    "c": TIE,
    "tie (inconsistent)": TIE,
    "tie (bothbad)": TIE,
}
_MISSING_SPELLINGS = frozenset({"", "missing", "na", "n/a", "nan", "none", "null"})


def is_null(value) -> bool:
    """True for the scalar null values None, NaN (float or numpy), pandas.NA and pandas.NaT."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return False


def normalize_verdict(value, *, allow_missing: bool) -> str:
    """Return the normal form ``"A" | "B" | "tie"`` (or ``"missing"`` when allowed) of ``value``.

    Raises ``ValueError`` with the accepted spellings when ``value`` is not one of them.
    """
    if isinstance(value, bool):
        raise ValueError(f"unknown verdict {value!r} (booleans are not verdicts)")
    if is_null(value):
        key = ""
    elif isinstance(value, numbers.Integral):
        key = str(int(value))
    elif isinstance(value, numbers.Real):
        if not math.isfinite(value) or not float(value).is_integer():
            raise ValueError(f"unknown verdict {value!r}")
        key = str(int(value))
    elif isinstance(value, str):
        key = value.strip().lower()
    else:
        raise ValueError(f"unknown verdict {value!r} of type {type(value).__name__}")
    if key in _SPELLINGS:
        return _SPELLINGS[key]
    if key in _MISSING_SPELLINGS:
        if allow_missing:
            return MISSING
        raise ValueError("verdict is missing (the judge column needs A, B or tie on every row)")
    accepted = "A|model_a|model_1|left|1, B|model_b|model_2|right|2, tie|draw|C|tie (inconsistent)|tie (bothbad)"
    if allow_missing:
        accepted += ", or empty/missing/NA/none/null"
    raise ValueError(f"unknown verdict {value!r} (accepted, case-insensitive: {accepted})")


def flip_verdict(verdicts) -> np.ndarray:
    """Swap A <-> B elementwise (ties and other values unchanged).

    Args:
        verdicts: (n,) verdicts in normal form (any sequence).

    Returns:
        (n,) object array: "B" where "A", "A" where "B", the rest as given.
    """
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == A, B, np.where(v == B, A, v))


def question_types(values) -> np.ndarray:
    """(n,) object array of question types as strings, :data:`NO_TYPE` where missing (None / NaN / NA)."""
    return np.array([NO_TYPE if is_null(t) else str(t) for t in values], dtype=object)
